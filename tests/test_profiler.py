"""The profiler timeline: events of a multi-device call, the summary, Chrome-trace export,
retries after a fault, and the Gantt chart."""

from __future__ import annotations

import json

import amari_gpu as ag
import numpy as np
import pytest

KEYS = {"device", "kind", "chunk", "call", "start_s", "duration_s", "bytes", "items", "clock"}


@pytest.fixture(scope="module")
def ctx4() -> ag.MultiGpuContext:
    return ag.MultiGpuContext(
        adapters=[0, 1], devices_per_adapter=2, chunk_items=2048, gpu_timestamps=True
    )


def _batch(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 8), dtype=np.float32)


def _profiled(ctx: ag.MultiGpuContext, n: int, strategy: str = "balanced") -> ag.Profile:
    a = _batch(n)
    with ctx.profile() as prof:
        ctx.geometric_product(a, a, strategy=strategy)
    return prof


def test_kernel_events_cover_every_item_exactly_once(ctx4):
    n = 50_001
    prof = _profiled(ctx4, n)
    events = prof.events
    assert all(set(e) == KEYS for e in events)
    assert {e["kind"] for e in events} <= set(ag.profiler.KINDS)
    kernels = [e for e in events if e["kind"] == "kernel"]
    chunks = [e["chunk"] for e in kernels]
    assert sorted(chunks) == list(range(-(-n // 2048)))
    assert sum(e["items"] for e in kernels) == n
    assert {e["device"] for e in kernels} == {0, 1, 2, 3}
    assert all(e["duration_s"] >= 0 and e["start_s"] >= 0 for e in events)
    plans = [e for e in events if e["kind"] == "plan"]
    assert len(plans) == 1 and plans[0]["device"] is None and plans[0]["items"] == n
    uploads = [e for e in events if e["kind"] == "upload"]
    assert sum(e["bytes"] for e in uploads) == n * 64
    readbacks = [e for e in events if e["kind"] == "readback"]
    assert sum(e["bytes"] for e in readbacks) >= n * 32


def test_kernels_use_gpu_timestamps_where_the_device_has_them(ctx4):
    prof = _profiled(ctx4, 20_000)
    for e in prof.events:
        if e["kind"] == "kernel":
            want = "gpu" if ctx4.devices[e["device"]].gpu_timestamps else "host"
            assert e["clock"] == want
        else:
            assert e["clock"] == "host"


def test_by_default_timestamps_are_used_only_where_they_cost_under_3_percent_of_a_chunk():
    ctx = ag.MultiGpuContext(adapters=[0, 1], chunk_items=4096)
    n = 40_000
    prof = _profiled(ctx, n)
    plan = ctx.last_plan
    assert plan is not None
    for w in plan:
        device = ctx.devices[w.device_id]
        cost = device.capabilities.timestamp_cost_s
        assert cost is not None and cost >= 0
        affordable = cost <= 0.03 * w.estimated_seconds / w.chunks
        want = "gpu" if device.gpu_timestamps and affordable else "host"
        clocks = {
            e["clock"] for e in prof.events if e["kind"] == "kernel" and e["device"] == w.device_id
        }
        assert clocks == {want}


def test_host_timing_when_timestamps_are_turned_off():
    ctx = ag.MultiGpuContext(backends=["vulkan"], gpu_timestamps=False, chunk_items=4096)
    assert not any(d.gpu_timestamps for d in ctx.devices)
    prof = _profiled(ctx, 20_000)
    kernels = [e for e in prof.events if e["kind"] == "kernel"]
    assert kernels and all(e["clock"] == "host" for e in kernels)
    assert sum(e["items"] for e in kernels) == 20_000


def test_the_host_devices_kernels_span_their_own_runs():
    """The host device runs a batch of chunks side by side on its threads: each kernel
    event is that chunk's own run (bounding it by the chunk finished before it left most
    of them empty), inside the call."""
    ctx = ag.MultiGpuContext(backends=["host"], chunk_items=4096)
    a = _batch(1 << 16)
    ctx.geometric_product(a, a, strategy="balanced")
    with ctx.profile() as prof:
        ctx.geometric_product(a, a, strategy="balanced")
    kernels = [e for e in prof.events if e["kind"] == "kernel"]
    assert sorted(e["chunk"] for e in kernels) == list(range(16))
    assert all(e["clock"] == "host" and e["duration_s"] > 0 for e in kernels), kernels
    (call,) = prof.calls
    for e in kernels:
        assert call["start_s"] <= e["start_s"]
        assert e["start_s"] + e["duration_s"] <= call["end_s"]


def test_the_summary_agrees_with_the_events(ctx4):
    n = 40_000
    prof = _profiled(ctx4, n)
    s = prof.summary()
    assert set(s) >= {
        "makespan_s",
        "predicted_lower_bound_s",
        "efficiency",
        "imbalance",
        "overhead_fraction",
        "bottleneck",
        "figures",
        "devices",
    }
    assert s["bottleneck"] in {"transfer-bound", "compute-bound", "imbalance", "launch-overhead"}
    events = prof.events
    first = min(e["start_s"] for e in events)
    last = max(e["start_s"] + e["duration_s"] for e in events)
    assert s["makespan_s"] == pytest.approx(last - first, rel=1e-9)
    bound = s["predicted_lower_bound_s"]
    assert s["efficiency"] == pytest.approx(bound / s["makespan_s"], rel=1e-9)
    assert bound == pytest.approx(prof.kernel_calls[0]["lower_bound_s"])
    busy = [d["busy_s"] for d in s["devices"].values()]
    assert s["imbalance"] == pytest.approx(max(busy) / (sum(busy) / len(busy)) - 1, rel=1e-9)
    assert 0 <= s["overhead_fraction"] <= 1
    for device, d in s["devices"].items():
        mine = [e for e in events if e["device"] == device]
        kernel_items = sum(e["items"] for e in mine if e["kind"] == "kernel")
        assert d["items"] == kernel_items
        assert d["utilization"] == pytest.approx(d["busy_s"] / s["makespan_s"], rel=1e-9)
        assert d["items_per_s"] == pytest.approx(kernel_items / d["busy_s"], rel=1e-9)
        assert d["busy_s"] <= s["makespan_s"] * (1 + 1e-9)
    assert sum(d["items"] for d in s["devices"].values()) == n
    text = str(prof)
    assert "bottleneck" in text and "device" in text


def test_chrome_trace_parses_with_the_required_keys(ctx4, tmp_path):
    prof = _profiled(ctx4, 30_000)
    path = tmp_path / "trace.json"
    prof.save_chrome_trace(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    every = [e for e in events if e["ph"] == "X"]
    # The steps, and on the calls track the user call with its one kernel call.
    complete = [e for e in every if e["cat"] != "call"]
    assert len(complete) == len(prof.events)
    assert [e["name"] for e in every if e["cat"] == "call"] == [
        prof.calls[0]["name"],
        prof.kernel_calls[0]["kernel"],
    ]
    for e in every:
        assert {"name", "cat", "ph", "pid", "tid", "ts", "dur", "args"} <= set(e)
        assert e["dur"] >= 0
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any(n.startswith("device 0 queue") for n in names)
    assert any(n.startswith("device 3 worker") for n in names)
    # Named by kind, so Perfetto groups them; the chunk is an argument.
    assert {e["name"] for e in complete} <= set(ag.profiler.KINDS)
    kernel_tids = {e["tid"] for e in complete if e["cat"] == "kernel"}
    host_tids = {e["tid"] for e in complete if e["cat"] in ("upload", "readback")}
    assert kernel_tids.isdisjoint(host_tids)


def test_injected_faults_show_up_as_retries():
    ctx = ag.MultiGpuContext(
        backends=["vulkan"], devices_per_adapter=2, chunk_items=1024, strategy="balanced"
    )
    ctx.inject_fault(1, after_chunks=2)
    n = 30_000
    prof = _profiled(ctx, n)
    retries = [e for e in prof.events if e["kind"] == "retry"]
    assert retries and all(e["device"] == 0 for e in retries)
    kernels = [e for e in prof.events if e["kind"] == "kernel"]
    assert sum(e["items"] for e in kernels) == n
    assert len({e["chunk"] for e in kernels}) == len(kernels)
    assert prof.summary()["devices"][0]["retries"] == len(retries)


def test_gantt_chart_png(ctx4, tmp_path):
    prof = _profiled(ctx4, 30_000)
    path = tmp_path / "gantt.png"
    fig = prof.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # One row per device, named by its adapter and backend, one for the host's planning
    # and one for the user calls, on top.
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    names = [f"{d.id}: {d.adapter.name} ({d.adapter.backend})" for d in ctx4.devices]
    assert labels == [*names, "host", "calls"]
    assert all(label.endswith(("(vulkan)", "(gl)")) for label in labels[:4])
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_one_profile_at_a_time_and_nothing_recorded_after_it(ctx4):
    a = _batch(5000)
    with ctx4.profile() as prof:
        with pytest.raises(ag.InvalidArgumentError, match="already active"):
            ctx4.profile().__enter__()
        ctx4.geometric_product(a, a)
    count = len(prof.events)
    ctx4.geometric_product(a, a)
    assert len(prof.events) == count
    assert len(prof.calls) == 1
