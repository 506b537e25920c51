"""Argument checks shared by the public API: clear errors before anything reaches a device.

Dtype rule: the kernels compute in float32. Arrays of any real numeric dtype (bool, integer,
floating) are converted to float32 in a new array; complex, object, string and other dtypes
raise ``TypeError``. Inputs are never modified.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import InvalidArgumentError


def shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def real_array(name: str, value: Any) -> np.ndarray[Any, Any]:
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(
            f"{name}: expected an array of real numbers (converted to float32), "
            f"got dtype {array.dtype}"
        )
    return array


def as_float32(name: str, value: Any) -> npt.NDArray[np.float32]:
    """``value`` as a C-contiguous float32 array (a copy unless it already is one)."""
    return np.ascontiguousarray(real_array(name, value), dtype=np.float32)


def positive_int(name: str, value: Any) -> int:
    """An integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidArgumentError(f"{name}: expected an integer >= 1, got {value!r}")
    return int(value)


def optional_positive_int(name: str, value: Any) -> int | None:
    """None or an integer >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidArgumentError(f"{name}: expected an integer >= 1 or None, got {value!r}")
    return int(value)


def name_list(name: str, value: Any, allowed: tuple[str, ...]) -> list[str] | None:
    """None, one name, or a sequence of names from ``allowed`` (case-insensitive)."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    result = []
    for item in items:
        if not isinstance(item, str) or item.lower() not in allowed:
            raise InvalidArgumentError(f"{name}: expected names from {list(allowed)}, got {item!r}")
        result.append(item.lower())
    if not result:
        raise InvalidArgumentError(
            f"{name}: expected at least one name from {list(allowed)}, got none"
        )
    return result


def index_list(name: str, value: Any) -> list[int] | None:
    """None or a sequence of non-negative adapter indices."""
    if value is None:
        return None
    items = [value] if isinstance(value, (int, np.integer)) else list(value)
    result = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)) or item < 0:
            raise InvalidArgumentError(
                f"{name}: expected adapter indices (integers >= 0), got {item!r}"
            )
        result.append(int(item))
    if not result:
        raise InvalidArgumentError(f"{name}: expected at least one adapter index, got none")
    return result
