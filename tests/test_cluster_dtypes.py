"""float64 on a RayContext over a real Ray cluster of this machine (two loopback nodes):
tropical products and shortest paths, the Fisher matrices and maps and ``map_rows`` compute
float64 by the local rules, the row kernels' rows split over the nodes with a device for
float64 as float32 ones are (the Fisher matrix's float64 partials too; shortest paths whole
on one), the same bits, dtypes and errors as one MultiGpuContext; nodes with no device for
the dtype are left out, and a cluster with none refuses the call (or the upload of a
float64 array) by name, nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest
from _fisher_helpers import random_scores
from _tropical_helpers import graph_without_negative_cycles, random_operand
from amari_gpu.cluster.dispatch import computes

OTHER = {"amari_gpu_other": 1}
"""A second resource both nodes offer: the contexts of other backends run beside ``rc``."""

OPS = """
fn row(a: array<amari_float, 2>) -> array<amari_float, 3> {
    return array<amari_float, 3>(a[0] + a[1], a[0] - a[1], a[0] * a[1]);
}
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    both = {**helpers.RESOURCE, **OTHER}
    with helpers.local_cluster([both, both]) as c:
        yield c


@pytest.fixture(scope="module")
def rc(cluster: Any) -> Iterator[ag.RayContext]:
    with ag.RayContext(backends=["vulkan"], chunk_items=512) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def local() -> Iterator[ag.MultiGpuContext]:
    with ag.MultiGpuContext(backends=["vulkan"]) as ctx:
        yield ctx


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype == np.float64 and got.flags.writeable
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


def test_float64_calls_are_one_contexts_bits(rc: ag.RayContext, local: ag.MultiGpuContext) -> None:
    rng = np.random.default_rng(64)
    a = random_operand(rng, (1500, 40), 0.05).astype(np.float64) * np.pi
    b = random_operand(rng, (40, 30), 0.05).astype(np.float64) / 3.0
    a.flags.writeable = False  # as a node reads them: borrowed, never modified
    for semiring in ("max_plus", "min_plus"):
        _same(rc.tropical_matmul(a, b, semiring), local.tropical_matmul(a, b, semiring))
    x = np.ascontiguousarray(b[:, 0])
    _same(rc.tropical_matvec(a, x), local.tropical_matvec(a, x))
    w = graph_without_negative_cycles(rng, 70, 0.3, integer=False).astype(np.float64) / 7.0
    _same(rc.shortest_paths(w), local.shortest_paths(w))
    scores = random_scores(20_000, 9, seed=3).astype(np.float64) / 3.0
    weights = rng.uniform(0.0, 2.0, 20_000)
    _same(rc.fisher_information(scores), local.fisher_information(scores))
    _same(rc.fisher_information(scores, weights), local.fisher_information(scores, weights))
    # float64 partials split over the nodes as float32 ones are, summed in chunk order.
    got = rc.fisher_information(scores, weights, strategy="balanced")
    _split_over_both(rc)
    _same(got, local.fisher_information(scores, weights))
    # The per-sample maps keep float64 (run whole on one node) and float16 (float32 rows).
    probs = rng.dirichlet(np.ones(5), size=700)
    _same(rc.fisher_categorical(probs), local.fisher_categorical(probs))
    logits = rng.standard_normal((700, 5)) * 4.0
    _same(rc.fisher_categorical(logits=logits), local.fisher_categorical(logits=logits))
    mean, var = rng.standard_normal((700, 3)), rng.uniform(0.5, 2.0, (700, 3))
    _same(rc.fisher_gaussian(mean, var), local.fisher_gaussian(mean, var))
    half = probs.astype(np.float16)
    got16, want16 = rc.fisher_categorical(half), local.fisher_categorical(half)
    assert got16.dtype == want16.dtype == np.float16 and got16.tobytes() == want16.tobytes()
    rows = rng.standard_normal((3000, 2))
    _same(rc.map_rows(OPS, rows, out_cols=3), local.map_rows(OPS, rows, out_cols=3))
    # float64 rows split over the nodes as float32 ones do.
    g, h = rng.standard_normal((5000, 8)), rng.standard_normal((5000, 8))
    _same(rc.geometric_product(g, h, strategy="balanced"), local.geometric_product(g, h))
    _split_over_both(rc)
    for semiring in ("max_plus", "min_plus"):
        got = rc.tropical_matmul(a, b, semiring, strategy="balanced")
        _split_over_both(rc)
        _same(got, local.tropical_matmul(a, b, semiring))
    _same(rc.tropical_matvec(a, x, strategy="balanced"), local.tropical_matvec(a, x))
    _split_over_both(rc)
    _same(rc.fisher_categorical(probs, strategy="balanced"), local.fisher_categorical(probs))
    _split_over_both(rc)
    got = rc.fisher_categorical(logits=logits, strategy="balanced")
    _same(got, local.fisher_categorical(logits=logits))
    _same(rc.fisher_gaussian(mean, var, strategy="balanced"), local.fisher_gaussian(mean, var))
    _split_over_both(rc)
    got = rc.map_rows(OPS, rows, out_cols=3, strategy="balanced")
    _split_over_both(rc)
    _same(got, local.map_rows(OPS, rows, out_cols=3))
    # The caller's out takes the result.
    out = np.full((1500, 30), 7.0)
    assert rc.tropical_matmul(a, b, out=out) is out
    _same(out, local.tropical_matmul(a, b))
    # float32 on request splits over the nodes as before.
    got32 = rc.tropical_matmul(a, b, dtype=np.float32, strategy="balanced")
    assert np.array_equal(got32, local.tropical_matmul(a, b, dtype=np.float32))
    assert rc.last_plan is not None and len({w.device_id for w in rc.last_plan}) == 2


