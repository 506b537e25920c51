"""The profiler speaks of the user's calls: ``prof.calls`` has one entry per method called
(a shortest-paths call is one call, whatever number of tiled products it runs), the trace
has one named slice per user call on its "calls" track with the call's kernel work inside
its span, the PNG labels the calls, and the summaries (local and cluster) count user calls
with the kernel calls beside them.
"""

from __future__ import annotations

import json
from typing import Any

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu.cluster.profile import ClusterRecording
from amari_gpu.profiler import TIMES as X
from amari_gpu.profiler import CallsOf


@pytest.fixture(scope="module")
def ctx() -> Any:
    with ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2) as ctx:
        yield ctx


def _weights(n: int) -> np.ndarray:
    w = np.random.default_rng(n).uniform(1.0, 9.0, (n, n)).astype(np.float32)
    w[np.random.default_rng(n + 1).random((n, n)) < 0.7] = np.inf
    return w


def _three_calls(ctx: Any) -> tuple[Any, dict[str, Any]]:
    """A shortest-paths call, a grid call and a call on a DeviceArray, profiled."""
    w = _weights(160)
    grid = np.random.default_rng(1).random((96, 40), dtype=np.float32)
    rows = np.random.default_rng(2).standard_normal((3000, 8)).astype(np.float32)
    resident = ctx.asarray(rows)
    # Compiled, calibrated and measured before: the profile sees the calls alone.
    ctx.shortest_paths(w), ctx.stencil(grid, 4, 0.2, "dirichlet")
    ctx.geometric_product(resident, rows[0])
    with ctx.profile() as prof:
        got = {
            "paths": ctx.shortest_paths(w),
            "grid": ctx.stencil(grid, 4, 0.2, "dirichlet"),
            "resident": ctx.geometric_product(resident, rows[0]).numpy(),
        }
    # Profiling changes no result.
    assert np.array_equal(got["paths"], ctx.shortest_paths(w))
    assert np.array_equal(got["grid"], ctx.stencil(grid, 4, 0.2, "dirichlet"))
    assert np.array_equal(got["resident"], ctx.geometric_product(rows, rows[0]))
    return prof, got


@pytest.fixture(scope="module")
def profiled(ctx: Any) -> Any:
    return _three_calls(ctx)[0]


def test_calls_lists_each_user_call_once(profiled: Any) -> None:
    calls = profiled.calls
    assert [c["name"] for c in calls] == [
        f"shortest_paths(160{X}160)",
        f"stencil(96{X}40)",
        f"geometric_product(DeviceArray 3000{X}8, 1{X}8)",
    ]
    assert [c["method"] for c in calls] == ["shortest_paths", "stencil", "geometric_product"]
    paths, grid, resident = calls
    # Blocked Floyd-Warshall runs one tiled product per round: all of them are this call's.
    assert len(paths["kernel_calls"]) > 1
    assert {k["kernel"] for k in paths["kernel_calls"]} == {"tropical/tropical_matmul_tiled"}
    assert [k["kernel"] for k in grid["kernel_calls"]] == ["domain/heat"]
    assert resident["kernel_calls"] and all(
        k["kernel"].startswith("geometric_algebra/") for k in resident["kernel_calls"]
    )
    owned = [k["call"] for c in calls for k in c["kernel_calls"]]
    assert len(owned) == len(set(owned)), "a kernel call belongs to one user call"
    for c in calls:
        assert 0 <= c["start_s"] <= c["end_s"]
        assert c["device_s"] > 0
        assert c["plan"]["strategy"]
    assert calls[0]["end_s"] <= calls[1]["start_s"] <= calls[1]["end_s"] <= calls[2]["start_s"]
    # Kernel calls are still listed on their own, with their index as events give it.
    kernel_calls = profiled.kernel_calls
    assert [k["call"] for k in kernel_calls] == list(range(len(kernel_calls)))
    assert set(owned) <= {k["call"] for k in kernel_calls}


def test_a_calls_steps_lie_within_its_span(profiled: Any) -> None:
    events = profiled.events
    for c in profiled.calls:
        mine = {k["call"] for k in c["kernel_calls"]}
        steps = [e for e in events if e["call"] in mine]
        assert any(e["kind"] == "kernel" for e in steps), c["name"]
        for e in steps:
            assert c["start_s"] <= e["start_s"]
            assert e["start_s"] + e["duration_s"] <= c["end_s"]
        kernels = [e["duration_s"] for e in steps if e["kind"] == "kernel"]
        assert c["device_s"] == pytest.approx(sum(kernels))


def _slices(trace: list[dict[str, Any]]) -> dict[int, list[tuple[int, int, dict[str, Any]]]]:
    """X slices by track, as whole nanoseconds (the trace's resolution)."""
    tracks: dict[int, list[tuple[int, int, dict[str, Any]]]] = {}
    for e in trace:
        if e["ph"] == "X":
            start = round(e["ts"] * 1e3)
            tracks.setdefault(e["tid"], []).append((start, start + round(e["dur"] * 1e3), e))
    return tracks


