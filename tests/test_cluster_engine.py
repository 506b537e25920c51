"""The cluster as a transport over the core's engine, without a cluster: cluster plans are
the core partitioner's (nodes as devices), the cluster profile's summary and trace are the
core's writers', and a node actor created with ``num_gpus`` matches Ray's GPU ids to wgpu
adapters by PCI bus id. On a real cluster (one message per node, operands put once, read-only
operands, ``num_gpus``): tests/test_cluster.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import pytest
from amari_gpu import _native
from amari_gpu.cluster import planner
from amari_gpu.cluster.gpus import AMD, NVIDIA, match_gpu_ids
from amari_gpu.cluster.profile import ClusterProfile
from amari_gpu.profiler import TIMES as X

# --- plans: the core's partitioner with nodes as devices ---


def test_cluster_plans_are_the_core_partitioners() -> None:
    fast = planner.NodeModel(0, {"geometric_algebra": 2e6}, 1e9, 1e9, 1e-3)
    slow = planner.NodeModel(1, {"geometric_algebra": 1e6}, 1e9, 1e9, 1e-3)
    work = planner.workload("geometric_algebra", 1 << 20, 64.0, 32.0)
    rows = planner.chunk_rows(work.items, 96.0)
    assert rows == _native.chunk_items_for(1 << 20, 96.0, 96.0) == 1 << 14
    plan = planner.plan(work, rows, [fast, slow], "capability")
    assert plan == _native.plan_models(
        work,
        rows,
        [fast.device_model("geometric_algebra"), slow.device_model("geometric_algebra")],
        "capability",
    )
    assert [a.device_id for a in plan] == [0, 1]
    assert sum(a.items for a in plan) == 1 << 20
    # Items/s 2:1 apart, the same transfer per item for both: about 1.84:1, within a chunk.
    share = plan.assignments[0].items / plan.assignments[1].items
    assert 1.7 < share < 2.0, plan
    assert plan.lower_bound_s > 0 and plan.estimated_makespan_s >= plan.lower_bound_s
    balanced = planner.plan(work, rows, [fast, slow], "balanced")
    assert [a.chunks for a in balanced] == [32, 32]
    # A unit (a node context's Fisher chunk) the grid must follow: the core's grid (8192
    # rows here, its 1 MiB floor) rounded up to a multiple of it.
    assert planner.chunk_rows(1000, 96.0, unit=3000) == 9000


def test_a_node_model_the_core_refuses_is_named() -> None:
    broken = planner.NodeModel(0, {"geometric_algebra": 1e6}, 1e9, 1e9, float("nan"))
    work = planner.workload("geometric_algebra", 100, 64.0, 32.0)
    with pytest.raises(ag.InvalidArgumentError, match="models"):
        planner.plan(work, 16, [broken], "auto")
    with pytest.raises(ag.InvalidArgumentError, match="strategy"):
        planner.plan(work, 16, [planner.NodeModel(0, {})], "fastest")


def test_grid_rows_split_by_the_core() -> None:
    assert planner.split([2.0, 1.0, 1.0], 400) == [200, 100, 100]
    assert sum(planner.split([3.0, 0.0, 1.0], 301)) == 301
    assert planner.split([3.0, 0.0, 1.0], 301)[1] == 0


# --- the profile: the core's summary and trace writers ---


def _node_recording(t0: float) -> dict[str, Any]:
    def kernel(start: float, chunk: int) -> dict[str, Any]:
        return {
            "device": 0,
            "kind": "kernel",
            "chunk": chunk,
            "call": 0,
            "start_s": start,
            "duration_s": 0.5,
            "bytes": 0,
            "items": 10,
            "clock": "gpu",
        }

    call = {
        "call": 0,
        "kernel": "ga/geometric_product",
        "items": 20,
        "flops_per_item": 1.0,
        "bytes_per_item": 96.0,
        "strategy": "auto",
        "lower_bound_s": 0.1,
        "estimated_makespan_s": 0.2,
    }
    # Two kernels that overlap on one queue (GPU timestamps aligned late).
    return {
        "t0": t0,
        "events": [kernel(0.1, 0), kernel(0.3, 1)],
        "kernel_calls": [call],
        "names": {0: "llvmpipe (vulkan)"},
        "summary": {"calls": 0},
    }


def test_cluster_profile_is_written_by_the_cores_writers() -> None:
    prof = ClusterProfile()
    index = prof.begin_call("geometric_product", f"20{X}8, 20{X}8")
    assert index is not None
    prof.calls[index]["start_s"], prof.calls[index]["end_s"] = 0.0, 1.0
    node = SimpleNamespace(index=2, clock_offset_s=0.0, info={"address": helpers.LOOPBACK})
    prof.merge(node, 0.0, _node_recording(0.0))  # type: ignore[arg-type]
    trace = prof.chrome_trace()["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in trace if e["name"] == "process_name"}
    assert processes[2] == f"node 2: {helpers.LOOPBACK}" and "driver" in processes.values()
    threads = [e["args"]["name"] for e in trace if e["name"] == "thread_name" and e["pid"] == 2]
    # The core's tracks, with its overlap lanes: the second kernel nests in no slice of the
    # first lane, so it has one of its own (never dropped by Perfetto).
    assert "device 0 queue — llvmpipe (vulkan)" in threads
    assert "device 0 queue — llvmpipe (vulkan) (lane 2)" in threads
    assert any(
        e.get("cat") == "call" and e["name"] == f"geometric_product(20{X}8, 20{X}8)" for e in trace
    )
    summary = prof.summary()
    assert summary["calls"] == 1 and summary["kernel_calls"] == 1
    assert summary["makespan_s"] == pytest.approx(0.7)
    assert summary["devices"][(2, 0)]["items"] == 20
    assert summary["devices"][(2, 0)]["kernel_s"] == pytest.approx(0.7)
    assert summary["busy_s"] == {2: pytest.approx(0.7)}
    assert summary["bottleneck"] in (
        "compute-bound",
        "transfer-bound",
        "imbalance",
        "launch-overhead",
    )


def test_a_recorded_event_the_core_cannot_read_is_named() -> None:
    event = dict(_node_recording(0.0)["events"][0], kind="kernels")
    with pytest.raises(ag.InvalidArgumentError, match="events: kind"):
        _native.profile_summary([event], [], [])


# --- GPUs in Ray's terms: matching Ray's GPU ids to adapters ---


def _adapter(index: int, backend: str, vendor: int, bus: str) -> SimpleNamespace:
    return SimpleNamespace(index=index, backend=backend, vendor_id=vendor, pci_bus_id=bus)


MACHINE = [
    _adapter(0, "vulkan", NVIDIA, "0000:41:00.0"),
    _adapter(1, "vulkan", NVIDIA, "0000:01:00.0"),
    _adapter(2, "gl", NVIDIA, ""),
    _adapter(3, "vulkan", 0x8086, "0000:00:02.0"),
    _adapter(4, "host", 0, ""),
]


def test_ray_gpu_ids_match_adapters_in_pci_bus_order() -> None:
    # Ray's id 0 is the driver's first GPU: the lowest PCI bus id of the vendor.
    assert match_gpu_ids(["0"], MACHINE, ["vulkan"]).adapters == [1]
    found = match_gpu_ids([1, 0], MACHINE, ["vulkan", "host"])
    assert found.adapters == [0, 1, 4]
    assert "0000:41:00.0, 0000:01:00.0" in found.how
    assert match_gpu_ids(["0"], MACHINE, None).adapters == [1]
    amd = [_adapter(0, "vulkan", AMD, "0000:03:00.0"), _adapter(1, "vulkan", AMD, "0000:02:00.0")]
    assert match_gpu_ids(["1"], amd, None).adapters == [0]


def test_gpu_ids_that_cannot_be_matched_say_why() -> None:
    assert match_gpu_ids([], MACHINE, None).adapters is None
    lavapipe = [_adapter(0, "vulkan", 0x10005, ""), _adapter(1, "host", 0, "")]
    unmatched = match_gpu_ids(["0"], lavapipe, ["vulkan"])
    assert unmatched.adapters is None and "no adapter reports a PCI bus id" in unmatched.how
    assert "not a device index" in str(match_gpu_ids(["GPU-5e1c"], MACHINE, None).how)
    past = match_gpu_ids(["2"], MACHINE, None)
    assert past.adapters is None and "2 GPU(s)" in past.how
    assert match_gpu_ids(["0"], MACHINE, ["gl"]).adapters is None
