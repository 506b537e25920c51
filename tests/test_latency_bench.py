"""The latency bench's account of a call's wall time off the CPU: the calling thread's CPU
time and its context switches per call, read around a loop of calls (issue 25)."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from amari_gpu.tools.bench_latency import _thread_cost, handoffs, lines, one_core


def test_a_call_that_blocks_shows_its_wall_time_off_the_cpu_and_its_voluntary_switch() -> None:
    """A call that sleeps spends its wall time off the CPU, blocked: its CPU time per call is
    below its wall time, and each call switches away voluntarily at least once."""
    cost = _thread_cost(lambda: time.sleep(0.002), 5)
    assert cost["wall_us"] is not None and cost["cpu_us"] is not None
    assert cost["wall_us"] >= 2000
    assert 0 <= cost["cpu_us"] < cost["wall_us"]
    if sys.platform == "linux":
        assert cost["voluntary"] is not None and cost["voluntary"] >= 1
        assert cost["involuntary"] is not None and cost["involuntary"] >= 0
    else:
        assert cost["voluntary"] is None and cost["involuntary"] is None


def test_a_call_that_computes_is_counted_on_the_cpu() -> None:
    """A call that only computes is on the CPU for its whole wall time, save preemption:
    some CPU time per call is counted, never more than its wall time, and it never blocks
    (no voluntary switch beyond the odd page fault's: fewer than one per call)."""

    def spin() -> None:
        end = time.thread_time() + 0.001
        while time.thread_time() < end:
            pass

    cost = _thread_cost(spin, 20)
    assert cost["cpu_us"] is not None and cost["wall_us"] is not None
    assert 1000 <= cost["cpu_us"] <= cost["wall_us"]
    if sys.platform == "linux":
        assert cost["voluntary"] is not None and cost["voluntary"] < 1


def test_the_handoff_figures_are_measured_and_leave_the_callers_affinity_as_it_was() -> None:
    """The bench measures a hand-off between two threads on one core and on two (where
    threads can be pinned and there are two cores), reports both, and gives the calling
    thread its own affinity back."""
    pinnable = sys.platform == "linux" and len(os.sched_getaffinity(0)) >= 2
    before = os.sched_getaffinity(0) if sys.platform == "linux" else None
    figures = handoffs(10)
    if not pinnable:
        assert figures is None
        return
    assert figures is not None
    assert figures["same_core_us"] > 0 and figures["other_core_us"] > 0
    assert os.sched_getaffinity(0) == before
    report = lines(
        {
            "cpu": "c",
            "python": "3",
            "numpy": "2",
            "blas": "b",
            "repeats": 10,
            "devices": [],
            "rows": [],
            "handoffs": figures,
        }
    )
    assert any("to another core" in line for line in report)


def test_one_core_pins_every_thread_of_the_process_for_the_calls_and_gives_each_its_own_back() -> (
    None
):
    """While the calls run, every thread of the process (one that is not the caller's too,
    as a driver's queue thread is not) is on one core; after, each has its own affinity
    again, the caller's and the other thread's alike, even where they differed. Where
    threads cannot be pinned (not Linux, one core) it measures nothing."""
    if sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2:
        assert one_core(lambda: None, 3) is None
        return
    cores = sorted(os.sched_getaffinity(0))
    release = threading.Event()
    ready = threading.Event()
    tid: list[int] = []

    def other() -> None:
        tid.append(threading.get_native_id())
        os.sched_setaffinity(0, {cores[1]})
        ready.set()
        release.wait()

    helper = threading.Thread(target=other)
    helper.start()
    ready.wait()
    caller = os.sched_getaffinity(0)
    seen: list[tuple[set[int], set[int]]] = []
    try:
        median = one_core(
            lambda: seen.append((os.sched_getaffinity(0), os.sched_getaffinity(tid[0]))), 5
        )
        assert median is not None and median > 0
        assert seen and all(mine == {cores[0]} and theirs == {cores[0]} for mine, theirs in seen)
        assert os.sched_getaffinity(0) == caller
        assert os.sched_getaffinity(tid[0]) == {cores[1]}
    finally:
        release.set()
        helper.join()


def test_the_latency_bench_on_lavapipe_reports_the_one_core_figure_and_the_thread_cost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On a wgpu adapter every row has the one-core median beside the calling thread's CPU
    time and switches, and the report prints the hand-off figures; the process's threads
    have their affinity back after the run."""
    import json

    from amari_gpu.tools.cli import main

    before = {int(t): os.sched_getaffinity(int(t)) for t in os.listdir("/proc/self/task")}
    assert (
        main(["bench", "--family", "latency", "--backends", "vulkan", "--rounds", "3", "--json"])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert [d["label"].split()[0] for d in result["devices"]] == ["vulkan"]
    for row in result["rows"]:
        assert row["one_core_us"] > 0
        assert row["thread"]["wall_us"] > 0 and row["thread"]["voluntary"] >= 0
    assert result["handoffs"]["same_core_us"] > 0 and result["handoffs"]["other_core_us"] > 0
    for t, mask in before.items():
        if os.path.exists(f"/proc/self/task/{t}"):
            assert os.sched_getaffinity(t) == mask
