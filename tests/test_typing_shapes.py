"""The methods are typed once per shape (``amari_gpu._shapes``): a type checker binds each
method read from a context to its shape's Protocol and picks the overload from the
operands, while at run time the method is its own plain function (signature, docstring and
``help()`` unchanged)."""

from __future__ import annotations

import inspect
import pydoc
import re
import subprocess
import sys
from pathlib import Path

import amari_gpu as ag
import pytest

ROOT = Path(__file__).resolve().parent.parent

# One method per shape: the bound Protocol, and a call's result for a host operand, a
# DeviceArray operand and a DeviceArray operand with a numpy ``out``.
CASES = {
    "geometric_product": ("GaBinary", "x, x", "x, d"),
    "sandwich": ("GaSandwich", "r=x, x=x", "r=x, x=d"),
    "reverse": ("GaUnary", "x", "d"),
    "grade_projection": ("GaGrades", "x, 2", "d, 2"),
    "tropical_matmul": ("TropicalProduct", "x, x", "d, x"),
    "tropical_matvec": ("TropicalMatvec", "x, x", "d, x"),
    "fisher_categorical": ("FisherCategorical", "x", "logits=d"),
    "fisher_gaussian": ("FisherGaussian", "x, x", "x, d"),
}


def _revealed(tmp_path: Path) -> list[str]:
    lines = [
        "import amari_gpu as ag",
        "import numpy as np",
        "import numpy.typing as npt",
        "",
        "def f(",
        "    ctx: ag.MultiGpuContext,",
        "    x: npt.NDArray[np.float32],",
        "    d: ag.DeviceArray,",
        "    y: npt.NDArray[np.float32 | np.float64],",
        ") -> None:",
        "    reveal_type(x)",
        "    reveal_type(y)",
    ]
    for name, (_, host, resident) in CASES.items():
        lines += [
            f"    reveal_type(ctx.{name})",
            f"    reveal_type(ctx.{name}({host}))",
            f"    reveal_type(ctx.{name}({resident}))",
            f"    reveal_type(ctx.{name}({resident}, out=x))",
        ]
    source = tmp_path / "reveal.py"
    source.write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(source),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return re.findall(r'note: Revealed type is "(.*)"', result.stdout)


def test_mypy_binds_each_method_to_its_shape_and_picks_the_overload(tmp_path: Path) -> None:
    host, floating, *revealed = _revealed(tmp_path)
    assert host.startswith("numpy.ndarray[")
    expected = []
    for shape, _, _ in CASES.values():
        # Geometric and tropical algebra and the per-sample Fisher maps keep float32 and
        # float64: their host results say either.
        kept = ("Ga", "Tropical", "FisherCategorical", "FisherGaussian")
        result = floating if shape.startswith(kept) else host
        expected += [f"amari_gpu._shapes.{shape}", result, "amari_gpu.array.DeviceArray", result]
    assert revealed == expected


@pytest.mark.parametrize("name", list(CASES))
def test_a_shaped_method_is_its_own_function_at_run_time(name: str) -> None:
    method = getattr(ag.MultiGpuContext, name)
    assert inspect.isfunction(method)
    assert method.__name__ == name
    parameters = list(inspect.signature(method).parameters.values())
    assert parameters[0].name == "self"
    assert [p.name for p in parameters[-2:]] == ["strategy", "out"]
    assert all(p.kind is p.KEYWORD_ONLY for p in parameters[-2:])
    assert method.__doc__ and method.__doc__.strip()
    page = pydoc.render_doc(ag.MultiGpuContext, renderer=pydoc.plaintext)
    assert f"{name}(self, " in page
    assert method.__doc__.strip().splitlines()[0] in page
