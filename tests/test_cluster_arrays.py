"""Cluster arrays on a real Ray cluster of this machine (a head and two more nodes, each
offering the ``amari_gpu`` resource twice, so a second RayContext can run beside the
module's; lavapipe on every node): rows that stay on the nodes through chains of calls,
bit-identical to one MultiGpuContext, the bytes a chain moves through the object store,
lineage rebuilding the shards of a killed node, ``from_ray``, and the local errors; float64
and float16 arrays kept in their dtype on one, two and three nodes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest
from _fisher_helpers import random_probs
from amari_gpu.cluster import ClusterArray
from cl3 import reference_product

BACKENDS = ["vulkan"]
ROWS = 1 << 16
"""Rows of the chain's operands: 2 MiB per (N, 8) operand, so one operand moved through the
object store would already break the chain's 1 MiB bound."""

MIB = 1 << 20


ONE = {"amari_gpu_one": 1}
"""A resource only the head offers: a RayContext of one node beside the module's."""
TWO = {"amari_gpu_two": 1}
"""A resource the head and the second node offer: a RayContext of two nodes."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    twice = {"amari_gpu": 2}
    with helpers.local_cluster([{**twice, **ONE, **TWO}, {**twice, **TWO}, twice]) as c:
        yield c


@pytest.fixture(scope="module")
def rc(cluster: Any) -> Iterator[ag.RayContext]:
    with ag.RayContext(backends=BACKENDS) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def local() -> Iterator[ag.MultiGpuContext]:
    with ag.MultiGpuContext(backends=BACKENDS) as ctx:
        yield ctx


def _batch(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 8), dtype=np.float32)


def _moved(rc: ag.RayContext) -> int:
    """Bytes the driver sent to the nodes and received from them, through the store."""
    return sum(s["bytes_sent"] + s["bytes_received"] for s in rc.stats())


def _chain(ctx: Any, a: Any, b: Any, rotor: np.ndarray) -> Any:
    """Five GA calls, each on the previous result (a single rotor broadcast to every row)."""
    x = ctx.geometric_product(a, b)
    x = ctx.sandwich(rotor, x)
    x = ctx.outer_product(x, b)
    x = ctx.reverse(x)
    return ctx.normalize(x)


def test_a_chain_of_five_calls_stays_on_the_nodes(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    a, b = _batch(ROWS, 1), _batch(ROWS, 2)
    rotor = local.normalize(_batch(1, 3)[0])
    want = _chain(local, a, b, rotor)
    da, db = rc.asarray(a), rc.asarray(b)
    assert isinstance(da, ClusterArray) and isinstance(da, ag.DeviceArray)
    assert [node for node, _, _ in da.sharding] == [0, 1, 2]
    assert da.sharding[-1][2] == ROWS
    before = _moved(rc)
    got = _chain(rc, da, db, rotor)
    moved = _moved(rc) - before
    assert isinstance(got, ClusterArray)
    assert got.shape == (ROWS, 8) and got.sharding == da.sharding
    # Shards stay where they are: only the rotor (32 bytes per node) travels.
    assert moved <= MIB, moved
    assert moved < 1024, moved
    assert got.numpy().tobytes() == want.tobytes()
    assert _moved(rc) - before - moved == got.nbytes


def test_array_basics_and_free(rc: ag.RayContext, local: ag.MultiGpuContext) -> None:
    x = _batch(1000, 4).reshape(10, 100, 8)
    d = rc.asarray(x)
    assert (d.shape, d.dtype, d.ndim, d.size, len(d)) == ((10, 100, 8), np.float32, 3, 8000, 10)
    assert np.array_equal(np.asarray(d), x)
    assert "ClusterArray(shape=(10, 100, 8)" in repr(d)
    ints = rc.asarray(np.arange(30).reshape(10, 3))
    # Integers are kept as float64, as a local context's asarray keeps them.
    assert ints.numpy().dtype == np.float64 and np.array_equal(
        ints.numpy(), np.arange(30).reshape(10, 3)
    )
    # No rows, as locally: an empty array, and kernels give empty results.
    empty = rc.asarray(np.zeros((0, 8), np.float32))
    assert empty.shape == (0, 8) and empty.numpy().shape == (0, 8)
    assert rc.reverse(empty).numpy().shape == (0, 8)
    # An empty array keeps its dtype through a kernel too (no node computes it).
    empty64, local64 = rc.asarray(np.zeros((0, 8))), local.asarray(np.zeros((0, 8)))
    assert rc.reverse(empty64).dtype == local.reverse(local64).dtype == np.float64
    d.free()
    assert d.freed and "freed" in repr(d)
    with pytest.raises(ag.InvalidArgumentError, match="x: expected a live DeviceArray"):
        d.numpy()
    with pytest.raises(ag.InvalidArgumentError, match="a: expected a live DeviceArray"):
        rc.geometric_product(d, d)


def test_the_local_errors(rc: ag.RayContext, local: ag.MultiGpuContext) -> None:
    a = rc.asarray(_batch(300, 5))
    with pytest.raises(ag.ShapeError, match=r"b: expected leading shape \(300,\)"):
        rc.geometric_product(a, rc.asarray(_batch(200, 6)))
    with pytest.raises(ag.ShapeError, match="x: expected an array with at least one axis"):
        rc.asarray(np.float32(1.0))
    with pytest.raises(TypeError, match="x"):
        rc.asarray(np.array([["a", "b"]]))
    with pytest.raises(ag.InvalidArgumentError, match="a DeviceArray of a local context"):
        rc.asarray(local.asarray(_batch(4, 1)))
    with pytest.raises(ag.InvalidArgumentError, match="of another context"):
        local.geometric_product(a, _batch(300, 1))
    with pytest.raises(TypeError, match="pickled"):
        import pickle

        pickle.dumps(a)
    # The core's checks, in the caller's shapes, before anything runs.
    with pytest.raises(ag.ShapeError) as e:
        rc.geometric_product(a, rc.asarray(np.zeros((300, 4), np.float32)))
    with pytest.raises(ag.ShapeError) as e_local:
        local.geometric_product(
            local.asarray(_batch(300, 5)), local.asarray(np.zeros((300, 4), np.float32))
        )
    assert str(e.value) == str(e_local.value)


def test_out_takes_the_results_shards(rc: ag.RayContext, local: ag.MultiGpuContext) -> None:
    a, b = _batch(5000, 7), _batch(5000, 8)
    want = local.geometric_product(a, b)
    da, db = rc.asarray(a), rc.asarray(b)
    out = rc.asarray(np.zeros((5000, 8), np.float32))
    assert rc.geometric_product(da, db, out=out) is out
    assert out.numpy().tobytes() == want.tobytes()
    host = np.zeros((5000, 8), np.float32)
    assert rc.geometric_product(da, db, out=host) is host
    assert host.tobytes() == want.tobytes()
    # Single multivectors held on the nodes are gathered, as locally.
    one = rc.asarray(a[:1])
    assert (
        rc.geometric_product(one, db).numpy().tobytes()
        == local.geometric_product(a[:1], b).tobytes()
    )


def test_every_family_takes_cluster_arrays(rc: ag.RayContext, local: ag.MultiGpuContext) -> None:
    rng = np.random.default_rng(9)
    a = rng.standard_normal((700, 6)).astype(np.float32)
    bm = rng.standard_normal((6, 5)).astype(np.float32)
    got = rc.tropical_matmul(rc.asarray(a), bm)
    assert isinstance(got, ClusterArray)
    assert got.numpy().tobytes() == local.tropical_matmul(a, bm).tobytes()
    x = rng.standard_normal(6).astype(np.float32)
    got = rc.tropical_matvec(rc.asarray(a), x)
    assert got.numpy().tobytes() == local.tropical_matvec(a, x).tobytes()
    # A batch of products: its entries' rows gathered, the result put back on the nodes.
    a3 = rng.standard_normal((3, 50, 6)).astype(np.float32)
    b3 = rng.standard_normal((3, 6, 4)).astype(np.float32)
    got = rc.tropical_matmul(rc.asarray(a3), b3)
    assert isinstance(got, ClusterArray) and got.shape == (3, 50, 4)
    assert got.numpy().tobytes() == local.tropical_matmul(a3, b3).tobytes()
    probs = random_probs(900, 7, seed=2)
    got = rc.fisher_categorical(rc.asarray(probs))
    assert got.shape == (900, 7, 7)
    assert got.numpy().tobytes() == local.fisher_categorical(probs).tobytes()
    mean = rng.standard_normal((800, 3)).astype(np.float32)
    var = rng.random((800, 3), dtype=np.float32) + 0.5
    want = local.fisher_gaussian(mean, var)
    assert rc.fisher_gaussian(rc.asarray(mean), var).numpy().tobytes() == want.tobytes()
    assert rc.fisher_gaussian(mean, rc.asarray(var)).numpy().tobytes() == want.tobytes()
    scores = rng.standard_normal((1000, 4)).astype(np.float32)
    assert np.array_equal(
        rc.fisher_information(rc.asarray(scores)), local.fisher_information(scores)
    )
    # A node's check of its shard becomes the whole call's error, as one context gives it.
    bad = probs.copy()
    bad[850, 2] = np.nan
    with pytest.raises(ag.InvalidArgumentError) as e:
        rc.fisher_categorical(rc.asarray(bad))
    with pytest.raises(ag.InvalidArgumentError) as e_local:
        local.fisher_categorical(bad)
    assert str(e.value) == str(e_local.value)


def test_from_ray_reads_shards_already_in_the_store(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    import ray

    @ray.remote(num_cpus=0)
    def load(seed: int, n: int) -> np.ndarray:
        # Float64 rows produced where the task ran (kept float64, as asarray keeps them).
        return np.random.default_rng(seed).standard_normal((n, 8))

    parts = [load.remote(s, n) for s, n in [(1, 400), (2, 1), (3, 900)]]
    d = rc.from_ray(parts)
    assert d.shape == (1301, 8) and d.dtype == np.float64
    assert [(start, stop) for _, start, stop in d.sharding] == [(0, 400), (400, 401), (401, 1301)]
    whole = np.concatenate(ray.get(parts))
    assert d.numpy().tobytes() == whole.tobytes()
    got = rc.reverse(d)
    assert got.dtype == np.float64
    assert got.numpy().tobytes() == local.reverse(whole).tobytes()
    with pytest.raises(
        ag.ShapeError, match=r"refs\[1\]: expected an array of shape \(rows >= 1, 8\)"
    ):
        rc.from_ray([ray.put(np.zeros((3, 8))), ray.put(np.zeros((3, 4)))])
    with pytest.raises(ag.ShapeError, match=r"refs\[0\]"):
        rc.from_ray([ray.put(np.zeros((0, 8)))])
    with pytest.raises(TypeError, match=r"refs\[1\]"):
        rc.from_ray([ray.put(np.zeros((3, 8))), ray.put(np.array([["a"] * 8]))])
    with pytest.raises(ag.InvalidArgumentError, match="refs: expected a non-empty list"):
        rc.from_ray([])
    with pytest.raises(ag.InvalidArgumentError, match=r"refs\[0\]: expected a ray.ObjectRef"):
        rc.from_ray([np.zeros((3, 8))])


def test_from_ray_keeps_the_arrays_dtype_as_asarray_does(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    import ray

    rng = np.random.default_rng(28)
    x = rng.standard_normal((700, 8))
    cases = {
        "float16": ([x[:300].astype(np.float16), x[300:].astype(np.float16)], np.float16),
        "float32": ([x[:1].astype(np.float32), x[1:].astype(np.float32)], np.float32),
        # Integers as numpy's true division gives them; int32 beside int64 is float64 both.
        "integers": ([(x[:350] * 9).astype(np.int32), (x[350:] * 9).astype(np.int64)], np.float64),
        "bool": ([x[:350] > 0, x[350:] > 0], np.float64),
        "1-D float64": ([x[:200, 0].copy(), x[200:, 0].copy()], np.float64),
    }
    for name, (parts, dtype) in cases.items():
        d = rc.from_ray([ray.put(p) for p in parts])
        want = np.concatenate(parts).astype(dtype)
        assert isinstance(d, ClusterArray) and d.dtype == dtype and d.shape == want.shape, name
        assert d.numpy().tobytes() == want.tobytes(), name
        if want.ndim == 2:
            # A kernel takes it as a local DeviceArray of that dtype: the local bits.
            got, mine = rc.reverse(d), local.reverse(local.asarray(want))
            assert got.dtype == mine.dtype == dtype, name
            assert got.numpy().tobytes() == mine.numpy().tobytes(), name
    with pytest.raises(
        ag.InvalidArgumentError,
        match=r"^refs\[1\]: expected an array kept as float32 like refs\[0\] \(arrays of one "
        r"dtype: they are not promoted across nodes\), got one kept as float64",
    ):
        rc.from_ray([ray.put(x[:3].astype(np.float32)), ray.put(x[3:6])])
    with pytest.raises(ag.ShapeError, match=r"^refs\[0\]: expected float16 rows of an even"):
        rc.from_ray([ray.put(np.ones((4, 3), np.float16))])
    with pytest.raises(ag.ShapeError, match=r"^refs\[0\]: expected float16 rows of an even"):
        rc.from_ray([ray.put(np.ones(4, np.float16))])
    with pytest.raises(TypeError, match=r"^refs\[1\]: expected an array of bool, integer"):
        rc.from_ray([ray.put(x[:3]), ray.put(x[3:6].astype(np.complex128))])


def test_a_from_ray_shard_lost_with_its_node_is_read_again_in_its_dtype(
    cluster: Any, local: ag.MultiGpuContext
) -> None:
    import ray

    rng = np.random.default_rng(29)
    parts = [rng.standard_normal((n, 8)) for n in (500, 700, 600)]
    parts16 = [p.astype(np.float16) for p in parts]
    whole, whole16 = np.concatenate(parts), np.concatenate(parts16)
    with ag.RayContext(backends=BACKENDS) as rc:
        d = rc.from_ray([ray.put(p) for p in parts])
        d16 = rc.from_ray([ray.put(p) for p in parts16])
        victim = d.sharding[-1][0]
        assert victim in {node for node, _, _ in d16.sharding}
        rc.inject_fault(victim, after_chunks=0)
        got = rc.reverse(d)
        assert not rc.health()[victim]["healthy"]
        assert all(node != victim for node, _, _ in d.sharding + got.sharding)
        assert d.dtype == got.dtype == np.float64
        assert d.numpy().tobytes() == whole.tobytes()
        assert got.numpy().tobytes() == local.reverse(whole).tobytes()
        # The float16 array's shards on the lost node are read again as float16.
        assert d16.numpy().tobytes() == whole16.tobytes() and d16.dtype == np.float16
        assert all(node != victim for node, _, _ in d16.sharding)
        got16 = rc.reverse(d16)
        assert got16.numpy().tobytes() == local.reverse(local.asarray(whole16)).numpy().tobytes()


@pytest.mark.parametrize(
    ("fault", "keep", "reason"),
    [
        ("kill", True, "actor died"),
        ("kill", False, "actor died"),
        ("hang", False, "hung"),
        ("device_error", True, "DeviceLostError"),
    ],
    ids=["killed-operands-kept", "killed-operands-dropped", "hung", "device-error"],
)
def test_a_node_lost_mid_chain_is_rebuilt_from_lineage(
    cluster: Any, local: ag.MultiGpuContext, fault: str, keep: bool, reason: str
) -> None:
    a, b = _batch(30_000, 11), _batch(30_000, 12)
    rotor = local.normalize(_batch(1, 13)[0])
    want = _chain(local, a, b, rotor)
    # A hung node is given up after node_timeout_s: short for the hang (which is certain),
    # the default otherwise (it also bounds the nodes' start on a busy machine).
    timeout = {"node_timeout_s": 10.0} if fault == "hang" else {}
    with ag.RayContext(backends=BACKENDS, **timeout) as rc:
        da, db = rc.asarray(a), rc.asarray(b)
        assert [node for node, _, _ in da.sharding] == [0, 1, 2]
        # Node 1 fails when it starts the third call's shard (after the two of the chain's
        # first two calls).
        rc.inject_fault(1, after_chunks=2, fault=fault)
        kept = []
        x = rc.geometric_product(da, db)
        for step in range(4):
            if keep:
                kept.append(x)
            x = [
                lambda y: rc.sandwich(rotor, y),
                lambda y: rc.outer_product(y, db),
                rc.reverse,
                rc.normalize,
            ][step](x)
        health = rc.health()
        assert not health[1]["healthy"] and health[1]["reason"].startswith(reason), health
        assert all(node != 1 for node, _, _ in x.sharding)
        assert x.numpy().tobytes() == want.tobytes()
        # The operands' shards lost with the node are made again on the others too.
        assert da.numpy().tobytes() == a.tobytes()
        assert all(node != 1 for node, _, _ in da.sharding)
        if keep:
            # A kept intermediate whose shard was lost is made again when it is read.
            first = local.geometric_product(a, b)
            assert kept[0].numpy().tobytes() == first.tobytes()


def test_lineage_keeps_the_rows_a_numpy_operand_had(
    cluster: Any, local: ag.MultiGpuContext
) -> None:
    a, b = _batch(9000, 21), _batch(9000, 22)
    want = local.reverse(local.geometric_product(a, b))
    with ag.RayContext(backends=BACKENDS) as rc:
        y = rc.geometric_product(rc.asarray(a), b)
        b[:] = 0.0  # the caller's array changes after the call
        # Node 2 dies at its next shard call: its shard of y is made again from lineage.
        rc.inject_fault(2, after_chunks=0)
        got = rc.reverse(y)
        assert not rc.health()[2]["healthy"]
        assert got.numpy().tobytes() == want.tobytes()


OPS = """
fn row(a: array<amari_float, 2>) -> array<amari_float, 3> {
    return array<amari_float, 3>(a[0] + a[1], a[0] - a[1], a[0] * a[1]);
}
"""


def _same(got: Any, want: Any) -> None:
    """The same dtype, shape and bits (a cluster array's gathered, a local one's too)."""
    got = got.numpy() if isinstance(got, ag.DeviceArray) else got
    want = want.numpy() if isinstance(want, ag.DeviceArray) else want
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def _kept_dtypes(rc: ag.RayContext, local: ag.MultiGpuContext) -> None:
    """float64 and float16 cluster arrays: held in their dtype, every kernel that takes a
    local DeviceArray of that dtype gives the local bits and dtype."""
    rng = np.random.default_rng(29)
    for dtype in (np.float64, np.float16):
        a = rng.standard_normal((4000, 8)).astype(dtype)
        b = rng.standard_normal((4000, 8)).astype(dtype)
        rotor = local.normalize(rng.standard_normal(8).astype(dtype))
        da, db = rc.asarray(a), rc.asarray(b)
        assert (da.dtype, da.nbytes) == (np.dtype(dtype), a.nbytes)
        assert f"dtype={np.dtype(dtype).name}" in repr(da)
        assert rc.last_plan is not None and rc.last_plan.left_out == ()
        assert sorted(w.device_id for w in rc.last_plan) == [n.index for n in rc.nodes]
        _same(da, a)
        la, lb = local.asarray(a), local.asarray(b)
        got = _chain(rc, da, db, rotor)
        assert isinstance(got, ClusterArray) and got.dtype == dtype
        _same(got, _chain(local, la, lb, rotor))
        _same(rc.dual(da), local.dual(la))
        _same(rc.grade_projection(da, [1, 2]), local.grade_projection(la, [1, 2]))
        _same(da * 3.0 - db, la * 3.0 - lb)
        _same(da[10:20], a[10:20])
        if dtype == np.float64:
            _same(da[7], a[7])
            _same(rc.scalar_product(da, db), local.scalar_product(la, lb))
            want = reference_product(a, b)
            err = np.abs(rc.geometric_product(da, db).numpy() - want).max()
            assert err <= 1e-14 * max(1.0, np.abs(want).max()), err
    # Tropical products, map_rows and the Fisher matrix of float64 cluster arrays.
    a64, b64 = rng.standard_normal((900, 6)), rng.standard_normal((6, 5))
    d64 = rc.asarray(a64)
    _same(rc.tropical_matmul(d64, b64), local.tropical_matmul(local.asarray(a64), b64))
    _same(rc.tropical_matvec(d64, b64[:, 0]), local.tropical_matvec(a64, b64[:, 0]))
    a3, b3 = rng.standard_normal((3, 40, 6)), rng.standard_normal((3, 6, 4))
    got3 = rc.tropical_matmul(rc.asarray(a3), b3)
    assert got3.dtype == np.float64
    _same(got3, local.tropical_matmul(a3, b3))
    rows = rng.standard_normal((3000, 2))
    got = rc.map_rows(OPS, rc.asarray(rows), out_cols=3)
    _same(got, local.map_rows(OPS, local.asarray(rows), out_cols=3))
    scores = rng.standard_normal((6000, 7))
    _same(rc.fisher_information(rc.asarray(scores)), local.fisher_information(scores))
    # float64 scores' partials split over every node, summed in chunk order.
    scores, weights = rng.standard_normal((200_000, 5)), rng.uniform(0.0, 2.0, 200_000)
    got = rc.fisher_information(scores, weights, strategy="balanced")
    assert rc.last_plan is not None
    assert {w.device_id for w in rc.last_plan} == {n.index for n in rc.nodes}
    _same(got, local.fisher_information(scores, weights))
    # The local refusals: a DeviceArray of another dtype than the call's, a conversion.
    d32 = rc.asarray(a64, dtype=np.float32)
    assert d32.dtype == np.float32
    with pytest.raises(ag.InvalidArgumentError) as e:
        rc.tropical_matmul(d32, b64)
    with pytest.raises(ag.InvalidArgumentError) as e_local:
        local.tropical_matmul(local.asarray(a64, dtype=np.float32), b64)
    assert str(e.value) == str(e_local.value)
    with pytest.raises(ag.InvalidArgumentError, match="DeviceArrays are not converted"):
        rc.asarray(d64, dtype=np.float32)
    assert rc.asarray(d64) is d64
    with pytest.raises(ag.ShapeError, match="float16 rows of an even number"):
        rc.asarray(np.ones((4, 3), np.float16))


def test_float64_and_float16_arrays_on_three_nodes(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    _kept_dtypes(rc, local)


@pytest.mark.parametrize(("resources", "nodes"), [(ONE, 1), (TWO, 2)], ids=["one", "two"])
def test_float64_and_float16_arrays_on_fewer_nodes(
    cluster: Any, local: ag.MultiGpuContext, resources: dict[str, int], nodes: int
) -> None:
    with ag.RayContext(resources=resources, backends=BACKENDS) as rc:
        assert len(rc.nodes) == nodes
        _kept_dtypes(rc, local)


def test_a_node_killed_mid_float64_chain(cluster: Any, local: ag.MultiGpuContext) -> None:
    """A float64 shard lost with its node is made again from lineage in float64, the same
    bits; the rebuilt operand gathers its float64 rows."""
    rng = np.random.default_rng(30)
    a, b = rng.standard_normal((30_000, 8)), rng.standard_normal((30_000, 8))
    rotor = local.normalize(rng.standard_normal(8))
    want = _chain(local, local.asarray(a), local.asarray(b), rotor)
    with ag.RayContext(backends=BACKENDS) as rc:
        da, db = rc.asarray(a), rc.asarray(b)
        assert [node for node, _, _ in da.sharding] == [0, 1, 2]
        rc.inject_fault(1, after_chunks=2)
        x = rc.geometric_product(da, db)
        kept = x
        x = rc.outer_product(rc.sandwich(rotor, x), db)
        x = rc.normalize(rc.reverse(x))
        assert not rc.health()[1]["healthy"]
        assert all(node != 1 for node, _, _ in x.sharding)
        assert x.dtype == np.float64
        _same(x, want)
        _same(da, a)
        assert all(node != 1 for node, _, _ in da.sharding)
        _same(kept, local.geometric_product(a, b))
