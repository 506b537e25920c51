"""The dtype rule every entry point follows (``amari_gpu._dtypes``): numpy's promotion of
the operands' dtypes, integers and bools to float64, float16/32/64 kept, ``dtype=``
overriding, other dtypes refused naming the argument; and what devices say they run."""

from __future__ import annotations

import amari_gpu
import numpy as np
import pytest
from amari_gpu._dtypes import FLOAT16, FLOAT32, FLOAT64, result_dtype
from amari_gpu.errors import InvalidArgumentError
from hypothesis import given
from hypothesis import strategies as st

GA = (FLOAT32, FLOAT64)
ALL = (FLOAT16, FLOAT32, FLOAT64)
REAL = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64]
FLOATS = [np.float16, np.float32, np.float64]


@given(st.sampled_from(REAL + FLOATS), st.sampled_from(REAL + FLOATS))
def test_promotion_is_numpys_with_integers_to_float64(left: type, right: type) -> None:
    a, b = np.zeros(3, dtype=left), np.zeros(3, dtype=right)
    want = np.result_type(a, b)
    if want.kind in "biu":
        want = FLOAT64
    assert result_dtype([("a", a), ("b", b)], kernels=ALL) == want
    # A family without float16 kernels computes what would be float16 in float32.
    assert result_dtype([("a", a), ("b", b)], kernels=GA) == (FLOAT32 if want == FLOAT16 else want)
    # A family with float32 kernels only computes in float32, as every call did before.
    assert result_dtype([("a", a), ("b", b)]) == FLOAT32


@given(st.sampled_from(FLOATS), st.sampled_from([1, 2.5, True]))
def test_python_scalars_do_not_promote(kind: type, scalar: object) -> None:
    array = np.ones(4, dtype=kind)
    assert result_dtype([("a", array), ("s", scalar)], kernels=ALL) == np.dtype(kind)


def test_float32_and_float64_give_float64_and_lists_are_float64() -> None:
    x32, x64 = np.ones(8, np.float32), np.ones(8, np.float64)
    assert result_dtype([("a", x32), ("b", x64)], kernels=GA) == FLOAT64
    assert result_dtype([("a", [1.0] * 8), ("b", x32)], kernels=GA) == FLOAT64
    assert result_dtype([("a", np.arange(8)), ("b", np.arange(8))], kernels=GA) == FLOAT64


@given(st.sampled_from(REAL + FLOATS), st.sampled_from(GA))
def test_dtype_overrides(kind: type, want: np.dtype) -> None:
    assert result_dtype([("x", np.zeros(2, kind))], dtype=want, kernels=GA) == want
    assert result_dtype([("x", np.zeros(2, kind))], dtype=str(want), kernels=GA) == want


def test_a_dtype_without_kernels_or_not_a_float_is_refused() -> None:
    x = np.ones(8, np.float64)
    with pytest.raises(
        InvalidArgumentError,
        match=r"^dtype: this operation computes in "
        r"float32, float64, got float16$",
    ):
        result_dtype([("x", x)], dtype=np.float16, kernels=GA)
    with pytest.raises(
        TypeError,
        match=r"^dtype: expected float16, float32, float64 or "
        r"None, got int32$",
    ):
        result_dtype([("x", x)], dtype=np.int32, kernels=GA)
    with pytest.raises(TypeError, match=r"^dtype: expected .* got 'nonsense'$"):
        result_dtype([("x", x)], dtype="nonsense", kernels=GA)


# longdouble is refused where it is wider than float64 (where it is float64, it is float64).
OTHER = [np.complex64, np.complex128, object, "U3"] + (
    [np.longdouble] if np.dtype(np.longdouble).itemsize > 8 else []
)


@pytest.mark.parametrize("kind", OTHER)
def test_other_dtypes_are_refused_naming_the_argument(kind: object) -> None:
    bad = np.zeros(8, dtype=kind)
    with pytest.raises(
        TypeError,
        match=rf"^b: expected an array of bool, integer, float16, "
        rf"float32 or float64 values, got dtype {bad.dtype}$",
    ):
        result_dtype([("a", np.ones(8)), ("b", bad)], kernels=GA)


def test_devices_list_the_dtypes_they_run() -> None:
    ctx = amari_gpu.MultiGpuContext(backends=["vulkan", "gl", "host"])
    try:
        by_backend = {d.adapter.backend: d.dtypes for d in ctx.devices}
        assert by_backend == {
            "vulkan": ("float16", "float32", "float64"),
            "gl": ("float32",),
            "host": ("float16", "float32", "float64"),
        }
    finally:
        ctx.close()
