"""float64 per-sample Fisher maps and ``dtype=`` on every Fisher function.

``fisher_categorical`` and ``fisher_gaussian`` of float64 (and bool or integer) inputs compute
in float64 on the host device and on lavapipe (Vulkan, ``SHADER_F64``), within a few ulps of
a longdouble reference, with the same bits on every device count, device mix and strategy of
a context; llvmpipe (GL, no float64) is left out, and a GL-only context refuses naming its
devices. ``dtype=`` overrides the operands' dtype on every Fisher function: float32 on float64
inputs computes in float32 on purpose, float64 on float32 inputs in float64, float16 rounds
the operands to float16, computes in float32 and rounds the result once."""

from __future__ import annotations

import _dtype_helpers as helpers
import amari_gpu
import numpy as np
import pytest
from amari_gpu.errors import InvalidArgumentError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CHUNK = 64
"""Items per chunk: every batch below is several chunks on every device of a context."""
EPS = np.finfo(np.float64).eps

host64 = helpers.module_context(CHUNK, ["host"])
vulkan64 = helpers.module_context(CHUNK, ["vulkan"])

PROPERTY = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _probs(n: int, k: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(k), size=n)


def _gaussian(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), np.exp(rng.uniform(-30, 30, (n, d)))


def _categorical_reference(p: np.ndarray) -> np.ndarray:
    pl = p.astype(np.longdouble)
    k = p.shape[1]
    return pl[:, :, None] * np.eye(k, dtype=np.longdouble) - pl[:, :, None] * pl[:, None, :]


