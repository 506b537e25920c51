"""RayContext when nodes fail mid-call, on a real Ray cluster of this machine (a head and two
more nodes with the ``amari_gpu`` resource): a node whose actor is killed, one that hangs
past ``node_timeout_s``, one whose devices fail; the call still returns the single
context's bits, ``health()`` marks the node, and with no node left: ``DeviceLostError``.
Every test runs with the arrays through Ray's object store and through the driver's shared
memory (every array of a message there, however small), and leaves no segment behind."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest
from _fisher_helpers import random_scores
from amari_gpu.cluster import shared
from cl3 import random_batch

BACKENDS = ["vulkan"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with helpers.local_cluster() as c:
        yield c


@pytest.fixture(scope="module")
def local() -> Iterator[ag.MultiGpuContext]:
    with ag.MultiGpuContext(backends=BACKENDS) as ctx:
        yield ctx


@pytest.fixture(autouse=True, params=["object_store", "shared_memory"])
def transport(request: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test through either transport; no segment of the shared memory left open once
    its contexts closed and its results are gone."""
    monkeypatch.setenv(shared.TRANSPORT_ENV, request.param)
    if request.param == "shared_memory":
        monkeypatch.setattr(shared, "MIN_BYTES", 0)
    before = helpers.segments()
    yield request.param
    gc.collect()
    assert helpers.segments() == before
    # Nor any named shared memory of the package's (its segments have no name).
    assert not [n for n in os.listdir("/dev/shm") if "amari" in n]


def test_a_node_killed_mid_call(cluster: Any, local: ag.MultiGpuContext) -> None:
    a, b = random_batch(8000, seed=3)
    want = local.geometric_product(a, b)
    with ag.RayContext(backends=BACKENDS, chunk_items=400, strategy="balanced") as rc:
        rc.inject_fault(1, after_chunks=1)
        got = rc.geometric_product(a, b)
        assert np.array_equal(got, want)
        health = rc.health()
        assert not health[1]["healthy"]
        assert "actor died" in health[1]["reason"]
        assert health[0]["healthy"] and health[2]["healthy"]
        stats = rc.stats()
        # It finished one chunk before it died; the driver keeps that result unless Ray
        # reported the death before the reply (then the chunk ran again elsewhere).
        assert stats[1]["chunks_done"] <= 1 and stats[1]["failed_chunks"] > 0, stats
        assert stats[1]["devices"] == []
        assert sum(s["chunks_done"] for s in stats) == 20
        # Later calls leave it out; Fisher partials still sum in chunk order.
        scores = random_scores(60_000, 11, seed=4)
        assert np.array_equal(rc.fisher_information(scores), local.fisher_information(scores))
        assert rc.last_plan is not None and 1 not in {w.device_id for w in rc.last_plan}
        with pytest.raises(ag.InvalidArgumentError, match="node 1 has failed"):
            rc.inject_fault(1)


