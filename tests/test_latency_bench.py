"""The latency bench's account of a call's wall time off the CPU: the calling thread's CPU
time and its context switches per call, read around a loop of calls (issue 25)."""

from __future__ import annotations

import os
import sys
import time

from amari_gpu.tools.bench_latency import _thread_cost, handoffs, lines


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