def _softmax_reference(x: np.ndarray) -> np.ndarray:
    xl = x.astype(np.longdouble)
    e = np.exp(xl - xl.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _gaussian_reference(var: np.ndarray) -> np.ndarray:
    n, d = var.shape
    out = np.zeros((n, 2 * d, 2 * d), np.longdouble)
    v = var.astype(np.longdouble)
    idx = np.arange(d)
    out[:, idx, idx] = 1 / v
    out[:, d + idx, d + idx] = 1 / (2 * v * v)
    return out


def _ulps(got: np.ndarray, want: np.ndarray, p: np.ndarray) -> float:
    """Largest error of the (N, K, K) ``got`` against ``want``, in float64 ulps of the sum of
    the magnitudes of each entry's terms, ``p_r [r == c] + p_r p_c`` (what one fused or two
    separate roundings are bounded by; an entry that cancels to 0 has no ulps of its own)."""
    assert got.dtype == np.float64
    pl = p.astype(np.longdouble)
    k = p.shape[1]
    scale = pl[:, :, None] * np.eye(k, dtype=np.longdouble) + pl[:, :, None] * pl[:, None, :]
    err = np.abs(got.astype(np.longdouble) - want)
    return float((err / (np.maximum(scale, np.finfo(np.float64).tiny) * EPS)).max(initial=0))


@PROPERTY
@given(n=st.integers(1, 300), k=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_float64_categorical_is_within_ulps_of_longdouble_on_host_and_lavapipe(
    host64: amari_gpu.MultiGpuContext, vulkan64: amari_gpu.MultiGpuContext, n, k, seed
) -> None:
    p = _probs(n, k, seed)
    logits = np.random.default_rng(seed).standard_normal((n, k)) * 10
    before = (p.copy(), logits.copy())
    for ctx in (host64, vulkan64):
        f = ctx.fisher_categorical(p)
        assert f.dtype == np.float64 and f.shape == (n, k, k)
        assert _ulps(f, _categorical_reference(p), p) <= 1
        g = ctx.fisher_categorical(logits=logits)
        # The softmax in float64: x - max(x) rounds by up to |x - max(x)| / 2 ulps of 1,
        # which exp turns into as many ulps of p (numpy's softmax conditioning too), then a
        # few ulps of exp, sum and division, and one fused or two roundings per entry.
        q = _softmax_reference(logits)
        spread = float(np.ptp(logits, axis=1).max())
        assert _ulps(g, _categorical_reference(q), q.astype(np.float64)) <= 8 + 2 * spread
    assert np.array_equal(p, before[0]) and np.array_equal(logits, before[1])


@PROPERTY
@given(n=st.integers(1, 300), d=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_float64_gaussian_is_within_ulps_of_longdouble_on_host_and_lavapipe(
    host64: amari_gpu.MultiGpuContext, vulkan64: amari_gpu.MultiGpuContext, n, d, seed
) -> None:
    # Variances from 1e-13 to 1e13: 1 / (2 var^2) far outside float32's range.
    mean, var = _gaussian(n, d, seed)
    want = _gaussian_reference(var)
    for ctx in (host64, vulkan64):
        f = ctx.fisher_gaussian(mean, var)
        assert f.dtype == np.float64 and f.shape == (n, 2 * d, 2 * d)
        nonzero = want != 0
        assert np.array_equal(f != 0, nonzero)
        rel = np.abs(f[nonzero].astype(np.longdouble) - want[nonzero]) / want[nonzero]
        # Two correctly rounded divisions: within two ulps.
        assert float(rel.max()) <= 2 * EPS


def test_float64_bits_are_the_same_for_every_device_count_mix_and_strategy() -> None:
    p = _probs(1500, 7, seed=1)
    logits = np.random.default_rng(2).standard_normal((1500, 7)) * 5
    mean, var = _gaussian(1500, 3, seed=3)

    def call(ctx: amari_gpu.MultiGpuContext, strategy: str) -> tuple[np.ndarray, ...]:
        return (
            ctx.fisher_categorical(p, strategy=strategy),
            ctx.fisher_categorical(logits=logits, strategy=strategy),
            ctx.fisher_gaussian(mean, var, strategy=strategy),
        )

    results = helpers.over_mixes(CHUNK, call)
    for got in results[1:]:
        for a, b in zip(got, results[0]):
            assert a.dtype == np.float64 and a.tobytes() == b.tobytes()


def test_a_mixed_context_runs_float64_maps_on_vulkan_and_host_only() -> None:
    ctx = helpers.context(CHUNK, backends=["vulkan", "gl", "host"])
    try:
        p = _probs(900, 5, seed=4)
        gl = {d.id for d in ctx.devices if d.adapter.backend == "gl"}
        assert gl
        for call in (
            lambda: ctx.fisher_categorical(p, strategy="balanced"),
            lambda: ctx.fisher_gaussian(*_gaussian(900, 2, seed=5), strategy="balanced"),
        ):
            f = call()
            plan = ctx.last_plan
            assert plan is not None and f.dtype == np.float64
            assert all(d.device_id not in gl for d in plan)
            assert {device for device, _ in plan.left_out} == gl
            for _, reason in plan.left_out:
                assert "float64 needs SHADER_F64" in reason, reason
        assert _ulps(ctx.fisher_categorical(p), _categorical_reference(p), p) <= 1
    finally:
        ctx.close()


def test_a_gl_only_context_refuses_float64_maps_naming_its_devices() -> None:
    ctx = amari_gpu.MultiGpuContext(backends=["gl"])
    try:
        out = np.full((4, 3, 3), np.nan)
        calls = (
            lambda: ctx.fisher_categorical(np.full((4, 3), 1 / 3), out=out),
            lambda: ctx.fisher_gaussian(np.zeros((4, 2)), np.ones((4, 2))),
        )
        for call in calls:
            with pytest.raises(InvalidArgumentError) as raised:
                call()
            message = str(raised.value)
            assert message.startswith("dtype: no device of this context computes in float64")
            for device in ctx.devices:
                assert f"float64 needs SHADER_F64: device {device.id} '" in message, message
        assert np.isnan(out).all(), "nothing is half-written"
        # float32 still runs there, and dtype= float32 computes float64 inputs there.
        f = ctx.fisher_categorical(np.full((4, 3), 1 / 3), dtype=np.float32)
        assert f.dtype == np.float32
    finally:
        ctx.close()


def test_integer_and_bool_inputs_compute_in_float64(host64: amari_gpu.MultiGpuContext) -> None:
    var = np.arange(1, 13).reshape(4, 3)
    f = host64.fisher_gaussian(np.zeros((4, 3), np.int8), var)
    assert f.dtype == np.float64
    assert f.tobytes() == host64.fisher_gaussian(np.zeros((4, 3)), var.astype(np.float64)).tobytes()
    onehot = np.eye(3, dtype=bool)
    assert host64.fisher_categorical(onehot).dtype == np.float64


def test_dtype_float32_computes_float64_maps_in_float32_on_purpose(
    vulkan64: amari_gpu.MultiGpuContext,
) -> None:
    p = _probs(500, 6, seed=6)
    mean, var = _gaussian(500, 2, seed=7)
    var = np.clip(var, 1e-10, 1e10)
    a = vulkan64.fisher_categorical(p, dtype=np.float32)
    b = vulkan64.fisher_categorical(p.astype(np.float32))
    assert a.dtype == np.float32 and a.tobytes() == b.tobytes()
    c = vulkan64.fisher_gaussian(mean, var, dtype="float32")
    d = vulkan64.fisher_gaussian(mean.astype(np.float32), var.astype(np.float32))
    assert c.dtype == np.float32 and c.tobytes() == d.tobytes()
    # And float64 on float32 inputs: the float64 computation of the same values.
    p32 = p.astype(np.float32)
    e = vulkan64.fisher_categorical(p32, dtype=np.float64)
    assert e.dtype == np.float64
    assert e.tobytes() == vulkan64.fisher_categorical(p32.astype(np.float64)).tobytes()


def test_dtype_float16_rounds_the_operands_and_the_result_once(
    host64: amari_gpu.MultiGpuContext,
) -> None:
    logits = np.random.default_rng(8).standard_normal((300, 4))
    f = host64.fisher_categorical(logits=logits, dtype=np.float16)
    assert f.dtype == np.float16
    want = host64.fisher_categorical(logits=logits.astype(np.float16).astype(np.float32))
    assert f.tobytes() == want.astype(np.float16).tobytes()
    # float16 inputs keep float16, as numpy does; out= takes a float16 array.
    mean, var = _gaussian(300, 2, seed=9)
    mean, var = mean.astype(np.float16), np.clip(var, 0.01, 100).astype(np.float16)
    out = np.empty((300, 4, 4), np.float16)
    got = host64.fisher_gaussian(mean, var, out=out)
    assert got is out
    expected = host64.fisher_gaussian(mean.astype(np.float32), var.astype(np.float32))
    assert out.tobytes() == expected.astype(np.float16).tobytes()


def test_dtype_on_the_fisher_matrix_sets_its_accumulation(
    host64: amari_gpu.MultiGpuContext,
) -> None:
    rng = np.random.default_rng(10)
    g, w = rng.standard_normal((700, 5)), rng.random(700)
    g32, w32 = g.astype(np.float32), w.astype(np.float32)
    a = host64.fisher_information(g, w, dtype=np.float32)
    assert a.dtype == np.float64
    assert a.tobytes() == host64.fisher_information(g32, w32).tobytes()
    b = host64.fisher_information(g32, w32, dtype=np.float64)
    assert b.tobytes() == host64.fisher_information(g32.astype(float), w32.astype(float)).tobytes()
    c = host64.fisher_information(g, dtype=np.float16)
    assert c.tobytes() == host64.fisher_information(g.astype(np.float16)).tobytes()
    grad = np.linspace(-1, 1, 5)
    x = host64.natural_gradient(g, grad, 1e-3, weights=w, dtype=np.float32)
    assert x.tobytes() == np.linalg.solve(a + 1e-3 * np.eye(5), grad).tobytes()


def test_bad_dtypes_are_refused_by_name(host64: amari_gpu.MultiGpuContext) -> None:
    p = _probs(4, 3, seed=11)
    with pytest.raises(TypeError, match=r"^dtype: expected float16, float32, float64 or None"):
        host64.fisher_categorical(p, dtype=np.int32)
    with pytest.raises(TypeError, match=r"^dtype: expected float16, float32, float64 or None"):
        host64.fisher_information(np.ones((3, 2)), dtype="complex64")
    with pytest.raises(InvalidArgumentError, match=r"^dtype: expected None with fisher="):
        host64.natural_gradient(None, np.ones(2), 0.1, fisher=np.eye(2), dtype=np.float32)
    with pytest.raises(TypeError, match=r"^out: expected .*float64"):
        host64.fisher_categorical(p, out=np.empty((4, 3, 3), np.float32))
    array = host64.asarray(p.astype(np.float32))
    try:
        # dtype= does not convert a DeviceArray: it must hold the dtype asked for.
        with pytest.raises(
            InvalidArgumentError, match=r"^probs: expected a DeviceArray of float64 .*float32"
        ):
            host64.fisher_categorical(array, dtype=np.float64)
        assert host64.fisher_categorical(array, dtype=np.float32).dtype == np.float32
    finally:
        array.free()
