"""``out=`` on every kernel method: the numpy ufunc convention.

Every method that returns an array writes into the caller's ``out`` and returns it: the same
bits as the call without ``out``, on one device and on several with small chunks. A wrong
``out`` (shape, dtype, order, read-only, overlapping an input, masked, not an array) raises
the specific error before any work, and leaves ``out`` as it was. One ``out`` serves
repeated calls. A call that fails after its work began says that ``out`` may hold part of
the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from amari_gpu import Algebra, DeviceLostError, InvalidArgumentError, MultiGpuContext, ShapeError

RNG = np.random.default_rng(16)
PGA = Algebra(3, 0, 1)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _probs(n: int, k: int) -> np.ndarray:
    p = RNG.random((n, k)) + 0.1
    return (p / p.sum(axis=1, keepdims=True)).astype(np.float32)


def _graph(n: int) -> np.ndarray:
    w = (RNG.random((n, n)) * 10).astype(np.float32)
    w[RNG.random((n, n)) < 0.5] = np.inf
    return w


@dataclass
class Case:
    """A method call: ``inputs`` are its array arguments (the first is used to build an
    ``out`` overlapping an input), ``call`` runs it with ``out=`` (None: without)."""

    name: str
    inputs: dict[str, np.ndarray]
    call: Callable[[MultiGpuContext, dict[str, np.ndarray], Any], np.ndarray]


def _cases() -> list[Case]:
    n = 1000
    ga_two = [
        "geometric_product",
        "outer_product",
        "inner_product",
        "scalar_product",
    ]
    ga_one = ["reverse", "grade_involution", "normalize", "dual"]
    cases = [
        Case(
            name,
            {"a": _f32(n, 8), "b": _f32(n, 8)},
            lambda ctx, d, out, name=name: getattr(ctx, name)(d["a"], d["b"], out=out),
        )
        for name in ga_two
    ]
    cases += [
        Case(
            name,
            {"x": _f32(n, 8)},
            lambda ctx, d, out, name=name: getattr(ctx, name)(d["x"], out=out),
        )
        for name in ga_one
    ]
    cases += [
        Case(
            "geometric_product-broadcast-3d",
            {"a": _f32(3, 1, 16), "b": _f32(40, 16)},
            lambda ctx, d, out: ctx.geometric_product(d["a"], d["b"], PGA, out=out),
        ),
        Case(
            "scalar_product-single",
            {"a": _f32(8), "b": _f32(8)},
            lambda ctx, d, out: ctx.scalar_product(d["a"], d["b"], out=out),
        ),
        Case(
            "sandwich-rotor",
            {"x": _f32(n, 8), "r": _f32(8)},
            lambda ctx, d, out: ctx.sandwich(d["r"], d["x"], out=out),
        ),
        Case(
            "grade_projection",
            {"x": _f32(7, 9, 8)},
            lambda ctx, d, out: ctx.grade_projection(d["x"], [0, 2], out=out),
        ),
        Case(
            "tropical_matmul",
            {"a": _f32(150, 20), "b": _f32(20, 30)},
            lambda ctx, d, out: ctx.tropical_matmul(d["a"], d["b"], out=out),
        ),
        Case(
            "tropical_matmul-batched",
            {"a": _f32(3, 70, 5), "b": _f32(3, 5, 4)},
            lambda ctx, d, out: ctx.tropical_matmul(d["a"], d["b"], "min_plus", out=out),
        ),
        Case(
            "tropical_matvec",
            {"a": _f32(300, 12), "x": _f32(12)},
            lambda ctx, d, out: ctx.tropical_matvec(d["a"], d["x"], out=out),
        ),
        Case(
            "tropical_matvec-batched",
            {"a": _f32(2, 100, 12), "x": _f32(2, 12)},
            lambda ctx, d, out: ctx.tropical_matvec(d["a"], d["x"], out=out),
        ),
        Case(
            "shortest_paths",
            {"w": _graph(90)},
            lambda ctx, d, out: ctx.shortest_paths(d["w"], out=out),
        ),
        Case(
            "fisher_information",
            {"scores": _f32(500, 24)},
            lambda ctx, d, out: ctx.fisher_information(d["scores"], out=out),
        ),
        Case(
            "fisher_categorical",
            {"probs": _probs(200, 6)},
            lambda ctx, d, out: ctx.fisher_categorical(d["probs"], out=out),
        ),
        Case(
            "fisher_categorical-logits",
            {"logits": _f32(200, 6)},
            lambda ctx, d, out: ctx.fisher_categorical(logits=d["logits"], out=out),
        ),
        Case(
            "fisher_gaussian",
            {"mean": _f32(100, 3), "var": np.abs(_f32(100, 3)) + 0.5},
            lambda ctx, d, out: ctx.fisher_gaussian(d["mean"], d["var"], out=out),
        ),
        Case(
            "natural_gradient",
            {"grad": _f32(24, 3), "scores": _f32(500, 24)},
            lambda ctx, d, out: ctx.natural_gradient(d["scores"], d["grad"], 0.1, out=out),
        ),
        Case(
            "stencil",
            {"grid": _f32(40, 33)},
            lambda ctx, d, out: ctx.stencil(d["grid"], 5, out=out),
        ),
        Case(
            "life",
            {"grid": (RNG.random((40, 33)) < 0.4).astype(np.uint8)},
            lambda ctx, d, out: ctx.life(d["grid"], 5, out=out),
        ),
    ]
    return cases


CASES = _cases()
IDS = [c.name for c in CASES]


@pytest.fixture(scope="module")
def expected(default_ctx: MultiGpuContext) -> dict[str, np.ndarray]:
    """Every case's result without ``out``."""
    return {c.name: c.call(default_ctx, c.inputs, None) for c in CASES}


