"""docs/geometric-algebra.md's PGA and CGA examples run as written (on the default context,
and with that context on lavapipe) and their results are checked against the same geometry
computed directly in float64: a quarter turn about z then a shift, applied to the points by
a rotation matrix, and the motors against the float64 products of ``_ga_helpers``."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
from collections.abc import Iterator

import numpy as np
import pytest
from _ga_helpers import product

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "geometric-algebra.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE, flags=re.S)
DEFAULT = "ctx = ag.MultiGpuContext()\n"

# The motion of both examples: a quarter turn about z (e1 towards e2), then a shift by t.
TURN = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
SHIFT = np.array([1.0, 2.0, 0.0])


@contextlib.contextmanager
def run(code: str, backend: str | None) -> Iterator[tuple[dict, str]]:
    """The block's namespace after running it (its context on ``backend`` when given) and
    what it printed; the block's context is closed afterwards."""
    assert code.count(DEFAULT) == 1, "the example opens its context as the test expects"
    if backend is not None:
        code = code.replace(DEFAULT, f"ctx = ag.MultiGpuContext(backends=[{backend!r}])\n")
    namespace: dict = {"__name__": "__doc_example__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "docs/geometric-algebra.md", "exec"), namespace)
    try:
        yield namespace, printed.getvalue()
    finally:
        namespace["ctx"].close()


def test_the_page_has_the_two_examples_and_readme_links_it():
    assert len(BLOCKS) == 2
    assert "Algebra(3, 0, 1)" in BLOCKS[0] and "Algebra(4, 1)" in BLOCKS[1]
    assert "(docs/geometric-algebra.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("backend", [None, "vulkan"], ids=["as-written", "lavapipe"])
def test_pga_example(backend):
    with run(BLOCKS[0], backend) as (ns, printed):
        pga, corners = ns["pga"], ns["corners"]
        want = corners @ TURN.T + SHIFT
        np.testing.assert_allclose(ns["coordinates"](ns["moved"]), want, atol=1e-6)
        np.testing.assert_allclose(ns["coordinates"](ns["meet"]), [1.0, 2.0, 1.0], atol=1e-6)
        # The motor is the float64 product of the translator and the rotor.
        motor, _ = product("geometric", (3, 0, 1), ns["translator"][None], ns["rotor"][None])
        np.testing.assert_allclose(ns["motor"], motor[0], atol=1e-7)
        assert ns["moved"].shape == (8, pga.n_blades)
        assert printed.count("\n") == 9 and "[1. 2. 1.]" in printed


@pytest.mark.parametrize("backend", [None, "vulkan"], ids=["as-written", "lavapipe"])
def test_cga_example(backend):
    with run(BLOCKS[1], backend) as (ns, printed):
        corners, moved, cga = ns["corners"], ns["moved"], ns["cga"]
        want = corners @ TURN.T + SHIFT
        np.testing.assert_allclose(ns["down"](moved), want, atol=1e-5)
        # up(x) of the example is x + x²/2 ninf + no, computed here in float64.
        half = 0.5 * (want**2).sum(axis=1)
        np.testing.assert_allclose(
            cga.component(moved, ["e1", "e2", "e3", "e4", "e5"]),
            np.column_stack([want, half - 0.5, half + 0.5]),
            atol=1e-5,
        )
        motor, _ = product("geometric", (4, 1, 0), ns["translator"][None], ns["rotor"][None])
        np.testing.assert_allclose(ns["motor"], motor[0], atol=1e-7)
        squared = ((want[0] - want[1:]) ** 2).sum(axis=1)
        np.testing.assert_allclose(ns["squared"], squared, atol=1e-5)
        assert printed.splitlines()[-2:] == ["[1. 1. 1.]", "True"]
