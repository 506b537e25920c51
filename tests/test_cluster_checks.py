"""A RayContext's argument errors on a real Ray cluster of this machine: the driver checks
the whole call with the core's checks before any chunk reaches a node, so an error names
the caller's positions and shapes (the same message one MultiGpuContext gives, not a
chunk's) and the caller's ``out`` is untouched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest

BACKENDS = ["vulkan"]
CHUNK = 256
"""Cluster chunk rows: the test sizes give every node several chunks, and the bad rows lie
far beyond the first chunk."""

ROWS = 8 * CHUNK
DEEP = 6 * CHUNK + 37
"""A row in the seventh chunk: its chunk-relative position (37) differs from the caller's."""


@pytest.fixture(scope="module")
def rc() -> Iterator[ag.RayContext]:
    with helpers.local_cluster(), ag.RayContext(backends=BACKENDS, chunk_items=CHUNK) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def local() -> Iterator[ag.MultiGpuContext]:
    with ag.MultiGpuContext(backends=BACKENDS) as ctx:
        yield ctx


def _message(error: type[Exception], call: Any, *args: Any, **kwargs: Any) -> str:
    """The message of the ``error`` that ``call(*args, **kwargs)`` raises."""
    with pytest.raises(error) as e:
        call(*args, **kwargs)
    return str(e.value)


def _operand(rows: int, cols: int) -> np.ndarray[Any, Any]:
    return np.random.default_rng(7).uniform(-4, 4, (rows, cols)).astype(np.float32)


def test_a_nan_deep_in_a_names_the_callers_position(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    a, b = _operand(ROWS, 8), _operand(8, 3)
    a[DEEP, 5] = np.nan
    for semiring in ("max_plus", "min_plus"):
        got = _message(ag.InvalidArgumentError, rc.tropical_matmul, a, b, semiring=semiring)
        want = _message(ag.InvalidArgumentError, local.tropical_matmul, a, b, semiring=semiring)
        assert f"at [{DEEP}, 5] of shape ({ROWS}, 8)" in got
        assert got == want
    batched = np.stack([a, a])
    x = np.zeros((2, 8), dtype=np.float32)
    got = _message(ag.InvalidArgumentError, rc.tropical_matvec, batched, x)
    assert f"at [0, {DEEP}, 5] of shape (2, {ROWS}, 8)" in got
    assert got == _message(ag.InvalidArgumentError, local.tropical_matvec, batched, x)


def test_bad_values_deep_in_the_rows_name_the_callers_row(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    mean = _operand(ROWS, 3)
    var = np.abs(_operand(ROWS, 3)) + 0.5
    var[DEEP, 1] = -1.0
    got = _message(ag.InvalidArgumentError, rc.fisher_gaussian, mean, var)
    assert got == _message(ag.InvalidArgumentError, local.fisher_gaussian, mean, var)
    assert str(DEEP) in got
    logits = _operand(ROWS, 4)
    logits[DEEP, 2] = np.inf
    got = _message(ag.InvalidArgumentError, rc.fisher_categorical, logits=logits)
    want = _message(ag.InvalidArgumentError, local.fisher_categorical, logits=logits)
    assert got == want
    assert str(DEEP) in got


def test_a_bad_shape_names_the_callers_shape(rc: ag.RayContext, local: ag.MultiGpuContext) -> None:
    a = _operand(ROWS, 8)
    x = np.zeros(7, dtype=np.float32)
    got = _message(ag.ShapeError, rc.tropical_matvec, a, x)
    assert got == "x: expected shape (8,), got (7,)"
    assert got == _message(ag.ShapeError, local.tropical_matvec, a, x)
    mean = _operand(ROWS, 3)
    var = np.ones((ROWS - 100, 3), dtype=np.float32)
    got = _message(ag.ShapeError, rc.fisher_gaussian, mean, var)
    assert f"({ROWS}, 3)" in got
    assert got == _message(ag.ShapeError, local.fisher_gaussian, mean, var)


def test_out_is_untouched_on_an_argument_error(rc: ag.RayContext) -> None:
    # The bad row is in the last chunk: on the nodes, every earlier chunk would be written
    # into out before it failed.
    last = ROWS - 3
    a, b = _operand(ROWS, 8), _operand(8, 3)
    a[last, 0] = np.nan
    out = np.full((ROWS, 3), 7.0, dtype=np.float32)
    with pytest.raises(ag.InvalidArgumentError):
        rc.tropical_matmul(a, b, out=out)
    assert (out == 7.0).all()
    mean = _operand(ROWS, 2)
    var = np.ones((ROWS, 2), dtype=np.float32)
    var[last, 1] = 0.0
    before = (mean.copy(), var.copy())
    out3 = np.full((ROWS, 4, 4), 7.0, dtype=np.float32)
    with pytest.raises(ag.InvalidArgumentError):
        rc.fisher_gaussian(mean, var, out=out3)
    assert (out3 == 7.0).all()
    assert np.array_equal(mean, before[0]) and np.array_equal(var, before[1])


def test_an_overflow_deep_in_a_names_the_callers_row(
    rc: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    # Found only by running the product (a node's chunk), never by the driver's checks: the
    # entry the node names in its chunk's result is the caller's, as one context names it.
    a, b = _operand(ROWS, 8), _operand(8, 3)
    a[DEEP, 5], b[5, 2] = 3e38, 3e38
    out = np.full((ROWS, 3), 7.0, dtype=np.float32)
    got = _message(ag.InvalidArgumentError, rc.tropical_matmul, a, b, out=out)
    assert f"out[0, {DEEP}, 2]" in got
    assert got == _message(ag.InvalidArgumentError, local.tropical_matmul, a, b)
    batched = np.stack([_operand(8, 8)] * (2 * CHUNK))
    x = np.zeros((2 * CHUNK, 8), dtype=np.float32)
    batched[CHUNK + 37, 4, 1], x[CHUNK + 37, 1] = -3e38, -3e38
    got = _message(ag.InvalidArgumentError, rc.tropical_matvec, batched, x, "min_plus")
    assert f"out[{CHUNK + 37}, 4, 0]" in got
    assert got == _message(ag.InvalidArgumentError, local.tropical_matvec, batched, x, "min_plus")
