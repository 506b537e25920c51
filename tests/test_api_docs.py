"""docs/api.md's reference is generated from the live package (scripts/gen-api-docs.py): the
committed file is what the docstrings give (``make lint`` runs ``--check``), a method added
to a documented class appears on regeneration with its signature and its Args/Returns/Raises
sections, a public name no region documents is refused, and the hand-written text between
the regions is kept as written."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import amari_gpu as ag
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gen-api-docs.py"
DOC = ROOT / "docs" / "api.md"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_api_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "gen-api-docs.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=root,
    )


def test_committed_reference_is_what_the_docstrings_give() -> None:
    result = _check(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_stale_reference_fails_the_check_with_a_diff(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "docs").mkdir()
    shutil.copyfile(SCRIPT, tmp_path / "scripts" / "gen-api-docs.py")
    text = DOC.read_text(encoding="utf-8")
    stale = "Whether each device is given work."
    assert stale in text
    (tmp_path / "docs" / "api.md").write_text(text.replace(stale, "Edited by hand."))
    result = _check(tmp_path)
    assert result.returncode == 1
    assert "-Edited by hand." in result.stdout and f"+{stale}" in result.stdout
    assert "make api-docs" in result.stderr


def test_a_new_method_appears_on_regeneration(monkeypatch: pytest.MonkeyPatch) -> None:
    def blade_count(self: Any, grade: int, *, strict: bool = True) -> int:
        """How many blades of ``grade`` the context's default algebra has.

        Args:
            grade: a grade, 0 to n.
            strict: refuse a grade beyond n.

        Returns:
            The binomial coefficient.

        Raises:
            InvalidArgumentError: ``grade`` is out of range.

        Example:
            ctx.blade_count(2)
        """
        return 0

    monkeypatch.setattr(ag.MultiGpuContext, "blade_count", blade_count, raising=False)
    out = _generator().generate(DOC.read_text(encoding="utf-8"))
    section = out[out.index("### `MultiGpuContext.blade_count`") :]
    section = section[: section.index("\n### ")]
    assert "ctx.blade_count(grade: int, *, strict: bool = True) -> int" in section
    assert "- `grade`: a grade, 0 to n." in section
    assert "Returns: The binomial coefficient." in section
    assert "- `InvalidArgumentError`: `grade` is out of range." in section
    assert "```python\nctx.blade_count(2)\n```" in section


def test_an_operator_with_a_docstring_is_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    # Special methods are public behaviour when they say what they do (DeviceArray's
    # operators); the undocumented ones (__repr__, __enter__...) are not listed.
    def __neg__(self: Any) -> Any:
        """``-x``: every element negated, where the rows live."""

    monkeypatch.setattr(ag.DeviceArray, "__neg__", __neg__, raising=False)
    out = _generator().generate(DOC.read_text(encoding="utf-8"))
    assert "### `DeviceArray.__neg__`\n\n```python\nx.__neg__() -> Any\n```" in out
    assert "`-x`: every element negated, where the rows live." in out
    assert "DeviceArray.__repr__" not in out and "MultiGpuContext.__enter__" not in out


def test_a_public_name_without_a_region_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def helper() -> None:
        """A new public function."""

    monkeypatch.setattr(ag, "helper", helper, raising=False)
    monkeypatch.setattr(ag, "__all__", [*ag.__all__, "helper"])
    with pytest.raises(SystemExit, match="no generated region documents helper"):
        _generator().generate(DOC.read_text(encoding="utf-8"))


def test_hand_written_text_is_kept_as_written() -> None:
    text = DOC.read_text(encoding="utf-8")
    edited = text.replace("### Guarantees of every call", "### Guarantees of every call\n\nNew.")
    out = _generator().generate(edited)
    assert out == edited


def test_links_within_the_reference_name_its_headings() -> None:
    # The contents line and the generated "as MultiGpuContext.x" links point at headings of
    # docs/api.md, under the fragment rule tests/test_readme.py applies to README's links.
    text = DOC.read_text(encoding="utf-8")
    headings = {
        re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.*)$", text, flags=re.M)
    }
    fragments = set(re.findall(r"\]\(#([^)\s]+)\)", text))
    assert len(fragments) >= 10
    assert fragments <= headings, sorted(fragments - headings)