def _split_over_both(rc: ag.RayContext) -> None:
    """The last call's rows went to both nodes."""
    assert rc.last_plan is not None and len({w.device_id for w in rc.last_plan}) == 2


def test_float64_errors_are_one_contexts_and_nothing_is_written(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    a = np.ones((1600, 5))
    a[1417, 3] = np.nan  # in the third chunk of 512 rows: the second node's
    b = np.ones((5, 4))
    out = np.full((1600, 4), 7.0)
    with pytest.raises(ag.InvalidArgumentError) as e:
        rc.tropical_matmul(a, b, out=out, strategy="balanced")
    with pytest.raises(ag.InvalidArgumentError) as e_local:
        local.tropical_matmul(a, b)
    assert str(e.value) == str(e_local.value) and "NaN at [1417, 3]" in str(e.value)
    assert np.all(out == 7.0), "nothing written"
    # The maps' row checks name the caller's row, nothing written.
    probs = np.full((1600, 4), 0.25)
    probs[1500] = [0.5, 0.5, 0.5, -0.5]
    out = np.full((1600, 4, 4), 7.0)
    with pytest.raises(ag.InvalidArgumentError) as e:
        rc.fisher_categorical(probs, out=out, strategy="balanced")
    with pytest.raises(ag.InvalidArgumentError) as e_local:
        local.fisher_categorical(probs)
    assert str(e.value) == str(e_local.value) and "1500" in str(e.value)
    assert np.all(out == 7.0), "nothing written"
    var = np.ones((1600, 3))
    var[1200, 1] = -1.0
    with pytest.raises(ag.InvalidArgumentError) as e:
        rc.fisher_gaussian(np.zeros((1600, 3)), var, strategy="balanced")
    with pytest.raises(ag.InvalidArgumentError) as e_local:
        local.fisher_gaussian(np.zeros((1600, 3)), var)
    assert str(e.value) == str(e_local.value) and "1200" in str(e.value)
    with pytest.raises(ag.ShapeError) as e:
        rc.map_rows(OPS, np.ones((2, 2, 2)), out_cols=3)
    with pytest.raises(ag.ShapeError) as e_local:
        local.map_rows(OPS, np.ones((2, 2, 2)), out_cols=3)
    assert str(e.value) == str(e_local.value)


def test_nodes_without_a_float64_device_are_left_out(cluster: Any) -> None:
    """A node whose devices do not compute in float64 (llvmpipe GL) takes no float64 call: a
    cluster of such nodes refuses it naming each node's devices, nothing written, and still
    runs float32; with the host device beside GL a node runs float64 products and Fisher
    there, but not float64 rows (WGSL needs a wgpu device that computes in float64)."""
    rng = np.random.default_rng(65)
    a, b = rng.standard_normal((300, 6)), rng.standard_normal((6, 5))
    scores = rng.standard_normal((500, 4))
    with ag.RayContext(resources=OTHER, backends=["gl"]) as gl:
        assert not any(computes({"devices": n.devices}, "float64") for n in gl.nodes)
        out = np.full((300, 5), 7.0)
        with pytest.raises(
            ag.InvalidArgumentError,
            match=r"^dtype: no node of this RayContext has a device that computes in float64 "
            r"\(node 0: llvmpipe .*\(gl: float32\); node 1: .*pass dtype=numpy.float32",
        ):
            gl.tropical_matmul(a, b, out=out)
        assert np.all(out == 7.0), "nothing written"
        with pytest.raises(ag.InvalidArgumentError, match=r"^dtype: no node"):
            gl.fisher_information(scores)
        assert gl.tropical_matmul(a, b, dtype=np.float32).dtype == np.float32
        # Arrays too: float64 and float16 rows find no node to live on, float32 ones do.
        for dtype in ("float64", "float16"):
            with pytest.raises(
                ag.InvalidArgumentError,
                match=rf"^dtype: no node of this RayContext has a device that computes in "
                rf"{dtype} \(node 0: llvmpipe .*\(gl: float32\); node 1: ",
            ):
                gl.asarray(a.astype(dtype))
            # from_ray's arrays are held in their dtype too: refused alike, nothing held.
            import ray

            with pytest.raises(
                ag.InvalidArgumentError,
                match=rf"^dtype: no node of this RayContext has a device that computes in "
                rf"{dtype} \(node 0: llvmpipe .*\(gl: float32\); node 1: ",
            ):
                gl.from_ray([ray.put(a.astype(dtype))])
        held = gl.asarray(a, dtype=np.float32)
        assert held.dtype == np.float32 and np.array_equal(held.numpy(), a.astype(np.float32))
    with (
        ag.RayContext(resources=OTHER, backends=["gl", "host"]) as mixed,
        ag.MultiGpuContext(backends=["gl", "host"]) as local,
    ):
        assert all(computes({"devices": n.devices}, "float64") for n in mixed.nodes)
        _same(mixed.tropical_matmul(a, b), local.tropical_matmul(a, b))
        _same(mixed.fisher_information(scores), local.fisher_information(scores))
        with pytest.raises(
            ag.InvalidArgumentError,
            match=r"^dtype: no node of this RayContext has a wgpu device that computes in "
            r"float64",
        ):
            mixed.map_rows(OPS, a[:, :2], out_cols=3)


def test_float16_scalar_product_is_one_contexts_bits(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    """A RayContext's float16 scalar product of numpy operands: float16, the local bits (the
    float32 result rounded once on the driver, as a local call rounds it)."""
    rng = np.random.default_rng(16)
    a, b = (rng.standard_normal((5001, 8)) * 200).astype(np.float16), rng.standard_normal(8) * 200
    got, want = rc.scalar_product(a, b.astype(np.float16)), local.scalar_product(a, b, dtype="f2")
    assert got.dtype == want.dtype == np.float16 and np.isinf(want).any()
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
