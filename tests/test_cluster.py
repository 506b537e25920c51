"""RayContext on a real Ray cluster of this machine (a head and two more nodes with the
``amari_gpu`` resource, one without it; lavapipe on every node): node admission, loopback
addresses, bit-identity with one MultiGpuContext for every family, strategy and node count,
the same errors, the merged profile."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest
from _fisher_helpers import random_probs, random_scores, reference_fisher, relative_error
from _process import python
from _tropical_helpers import floyd_warshall, graph_without_negative_cycles, random_operand
from amari_gpu.profiler import TIMES as X
from cl3 import random_batch, reference_product

BACKENDS = ["vulkan"]
STRATEGIES = ["balanced", "capability", "adaptive", "auto"]
PAIR = {"amari_gpu_pair": 1}
"""A second resource that two of the three nodes offer: a RayContext over two nodes (its
actors take this resource, so they run beside the module context's)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    both = {**helpers.RESOURCE, **PAIR}
    # Head and two nodes with the resource (two of them with PAIR), one node without.
    # The node without the resource declares a GPU to Ray (the machine has none).
    resources = [both, both, dict(helpers.RESOURCE), {}]
    with helpers.local_cluster(resources, num_gpus=[0, 0, 0, 1]) as c:
        yield c


@pytest.fixture(scope="module")
def rc(cluster: Any) -> Iterator[ag.RayContext]:
    # Small cluster chunks, so that the test sizes give every node several.
    with ag.RayContext(backends=BACKENDS, chunk_items=512) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def local() -> Iterator[ag.MultiGpuContext]:
    with ag.MultiGpuContext(backends=BACKENDS) as ctx:
        yield ctx


def test_importing_the_package_does_not_import_ray() -> None:
    code = (
        "import sys, amari_gpu; assert 'ray' not in sys.modules, 'ray imported'; "
        "from amari_gpu.cluster import RayContext; assert 'ray' in sys.modules; "
        "assert amari_gpu.RayContext is RayContext; print('ok')"
    )
    result = python("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_nodes_with_the_resource_only_all_on_loopback(rc: ag.RayContext) -> None:
    import ray

    alive = [n for n in ray.nodes() if n["Alive"]]
    assert len(alive) == 4
    assert {n["NodeManagerAddress"] for n in alive} == {helpers.LOOPBACK}
    offering = {n["NodeID"] for n in alive if n["Resources"].get("amari_gpu", 0) >= 1}
    assert len(offering) == 3
    nodes = rc.nodes
    assert {n.node_id for n in nodes} == offering
    assert [n.index for n in nodes] == [0, 1, 2]
    for n in nodes:
        assert n.address == helpers.LOOPBACK
        assert n.devices and all(d["backend"] == "vulkan" for d in n.devices)
        assert n.throughput["geometric_algebra"] > 0
        assert n.upload_bytes_per_s > 0 and n.download_bytes_per_s > 0
    assert all(h["healthy"] for h in rc.health().values())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_geometric_algebra_is_bit_identical(
    rc: ag.RayContext, local: ag.MultiGpuContext, strategy: str
) -> None:
    a, b = random_batch(5000, seed=11)
    got = rc.geometric_product(a, b, strategy=strategy)
    assert np.array_equal(got, local.geometric_product(a, b))
    assert float(np.abs(got - reference_product(a, b)).max()) < 1e-4 * max(
        1.0, float(np.abs(reference_product(a, b)).max())
    )
    plan = rc.last_plan
    assert plan is not None and plan.items == 5000 and plan.n_chunks == 10
    assert sum(w.items for w in plan) == 5000
    rotor = a[0]
    for name in ("sandwich", "scalar_product", "outer_product", "inner_product"):
        got = getattr(rc, name)(rotor, b, strategy=strategy)
        assert np.array_equal(got, getattr(local, name)(rotor, b)), name
    for name in ("reverse", "normalize", "dual"):
        assert np.array_equal(getattr(rc, name)(a), getattr(local, name)(a)), name
    assert np.array_equal(rc.grade_projection(a, [0, 2]), local.grade_projection(a, [0, 2]))


def test_algebras_and_batch_axes(rc: ag.RayContext, local: ag.MultiGpuContext) -> None:
    alg = ag.Algebra(3, 0, 1)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 700, 16)).astype(np.float32)
    b = rng.standard_normal((700, 16))
    assert np.array_equal(rc.geometric_product(a, b, alg), local.geometric_product(a, b, alg))
    empty = np.zeros((0, 8), np.float32)
    assert rc.geometric_product(empty, empty).shape == (0, 8)
    # A motor on points given as their 4 blades: passed through to the nodes.
    even = [bin(k).count("1") % 2 == 0 for k in range(16)]
    motor = np.where(even, rng.standard_normal(16), 0.0).astype(np.float32)
    points = rng.standard_normal((700, 4)).astype(np.float32)
    on = {"blades": [14, 7, 13, 11]}
    got = rc.sandwich(motor, points, alg, **on)
    assert got.shape == (700, 4) and np.array_equal(got, local.sandwich(motor, points, alg, **on))


