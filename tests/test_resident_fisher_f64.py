"""``fisher_information`` and ``natural_gradient`` of float64 DeviceArray scores (issue 28
item 4): accumulated in float64 where the rows live (only column maxima and the partials read
back), the bits of float64 numpy scores on the host device, lavapipe and mixes of them (never
on llvmpipe GL, which holds no float64 rows), past 65,535 rows on lavapipe; DeviceArrays of
another dtype than the call's refused by name."""

from __future__ import annotations

from collections.abc import Iterator

import amari_gpu as ag
import numpy as np
import pytest
from _resident_helpers import assert_faults_change_nothing, gl_device_ids
from amari_gpu.errors import InvalidArgumentError


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)


@pytest.fixture(scope="module")
def contexts() -> Iterator[dict[str, ag.MultiGpuContext]]:
    made = {
        "host": ag.MultiGpuContext(backends=["host"]),
        "lavapipe": ag.MultiGpuContext(backends=["vulkan"]),
        "2 lavapipe+host": ag.MultiGpuContext(backends=["vulkan", "host"], devices_per_adapter=2),
        "lavapipe+gl": ag.MultiGpuContext(backends=["vulkan", "gl"]),
    }
    yield made
    for ctx in made.values():
        ctx.close()


@pytest.mark.parametrize("shape", [(70_000, 3), (1_000, 37)])
def test_float64_device_array_scores_are_the_numpy_paths_bits(
    contexts: dict[str, ag.MultiGpuContext], shape: tuple[int, int]
) -> None:
    rng = np.random.default_rng(3)
    scores = rng.standard_normal(shape) * 1e-3 + 1.0 / 3.0
    weights = rng.random(shape[0])
    grad = rng.standard_normal(shape[1])
    before = scores.copy()
    exact = np.einsum("n,ni,nj->ij", weights.astype(np.longdouble), scores, scores)
    exact /= weights.astype(np.longdouble).sum()
    # Within each context: the numpy path's bits (which hold for any device count, mix and
    # strategy of the context; contexts may differ in how their devices round an fma).
    for name, ctx in contexts.items():
        resident = ctx.asarray(scores)
        assert resident.dtype == np.float64
        got = ctx.fisher_information(resident, weights)
        assert got.dtype == np.float64
        want = ctx.fisher_information(scores, weights)
        assert np.array_equal(_bits(got), _bits(want)), name
        # float64 accumulation: far within float32's reach of the longdouble value.
        assert np.max(np.abs(got - exact)) <= 1e-13 * np.max(np.abs(exact)), name
        unweighted = ctx.fisher_information(resident)
        assert np.array_equal(_bits(unweighted), _bits(ctx.fisher_information(scores))), name
        step = ctx.natural_gradient(resident, grad, 1e-3, weights=weights)
        assert np.array_equal(
            _bits(step), _bits(ctx.natural_gradient(scores, grad, 1e-3, weights=weights))
        ), name
    assert np.array_equal(_bits(scores), _bits(before))


