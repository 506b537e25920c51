"""What the tests of resident operands (test_resident_*.py) share: the hypothesis settings of
their random shardings, the run of one call with a fault injected on every device in turn, and
the OpenGL devices of a mixed context (which never hold float64 rows).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import amari_gpu as ag
import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

T = TypeVar("T")

SHARDINGS = st.sampled_from(["balanced", "capability", "memory", "latency", "auto"])
"""The placement strategies a random sharding is drawn from."""


def sharding_settings(max_examples: int) -> settings:
    """Hypothesis settings for properties over the session's module-scoped contexts: no
    deadline (calls on software adapters take as long as the machine allows), and the
    fixtures shared by every example."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def assert_faults_change_nothing(
    ctx: ag.MultiGpuContext,
    upload: Callable[[], T],
    same: Callable[[T], bool],
    attempts: int,
) -> None:
    """For every device of ``ctx`` and each k below ``attempts``: with health reset,
    ``upload()`` makes the resident operands, a fault is injected on that device after k of
    its chunks, and ``same(operands)`` runs the call and must find the fault-free result.
    Each device's fault must fire at least once (else nothing was tested). Health is reset
    afterwards, whatever happens."""
    try:
        for device in range(len(ctx.devices)):
            fired = 0
            for k in range(attempts):
                ctx.reset_health()
                operands = upload()
                ctx.inject_fault(device, after_chunks=k)
                assert same(operands), (device, k)
                fired += not ctx.health()[device]["healthy"]
            assert fired >= 1, device
    finally:
        ctx.reset_health()


def same_bits(got: object, want: np.ndarray) -> bool:
    """Same shape and dtype, bit for bit (float16, float32 or float64), a NaN equal to any
    NaN (numpy promises no payload); bool arrays equal."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype == np.bool_:
        return bool(np.array_equal(got, want))
    nan = np.isnan(want)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
    return bool(
        np.array_equal(np.isnan(got), nan)
        and np.array_equal(got[~nan].view(bits), want[~nan].view(bits))
    )


def gl_device_ids(ctx: ag.MultiGpuContext) -> set[int]:
    """The ids of `ctx`'s OpenGL devices (at least one: the context must hold llvmpipe GL)."""
    gl = {d.id for d in ctx.devices if d.adapter.backend == "gl"}
    assert gl, "the context holds llvmpipe"
    return gl
