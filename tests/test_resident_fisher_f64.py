"""``fisher_information`` and ``natural_gradient`` of float64 DeviceArray scores (issue 28
item 4): accumulated in float64 as float64 numpy scores are, the same bits on the host device,
lavapipe and mixes of them (never on llvmpipe GL, which holds no float64 rows), past 65,535
rows on lavapipe; DeviceArrays of another dtype than the call's refused by name."""

from __future__ import annotations

from collections.abc import Iterator

import amari_gpu as ag
import numpy as np
import pytest
from _resident_helpers import gl_device_ids
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
    assert not {device for device, _, _ in resident.sharding} & gl
    got = ctx.fisher_information(resident)
    plan = ctx.last_plan
    assert plan is not None and set(dict(plan.left_out)) == gl
    assert np.array_equal(_bits(got), _bits(ctx.fisher_information(scores)))


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
    with pytest.raises(InvalidArgumentError, match="weights"):
        ctx.fisher_information(ctx.asarray(np.ones((6, 3))), -np.ones(6))
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
