"""The surface written once: scripts/gen-surface.py regenerates the stub, the Kernels
Protocol, the overloads and api.md's signature list from the registry (``_surface.py``) and
checks the hand-written signatures against it; ``make lint`` runs it with ``--check``.
These tests run it on the tree and on edited copies, to see that a difference fails."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
FILES = [
    "scripts/gen-surface.py",
    "docs/api.md",
    *(
        f"python/amari_gpu/{name}"
        for name in (
            "_surface.py",
            "_native.pyi",
            "_mixin.py",
            "ga.py",
            "ga_unary.py",
            "tropical.py",
            "information.py",
            "cluster/kernels.py",
            "cluster/grids.py",
        )
    ),
]


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "gen-surface.py"), "--check"],
        capture_output=True,
        text=True,
        env={"RUFF": RUFF, "PATH": ""},
        cwd=root,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The files the generator reads and writes, copied under ``tmp_path``."""
    for name in FILES:
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, target)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_committed_files_are_what_the_registry_generates() -> None:
    result = _check(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_registry_edit_fails_the_check_with_a_diff(copy: Path) -> None:
    _edit(copy / "python/amari_gpu/_surface.py", '"Reverse ``x̃``."', '"Reverse, edited."')
    result = _check(copy)
    assert result.returncode == 1
    assert "+| `reverse(x, algebra=None, *, strategy=None, out=None)` | Reverse, edited. |" in (
        result.stdout
    )
    assert "docs/api.md" in result.stderr


def test_a_hand_edited_overload_fails_the_check(copy: Path) -> None:
    _edit(copy / "python/amari_gpu/ga_unary.py", "x: DeviceArray,", "x: Any,")
    result = _check(copy)
    assert result.returncode == 1
    assert "python/amari_gpu/ga_unary.py" in result.stderr


def test_a_cluster_kernel_that_differs_from_the_registry_fails_the_check(copy: Path) -> None:
    kernels = copy / "python/amari_gpu/cluster/kernels.py"
    _edit(kernels, "    logits: bool,\n", "    use_logits: bool,\n")
    result = _check(copy)
    assert result.returncode == 1
    assert "cluster fisher_categorical: (values, use_logits, strategy = None, out = None)" in (
        result.stderr
    )


def test_a_method_whose_signature_differs_from_the_registry_fails_the_check(copy: Path) -> None:
    _edit(
        copy / "python/amari_gpu/tropical.py",
        "    def shortest_paths(\n        self,\n        w:",
        "    def shortest_paths(\n        self,\n        graph:",
    )
    result = _check(copy)
    assert result.returncode == 1
    assert "tropical.shortest_paths: (self, graph, *strategy = None, *out = None)" in result.stderr