@pytest.mark.parametrize("strategy", ["balanced", "adaptive"])
def test_tropical_is_bit_identical(
    rc: ag.RayContext, local: ag.MultiGpuContext, strategy: str
) -> None:
    rng = np.random.default_rng(5)
    a = random_operand(rng, (1500, 40), 0.05)
    b = random_operand(rng, (40, 30), 0.05)
    for semiring in ("max_plus", "min_plus"):
        got = rc.tropical_matmul(a, b, semiring, strategy=strategy)
        assert np.array_equal(got, local.tropical_matmul(a, b, semiring))
    a3 = random_operand(rng, (600, 9, 12), 0.1)
    b3 = random_operand(rng, (600, 12, 7), 0.1)
    assert np.array_equal(rc.tropical_matmul(a3, b3), local.tropical_matmul(a3, b3))
    x = random_operand(rng, (40,), 0.0)
    assert np.array_equal(rc.tropical_matvec(a, x), local.tropical_matvec(a, x))
    x3 = random_operand(rng, (600, 12), 0.0)
    assert np.array_equal(rc.tropical_matvec(a3, x3), local.tropical_matvec(a3, x3))
    w = graph_without_negative_cycles(rng, 90, 0.3, integer=True)
    got = rc.shortest_paths(w, strategy=strategy)
    assert np.array_equal(got, local.shortest_paths(w))
    assert np.array_equal(got, floyd_warshall(w).astype(np.float32))


@pytest.mark.parametrize("p", [13, 70])
def test_fisher_information_is_bit_identical(
    rc: ag.RayContext, local: ag.MultiGpuContext, p: int
) -> None:
    # Enough rows for several chunks of the single context's grid: a node computes the
    # partials of the grid's chunks it takes, the driver sums them all in chunk order.
    scores = random_scores(70_000, p, seed=p)
    weights = np.random.default_rng(p).uniform(0.0, 2.0, 70_000).astype(np.float32)
    for strategy in STRATEGIES:
        got = rc.fisher_information(scores, strategy=strategy)
        assert np.array_equal(got, local.fisher_information(scores)), strategy
    assert rc.last_plan is not None and rc.last_plan.n_chunks > 1
    assert len({w.device_id for w in rc.last_plan}) > 1
    assert relative_error(got, reference_fisher(scores)) < 1e-4
    got = rc.fisher_information(scores, weights)
    assert np.array_equal(got, local.fisher_information(scores, weights))
    # Scores far outside float32's comfortable range go through the exact scaling.
    tiny = random_scores(40_000, p, seed=1, scale=1e-25)
    assert np.array_equal(rc.fisher_information(tiny), local.fisher_information(tiny))
    g = np.random.default_rng(2).standard_normal(p)
    assert np.array_equal(
        rc.natural_gradient(scores, g, 0.1), local.natural_gradient(scores, g, 0.1)
    )


