"""Cluster arrays on a real Ray cluster of this machine (a head and two more nodes, each
offering the ``amari_gpu`` resource twice, so a second RayContext can run beside the
module's; lavapipe on every node): rows that stay on the nodes through chains of calls,
bit-identical to one MultiGpuContext, the bytes a chain moves through the object store,
lineage rebuilding the shards of a killed node, ``from_ray``, and the local errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest
from _fisher_helpers import random_probs
from amari_gpu.cluster import ClusterArray

BACKENDS = ["vulkan"]
ROWS = 1 << 16
"""Rows of the chain's operands: 2 MiB per (N, 8) operand, so one operand moved through the
object store would already break the chain's 1 MiB bound."""

MIB = 1 << 20


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    twice = {"amari_gpu": 2}
    with helpers.local_cluster([twice, twice, twice]) as c:
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


def test_array_basics_and_free(rc: ag.RayContext) -> None:
    x = _batch(1000, 4).reshape(10, 100, 8)
    d = rc.asarray(x)
    assert (d.shape, d.dtype, d.ndim, d.size, len(d)) == ((10, 100, 8), np.float32, 3, 8000, 10)
    assert np.array_equal(np.asarray(d), x)
    assert "ClusterArray(shape=(10, 100, 8)" in repr(d)
    ints = rc.asarray(np.arange(30).reshape(10, 3))
    assert ints.numpy().dtype == np.float32 and np.array_equal(
        ints.numpy(), np.arange(30).reshape(10, 3)
    )
    # No rows, as locally: an empty array, and kernels give empty results.
    empty = rc.asarray(np.zeros((0, 8), np.float32))
    assert empty.shape == (0, 8) and empty.numpy().shape == (0, 8)
    assert rc.reverse(empty).numpy().shape == (0, 8)
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
        # Float64 rows produced where the task ran (converted to float32 like any input).
        return np.random.default_rng(seed).standard_normal((n, 8))

    parts = [load.remote(s, n) for s, n in [(1, 400), (2, 1), (3, 900)]]
    d = rc.from_ray(parts)
    assert d.shape == (1301, 8)
    assert [(start, stop) for _, start, stop in d.sharding] == [(0, 400), (400, 401), (401, 1301)]
    whole = np.concatenate(ray.get(parts)).astype(np.float32)
    assert np.array_equal(d.numpy(), whole)
    got = rc.reverse(d)
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
