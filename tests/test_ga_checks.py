"""The one width check of geometric-algebra operands: the core's, in the caller's shapes.

Python converts the operands (rows of their own width, a DeviceArray as its handle) and
passes the shapes the caller gave; the core checks each width against the algebra's and a
DeviceArray's rows against its logical shape, and names the caller's shape in its error.
The error comes before any work: nothing uploaded or run, ``out`` and the inputs as they
were. A caller of ``_native`` that passes no shapes is checked on its arrays' own shapes.
"""

from __future__ import annotations

from typing import Any

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu import _native

PGA = ag.Algebra(3, 0, 1)


def _work(ctx: ag.MultiGpuContext) -> list[tuple[Any, ...]]:
    """What a call's work would change on each device: bytes sent, chunks run, rows held."""
    return [(s["bytes_up"], s["chunks_done"], s["resident_bytes"]) for s in ctx.stats()]


def test_a_wrong_width_with_out_is_refused_before_any_work(default_ctx: ag.MultiGpuContext) -> None:
    a = np.ones((50, 2, 15), np.float32)
    b = np.ones((2, 16), np.float32)
    out = np.full((50, 2, 16), 7.0, np.float32)
    before = (a.copy(), b.copy())
    work = _work(default_ctx)
    with pytest.raises(
        ag.ShapeError, match=r"^a: expected shape \(\.\.\., 16\), got \(50, 2, 15\)$"
    ):
        default_ctx.geometric_product(a, b, PGA, out=out)
    assert (out == 7.0).all()
    assert np.array_equal(a, before[0]) and np.array_equal(b, before[1])
    assert _work(default_ctx) == work


def test_a_device_array_of_the_wrong_width_is_refused_before_any_work(
    ctx3: ag.MultiGpuContext,
) -> None:
    x = ctx3.asarray(np.ones((6, 5, 4), np.float32))
    out = ctx3.asarray(np.full((6, 5, 8), 7.0, np.float32))
    work = _work(ctx3)
    with pytest.raises(ag.ShapeError, match=r"^x: expected shape \(\.\.\., 8\), got \(6, 5, 4\)$"):
        ctx3.reverse(x, out=out)
    assert _work(ctx3) == work
    assert (out.numpy() == 7.0).all()
    assert (x.numpy() == 1.0).all()


def test_a_numpy_batch_beside_a_gathered_multivector_is_checked_before_its_upload(
    ctx3: ag.MultiGpuContext,
) -> None:
    # The batch would be uploaded to run beside the gathered single DeviceArray: the core's
    # checks run first, so a refused call uploads nothing.
    single = ctx3.asarray(np.ones(8, np.float32))
    batch = np.ones((300, 7), np.float32)
    work = _work(ctx3)
    with pytest.raises(ag.ShapeError, match=r"^b: expected shape \(\.\.\., 8\), got \(300, 7\)$"):
        ctx3.geometric_product(single, batch)
    assert _work(ctx3) == work
    assert (batch == 1.0).all()


def test_a_device_array_whose_rows_are_not_its_shape_is_refused(
    ctx3: ag.MultiGpuContext,
) -> None:
    # Only a caller of ``_native`` can state a shape the rows do not make up.
    x = ctx3.asarray(np.ones((6, 8), np.float32))
    with pytest.raises(
        ag.ShapeError,
        match=r"^x: expected shape \(5, 8\) \(the DeviceArray's rows and row width\), "
        r"got 6 rows of 8$",
    ):
        _native.check_ga_apply("reverse", (3, 0, 0), [x._handle], 0, [(5, 8)])


def test_native_callers_without_shapes_are_checked_on_their_arrays(
    default_ctx: ag.MultiGpuContext,
) -> None:
    # 4 rows of 32 words are 128 words, 8 whole rows of Cl(4,0,0)'s 16: refused all the same.
    x = np.ones((4, 32), np.float32)
    with pytest.raises(ag.ShapeError, match=r"^x: expected shape \(\.\.\., 16\), got \(4, 32\)$"):
        _native.ga_apply(default_ctx._native, "reverse", (4, 0, 0), [x])
    with pytest.raises(ag.ShapeError, match=r"^x: expected shape \(\.\.\., 16\), got \(4, 32\)$"):
        _native.check_ga_apply("reverse", (4, 0, 0), [x])
    with pytest.raises(ag.InvalidArgumentError, match=r"^shapes: expected one shape per operand"):
        _native.check_ga_apply("reverse", (4, 0, 0), [x], 0, [])


def test_the_check_without_a_context_speaks_the_callers_shape() -> None:
    # A cluster's driver checks the whole call on the rows Python made of the caller's arrays.
    rows = np.ones((32, 1), np.float32)
    with pytest.raises(
        ag.ShapeError, match=r"^x: expected shape \(\.\.\., 16\), got \(2, 16, 1\)$"
    ):
        _native.check_ga_apply("reverse", (3, 0, 1), [rows], 0, [(2, 16, 1)])
