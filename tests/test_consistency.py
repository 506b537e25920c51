"""Consistency across the API (issue 14, item 16): ``last_plan`` and ``last_run`` describe the
last call (a call that produces neither sets it to None), results of float64 inputs are the
dtypes the docstrings say, and the README no longer claims grids take ``strategy=``."""

from __future__ import annotations

import inspect
from pathlib import Path

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu.ga import GeometricAlgebraMixin

ROOT = Path(__file__).resolve().parent.parent


def test_a_grid_call_resets_last_plan_and_a_kernel_call_resets_last_run():
    ctx = ag.MultiGpuContext(backends=["vulkan"])
    ctx.geometric_product(np.ones((4, 8)), np.ones(8))
    assert isinstance(ctx.last_plan, ag.Plan) and ctx.last_run is None
    ctx.stencil(np.zeros((8, 8)), 2)
    assert ctx.last_plan is None and isinstance(ctx.last_run, ag.DomainReport)
    ctx.tropical_matvec(np.zeros((3, 2)), np.zeros(2))
    assert isinstance(ctx.last_plan, ag.Plan) and ctx.last_run is None
    ctx.life(np.zeros((8, 8), np.uint8), 1)
    assert ctx.last_plan is None and isinstance(ctx.last_run, ag.DomainReport)
    ctx.fisher_information(np.ones((4, 2)))
    assert isinstance(ctx.last_plan, ag.Plan) and ctx.last_run is None


RESULT_DTYPES = {
    # Geometric and tropical algebra keep float64 (docs/api.md, dtypes).
    "geometric_product": np.float64,
    "scalar_product": np.float64,
    "reverse": np.float64,
    "tropical_matmul": np.float64,
    "tropical_matvec": np.float64,
    "shortest_paths": np.float64,
    "fisher_information": np.float64,
    "fisher_categorical": np.float64,
    "fisher_gaussian": np.float64,
    "natural_gradient": np.float64,
    "stencil": np.float64,
    "life": np.uint8,
}


def _call(ctx: ag.MultiGpuContext, name: str) -> np.ndarray:
    f64 = np.float64
    calls = {
        "geometric_product": lambda: ctx.geometric_product(np.ones((3, 8), f64), np.ones(8, f64)),
        "scalar_product": lambda: ctx.scalar_product(np.ones((3, 8), f64), np.ones(8, f64)),
        "reverse": lambda: ctx.reverse(np.ones((3, 8), f64)),
        "tropical_matmul": lambda: ctx.tropical_matmul(np.ones((3, 2), f64), np.ones((2, 4), f64)),
        "tropical_matvec": lambda: ctx.tropical_matvec(np.ones((3, 2), f64), np.ones(2, f64)),
        "shortest_paths": lambda: ctx.shortest_paths(np.ones((3, 3), f64)),
        "fisher_information": lambda: ctx.fisher_information(np.ones((4, 2), f64)),
        "fisher_categorical": lambda: ctx.fisher_categorical(logits=np.ones((4, 3), f64)),
        "fisher_gaussian": lambda: ctx.fisher_gaussian(np.ones((4, 2), f64), np.ones((4, 2), f64)),
        "natural_gradient": lambda: ctx.natural_gradient(
            np.ones((4, 2), f64), np.ones(2, f64), 1.0
        ),
        "stencil": lambda: ctx.stencil(np.ones((4, 4), f64), 1),
        "life": lambda: ctx.life(np.ones((4, 4), np.int64), 1),
    }
    return calls[name]()


@pytest.mark.parametrize(("name", "dtype"), sorted(RESULT_DTYPES.items()))
def test_float64_inputs_give_the_documented_result_dtype(default_ctx, name, dtype):
    assert _call(default_ctx, name).dtype == dtype
    doc = inspect.getdoc(getattr(ag.MultiGpuContext, name)) or ""
    word = {np.float32: "float32", np.float64: "float64", np.uint8: "uint8"}[dtype]
    if name in ("geometric_product", "scalar_product", "reverse"):
        doc += inspect.getdoc(GeometricAlgebraMixin) or ""  # the family's conventions
    assert word in doc, f"{name}'s docstring does not say its result is {word}"


def test_readme_does_not_claim_grids_take_strategy():
    text = (ROOT / "README.md").read_text()
    assert "accepts `strategy=`;" not in text
    for method in (ag.MultiGpuContext.stencil, ag.MultiGpuContext.life):
        assert "strategy" not in inspect.signature(method).parameters
    assert "strategy" in (inspect.getdoc(ag.MultiGpuContext.stencil) or "")
