"""RayContext's same-host transport on a real Ray cluster of this machine (a head and two
more nodes with the ``amari_gpu`` resource, all on loopback, so every node shares the
driver's machine): the nodes pass the shared-memory probe, operands and results go through
the driver's shared memory with one context's bits, the same as through the object store
(``AMARI_GPU_RAY_TRANSPORT`` forces either); the caller's result is a writable array of its
own, inputs are never written, and no segment outlives the context and its results."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest
from _fisher_helpers import random_probs, random_scores
from _tropical_helpers import random_operand
from amari_gpu.cluster import shared
from cl3 import random_batch

BACKENDS = ["vulkan"]
ROWS = 200_000
"""Rows of the products: each node's run of each operand is over ``shared.MIN_BYTES``."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with helpers.local_cluster() as c:
        yield c


@pytest.fixture(scope="module")
def local() -> Iterator[ag.MultiGpuContext]:
    with ag.MultiGpuContext(backends=BACKENDS) as ctx:
        yield ctx


def open_with(monkeypatch: pytest.MonkeyPatch, transport: str, **options: Any) -> ag.RayContext:
    monkeypatch.setenv(shared.TRANSPORT_ENV, transport)
    return ag.RayContext(backends=BACKENDS, **options)


@pytest.mark.parametrize("transport", ["auto", "shared_memory", "object_store"])
def test_both_transports_give_one_contexts_bits(
    cluster: Any, local: ag.MultiGpuContext, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    a, b = random_batch(ROWS, seed=11)
    copies = a.copy(), b.copy()
    want = local.geometric_product(a, b)
    scores = random_scores(120_000, 9, seed=12)
    rng = np.random.default_rng(13)
    x = random_operand(rng, (60_000, 24), 0.05)
    y = random_operand(rng, (24, 16), 0.05)
    with open_with(monkeypatch, transport, strategy="balanced") as rc:
        got = rc.geometric_product(a, b)
        assert np.array_equal(got, want)
        # Operands through shared memory, partials back through the store.
        assert np.array_equal(rc.fisher_information(scores), local.fisher_information(scores))
        tropical = rc.tropical_matmul(x, y)
        assert np.array_equal(tropical, local.tropical_matmul(x, y))
        assert np.array_equal(a, copies[0]) and np.array_equal(b, copies[1])
        stats = rc.stats()
        expected = "object_store" if transport == "object_store" else "shared_memory"
        assert [s["transport"] for s in stats] == [expected] * 3
        # Every node took part in the product: its rows of both operands and of the result.
        moved = sum(s["bytes_sent"] + s["bytes_received"] for s in stats)
        through_shared = sum(s["bytes_shared"] for s in stats)
        if transport == "object_store":
            assert through_shared == 0
        else:
            assert through_shared <= moved
            # The product's operands and result, and the tropical product's result (the
            # other operands' runs may be under shared.MIN_BYTES on a node).
            assert through_shared >= a.nbytes + b.nbytes + want.nbytes + tropical.nbytes
        del got


def test_the_result_is_the_callers_own_writable_array(
    cluster: Any, local: ag.MultiGpuContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = random_batch(ROWS, seed=21)
    want = local.geometric_product(a, b)
    before = helpers.segments()
    with open_with(monkeypatch, "shared_memory") as rc:
        first = rc.geometric_product(a, b)
        assert first.flags.writeable and first.shape == want.shape
        assert first.dtype == want.dtype
        view = first[10:20]
        first[:5] = -1.0
        # Later calls write other memory while the caller holds the first result.
        second = rc.geometric_product(a, b)
        assert np.array_equal(second, want)
        assert np.all(first[:5] == -1.0) and np.array_equal(first[5:], want[5:])
        del first
        gc.collect()
        # A view keeps the result's memory: no later call may take it.
        third = rc.geometric_product(b, a)
        assert np.array_equal(view, want[10:20])
        assert np.array_equal(third, local.geometric_product(b, a))
        # The memory of a result the caller let go is used again.
        del view, second, third
        gc.collect()
        assert rc._native.pool is not None
        free = len(rc._native.pool._free)
        assert np.array_equal(rc.geometric_product(a, b), want)
        gc.collect()
        assert len(rc._native.pool._free) == free
    gc.collect()
    assert helpers.segments() == before


def count_places(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes of every copy the driver makes into a result's place (``store.place``),
    appended as they happen."""
    from amari_gpu.cluster import store

    placed: list[int] = []
    place = store.place

    def counted(dst: Any, src: Any) -> None:
        placed.append(dst.nbytes)
        place(dst, src)

    monkeypatch.setattr(store, "place", counted)
    return placed


def test_a_callers_out_and_bad_input(
    cluster: Any, local: ag.MultiGpuContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = random_batch(ROWS, seed=31)
    want = local.geometric_product(a, b)
    placed = count_places(monkeypatch)
    with open_with(monkeypatch, "shared_memory") as rc:
        # A numpy out: the nodes write a segment of the pool, copied into it run by run.
        out = np.zeros_like(want)
        before = sum(s["bytes_shared"] for s in rc.stats())
        assert rc.geometric_product(a, b, out=out) is out
        assert np.array_equal(out, want)
        assert sum(s["bytes_shared"] for s in rc.stats()) - before >= 2 * a.nbytes + want.nbytes
        assert sum(placed) == want.nbytes
        # An earlier result as out: written where it is, nothing copied.
        placed.clear()
        held = rc.geometric_product(b, a)
        assert np.array_equal(rc.geometric_product(a, b, out=held), want)
        assert placed == []
        assert np.array_equal(held, want)
        with pytest.raises(ag.ShapeError) as cluster_error:
            rc.geometric_product(a, b[:-1])
        with pytest.raises(ag.ShapeError) as local_error:
            local.geometric_product(a, b[:-1])
        assert str(cluster_error.value) == str(local_error.value)


def test_an_unknown_transport_is_refused(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shared.TRANSPORT_ENV, "carrier_pigeon")
    with pytest.raises(ag.InvalidArgumentError, match="AMARI_GPU_RAY_TRANSPORT: expected one of"):
        ag.RayContext(backends=BACKENDS)


def test_a_node_that_fails_the_probe_keeps_the_object_store(
    cluster: Any, local: ag.MultiGpuContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe reads the token back: a node that reads another (as one on another machine
    would fail to open the segment) is sent its arrays through the store, and forcing shared
    memory then names it."""
    original = shared.probe_token

    def wrong_token() -> tuple[shared.Segment, bytes]:
        segment, token = original()
        return segment, bytes(b ^ 0xFF for b in token)

    monkeypatch.setattr(shared, "probe_token", wrong_token)
    a, b = random_batch(ROWS, seed=41)
    with open_with(monkeypatch, "auto") as rc:
        assert np.array_equal(rc.geometric_product(a, b), local.geometric_product(a, b))
        assert {s["transport"] for s in rc.stats()} == {"object_store"}
        assert sum(s["bytes_shared"] for s in rc.stats()) == 0
    with pytest.raises(ag.InvalidArgumentError, match=r"node\(s\) \[0, 1, 2\] cannot open"):
        open_with(monkeypatch, "shared_memory")


def test_every_row_family_writes_its_result_in_place(
    cluster: Any, local: ag.MultiGpuContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Categorical and Gaussian Fisher matrices, tropical products batched (split by batch
    entries) and single (split by rows of ``a``, the result's second axis), float32 and
    float64: the nodes write their rows of the result into the caller's array."""
    rng = np.random.default_rng(51)
    probs = random_probs(40_000, 12, seed=52)
    mean = rng.standard_normal((30_000, 4), dtype=np.float32)
    var = rng.random((30_000, 4), dtype=np.float32) + np.float32(0.5)
    single = random_operand(rng, (50_000, 24), 0.05)
    batched = random_operand(rng, (6, 9_000, 24), 0.05)
    b = random_operand(rng, (24, 16), 0.05)
    batched_b = random_operand(rng, (6, 24, 16), 0.05)
    x = random_operand(rng, (24,), 0.05)
    placed = count_places(monkeypatch)
    with open_with(monkeypatch, "shared_memory", strategy="balanced") as rc:
        calls = [
            ("fisher_categorical", (probs,)),
            ("fisher_categorical", (probs.astype(np.float64),)),
            ("fisher_gaussian", (mean, var)),
            ("tropical_matmul", (single, b)),
            ("tropical_matmul", (batched, batched_b)),
            ("tropical_matmul", (single.astype(np.float64), b.astype(np.float64))),
            ("tropical_matvec", (single, x)),
        ]
        for name, args in calls:
            want = getattr(local, name)(*args)
            before = sum(s["bytes_shared"] for s in rc.stats())
            got = getattr(rc, name)(*args)
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert got.tobytes() == want.tobytes(), name
            moved = sum(s["bytes_shared"] for s in rc.stats()) - before
            # The matvec's result (one value per row) is under MIN_BYTES: the store's,
            # copied into place.
            if name != "tropical_matvec":
                assert moved >= want.nbytes and placed == [], name
            else:
                assert sum(placed) == want.nbytes, name
            placed.clear()


def test_a_chain_reads_the_last_result_where_it_is(
    cluster: Any, local: ag.MultiGpuContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A result of the context (or a view of its rows) as an operand of the next call is
    read by the nodes in place: only the other operand is copied into shared memory."""
    a, b = random_batch(ROWS, seed=61)
    want_ab = local.geometric_product(a, b)
    want = local.geometric_product(want_ab, b)
    copied: list[int] = []
    copy_into = shared.copy_into

    def counted(segment: shared.Segment, offset: int, array: Any) -> None:
        copied.append(array.nbytes)
        copy_into(segment, offset, array)

    monkeypatch.setattr(shared, "copy_into", counted)
    # Every run's rows through shared memory, however few.
    monkeypatch.setattr(shared, "MIN_BYTES", 0)
    with open_with(monkeypatch, "shared_memory", strategy="balanced") as rc:
        ab = rc.geometric_product(a, b)
        assert sum(copied) == a.nbytes + b.nbytes
        copied.clear()
        assert np.array_equal(rc.geometric_product(ab, b), want)
        assert sum(copied) == b.nbytes
        copied.clear()
        # Rows of it: a view in the middle of the segment.
        half = ROWS // 2
        got = rc.geometric_product(ab[half:], b[half:])
        assert np.array_equal(got, want[half:])
        assert sum(copied) == b[half:].nbytes
        assert np.array_equal(ab, want_ab)