def test_float64_scores_never_sit_on_the_gl_device(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    ctx = contexts["lavapipe+gl"]
    gl = gl_device_ids(ctx)
    scores = np.random.default_rng(5).standard_normal((5_000, 4))
    resident = ctx.asarray(scores)
    placed = ctx.last_plan
    assert placed is not None and set(dict(placed.left_out)) == gl
    assert not {device for device, _, _ in resident.sharding} & gl
    with ctx.profile() as prof:
        got = ctx.fisher_information(resident)
    # Reduced where the rows live: no plan of its own, every kernel on a float64 device.
    assert ctx.last_plan is placed
    assert not {e["device"] for e in prof.events if e["kind"] == "kernel"} & gl
    assert np.array_equal(_bits(got), _bits(ctx.fisher_information(scores)))


@pytest.mark.parametrize("p", [64, 37])
def test_only_the_partials_come_back_not_the_rows(
    contexts: dict[str, ag.MultiGpuContext], p: int
) -> None:
    # 40,000 x P float64 scores, two thirds on two lavapipe devices: what is read back from
    # them is the column maxima (16 x P words per chunk) and the triangles of P x P
    # partials (about 64 chunks: a few percent of the rows here), not the N x P x 8 bytes
    # of rows that gathering them reads (P = 37 is padded to 40 columns where they live).
    ctx = contexts["2 lavapipe+host"]
    scores = np.random.default_rng(11).standard_normal((40_000, p))
    resident = ctx.asarray(scores, strategy="balanced")
    held = [x["resident_bytes"] for x in ctx.stats()]
    before = [x["bytes_down"] for x in ctx.stats()]
    with ctx.profile() as prof:
        got = ctx.fisher_information(resident)
    down = sum(x["bytes_down"] for x in ctx.stats()) - sum(before)
    assert 0 < down < scores.nbytes / 5, down
    kernels = {c["kernel"] for c in prof.kernel_calls}
    assert {"resident/fisher_column_max", "resident/fisher_triangle"} <= kernels, kernels
    assert "resident/gather" not in kernels, kernels
    devices = {e["device"] for e in prof.events if e["kind"] == "kernel"}
    assert devices == {x for x, _, _ in resident.sharding}
    # The padded copy lived only while the call ran.
    assert [x["resident_bytes"] for x in ctx.stats()] == held
    assert np.array_equal(_bits(got), _bits(ctx.fisher_information(scores)))


@pytest.mark.parametrize("strategy", ["balanced", "capability", "memory"])
def test_every_sharding_gives_the_numpy_paths_bits(
    contexts: dict[str, ag.MultiGpuContext], strategy: str
) -> None:
    # Shards cut chunks of the grid (run by the engine from the host) or hold them whole.
    rng = np.random.default_rng(13)
    scores = rng.standard_normal((9_000, 5)) * np.array([1e-150, 1.0, 3.0, 1e150, 7.0])
    weights = rng.random(9_000)
    for name in ["2 lavapipe+host", "lavapipe+gl"]:
        ctx = contexts[name]
        want = ctx.fisher_information(scores, weights)
        got = ctx.fisher_information(ctx.asarray(scores, strategy=strategy), weights)
        assert np.array_equal(_bits(got), _bits(want)), (name, strategy)


def test_errors_are_the_numpy_paths_and_other_dtypes_are_refused(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    ctx = contexts["2 lavapipe+host"]
    scores = np.ones((6, 3))
    scores[4, 2] = np.inf
    with pytest.raises(InvalidArgumentError) as numpy_path:
        ctx.fisher_information(scores)
    with pytest.raises(InvalidArgumentError) as resident:
        ctx.fisher_information(ctx.asarray(scores))
    assert str(resident.value) == str(numpy_path.value)
    weights = -np.ones(6)
    with pytest.raises(InvalidArgumentError) as numpy_path:
        ctx.fisher_information(np.ones((6, 3)), weights)
    with pytest.raises(InvalidArgumentError) as resident:
        ctx.fisher_information(ctx.asarray(np.ones((6, 3))), weights)
    assert str(resident.value) == str(numpy_path.value)
    assert "weights" in str(resident.value)
    # Both bad: the scores are named first, as on the numpy path.
    with pytest.raises(InvalidArgumentError) as resident:
        ctx.fisher_information(ctx.asarray(scores), weights)
    assert str(resident.value).startswith("scores")
    huge = np.full((6, 3), 1e200)
    with pytest.raises(InvalidArgumentError) as numpy_path:
        ctx.fisher_information(huge)
    with pytest.raises(InvalidArgumentError) as resident:
        ctx.fisher_information(ctx.asarray(huge))
    assert str(resident.value) == str(numpy_path.value)
    x16 = ctx.asarray(np.ones((6, 4), dtype=np.float16))
    with pytest.raises(
        InvalidArgumentError, match=r"scores: expected a DeviceArray of float32 .*float16"
    ):
        ctx.fisher_information(x16)
    x32 = ctx.asarray(np.ones((6, 4), dtype=np.float32))
    with pytest.raises(
        InvalidArgumentError, match=r"scores: expected a DeviceArray of float64 .*float32"
    ):
        ctx.fisher_information(x32, dtype=np.float64)
    x64 = ctx.asarray(np.ones((6, 4)))
    with pytest.raises(
        InvalidArgumentError, match=r"scores: expected a DeviceArray of float32 .*float64"
    ):
        ctx.fisher_information(x64, dtype=np.float32)


def test_a_device_failing_mid_call_changes_nothing(mixed: ag.MultiGpuContext) -> None:
    # Chunks of 64 rows on two lavapipe devices and the host: a failed device's chunks (and
    # their float64 weights, two words a row) go to another device, on rows rebuilt there
    # from the lineage (P = 6: the padded copy runs too).
    ctx = mixed
    rng = np.random.default_rng(17)
    scores = rng.standard_normal((900, 6))
    weights = rng.random(900)
    want = ctx.fisher_information(scores, weights)

    def same(resident: ag.DeviceArray) -> bool:
        got = ctx.fisher_information(resident, weights)
        return bool(np.array_equal(_bits(got), _bits(want)))

    assert_faults_change_nothing(
        ctx, lambda: ctx.asarray(scores, strategy="balanced"), same, attempts=4
    )