@pytest.fixture(params=CASES, ids=IDS)
def case(request: pytest.FixtureRequest) -> Case:
    """Each case in turn."""
    return request.param


@pytest.fixture
def want(case: Case, expected: dict[str, np.ndarray]) -> np.ndarray:
    """The case's result without ``out``."""
    return expected[case.name]


def _sentinel(like: np.ndarray) -> np.ndarray:
    """A fresh array shaped and typed like ``like``, filled with a value no result holds."""
    return np.full(like.shape, 7 if like.dtype == np.uint8 else -12345.5, dtype=like.dtype)


def test_out_is_written_returned_and_bit_identical(
    case: Case, default_ctx: MultiGpuContext, want: np.ndarray
) -> None:
    out = _sentinel(want)
    copies = {k: v.copy() for k, v in case.inputs.items()}
    got = case.call(default_ctx, case.inputs, out)
    assert got is out
    assert np.array_equal(out, want)
    for k, v in case.inputs.items():
        assert np.array_equal(v, copies[k]), f"{k} was modified"


@pytest.fixture(scope="module")
def several() -> MultiGpuContext:
    """Three logical devices per default adapter, 128 items per chunk: every device takes
    chunks of the cases' batches, the last one ragged."""
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=3, chunk_items=128)
    assert len(ctx.devices) >= 3
    return ctx


@pytest.fixture(scope="module")
def one_chunked() -> MultiGpuContext:
    """One device with the chunk grid of ``several``: reductions (the Fisher matrix) are
    summed in chunk order, so their bits depend on the grid, never on the devices."""
    return MultiGpuContext(backends=["vulkan"], chunk_items=128)


def test_out_on_several_devices_is_bit_identical(
    case: Case, several: MultiGpuContext, one_chunked: MultiGpuContext
) -> None:
    want = case.call(one_chunked, case.inputs, None)
    out = _sentinel(want)
    assert case.call(several, case.inputs, out) is out
    assert np.array_equal(out, want)


def test_out_is_reused_over_repeated_calls(
    case: Case, default_ctx: MultiGpuContext, want: np.ndarray
) -> None:
    out = _sentinel(want)
    # Another input of the same shapes first, then the case's own: out ends as the latter.
    first = {k: v[::-1].copy() for k, v in case.inputs.items()}
    other = case.call(default_ctx, first, None)
    assert case.call(default_ctx, first, out) is out
    assert np.array_equal(out, other)
    for _ in range(3):
        assert case.call(default_ctx, case.inputs, out) is out
        assert np.array_equal(out, want)


