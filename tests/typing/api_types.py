"""Static checks of the public API's result types: mypy (``make lint``) checks this file; it
is never run. A DeviceArray operand gives a DeviceArray, unless a numpy ``out=`` receives
the gathered result."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

F32 = npt.NDArray[np.float32]


def results(ctx: ag.MultiGpuContext, x: F32, d: ag.DeviceArray) -> None:
    """Each call's declared result type."""
    assert_type(ctx.geometric_product(x, x), F32)
    assert_type(ctx.geometric_product(d, x), ag.DeviceArray)
    assert_type(ctx.geometric_product(x, d), ag.DeviceArray)
    assert_type(ctx.geometric_product(d, d, out=d), ag.DeviceArray)
    assert_type(ctx.geometric_product(d, d, out=x), F32)
    assert_type(ctx.sandwich(x, d), ag.DeviceArray)
    assert_type(ctx.scalar_product(d, d, out=x), F32)
    assert_type(ctx.reverse(x), F32)
    assert_type(ctx.reverse(d), ag.DeviceArray)
    assert_type(ctx.reverse(d, out=d), ag.DeviceArray)
    assert_type(ctx.reverse(d, out=x), F32)
    assert_type(ctx.normalize(d), ag.DeviceArray)
    assert_type(ctx.grade_projection(d, 2, out=x), F32)
    assert_type(ctx.dual(x), F32)


def information_results(ctx: ag.MultiGpuContext, x: F32, d: ag.DeviceArray) -> None:
    """The information-geometry maps: a DeviceArray operand gives a DeviceArray; the Fisher
    matrix is always a float64 numpy array."""
    assert_type(ctx.fisher_categorical(x), F32)
    assert_type(ctx.fisher_categorical(d), ag.DeviceArray)
    assert_type(ctx.fisher_categorical(logits=d), ag.DeviceArray)
    assert_type(ctx.fisher_categorical(d, out=x), F32)
    assert_type(ctx.fisher_gaussian(x, x), F32)
    assert_type(ctx.fisher_gaussian(x, d), ag.DeviceArray)
    assert_type(ctx.fisher_gaussian(d, x, out=d), ag.DeviceArray)
    assert_type(ctx.fisher_gaussian(d, d, out=x), F32)
    assert_type(ctx.fisher_information(d), npt.NDArray[np.float64])
