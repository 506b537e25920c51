"""float64 geometric algebra: float64 in, float64 out, computed in float64 on the host
device and on lavapipe (Vulkan, ``SHADER_F64``), within 1e-14 of a longdouble reference (per
coefficient, relative to the sum of the absolute values of its terms, which any summation
order reaches), and the same bits on every device mix, device count and strategy of a
context; llvmpipe (GL, no float64) is left out of float64 work, and a context of GL devices
only refuses it naming them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import _dtype_helpers as helpers
import amari_gpu
import numpy as np
import pytest
from _ga_helpers import reverse_signs, table
from amari_gpu import Algebra
from amari_gpu.errors import InvalidArgumentError
from hypothesis import given, settings
from hypothesis import strategies as st

TOLERANCE = 1e-14
SIGNATURES = [(3, 0, 0), (3, 0, 1), (4, 1, 0)]
ROWS = 600
"""Rows of each batch: several chunks of ``CHUNK`` on every device of a context."""
CHUNK = 64


def _context(**options: Any) -> amari_gpu.MultiGpuContext:
    return helpers.context(CHUNK, **options)


host64 = helpers.module_context(CHUNK, ["host"])
vulkan64 = helpers.module_context(CHUNK, ["vulkan"])


both64 = helpers.module_context(CHUNK, ["vulkan", "host"])
"""lavapipe and the host device: the host's kernels round fma as lavapipe does."""


def _balanced(ctx: amari_gpu.MultiGpuContext, call: Any) -> Any:
    """``call(strategy="balanced")``, checking that every device of ``ctx`` took rows."""
    result = call(strategy="balanced")
    plan = ctx.last_plan
    assert plan is not None
    assert {w.device_id for w in plan} == {d.id for d in ctx.devices}, plan
    return result


@pytest.fixture(scope="module")
def mixed64() -> Iterator[amari_gpu.MultiGpuContext]:
    """lavapipe twice, llvmpipe and the host device."""
    ctx = _context(backends=["vulkan", "gl", "host"], devices_per_adapter=2)
    yield ctx
    ctx.close()


# ---- longdouble references, from the multiplication table (not from amari_gpu) ----


def _bilinear_ld(sig: tuple[int, int, int], a: np.ndarray, b: np.ndarray, keep: np.ndarray):
    """(sum, bound) of the kept terms of a b in longdouble, (N, 2ⁿ) rows broadcasting."""
    t = table(*sig)
    a = np.atleast_2d(a).astype(np.longdouble)
    b = np.atleast_2d(b).astype(np.longdouble)
    i, j, k, coef = t.i[keep], t.j[keep], t.k[keep], t.coef[keep].astype(np.longdouble)
    terms = a[:, i] * b[:, j] * coef
    rows = max(a.shape[0], b.shape[0])
    out = np.zeros((rows, 1 << t.n), dtype=np.longdouble)
    bound = np.zeros((rows, 1 << t.n), dtype=np.longdouble)
    np.add.at(out.T, k, terms.T)
    np.add.at(bound.T, k, np.abs(terms).T)
    return out, bound


def _keep(sig: tuple[int, int, int], kind: str) -> np.ndarray:
    t = table(*sig)
    gi, gj, gk = t.grade[t.i], t.grade[t.j], t.grade[t.k]
    return {
        "geometric_product": np.ones_like(gk, dtype=bool),
        "outer_product": gk == gi + gj,
        "inner_product": (gj >= gi) & (gk == gj - gi),
        "scalar_product": gk == 0,
    }[kind]


