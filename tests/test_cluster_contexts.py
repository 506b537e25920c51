"""More than one RayContext on a real Ray cluster of this machine (a head offering the
``amari_gpu`` resource and ``solo``, one more node offering ``amari_gpu``): a context whose
nodes' resource another context holds fails within ``node_timeout_s`` naming the holder
(or leaves out just the held node), the first one keeps working, either can be closed
while the other runs, and a context opened after the first is closed gets every node."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest
from cl3 import random_batch

BACKENDS = ["vulkan"]
SOLO = {"solo": 1}
"""A resource only the head offers: a context that takes it (with ``amari_gpu``) holds
just the head's ``amari_gpu``."""
TIMEOUT_S = 5.0
# How late past node_timeout_s a refused context may still be: far more than the check
# takes, so a busy machine cannot fail the test; a context that waits for the resource
# (forever, or STARTUP_TIMEOUT_S = 600 s per node) is far beyond it.
MARGIN_S = 90.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with helpers.local_cluster([{**helpers.RESOURCE, **SOLO}, dict(helpers.RESOURCE)]) as c:
        yield c


@pytest.fixture(scope="module")
def local() -> Iterator[ag.MultiGpuContext]:
    with ag.MultiGpuContext(backends=BACKENDS) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def batch(local: ag.MultiGpuContext) -> tuple[Any, Any, Any]:
    a, b = random_batch(3000, seed=17)
    return a, b, local.geometric_product(a, b)


def _holder_pids(rc: ag.RayContext) -> list[int]:
    return [int(n.info["pid"]) for n in rc._native.nodes]


def test_a_second_context_on_held_nodes_fails_fast(cluster: Any, batch: Any) -> None:
    a, b, want = batch
    with ag.RayContext(backends=BACKENDS, chunk_items=500) as first:
        assert len(first.nodes) == 2 and all(h["healthy"] for h in first.health().values())
        t0 = time.monotonic()
        with pytest.raises(ag.NoAdapterError) as e:
            ag.RayContext(backends=BACKENDS, node_timeout_s=TIMEOUT_S)
        elapsed = time.monotonic() - t0
        assert elapsed < TIMEOUT_S + MARGIN_S, elapsed
        message = str(e.value)
        # Both nodes, each naming what holds it: the first context's actor, this driver.
        for index in (0, 1):
            assert f"node {index}: its resources {{'amari_gpu': 1.0}}" in message, message
        assert message.count("held by another RayContext's node actor") == 2, message
        for pid in _holder_pids(first):
            assert f"pid {pid}, this driver" in message, message
        assert "close that RayContext first" in message
        # The refused context left nothing behind: the first one runs as before.
        assert np.array_equal(first.geometric_product(a, b), want)
        assert all(h["healthy"] for h in first.health().values())
    # Opened after the first is closed: every node, nothing of the refused one in the way.
    with ag.RayContext(backends=BACKENDS, node_timeout_s=TIMEOUT_S, chunk_items=500) as later:
        assert len(later.nodes) == 2
        assert all(h["healthy"] for h in later.health().values())
        assert np.array_equal(later.geometric_product(a, b), want)


def test_a_held_node_is_left_out_and_either_context_can_close(cluster: Any, batch: Any) -> None:
    a, b, want = batch
    # The first context takes the head only (the one node with SOLO), holding its
    # amari_gpu; a second one asking for amari_gpu gets the other node, the head failed.
    first = ag.RayContext(resources={**helpers.RESOURCE, **SOLO}, backends=BACKENDS)
    try:
        assert len(first.nodes) == 1
        head_id = first.nodes[0].node_id
        t0 = time.monotonic()
        second = ag.RayContext(backends=BACKENDS, node_timeout_s=TIMEOUT_S, chunk_items=500)
        elapsed = time.monotonic() - t0
    except BaseException:
        first.close()
        raise
    try:
        assert elapsed < TIMEOUT_S + MARGIN_S, elapsed
        health = second.health()
        assert len(health) == 2
        held = next(i for i, h in health.items() if h["node_id"] == head_id)
        free = 1 - held
        reason = health[held]["reason"]
        assert not health[held]["healthy"]
        assert "held by another RayContext's node actor" in reason, reason
        assert f"pid {_holder_pids(first)[0]}, this driver" in reason, reason
        assert health[free]["healthy"]
        got = second.geometric_product(a, b)
        assert np.array_equal(got, want)
        assert second.last_plan is not None
        assert {w.device_id for w in second.last_plan} == {free}
        assert np.array_equal(first.geometric_product(a, b), want)
        # Closing one leaves the other's nodes alone.
        first.close()
        assert np.array_equal(second.geometric_product(a, b), want)
        assert second.health()[free]["healthy"]
    finally:
        first.close()
        second.close()
    # Both closed: a new context gets both nodes (the held node's waiting actor was ended).
    with ag.RayContext(backends=BACKENDS, node_timeout_s=TIMEOUT_S) as later:
        assert [h["healthy"] for h in later.health().values()] == [True, True]
        assert np.array_equal(later.geometric_product(a, b), want)


def test_closing_the_second_context_leaves_the_first_running(cluster: Any, batch: Any) -> None:
    a, b, want = batch
    with ag.RayContext(resources={**helpers.RESOURCE, **SOLO}, backends=BACKENDS) as first:
        with ag.RayContext(backends=BACKENDS, node_timeout_s=TIMEOUT_S) as second:
            assert sum(h["healthy"] for h in second.health().values()) == 1
        assert second.closed
        assert np.array_equal(first.geometric_product(a, b), want)
        assert all(h["healthy"] for h in first.health().values())
