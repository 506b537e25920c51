"""The dtype of a call's result, as numpy would give it: the one rule every entry point
follows once its family has kernels in more than float32.

- The result dtype is numpy's promotion of the operands' dtypes (``np.result_type``): a
  DeviceArray contributes its ``dtype``, an array or array-like its own, and a Python scalar
  (``int``, ``float``, ``bool``) nothing, as in numpy 2.
- bool and integer dtypes compute in float64 (as numpy's true division would);
  float16, float32 and float64 are kept.
- complex, object, string, ``longdouble`` and every other dtype raise ``TypeError`` naming
  the argument, its dtype and the accepted ones.
- ``dtype=`` overrides the promotion (e.g. ``dtype=np.float32`` to compute a float64 input in
  float32 on purpose).
- A family computes only in the dtypes it has kernels for (``kernels``): a promoted dtype it
  has none for computes in float32, as every call did before dtypes were kept; a ``dtype=``
  it has none for is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import InvalidArgumentError

FLOAT16 = np.dtype(np.float16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)

KEPT: tuple[np.dtype[Any], ...] = (FLOAT16, FLOAT32, FLOAT64)
"""The dtypes a result may have."""

_ACCEPTED = "bool, integer, float16, float32 or float64"


def _operand_dtype(name: str, value: Any) -> np.dtype[Any] | None:
    """The dtype ``value`` contributes to the promotion (None for a Python scalar), after
    checking it is one a kernel can compute from."""
    if isinstance(value, (bool, int, float)):
        return None
    dtype = getattr(value, "dtype", None)
    if not isinstance(dtype, np.dtype):
        try:
            dtype = np.asarray(value).dtype
        except Exception:
            # numpy's own conversion error (ragged lists...) is raised where the operand
            # is converted; here it contributes nothing.
            return None
    if dtype.kind in "biu" or dtype in KEPT:
        return dtype
    raise TypeError(f"{name}: expected an array of {_ACCEPTED} values, got dtype {dtype}")


def requested(dtype: Any) -> np.dtype[Any] | None:
    """``dtype=`` as a numpy dtype (None when not given), one of float16/32/64."""
    if dtype is None:
        return None
    try:
        want: np.dtype[Any] = np.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"dtype: expected float16, float32, float64 or None, got {dtype!r}"
        ) from None
    if want not in KEPT:
        raise TypeError(f"dtype: expected float16, float32, float64 or None, got {want}")
    return want


def result_dtype(
    named: Sequence[tuple[str, Any]],
    dtype: Any = None,
    kernels: Sequence[np.dtype[Any]] = (FLOAT32,),
) -> np.dtype[Any]:
    """The dtype a call on operands ``named`` (``(argument name, value)`` pairs) computes in
    and returns, ``dtype=`` being the caller's override and ``kernels`` the dtypes the
    family has kernels for (see the module's rule)."""
    found = [_operand_dtype(name, value) for name, value in named]
    want = requested(dtype)
    if want is not None:
        if want not in kernels:
            names = ", ".join(str(k) for k in kernels)
            raise InvalidArgumentError(f"dtype: this operation computes in {names}, got {want}")
        return want
    dtypes = [d for d in found if d is not None]
    # Python scalars alone promote as numpy 2 gives them: float64. One operand's dtype is
    # its own (numpy's promotion is not asked: a call's first after idle pays for every
    # line of code it runs).
    if len(dtypes) == 1:
        promoted = dtypes[0]
    else:
        promoted = np.result_type(*dtypes) if dtypes else FLOAT64
    if promoted.kind in "biu":
        promoted = FLOAT64
    return promoted if promoted in kernels else FLOAT32


def resident_dtype(
    named: Sequence[tuple[str, Any]],
    dtype: Any,
    kernels: Sequence[np.dtype[Any]],
    what: str,
    resident: type[Any],
) -> np.dtype[Any]:
    """:func:`result_dtype` of a call with DeviceArray operands (instances of ``resident``),
    which count with their dtype and must hold the dtype ``what`` computes in: DeviceArrays
    are not converted on the devices, so one of another dtype is refused, naming it."""
    kept = result_dtype(named, dtype, kernels)
    for name, value in named:
        held = getattr(value, "dtype", None) if isinstance(value, resident) else kept
        if held != kept:
            raise InvalidArgumentError(
                f"{name}: expected a DeviceArray of {kept} (the dtype {what} computes in "
                f"here), got one of {held}; DeviceArrays are not converted on the "
                f"devices: gather it (np.asarray) and ctx.asarray(..., dtype=numpy.{kept}) it"
            )
    return kept