def test_natural_gradient_takes_a_computed_fisher(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    # The method RayContext shares with MultiGpuContext: F from the cluster, then the solve
    # alone, the same bits as the call that computes F itself.
    scores = random_scores(5000, 9, seed=9)
    g = np.random.default_rng(9).standard_normal((9, 2))
    f = rc.fisher_information(scores)
    got = rc.natural_gradient(None, g, 0.1, fisher=f)
    assert np.array_equal(got, rc.natural_gradient(scores, g, 0.1))
    assert np.array_equal(got, local.natural_gradient(scores, g, 0.1))


def test_fisher_families_are_bit_identical(rc: ag.RayContext, local: ag.MultiGpuContext) -> None:
    probs = random_probs(3000, 6, seed=4)
    assert np.array_equal(rc.fisher_categorical(probs), local.fisher_categorical(probs))
    logits = np.random.default_rng(6).standard_normal((3000, 6)).astype(np.float32)
    assert np.array_equal(
        rc.fisher_categorical(logits=logits), local.fisher_categorical(logits=logits)
    )
    rng = np.random.default_rng(7)
    mean = rng.standard_normal((2500, 3))
    var = rng.uniform(0.5, 2.0, (2500, 3))
    assert np.array_equal(rc.fisher_gaussian(mean, var), local.fisher_gaussian(mean, var))


def test_two_nodes_give_the_same_bits(cluster: Any, local: ag.MultiGpuContext) -> None:
    a, b = random_batch(4000, seed=21)
    scores = random_scores(50_000, 9, seed=9)
    with ag.RayContext(resources=PAIR, backends=BACKENDS, chunk_items=300) as two:
        assert len(two.nodes) == 2
        for strategy in STRATEGIES:
            got = two.geometric_product(a, b, strategy=strategy)
            assert np.array_equal(got, local.geometric_product(a, b)), strategy
            got = two.fisher_information(scores, strategy=strategy)
            assert np.array_equal(got, local.fisher_information(scores)), strategy
    with pytest.raises(ag.NoAdapterError, match="no_such_resource"):
        ag.RayContext(resources={"no_such_resource": 1}, backends=BACKENDS)


def test_errors_are_the_single_contexts(rc: ag.RayContext, local: ag.MultiGpuContext) -> None:
    a, b = random_batch(10, seed=1)
    for ctx in (rc, local):
        with pytest.raises(ag.ShapeError, match=r"b: expected leading dimensions"):
            ctx.geometric_product(a, b[:7])
    bad = random_scores(100, 5, seed=1)
    bad[42, 3] = np.nan
    messages = []
    for ctx in (rc, local):
        with pytest.raises(ag.InvalidArgumentError) as e:
            ctx.fisher_information(bad)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    with pytest.raises(ag.InvalidArgumentError, match="strategy"):
        rc.geometric_product(a, b, strategy="fastest")
    with pytest.raises(ag.InvalidArgumentError, match="device_id"):
        rc.inject_fault(7)


def test_distribute_workload_and_stats(rc: ag.RayContext) -> None:
    w = ag.Workload("geometric_product", 100_000, 64.0, 32.0, 200.0)
    plan = rc.distribute_workload(w, strategy="balanced")
    assert plan.items == 100_000 and sum(p.items for p in plan) == 100_000
    assert {p.device_id for p in plan} == {0, 1, 2}
    stats = rc.stats()
    assert [s["node"] for s in stats] == [0, 1, 2]
    assert sum(s["chunks_done"] for s in stats) > 0
    assert all(s["devices"] and s["healthy"] for s in stats)


def test_profile_merges_every_nodes_timeline(rc: ag.RayContext, tmp_path: Any) -> None:
    a, b = random_batch(6000, seed=2)
    with rc.profile() as prof:
        rc.geometric_product(a, b, strategy="balanced")
    nodes = {e["node"] for e in prof.events}
    assert nodes == {0, 1, 2}
    kernels = [e for e in prof.events if e["kind"] == "kernel"]
    assert sum(e["items"] for e in kernels) == 6000
    starts = [e["start_s"] for e in prof.events]
    assert starts == sorted(starts)
    summary = prof.summary()
    assert summary["makespan_s"] > 0
    # The core's summary: the cluster plan's predicted bound against the span of the call.
    assert summary["predicted_lower_bound_s"] > 0 and summary["efficiency"] > 0
    assert set(summary["nodes"]) == {0, 1, 2}
    assert sum(d["items"] for d in summary["devices"].values()) == 6000
    path = tmp_path / "cluster.json"
    prof.save_chrome_trace(path)
    trace = json.loads(path.read_text())["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in trace if e["name"] == "process_name"}
    # One process per node, and the driver's, whose track holds the user's calls.
    driver = [pid for pid, name in processes.items() if name == "driver"]
    assert len(driver) == 1
    del processes[driver[0]]
    assert set(processes) == {0, 1, 2}
    assert all(helpers.LOOPBACK in name for name in processes.values())
    assert any(e["name"] == "thread_name" and "device 0" in e["args"]["name"] for e in trace)
    assert "makespan" in str(prof)
    # The user's one call, counted in the local summary's words.
    assert [c["name"] for c in prof.calls] == [f"geometric_product(6000{X}8, 6000{X}8)"]
    assert str(prof).startswith(f"calls 1 (kernel calls {len(prof.kernel_calls)} on the nodes)")
    assert any(e["name"] == f"geometric_product(6000{X}8, 6000{X}8)" for e in trace)


@pytest.mark.parametrize(("boundary", "halo"), [("dirichlet", 1), ("periodic", 3)])
def test_stencil_bands_on_nodes_are_bit_identical(
    rc: ag.RayContext, local: ag.MultiGpuContext, boundary: str, halo: int
) -> None:
    grid = np.random.default_rng(halo).random((301, 67), dtype=np.float32)
    got = rc.stencil(grid, 10, 0.2, boundary, halo)
    assert np.array_equal(got, local.stencil(grid, 10, 0.2, boundary))
    report = rc.last_run
    assert type(report) is ag.DomainReport and rc.last_plan is None
    assert report.failures == []
    assert [n for n, _ in report.final_split] == [0, 1, 2]
    assert sum(r for _, r in report.final_split) == 301
    assert sum(r["steps"] for r in report.rounds) == 10
    got = rc.stencil(grid, 4, 0.1, boundary, halo, split=[0, 150, 151])
    assert np.array_equal(got, local.stencil(grid, 4, 0.1, boundary))


def test_a_grid_run_whole_brings_its_nodes_report(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    # Above 2^123 the core scales the grid, so one node runs it whole: the DomainReport its
    # bindings built crosses the object store (pickled) to the driver.
    grid = np.full((40, 8), 2.0**124, np.float32)
    grid[::3] = -(2.0**125)
    got = rc.stencil(grid, 3, 0.2, "periodic")
    assert np.array_equal(got, local.stencil(grid, 3, 0.2, "periodic"))
    report = rc.last_run
    assert type(report) is ag.DomainReport
    assert (report.steps, report.halo, report.failures) == (3, 1, [])
    assert sum(rows for _, rows in report.final_split) == 40


def test_life_bands_on_nodes_are_bit_identical(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    cells = (np.random.default_rng(1).random((200, 90)) < 0.3).astype(np.uint8)
    for halo in (1, 4):
        assert np.array_equal(rc.life(cells, 13, halo), local.life(cells, 13))
    with pytest.raises(ValueError) as e:
        rc.life(cells * 3, 2)
    with pytest.raises(type(e.value)) as e_local:
        local.life(cells * 3, 2)
    assert str(e.value) == str(e_local.value)


def test_each_node_takes_its_run_as_one_message_with_its_rows_only(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    a, b = random_batch(6000, seed=11)
    # As a node reads them from the object store: read-only, taken without a copy.
    a.flags.writeable = False
    b.flags.writeable = False
    before = rc.stats()
    got = rc.geometric_product(a, b, strategy="balanced")
    assert np.array_equal(got, local.geometric_product(a, b)) and got.flags.writeable
    plan = rc.last_plan
    assert plan is not None and (plan.chunk_items, plan.n_chunks) == (512, 12)
    row = a.nbytes // len(a)
    for assignment, s, s0 in zip(plan, rc.stats(), before, strict=True):
        # Several chunks, one actor call, and only the node's own rows of each operand
        # (every node reading the whole operand would move 3x the bytes).
        assert (s["messages"] - s0["messages"], s["chunks_done"] - s0["chunks_done"]) == (
            1,
            assignment.chunks,
        )
        assert s["bytes_sent"] - s0["bytes_sent"] == 2 * row * assignment.items
        assert s["bytes_received"] - s0["bytes_received"] == row * assignment.items
    # Each node computed on read-only views of the store's operands: no copy on its side.
    import ray

    for node in rc._native.nodes:
        assert ray.get(node.actor.last_run.remote())[2], f"node {node.index} copied"
    # A broadcast row goes into the store once for the call, shared by every node.
    one = np.ascontiguousarray(b[:1])
    before = rc.stats()
    got = rc.geometric_product(a, one, strategy="balanced")
    assert np.array_equal(got, local.geometric_product(a, one))
    sent = sum(s["bytes_sent"] - s0["bytes_sent"] for s, s0 in zip(rc.stats(), before))
    assert sent == a.nbytes + one.nbytes


def test_a_large_run_goes_as_pieces_its_results_taken_as_they_come(
    rc: ag.RayContext, local: ag.MultiGpuContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's run that moves more than ``PIECE_BYTES`` goes as pieces of whole chunks (all
    sent at once, so the node computes one while the next arrive): the same bits, each
    node's own rows once, one actor call per piece."""
    from amari_gpu.cluster import dispatch

    a, b = random_batch(6000, seed=13)
    a.flags.writeable = False
    row = a.nbytes // len(a)
    # Three chunks' bytes (512 rows of two operands in, one out) per piece.
    monkeypatch.setattr(dispatch, "PIECE_BYTES", 3 * 512 * 3 * row)
    before = rc.stats()
    got = rc.geometric_product(a, b, strategy="balanced")
    assert np.array_equal(got, local.geometric_product(a, b)) and got.flags.writeable
    plan = rc.last_plan
    assert plan is not None and (plan.chunk_items, plan.n_chunks) == (512, 12)
    for assignment, s, s0 in zip(plan, rc.stats(), before, strict=True):
        assert s["chunks_done"] - s0["chunks_done"] == assignment.chunks
        assert s["messages"] - s0["messages"] == -(-assignment.chunks // 3)
        assert s["bytes_sent"] - s0["bytes_sent"] == 2 * row * assignment.items
        assert s["bytes_received"] - s0["bytes_received"] == row * assignment.items
    # Into the caller's out, as the single context's.
    out = np.full((6000, 8), 7.0, dtype=np.float32)
    assert rc.geometric_product(a, b, out=out, strategy="balanced") is out
    assert np.array_equal(out, got)


def test_a_messages_operands_are_put_at_once_and_its_result_placed_by_the_row_copy(
    rc: ag.RayContext, local: ag.MultiGpuContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The large operands of each node's message go into the object store at the same time
    (the two puts of a message meet at a barrier, which puts one after the other never
    pass), and each node's result is written into the output by the native row copy:
    the bits of one context, every byte sent once."""
    import threading

    import ray
    from amari_gpu.cluster import store

    a, b = random_batch(30_000, seed=17)
    row = a.nbytes // len(a)
    # Every node's rows of each operand are too large to travel inside the actor call.
    assert a.nbytes // 3 > store.INLINE_BYTES
    put, copy = ray.put, store._native.copy_rows
    meet = threading.Barrier(2, timeout=30)
    threads: list[int] = []
    placed: list[int] = []

    def put_at_once(value: Any, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        meet.wait()
        return put(value, *args, **kwargs)

    def counted(dst: Any, src: Any) -> None:
        placed.append(src.nbytes)
        copy(dst, src)

    monkeypatch.setattr(ray, "put", put_at_once)
    monkeypatch.setattr(store._native, "copy_rows", counted)
    before = rc.stats()
    got = rc.geometric_product(a, b, strategy="balanced")
    assert np.array_equal(got, local.geometric_product(a, b)) and got.flags.writeable
    plan = rc.last_plan
    assert plan is not None and len(plan) == 3
    # Two puts per node's message, on two threads each time.
    assert len(threads) == 6
    assert all(threads[i] != threads[i + 1] for i in range(0, 6, 2))
    assert sorted(placed) == sorted(row * w.items for w in plan)
    sent = sum(s["bytes_sent"] - s0["bytes_sent"] for s, s0 in zip(rc.stats(), before))
    assert sent == a.nbytes + b.nbytes


def test_float64_rows_split_over_three_nodes_with_one_contexts_bits(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    rng = np.random.default_rng(64)
    a = random_operand(rng, (2000, 12), 0.05).astype(np.float64) * np.pi
    b = random_operand(rng, (12, 7), 0.05).astype(np.float64) / 3.0
    probs = rng.dirichlet(np.ones(4), size=2000)
    mean, var = rng.standard_normal((2000, 2)), rng.uniform(0.5, 2.0, (2000, 2))
    calls = [
        (lambda c: c.tropical_matmul(a, b, "max_plus", strategy="balanced")),
        (lambda c: c.tropical_matvec(a, np.ascontiguousarray(b[:, 0]), strategy="balanced")),
        (lambda c: c.fisher_categorical(probs, strategy="balanced")),
        (lambda c: c.fisher_gaussian(mean, var, strategy="balanced")),
    ]
    for call in calls:
        got, want = call(rc), call(local)
        assert got.dtype == want.dtype == np.float64
        assert got.tobytes() == want.tobytes()
        assert rc.last_plan is not None and len({w.device_id for w in rc.last_plan}) == 3


def test_num_gpus_asks_ray_and_says_how_the_gpus_matched(
    cluster: Any, local: ag.MultiGpuContext
) -> None:
    a, b = random_batch(700, seed=12)
    # Only the node that declares a GPU takes part; Ray gives its actor GPU id 0. Lavapipe
    # reports no PCI bus id, so the node opens the adapters backends= selects, and says why.
    with ag.RayContext(backends=BACKENDS, num_gpus=1) as gpu:
        [node] = gpu.nodes
        assert node.gpus is not None and node.gpus["ids"] == ["0"]
        assert "no adapter reports a PCI bus id" in node.gpus["how"]
        assert [d["backend"] for d in node.devices] == ["vulkan"]
        assert np.array_equal(gpu.geometric_product(a, b), local.geometric_product(a, b))
    with pytest.raises(ag.NoAdapterError, match=r"'GPU': 2\.0"):
        ag.RayContext(backends=BACKENDS, num_gpus=2)
    with pytest.raises(ag.InvalidArgumentError, match="num_gpus: expected a number of GPUs > 0"):
        ag.RayContext(backends=BACKENDS, num_gpus=0)