def reference(
    op: str, sig: tuple[int, int, int], *args: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(value, magnitude bound) of ``op`` in longdouble."""
    if op in ("geometric_product", "outer_product", "inner_product", "scalar_product"):
        out, bound = _bilinear_ld(sig, args[0], args[1], _keep(sig, op))
        return (out[:, 0], bound[:, 0]) if op == "scalar_product" else (out, bound)
    if op == "sandwich":
        r, x = args
        everything = _keep(sig, "geometric_product")
        rx, rx_bound = _bilinear_ld(sig, r, x, everything)
        rt = np.atleast_2d(r).astype(np.longdouble) * reverse_signs(sig)
        out, _ = _bilinear_ld(sig, rx, rt, everything)
        t = table(*sig)
        abs_t = np.abs(t.coef)
        bound = np.zeros_like(out)
        terms = rx_bound[:, t.i] * np.abs(rt)[:, t.j] * abs_t
        np.add.at(bound.T, t.k, terms.T)
        return out, bound
    x = np.atleast_2d(args[0]).astype(np.longdouble)
    grade = table(*sig).grade
    signs = {
        "reverse": reverse_signs(sig),
        "grade_involution": np.where(grade % 2 == 0, 1.0, -1.0),
        "grade_projection": np.where(grade == 2, 1.0, 0.0),
    }[op]
    out = x * signs
    return out, np.abs(out)


def assert_within(got: np.ndarray, want: np.ndarray, bound: np.ndarray, what: str) -> None:
    assert got.dtype == np.float64, (what, got.dtype)
    err = np.abs(got.astype(np.longdouble) - want)
    limit = TOLERANCE * bound
    bad = err > limit
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} coefficients off by more than {TOLERANCE} of their "
        f"magnitude; worst {float(np.max(err - limit))}"
    )


def _operands(op: str, sig: tuple[int, int, int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    width = 1 << sum(sig)
    batch = [rng.standard_normal((ROWS, width))]
    if op in ("geometric_product", "outer_product", "inner_product", "scalar_product", "sandwich"):
        batch.append(rng.standard_normal((ROWS, width)))
    return batch


OPERATIONS = [
    "geometric_product",
    "outer_product",
    "inner_product",
    "scalar_product",
    "sandwich",
    "reverse",
    "grade_involution",
    "grade_projection",
]


def _call(ctx: amari_gpu.MultiGpuContext, op: str, alg: Algebra, args: list[Any], **kw: Any):
    if op == "grade_projection":
        return ctx.grade_projection(args[0], 2, alg, **kw)
    return getattr(ctx, op)(*args, alg, **kw)


@pytest.mark.parametrize("sig", SIGNATURES, ids=str)
@pytest.mark.parametrize("op", OPERATIONS)
def test_float64_operations_are_float64_on_host_and_lavapipe_with_the_same_bits(
    host64: amari_gpu.MultiGpuContext,
    vulkan64: amari_gpu.MultiGpuContext,
    both64: amari_gpu.MultiGpuContext,
    op: str,
    sig: tuple[int, int, int],
) -> None:
    alg = Algebra(*sig)
    args = _operands(op, sig, seed=10 * OPERATIONS.index(op) + SIGNATURES.index(sig))
    kept = [a.copy() for a in args]
    want, bound = reference(op, sig, *args)
    on_host = _call(host64, op, alg, args)
    on_vulkan = _call(vulkan64, op, alg, args)
    assert_within(on_host, want, bound, f"{op} Cl{sig} host")
    assert_within(on_vulkan, want, bound, f"{op} Cl{sig} lavapipe")
    # Beside lavapipe, the host device's rows are lavapipe's bits.
    on_both = _balanced(both64, lambda **kw: _call(both64, op, alg, args, **kw))
    np.testing.assert_array_equal(on_both.view(np.uint64), on_vulkan.view(np.uint64))
    for operand, copy in zip(args, kept, strict=True):
        np.testing.assert_array_equal(operand, copy, "inputs unchanged")


@pytest.mark.parametrize("sig", SIGNATURES, ids=str)
def test_a_sandwich_by_one_float64_rotor_and_the_dual(
    host64: amari_gpu.MultiGpuContext,
    vulkan64: amari_gpu.MultiGpuContext,
    both64: amari_gpu.MultiGpuContext,
    sig: tuple[int, int, int],
) -> None:
    alg = Algebra(*sig)
    rng = np.random.default_rng(7)
    width = 1 << sum(sig)
    rotor, x = rng.standard_normal(width), rng.standard_normal((ROWS, width))
    want, bound = reference("sandwich", sig, rotor, x)
    for ctx in (host64, vulkan64):
        # The map is built once in float64 (one rounding per product and sum), then applied:
        # a few more roundings than the two-stage product, still within the tolerance.
        assert_within(ctx.sandwich(rotor, x, alg), want, bound, f"one-rotor sandwich Cl{sig}")
    on_vulkan = vulkan64.sandwich(rotor, x, alg).view(np.uint64)
    on_both = _balanced(both64, lambda **kw: both64.sandwich(rotor, x, alg, **kw))
    np.testing.assert_array_equal(on_both.view(np.uint64), on_vulkan)
    dual = vulkan64.dual(x, alg)
    assert dual.dtype == np.float64
    on_both = _balanced(both64, lambda **kw: both64.dual(x, alg, **kw))
    np.testing.assert_array_equal(on_both.view(np.uint64), dual.view(np.uint64))


def test_bits_are_the_same_for_every_device_mix_count_and_strategy(
    vulkan64: amari_gpu.MultiGpuContext, mixed64: amari_gpu.MultiGpuContext
) -> None:
    alg = Algebra(4, 1, 0)
    a, b = _operands("geometric_product", (4, 1, 0), seed=3)
    want = vulkan64.geometric_product(a, b, alg).view(np.uint64)
    want_sandwich = vulkan64.sandwich(a, b, alg).view(np.uint64)
    contexts = [mixed64, *(_context(backends=["vulkan"], devices_per_adapter=n) for n in (2, 3))]
    try:
        for ctx in contexts:
            for strategy in amari_gpu.STRATEGIES:
                got = ctx.geometric_product(a, b, alg, strategy=strategy)
                np.testing.assert_array_equal(got.view(np.uint64), want, f"{ctx} {strategy}")
                sandwiched = ctx.sandwich(a, b, alg, strategy=strategy)
                np.testing.assert_array_equal(
                    sandwiched.view(np.uint64), want_sandwich, f"sandwich {ctx} {strategy}"
                )
    finally:
        for ctx in contexts[1:]:
            ctx.close()


def test_a_mixed_context_runs_float64_on_vulkan_only_and_the_plan_says_so(
    mixed64: amari_gpu.MultiGpuContext,
) -> None:
    a, b = _operands("geometric_product", (3, 0, 0), seed=5)
    mixed64.geometric_product(a, b, strategy="balanced")
    plan = mixed64.last_plan
    assert plan is not None
    gl = [d.id for d in mixed64.devices if d.adapter.backend == "gl"]
    assert gl and all(w.device_id not in gl for w in plan)
    assert {device for device, _ in plan.left_out} == set(gl)
    for device, reason in plan.left_out:
        assert reason.startswith(f"float64 needs SHADER_F64: device {device} '"), reason
        assert reason.endswith("(gl) lacks it"), reason
    # float32 work still goes to every device.
    mixed64.geometric_product(a.astype(np.float32), b.astype(np.float32), strategy="balanced")
    assert mixed64.last_plan is not None and mixed64.last_plan.left_out == ()


def test_a_gl_only_context_refuses_float64_naming_its_devices() -> None:
    ctx = amari_gpu.MultiGpuContext(backends=["gl"], devices_per_adapter=2)
    try:
        x = np.ones((4, 8))
        with pytest.raises(InvalidArgumentError) as raised:
            ctx.geometric_product(x, x)
        message = str(raised.value)
        assert message.startswith("dtype: no device of this context computes in float64: "), message
        for device in ctx.devices:
            assert f"float64 needs SHADER_F64: device {device.id} '" in message, message
        assert "dtype=numpy.float32" in message
        # On purpose in float32, it runs.
        assert ctx.geometric_product(x, x, dtype=np.float32).dtype == np.float32
    finally:
        ctx.close()


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.float16]),
    st.sampled_from([np.float32, np.float64, np.int16, np.bool_]),
)
def test_result_dtypes_follow_numpy(
    host64: amari_gpu.MultiGpuContext, left: type, right: type
) -> None:
    a = np.ones((3, 8), dtype=left)
    b = np.ones((3, 8), dtype=right)
    want = np.result_type(a, b)
    want = np.dtype(np.float64) if want.kind in "biu" else want
    got = host64.geometric_product(a, b)
    assert got.dtype == want
    # The values are those of the computation in that dtype.
    same = host64.geometric_product(a.astype(want), b.astype(want))
    np.testing.assert_array_equal(got, same)


def test_dtype_overrides_and_out_must_have_the_results_dtype(
    host64: amari_gpu.MultiGpuContext,
) -> None:
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((50, 8)), rng.standard_normal((50, 8))
    in32 = host64.geometric_product(a, b, dtype=np.float32)
    assert in32.dtype == np.float32
    np.testing.assert_array_equal(
        in32, host64.geometric_product(a.astype(np.float32), b.astype(np.float32))
    )
    up = host64.geometric_product(a.astype(np.float32), b.astype(np.float32), dtype="float64")
    assert up.dtype == np.float64
    out = np.zeros((50, 8))
    assert host64.geometric_product(a, b, out=out) is out
    np.testing.assert_array_equal(out, host64.geometric_product(a, b))
    with pytest.raises(
        TypeError, match=r"^out: expected dtype float64 \(the result's\), got dtype float32$"
    ):
        host64.geometric_product(a, b, out=np.zeros((50, 8), np.float32))
    with pytest.raises(
        TypeError, match=r"^out: expected dtype float32 \(the result's\), got dtype float64$"
    ):
        host64.geometric_product(a, b, dtype=np.float32, out=np.zeros((50, 8)))
    with pytest.raises(
        TypeError,
        match=r"^b: expected an array of bool, integer, float16, float32 or float64 values, "
        r"got dtype complex128$",
    ):
        host64.geometric_product(a, b.astype(np.complex128))


def test_device_arrays_compute_in_their_dtype(host64: amari_gpu.MultiGpuContext) -> None:
    x = np.random.default_rng(4).standard_normal((20, 8))
    d = host64.asarray(x)
    got = host64.geometric_product(d, x)
    assert got.dtype == np.float64
    assert np.array_equal(np.asarray(got), host64.geometric_product(x, x))
    with pytest.raises(
        InvalidArgumentError,
        match=r"^a: expected a DeviceArray of float32 \(the dtype geometric_product computes "
        r"in here\), got one of float64",
    ):
        host64.geometric_product(d, x, dtype=np.float32)