def test_the_trace_has_a_named_slice_per_user_call(profiled: Any, tmp_path: Any) -> None:
    path = tmp_path / "calls.json"
    profiled.save_chrome_trace(path)
    trace = json.loads(path.read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    calls_tids = [tid for tid, name in names.items() if name.startswith("calls")]
    assert calls_tids == [0], names
    tracks = _slices(trace)
    user = [s for s in tracks[0] if "kernel_calls" in s[2]["args"]]
    assert [s[2]["name"] for s in user] == [c["name"] for c in profiled.calls]
    for (start, end, slice_), call in zip(user, profiled.calls):
        mine = {k["call"] for k in call["kernel_calls"]}
        inside = [
            s
            for tid, spans in tracks.items()
            for s in spans
            if s[2]["args"].get("call") in mine and s[2] is not slice_
        ]
        # Its kernel calls' slices on the calls track, and their steps on the device
        # tracks, all within the user call's slice.
        assert {s[2]["name"] for s in inside if s[2]["cat"] == "call"} == {
            k["kernel"] for k in call["kernel_calls"]
        }
        assert all(start <= s[0] and s[1] <= end for s in inside), call["name"]


def test_the_png_labels_the_user_calls(profiled: Any) -> None:
    # matplotlib is a development requirement: the test runs (never skips) wherever tests run.
    import matplotlib.pyplot as plt

    fig = profiled.plot()
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.texts] == [c["name"] for c in profiled.calls]
        assert [t.get_text() for t in ax.get_yticklabels()][-1] == "calls"
    finally:
        plt.close(fig)


def test_the_summary_counts_user_calls(profiled: Any) -> None:
    s = profiled.summary()
    assert s["calls"] == 3
    assert s["kernel_calls"] == len(profiled.kernel_calls) > 3
    assert str(profiled).startswith(f"calls 3 (kernel calls {s['kernel_calls']})  makespan")


def test_a_tiny_call_on_the_fast_path_is_one_call() -> None:
    with ag.MultiGpuContext(backends=["host"]) as host:
        a = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
        want = host.geometric_product(a, a)
        with host.profile() as prof:
            got = host.geometric_product(a, a)
        assert host.last_plan is not None and host.last_plan.fast_path
        assert np.array_equal(got, want)
        [call] = prof.calls
        assert call["name"] == f"geometric_product(4{X}8, 4{X}8)"
        assert [k["call"] for k in call["kernel_calls"]] == [0]
        assert str(prof).startswith("calls 1 (kernel calls 1)")
        # Nothing is recorded once the profile has stopped: the context's own entry points
        # are back.
        host.geometric_product(a, a)
        assert len(prof.calls) == 1 and "_kernels" not in vars(host)


class _Dispatcher:
    """A cluster without nodes: what ClusterRecording asks of one."""

    def healthy(self) -> list[Any]:
        return []

    def ask(self, calls: list[Any], what: str) -> dict[int, Any]:
        return {}


class _Host:
    """A context whose kernel entry points record what they were called with."""

    class _kernels:  # the attribute a KernelHost has
        @staticmethod
        def shortest_paths(ctx: Any, w: np.ndarray, strategy: Any, out: Any) -> Any:
            return w, None

    _native = None


def test_the_cluster_summary_counts_user_calls_in_the_same_words() -> None:
    host = _Host()
    with ClusterRecording(_Dispatcher(), host) as prof:  # type: ignore[arg-type]
        assert isinstance(host._kernels, CallsOf)
        host._kernels.shortest_paths(None, np.zeros((5, 5), np.float32), None, None)
    assert "_kernels" not in vars(host)
    assert [c["name"] for c in prof.calls] == [f"shortest_paths(5{X}5)"]
    assert 0 <= prof.calls[0]["start_s"] <= prof.calls[0]["end_s"]
    node = type("Node", (), {"index": 0, "clock_offset_s": 0.0, "info": {"address": "n0"}})
    recorded = {
        "t0": prof.t0,
        "events": [
            {"device": 0, "kind": "kernel", "chunk": 0, "call": c, "start_s": 0.0}
            | {"duration_s": 0.001, "bytes": 0, "items": 4, "clock": "host"}
            for c in (0, 1)
        ],
        "calls": [],
        # As a node's profile lists them (Profile.kernel_calls).
        "kernel_calls": [
            {"call": c, "kernel": "tropical/a", "items": 4, "flops_per_item": 1.0}
            | {"bytes_per_item": 4.0, "strategy": "auto", "lower_bound_s": 0.0}
            | {"estimated_makespan_s": 0.001}
            for c in (0, 1)
        ],
        "names": {0: "lavapipe (vulkan)"},
        "summary": None,
    }
    prof.merge(node, prof.t0, recorded)  # type: ignore[arg-type]
    s = prof.summary()
    assert (s["calls"], s["kernel_calls"]) == (1, 2)
    assert str(prof).startswith("calls 1 (kernel calls 2 on the nodes)  makespan")
    trace = prof.chrome_trace()["traceEvents"]
    # The user's call in the driver's process, the kernel calls it made in the node's.
    slices = [(e["pid"], e["name"]) for e in trace if e.get("cat") == "call"]
    driver = next(e["pid"] for e in trace if e["args"] == {"name": "driver"})
    assert slices == [(driver, f"shortest_paths(5{X}5)"), (0, "tropical/a"), (0, "tropical/a")]
    # The core's writer names the driver's track as a local trace's.
    calls_track = {"name": "calls — user calls, kernel calls under them"}
    assert calls_track in [e["args"] for e in trace if e["name"] == "thread_name"]


def test_outside_a_profile_the_entry_points_are_the_native_ones(ctx: Any) -> None:
    assert "_kernels" not in vars(ctx)
    assert ctx._kernels is ag._native
