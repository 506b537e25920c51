"""Blades by name, and the rows the kernels take built from names: what the blade methods
of :class:`amari_gpu.Algebra` do.

A name is ``"e"`` followed by basis-vector digits, each vector at most once and in any
order: the order is that of the product, so a name that is not ascending carries the sign
of the permutation that sorts it (``e21 = e2 e1 = -e12``). ``"1"`` (``blade_names``' own)
and ``"e"`` (kingdon's) name the scalar. With exactly one null vector (r = 1, as in PGA)
``e0`` names it too: kingdon and the PGA literature put the null vector first and call it
e0, this package puts it last (e4 of Cl(3,0,1)), and the alias lets their names be written
as they are. A repeated vector (``e11``) is refused rather than reduced by the metric: a
name stands for one blade, and ``e1 e1`` is a product (the scalar e1²), which the kernels
compute.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ._validate import real_array, shape_text
from .array import DeviceArray
from .errors import InvalidArgumentError, ShapeError

if TYPE_CHECKING:
    from .algebra import Algebra

SCALAR_NAMES = ("1", "e")
"""Names of the scalar blade: ``blade_names``' own and kingdon's."""


def _known(alg: Algebra) -> str:
    """What the names of ``alg`` are, for an error message."""
    n = alg.dimension
    vectors = ", ".join(f"e{v}" for v in range(1, n + 1))
    alias = f" (e0 is e{n}, the null vector)" if alg.r == 1 else ""
    listed = ", ".join(alg.blade_names)
    if alg.n_blades > 16:
        listed = ", ".join(alg.blade_names[:8]) + f", ... ({alg.n_blades} in all)"
    return (
        f"its basis vectors are {vectors}{alias}; a blade names each at most once, in any "
        f"order: {listed}"
    )


def parse(alg: Algebra, what: str, name: Any) -> tuple[int, int]:
    """``(index, sign)`` of blade ``name`` of ``alg``; errors name the argument ``what``."""
    if not isinstance(name, str):
        raise InvalidArgumentError(
            f"{what}: expected a blade name such as 'e12', got {type(name).__name__} {name!r}"
        )
    if name in SCALAR_NAMES:
        return 0, 1
    n = alg.dimension
    digits = name[1:]
    if not (name.startswith("e") and digits.isdigit() and digits.isascii()):
        raise InvalidArgumentError(
            f"{what}: {name!r} is not a blade name of {alg}: expected '1' or 'e' followed "
            f"by basis-vector digits; {_known(alg)}"
        )
    vectors = []
    for digit in digits:
        v = int(digit)
        if v == 0 and alg.r == 1:
            v = n
        if not 1 <= v <= n:
            raise InvalidArgumentError(f"{what}: no blade {name!r} in {alg}: {_known(alg)}")
        if v in vectors:
            alias = f" (e0 is e{n} in this algebra)" if alg.r == 1 else ""
            raise InvalidArgumentError(
                f"{what}: {name!r} names e{v} twice{alias}: a blade names each basis vector "
                f"once (a repeated vector is a product, e{v} e{v} = {alg.metric[v - 1]} here: "
                "write the blade without it, or compute the product)"
            )
        vectors.append(v)
    inversions = sum(1 for i, a in enumerate(vectors) for b in vectors[i + 1 :] if a > b)
    index = sum(1 << (v - 1) for v in vectors)
    return index, -1 if inversions % 2 else 1


def one_hot(alg: Algebra, what: str, name: Any) -> npt.NDArray[np.float32]:
    index, sign = parse(alg, what, name)
    row = np.zeros(alg.n_blades, dtype=np.float32)
    row[index] = sign
    return row


class BladeMap(Mapping[str, npt.NDArray[np.float32]]):
    """The blades of an algebra by name (``Algebra.blades``): iterates ``blade_names``;
    looks up any name ``Algebra.blade`` takes, giving a new row each time (so changing
    one changes nothing else)."""

    def __init__(self, alg: Algebra) -> None:
        self._alg = alg

    def __getitem__(self, name: str) -> npt.NDArray[np.float32]:
        try:
            return one_hot(self._alg, "blades", name)
        except InvalidArgumentError as error:
            # A mapping's missing key is a KeyError (``get`` and ``in`` rely on it); the
            # message is the same.
            raise KeyError(str(error)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._alg.blade_names)

    def __len__(self) -> int:
        return self._alg.n_blades

    def __repr__(self) -> str:
        return f"<blades of {self._alg}: {', '.join(self._alg.blade_names)}>"


def _coefficient(what: str, value: Any) -> np.ndarray[Any, Any]:
    if isinstance(value, DeviceArray):
        # Converting it would gather its rows without a word.
        raise TypeError(
            f"{what}: expected numbers or a numpy array, got a DeviceArray (gather it with "
            "numpy.asarray first)"
        )
    return real_array(what, value)


def from_names(
    alg: Algebra,
    components: Mapping[str, Any] | None,
    named: Mapping[str, Any],
    argument: str | None = None,
) -> npt.NDArray[np.float32]:
    """Rows of ``alg`` from coefficients by name (``components`` then ``named``), broadcast
    against each other; errors name the blade (or ``argument`` when the caller's argument
    is not a name)."""
    if components is not None and not isinstance(components, Mapping):
        raise InvalidArgumentError(
            "components: expected a mapping of blade names to coefficients, got "
            f"{type(components).__name__}"
        )
    # Each coefficient with the argument its errors name: the mapping, or the keyword.
    given = [
        *(("components", name, value) for name, value in (components or {}).items()),
        *((name, name, value) for name, value in named.items()),
    ]
    columns: dict[int, tuple[str, int, np.ndarray[Any, Any]]] = {}
    for source, name, value in given:
        index, sign = parse(alg, argument or source, name)
        what = argument or name
        if index in columns:
            raise InvalidArgumentError(
                f"{what}: blade {alg.blade_names[index]} is named twice ({columns[index][0]!r} "
                f"and {name!r}); give each blade one coefficient"
            )
        columns[index] = (what, sign, _coefficient(what, value))
    try:
        lead = np.broadcast_shapes(*(array.shape for _, _, array in columns.values()))
    except ValueError:
        shapes = ", ".join(f"{w} {shape_text(a.shape)}" for w, _, a in columns.values())
        raise ShapeError(
            f"components: expected coefficient shapes that broadcast together, got {shapes}"
        ) from None
    rows = np.zeros((*lead, alg.n_blades), dtype=np.float32)
    for index, (_, sign, array) in columns.items():
        # Converted to float32 before the sign, so that -x is the float32 negation of x.
        rows[..., index] = array.astype(np.float32) * np.float32(sign)
    return rows


def from_vector(alg: Algebra, coords: Any) -> npt.NDArray[np.float32]:
    array = _coefficient("coords", coords)
    n = alg.dimension
    if array.ndim == 0 or array.shape[-1] != n:
        raise ShapeError(
            f"coords: expected shape (..., {n}) (a coefficient for each of e1..e{n} of "
            f"{alg}), got {shape_text(array.shape)}"
        )
    rows = np.zeros((*array.shape[:-1], alg.n_blades), dtype=np.float32)
    rows[..., [1 << v for v in range(n)]] = array
    return rows


def component(alg: Algebra, rows: Any, name: Any) -> np.ndarray[Any, Any]:
    array = _coefficient("rows", rows)
    if array.ndim == 0 or array.shape[-1] != alg.n_blades:
        raise ShapeError(
            f"rows: expected shape (..., {alg.n_blades}) (multivectors of {alg}), got "
            f"{shape_text(array.shape)}"
        )
    dtype = np.dtype(np.float64 if array.dtype == np.float64 else np.float32)
    if isinstance(name, str):
        index, sign = parse(alg, "name", name)
        values = np.array(array[..., index], dtype=dtype)
        values *= sign
        return values
    if not isinstance(name, (list, tuple)):
        raise InvalidArgumentError(
            f"name: expected a blade name or a list of them, got {type(name).__name__}"
        )
    found = [parse(alg, "name", item) for item in name]
    values = np.array(array[..., [index for index, _ in found]], dtype=dtype)
    values *= np.array([sign for _, sign in found], dtype=dtype)
    return values
