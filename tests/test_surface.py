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
    "python/amari_gpu/_native.pyi",
    # Every module of the package: the registry's METHODS and FAMILIES name the modules the
    # generator reads, and a new family adds one.
    *(
        str(path.relative_to(ROOT))
        for pattern in ("*.py", "cluster/*.py")
        for path in (ROOT / "python/amari_gpu").glob(pattern)
    ),
    *(
        f"rust/amari-gpu-py/src/{path.name}"
        for path in (ROOT / "rust/amari-gpu-py/src").glob("*.rs")
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
    assert (
        "+| `reverse(x, algebra=None, *, dtype=None, strategy=None, out=None)` | Reverse, "
        "edited. |" in result.stdout
    )
    assert "docs/api.md" in result.stderr


# Edits of a copy of the tree, each failing the check: the file, the text replaced, its
# replacement, and what the diff (stdout) and the message (stderr) then say.
EDITS = {
    "a hand-edited overload": (
        "python/amari_gpu/_shapes.py",
        "x: DeviceArray,",
        "x: Any,",
        [],
        ["python/amari_gpu/_shapes.py"],
    ),
    "a method typed as another shape": (
        "python/amari_gpu/ga.py",
        "    @_shapes.shaped[_shapes.GaSandwich]\n",
        "    @_shapes.shaped[_shapes.GaBinary]\n",
        ["+    @_shapes.shaped[_shapes.GaSandwich]"],
        ["python/amari_gpu/ga.py"],
    ),
    "a shape line on a method whose result is always numpy": (
        "python/amari_gpu/tropical.py",
        "    def shortest_paths(",
        "    @_shapes.shaped[_shapes.TropicalProduct]\n    def shortest_paths(",
        ["-    @_shapes.shaped[_shapes.TropicalProduct]"],
        ["python/amari_gpu/tropical.py"],
    ),
    "a family mixin missing from the contexts' base": (
        "python/amari_gpu/_context_base.py",
        "    TropicalMixin,\n",
        "",
        ["+    TropicalMixin,"],
        ["python/amari_gpu/_context_base.py"],
    ),
    "a family mixin missing from MultiGpuContext": (
        "python/amari_gpu/context.py",
        "    ResidentMixin,\n",
        "",
        ["+    ResidentMixin,"],
        ["python/amari_gpu/context.py"],
    ),
    "a new family entry": (
        "python/amari_gpu/_surface.py",
        '    Family("rows", "RowsMixin", cluster=True),\n',
        '    Family("rows", "RowsMixin", cluster=True),\n    Family("sparse", "SparseMixin"),\n',
        ["+from .sparse import SparseMixin", "+    SparseMixin,"],
        ["python/amari_gpu/context.py"],
    ),
    "a new family the cluster runs": (
        "python/amari_gpu/_surface.py",
        '    Family("rows", "RowsMixin", cluster=True),\n',
        '    Family("rows", "RowsMixin", cluster=True),\n'
        '    Family("sparse", "SparseMixin", cluster=True),\n',
        ["+from .sparse import SparseMixin", "+    SparseMixin,"],
        ["python/amari_gpu/_context_base.py"],
    ),
    "a bindings module missing from lib.rs": (
        "rust/amari-gpu-py/src/lib.rs",
        "    tropical::register(m)?;\n",
        "",
        ["+    tropical::register(m)?;"],
        ["rust/amari-gpu-py/src/lib.rs"],
    ),
    "a section of a new bindings module": (
        "python/amari_gpu/_surface.py",
        "# --- users' row kernels [rows] ---",
        "# --- users' row kernels [user_rows] ---",
        ["+mod user_rows;", "+    user_rows::register(m)?;"],
        ["rust/amari-gpu-py/src/lib.rs", "bindings user_rows.rs: no such module"],
    ),
    "a bindings module registering other functions": (
        "rust/amari-gpu-py/src/tropical.rs",
        "    m.add_function(wrap_pyfunction!(shortest_paths, m)?)?;\n",
        "",
        [],
        [
            "bindings tropical.rs: register adds (tropical_matmul, tropical_matvec); the "
            "registry says (shortest_paths, tropical_matmul, tropical_matvec)"
        ],
    ),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edit_that_differs_from_the_registry_fails_the_check(copy: Path, edit: str) -> None:
    path, old, new, diff, message = EDITS[edit]
    _edit(copy / path, old, new)
    result = _check(copy)
    assert result.returncode == 1
    for line in diff:
        assert line in result.stdout.splitlines()
    for text in message:
        assert text in result.stderr


def test_the_overloads_are_written_once_per_shape() -> None:
    """One Protocol per shape, not one overload block per method: the four GA products
    share ``GaBinary``, and no family module declares overloads of its own."""
    shapes = (ROOT / "python/amari_gpu/_shapes.py").read_text()
    assert shapes.count("class GaBinary(Protocol):") == 1
    # 8 shapes for the 14 methods whose resident operands give a DeviceArray.
    assert shapes.count("(Protocol):") == 8
    for name in ("ga", "ga_unary", "tropical", "information"):
        text = (ROOT / f"python/amari_gpu/{name}.py").read_text()
        assert "@overload" not in text, name
    ga = (ROOT / "python/amari_gpu/ga.py").read_text()
    assert ga.count("@_shapes.shaped[_shapes.GaBinary]") == 4


def test_a_method_in_a_module_not_written_yet_is_named(copy: Path) -> None:
    # A contributor who adds a method to the registry before writing its module gets the
    # module named, not a traceback, and nothing is written.
    reverse = 'Method("reverse", "ga_unary", GA_UNARY, "Reverse ``x̃``."),'
    _edit(
        copy / "python/amari_gpu/_surface.py",
        reverse,
        f'{reverse}\n    Method("scale", "nowhere", GA_UNARY, "Nowhere."),',
    )
    before = {name: (copy / name).read_text() for name in FILES}
    result = subprocess.run(
        [sys.executable, str(copy / "scripts" / "gen-surface.py")],
        capture_output=True,
        text=True,
        env={"RUFF": RUFF, "PATH": ""},
        cwd=copy,
    )
    assert result.returncode == 1
    assert "python/amari_gpu/nowhere.py: no such module (METHODS' scale are in it)" in result.stderr
    assert "Traceback" not in result.stderr
    assert {name: (copy / name).read_text() for name in FILES} == before


def test_a_cluster_kernel_that_differs_from_the_registry_fails_the_check(copy: Path) -> None:
    kernels = copy / "python/amari_gpu/cluster/kernels.py"
    _edit(kernels, "    logits: bool,\n", "    use_logits: bool,\n")
    result = _check(copy)
    assert result.returncode == 1
    got = "cluster fisher_categorical: (values, use_logits, strategy = None, out = None, "
    assert got + "values_shape = None)" in result.stderr


def test_a_method_whose_signature_differs_from_the_registry_fails_the_check(copy: Path) -> None:
    _edit(
        copy / "python/amari_gpu/tropical.py",
        "    def shortest_paths(\n        self,\n        w:",
        "    def shortest_paths(\n        self,\n        graph:",
    )
    result = _check(copy)
    assert result.returncode == 1
    assert (
        "tropical.shortest_paths: (self, graph, *dtype = None, *strategy = None, *out = None)"
        in result.stderr
    )