def test_a_node_killed_between_pieces_of_its_run(
    cluster: Any, local: ag.MultiGpuContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's run sent as pieces: it dies starting its second piece; the first piece's
    result is kept and its other pieces run on the healthy nodes, with the same bits."""
    from amari_gpu.cluster import dispatch

    a, b = random_batch(8000, seed=5)
    want = local.geometric_product(a, b)
    # Two chunks of 400 rows (two operands in, one out) per piece.
    monkeypatch.setattr(dispatch, "PIECE_BYTES", 2 * 400 * 3 * a.itemsize * a.shape[1])
    with ag.RayContext(backends=BACKENDS, chunk_items=400, strategy="balanced") as rc:
        rc.inject_fault(1, after_chunks=2)
        got = rc.geometric_product(a, b)
        assert np.array_equal(got, want)
        assert not rc.health()[1]["healthy"]
        stats = rc.stats()
        assert stats[1]["chunks_done"] <= 2 and stats[1]["failed_chunks"] > 0, stats
        assert sum(s["chunks_done"] for s in stats) == 20


def test_nodes_that_never_answer_are_marked_hung(cluster: Any) -> None:
    # Every node is held ("hang": it blocks from its first chunk until the driver ends its
    # actor), so no node can answer, however fast or loaded the machine: each is marked hung
    # after node_timeout_s, and with none left the call raises. No healthy node is there to
    # be misjudged. (The timeout also bounds the measurements when the context opens: ample
    # for those.)
    a, b = random_batch(900, seed=6)
    with ag.RayContext(backends=BACKENDS, node_timeout_s=10.0, chunk_items=300) as rc:
        for node in range(3):
            rc.inject_fault(node, after_chunks=0, fault="hang")
        with pytest.raises(ag.DeviceLostError, match="no healthy node"):
            rc.geometric_product(a, b)
        health = rc.health()
        assert [h["healthy"] for h in health.values()] == [False, False, False]
        for h in health.values():
            assert h["reason"] == "hung: no chunk finished within node_timeout_s=10.0", h


def test_a_hung_node_and_a_node_whose_devices_fail(cluster: Any, local: ag.MultiGpuContext) -> None:
    scores = random_scores(90_000, 6, seed=8)
    want = local.fisher_information(scores)
    # Node 0 never answers and node 2 raises a device error at once; node 1 is healthy, and
    # node_timeout_s is far above what one of its chunks takes on any machine (a chunk of a
    # few thousand rows), so only the held node runs out of it. That a held node is marked
    # hung whatever the load: test_nodes_that_never_answer_are_marked_hung.
    # chunk_items=1: cluster chunks of one grid chunk each, so that every node gets some.
    with ag.RayContext(
        backends=BACKENDS, node_timeout_s=20.0, strategy="balanced", chunk_items=1
    ) as rc:
        rc.inject_fault(0, after_chunks=0, fault="hang")
        rc.inject_fault(2, after_chunks=0, fault="device_error")
        got = rc.fisher_information(scores)
        assert np.array_equal(got, want)
        health = rc.health()
        assert health[0]["reason"].startswith("hung")
        assert "DeviceLostError" in health[2]["reason"]
        assert [h["healthy"] for h in health.values()] == [False, True, False]


def test_no_healthy_node_left(cluster: Any) -> None:
    a, b = random_batch(3000, seed=5)
    with ag.RayContext(backends=BACKENDS, chunk_items=300) as rc:
        for node in range(3):
            rc.inject_fault(node, after_chunks=0)
        with pytest.raises(ag.DeviceLostError, match="no healthy node"):
            rc.geometric_product(a, b)
        assert not any(h["healthy"] for h in rc.health().values())
        with pytest.raises(ag.DeviceLostError, match="node 0: actor died"):
            rc.geometric_product(a, b)


def test_cluster_info_lists_the_nodes(cluster: Any, capsys: Any) -> None:
    import json

    from amari_gpu.tools.cli import main

    assert (
        main(["cluster-info", "--address", cluster.address, "--backends", "vulkan", "--json"]) == 0
    )
    nodes = json.loads(capsys.readouterr().out)
    assert [n["index"] for n in nodes] == [0, 1, 2]
    for n in nodes:
        assert n["address"] == helpers.LOOPBACK and n["healthy"]
        assert n["devices"] and n["devices"][0]["backend"] == "vulkan"
        assert n["throughput_items_per_s"]["geometric_algebra"] > 0
        assert n["upload_bytes_per_s"] > 0
    assert main(["cluster-info", "--address", cluster.address, "--backends", "vulkan"]) == 0
    text = capsys.readouterr().out
    assert "3 node(s)" in text and "geometric_algebra" in text


@pytest.mark.parametrize("split", [None, [100, 60, 80]])
def test_a_node_killed_during_a_grid_run(
    cluster: Any, local: ag.MultiGpuContext, split: list[int] | None
) -> None:
    # A caller's split is the first layout's only, as in a local run: the run that starts
    # again without the node shares the rows by the nodes' rates.
    grid = np.random.default_rng(4).random((240, 50), dtype=np.float32)
    want = local.stencil(grid, 12, 0.2, "periodic")
    with ag.RayContext(backends=BACKENDS) as rc:
        rc.inject_fault(2, after_chunks=3)
        got = rc.stencil(grid, 12, 0.2, "periodic", 2, split=split)
        assert np.array_equal(got, want)
        report = rc.last_run
        assert report is not None
        assert [node for node, _ in report.failures] == [2]
        assert [n for n, _ in report.final_split] == [0, 1]
        assert not rc.health()[2]["healthy"]


def test_a_node_hung_during_a_grid_run(cluster: Any, local: ag.MultiGpuContext) -> None:
    # A band round that never returns: the node is given up after node_timeout_s and the
    # run starts again without it (it used to wait for that round forever).
    grid = np.random.default_rng(6).random((180, 40), dtype=np.float32)
    want = local.stencil(grid, 9, 0.2, "dirichlet")
    with ag.RayContext(backends=BACKENDS, node_timeout_s=3.0) as rc:
        rc.inject_fault(1, after_chunks=2, fault="hang")
        got = rc.stencil(grid, 9, 0.2, "dirichlet", 2)
        assert np.array_equal(got, want)
        report = rc.last_run
        assert report is not None
        assert [node for node, _ in report.failures] == [1]
        assert report.failures[0][1].startswith("hung: no band round finished")
        assert [n for n, _ in report.final_split] == [0, 2]
        health = rc.health()
        assert not health[1]["healthy"] and health[1]["reason"].startswith("hung")


def test_a_node_that_stops_answering_between_calls(cluster: Any, local: ag.MultiGpuContext) -> None:
    # A node whose actor is stuck outside any call of the context (here: in a chunk sent
    # to it directly) does not answer profile() or stats(): each gives it node_timeout_s,
    # then marks it hung and goes on without it (they used to wait for it, or raise Ray's
    # GetTimeoutError).
    a, b = random_batch(2000, seed=9)

    def stick(rc: ag.RayContext, node: int) -> None:
        rc.inject_fault(node, after_chunks=0, fault="hang")
        rc._native.nodes[node].actor.run.remote("geometric_product", None, ())

    with ag.RayContext(backends=BACKENDS, node_timeout_s=3.0, chunk_items=250) as rc:
        stick(rc, 2)
        with rc.profile() as prof:
            got = rc.geometric_product(a, b)
        assert np.array_equal(got, local.geometric_product(a, b))
        reason = rc.health()[2]["reason"]
        assert reason == "hung: did not answer profile_start() within node_timeout_s=3.0"
        assert {e["node"] for e in prof.events} == {0, 1}
        stick(rc, 1)
        stats = rc.stats()
        reason = rc.health()[1]["reason"]
        assert reason == "hung: did not answer stats() within node_timeout_s=3.0"
        assert stats[0]["devices"] and stats[1]["devices"] == [] == stats[2]["devices"]
        assert sum(s["chunks_done"] for s in stats) == 8
        assert [h["healthy"] for h in rc.health().values()] == [True, False, False]
        assert np.array_equal(rc.geometric_product(a, b), got)