def _bad_outs(case: Case, want: np.ndarray) -> list[tuple[str, Any, type[Exception], str]]:
    """(label, out, error class, text the message must contain) for every kind of bad out."""
    wrong_dtype = np.float64 if want.dtype != np.float64 else np.float32
    bad: list[tuple[str, Any, type[Exception], str]] = [
        ("shape", np.zeros((*want.shape, 1), want.dtype), ShapeError, "out: expected shape"),
        ("dtype", np.zeros(want.shape, wrong_dtype), TypeError, "out: expected dtype"),
        ("list", want.tolist(), TypeError, "out: expected a numpy.ndarray"),
        ("masked", np.ma.zeros(want.shape, want.dtype), TypeError, "masked array"),
    ]
    readonly = _sentinel(want)
    readonly.flags.writeable = False
    bad.append(("readonly", readonly, InvalidArgumentError, "writeable"))
    if want.ndim >= 1 and want.size > 1:
        strided = np.zeros((*want.shape[:-1], want.shape[-1] * 2), want.dtype)[..., ::2]
        bad.append(("strided", strided, InvalidArgumentError, "C-contiguous"))
    if want.ndim >= 2 and want.shape[0] > 1 and want.shape[-1] > 1:
        fortran = np.asfortranarray(_sentinel(want))
        bad.append(("fortran", fortran, InvalidArgumentError, "C-contiguous"))
    return bad


def test_bad_out_raises_before_any_work(
    case: Case, default_ctx: MultiGpuContext, want: np.ndarray
) -> None:
    for label, out, error, text in _bad_outs(case, want):
        before = np.array(out, copy=True)
        with pytest.raises(error, match=text):
            case.call(default_ctx, case.inputs, out)
        assert np.array_equal(np.asarray(out), before), f"{label}: out was written"


def test_out_overlapping_an_input_is_refused(
    case: Case, default_ctx: MultiGpuContext, want: np.ndarray
) -> None:
    name, value = next(iter(case.inputs.items()))
    # One buffer holds both the input (at its start) and out (at its end), so that they
    # overlap in at least one element.
    in_bytes, out_bytes = value.nbytes, want.nbytes
    buffer = np.zeros(in_bytes + out_bytes - min(in_bytes, out_bytes, 8), np.uint8)
    view_in = buffer[:in_bytes].view(value.dtype).reshape(value.shape)
    view_in[...] = value
    out = buffer[len(buffer) - out_bytes :].view(want.dtype).reshape(want.shape)
    assert np.shares_memory(out, view_in)
    inputs = {**case.inputs, name: view_in}
    snapshot = buffer.copy()
    with pytest.raises(InvalidArgumentError, match=f"overlaps {name}"):
        case.call(default_ctx, inputs, out)
    assert np.array_equal(buffer, snapshot)


def test_an_input_as_its_own_out_is_refused(default_ctx: MultiGpuContext) -> None:
    x = _f32(64, 8)
    before = x.copy()
    with pytest.raises(InvalidArgumentError, match="overlaps x"):
        default_ctx.reverse(x, out=x)
    assert np.array_equal(x, before)


def test_float64_inputs_write_float32_out_when_asked_to(default_ctx: MultiGpuContext) -> None:
    a, b = _f32(300, 8).astype(np.float64), _f32(300, 8).astype(np.float64)
    out = np.empty((300, 8), np.float32)
    assert default_ctx.geometric_product(a, b, out=out, dtype=np.float32) is out
    assert np.array_equal(out, default_ctx.geometric_product(a, b, dtype=np.float32))
    with pytest.raises(TypeError, match=r"^out: expected dtype float64 \(the result's\)"):
        default_ctx.geometric_product(a, b, out=out)


def test_failure_after_work_began_says_out_may_be_partly_written() -> None:
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=2, chunk_items=256)
    a, b = _f32(20_000, 8), _f32(20_000, 8)
    out = np.zeros((20_000, 8), np.float32)
    for device in ctx.devices:
        ctx.inject_fault(device.id, after_chunks=2)
    with pytest.raises(DeviceLostError, match="out may hold part of the result"):
        ctx.geometric_product(a, b, out=out)
