"""README is the first thing a user reads: every Python block in it runs as written (each in
a fresh interpreter, as a user would paste it), and every link and image in it is relative
and names a file of this repository (a heading of it too, when the link has a fragment), so
that they work in a clone and on the repository's own pages, whatever its address."""

from __future__ import annotations

import pathlib
import re

import pytest
from _process import python

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
LINKS = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", README)


def _anchors(markdown: str) -> set[str]:
    """The fragments the headings of a Markdown file get (lower case, punctuation dropped,
    spaces as hyphens)."""
    return {
        re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.*)$", markdown, flags=re.M)
    }


def test_readme_has_python_examples_and_links():
    assert len(BLOCKS) >= 3 and len(LINKS) >= 5


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_python_block_runs_as_written(code, tmp_path):
    done = python("-c", code, cwd=tmp_path)  # blocks that write files write them here
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "every README example prints what it computed"


@pytest.mark.parametrize("link", LINKS)
def test_links_are_relative_and_resolve(link):
    assert not re.match(r"[a-z][a-z0-9+.-]*:|//", link, flags=re.I), (
        f"{link} is absolute: README links point into the repository, relative to README"
    )
    path, _, fragment = link.partition("#")
    target = (ROOT / path).resolve() if path else ROOT / "README.md"
    assert target.is_relative_to(ROOT), f"{link} leaves the repository"
    assert target.is_file(), f"{link}: no {path} in the repository"
    if fragment:
        assert target.suffix == ".md", f"{link}: a fragment into a file that has no headings"
        headings = _anchors(target.read_text(encoding="utf-8"))
        assert fragment in headings, f"{link}: no heading #{fragment} in {path or 'README.md'}"
