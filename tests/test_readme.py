"""README is the first thing a user reads: every Python block in it runs as written (each in
a fresh interpreter, as a user would paste it), and every link and image in it is an
absolute URL, so that they also work on the package index page; links into this repository
name files that exist."""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
from _process import python

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
LINKS = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", README)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the dev environment is 3.11+
    tomllib = pytest.importorskip("tomli")

REPOSITORY = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


def test_readme_has_python_examples_and_links():
    assert len(BLOCKS) >= 3 and len(LINKS) >= 5


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_python_block_runs_as_written(code, tmp_path):
    done = python("-c", code, cwd=tmp_path)  # blocks that write files write them here
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "every README example prints what it computed"


@pytest.mark.parametrize("link", LINKS)
def test_links_are_absolute_and_files_exist(link):
    if link.startswith("#"):  # a heading of README itself
        anchors = {
            re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", README, flags=re.M)
        }
        assert link[1:] in anchors
        return
    assert re.match(r"https?://", link), f"{link} is relative: it breaks on the index page"
    for kind in ("blob", "raw"):
        prefix = f"{REPOSITORY}/{kind}/main/"
        if link.startswith(prefix):
            path = link[len(prefix) :].split("#")[0]
            assert (ROOT / path).is_file(), f"{link}: no {path} in the repository"
