"""The kernel families of the scaling study: inputs for a problem size, the GPU call, a check
of its result, and the CPU baselines a user would otherwise reach for (numpy for every
family, ``clifford`` for geometric algebra when it is installed).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from ..context import MultiGpuContext
from ..reference import cayley_tensor
from ..reference import geometric_product as reference_product

Arrays = tuple[npt.NDArray[Any], ...]
F32 = npt.NDArray[np.float32]

# clifford multiplies one MultiVector object at a time (about 0.25 M products/s here); above
# this many rows one call takes seconds, so its column stops there and the report says so.
CLIFFORD_MAX_ITEMS = 100_000
FISHER_PARAMS = 64


@dataclass(frozen=True)
class Baseline:
    """A CPU implementation: ``prepare`` (untimed, e.g. converting to the library's own
    types) turns the inputs into the argument of the timed ``run``."""

    name: str
    library: str
    run: Callable[[Any], Any]
    prepare: Callable[[Arrays], Any] = lambda inputs: inputs
    to_array: Callable[[Any], npt.NDArray[Any]] = np.asarray


@dataclass(frozen=True)
class Family:
    """One kernel family of the study."""

    name: str
    kernel: str
    describe: Callable[[int], str]
    inputs: Callable[[int], Arrays]
    gpu: Callable[[MultiGpuContext, Arrays, str | None], npt.NDArray[Any]]
    reference: Callable[[Arrays], npt.NDArray[Any]]
    """The float64 (or exact) result, computed once per problem size."""
    error: Callable[[npt.NDArray[Any], npt.NDArray[Any]], float]
    """Error of a result (second) against the reference (first); 0.0 is exact."""
    tolerance: float
    baselines: tuple[Baseline, ...]
    strategies: bool = True
    """Whether split strategies apply (grids are split into bands by their own rule)."""


def _rng(size: int) -> np.random.Generator:
    return np.random.default_rng(size)


# --- geometric algebra ------------------------------------------------------------------------


def _ga_inputs(n: int) -> Arrays:
    rng = _rng(n)
    return (
        rng.standard_normal((n, 8), dtype=np.float32),
        rng.standard_normal((n, 8), dtype=np.float32),
    )


def _ga_reference(inputs: Arrays) -> npt.NDArray[np.float64]:
    return np.asarray(reference_product(inputs[0], inputs[1]), dtype=np.float64)


def _ga_error(want: npt.NDArray[Any], out: npt.NDArray[Any]) -> float:
    scale = np.maximum(np.abs(want).max(axis=1, keepdims=True), 1e-3)
    return float((np.abs(out - want) / scale).max())


_CAYLEY32 = cayley_tensor(3).astype(np.float32)
_GA_BLOCK = 16_384


def _ga_numpy(inputs: Arrays) -> F32:
    """Two einsum steps (a with the table, then with b), 7x faster than one three-operand
    einsum here, in blocks of rows: the (rows, 8, 8) intermediate then stays in cache
    instead of a fresh 256 MiB allocation per million rows, whose page faults and memory
    traffic made the time swing 3x on a busy machine. The fairest numpy a user would write."""
    a, b = inputs
    out = np.empty((len(a), 8), dtype=np.float32)
    for start in range(0, len(a), _GA_BLOCK):
        rows = slice(start, start + _GA_BLOCK)
        partial = np.einsum("ni,ijk->njk", a[rows], _CAYLEY32)
        np.einsum("nj,njk->nk", b[rows], partial, out=out[rows])
    return out


# For output blade k, the input pairs (i, i ^ k) and their signs: the 64 non-zero terms of
# the Cl(3,0) table, 8 per output blade.
_GA_PARTNER = np.array([[i ^ k for i in range(8)] for k in range(8)])
_GA_SIGN = np.array(
    [[_CAYLEY32[i, i ^ k, k] for i in range(8)] for k in range(8)], dtype=np.float32
)[:, :, None]


def _ga_numpy_terms(inputs: Arrays) -> F32:
    """Only the 64 non-zero multiply-adds of the table (einsum also multiplies the 448
    zeros), on column-major blocks so each product is a contiguous vector operation: the
    fastest numpy a user who knows the algebra would write."""
    a, b = inputs
    out = np.empty((len(a), 8), dtype=np.float32)
    for start in range(0, len(a), _GA_BLOCK):
        rows = slice(start, start + _GA_BLOCK)
        at = np.ascontiguousarray(a[rows].T)
        bt = np.ascontiguousarray(b[rows].T)
        cols = np.empty_like(at)
        for k in range(8):
            np.sum(_GA_SIGN[k] * at * bt[_GA_PARTNER[k]], axis=0, out=cols[k])
        out[rows] = cols.T
    return out


def _clifford() -> Any:
    # Imported only when its column is measured: it is optional and slow to import (numba).
    return importlib.import_module("clifford")


@cache
def _clifford_layout() -> Any:
    layout, _ = _clifford().Cl(3)
    return layout


@cache
def _clifford_order() -> npt.NDArray[np.intp]:
    """Column c of clifford's blade order (by grade) is bitmask blade ``order[c]``."""
    from ..algebra import Algebra

    ours = list(Algebra(3).blade_names)
    return np.array([ours.index(name or "1") for name in _clifford_layout().names])


def _clifford_prepare(inputs: Arrays) -> tuple[Any, Any]:
    clifford = _clifford()
    layout, order = _clifford_layout(), _clifford_order()
    a, b = (np.asarray(x, dtype=np.float64)[:, order] for x in inputs)
    return (
        clifford.MVArray([layout.MultiVector(value=row) for row in a]),
        clifford.MVArray([layout.MultiVector(value=row) for row in b]),
    )


def _clifford_to_array(product: Any) -> npt.NDArray[np.float64]:
    values = np.array([mv.value for mv in product])
    out = np.empty_like(values)
    out[:, _clifford_order()] = values
    return out


def clifford_available() -> bool:
    """Whether the optional ``clifford`` package can be imported."""
    return importlib.util.find_spec("clifford") is not None


def _ga_baselines() -> tuple[Baseline, ...]:
    numpy = (
        Baseline("numpy einsum (float32, Cayley table, blocked)", "numpy", _ga_numpy),
        Baseline("numpy non-zero terms only (float32, blocked)", "numpy", _ga_numpy_terms),
    )
    if not clifford_available():
        return numpy
    # MVArray * MVArray: clifford's own batch of multivectors, multiplied element-wise.
    clifford = Baseline(
        "clifford MVArray product (float64)",
        "clifford",
        lambda ab: ab[0] * ab[1],
        prepare=_clifford_prepare,
        to_array=_clifford_to_array,
    )
    return (*numpy, clifford)


# --- tropical ---------------------------------------------------------------------------------


def _tropical_inputs(n: int) -> Arrays:
    # Integers in float32: every max-plus sum is exact, so results compare with ==.
    rng = _rng(n)
    return (
        rng.integers(-1000, 1000, (n, n)).astype(np.float32),
        rng.integers(-1000, 1000, (n, n)).astype(np.float32),
    )


def numpy_max_plus(inputs: Arrays) -> F32:
    """Max-plus product by broadcasting, in row blocks of at most 32 MiB of temporaries."""
    a, b = inputs
    m, k = a.shape
    rows = max(1, (32 << 20) // (4 * k * b.shape[1]))
    out = np.empty((m, b.shape[1]), dtype=np.float32)
    for start in range(0, m, rows):
        out[start : start + rows] = (a[start : start + rows, :, None] + b[None]).max(axis=1)
    return out


def _exact_error(want: npt.NDArray[Any], out: npt.NDArray[Any]) -> float:
    return 0.0 if np.array_equal(out, want) else float("inf")


# --- information geometry ---------------------------------------------------------------------


def _fisher_inputs(n: int) -> Arrays:
    return (_rng(n).standard_normal((n, FISHER_PARAMS), dtype=np.float32),)


def _fisher64(inputs: Arrays) -> npt.NDArray[np.float64]:
    s = inputs[0].astype(np.float64)
    return np.asarray(s.T @ s / len(s), dtype=np.float64)


def _fisher32(inputs: Arrays) -> F32:
    s = inputs[0]
    return np.asarray(s.T @ s / np.float32(len(s)), dtype=np.float32)


def _fisher_error(want: npt.NDArray[Any], out: npt.NDArray[Any]) -> float:
    return float(np.abs(out - want).max() / np.abs(want).max())


# --- grids (domain decomposition) -------------------------------------------------------------

GRID_STEPS = 16
GRID_ALPHA = 0.2


def _grid_inputs(n: int) -> Arrays:
    return (_rng(n).random((n, n), dtype=np.float32),)


def _heat_numpy(inputs: Arrays, dtype: type[np.floating[Any]] = np.float32) -> npt.NDArray[Any]:
    """Periodic heat steps with np.roll, as a numpy user would write them."""
    u: npt.NDArray[Any] = inputs[0].astype(dtype)
    alpha = dtype(GRID_ALPHA)
    for _ in range(GRID_STEPS):
        s = np.roll(u, 1, 0) + np.roll(u, -1, 0) + np.roll(u, 1, 1) + np.roll(u, -1, 1)
        u = u + alpha * (s - dtype(4.0) * u)
    return u


def _heat_reference(inputs: Arrays) -> npt.NDArray[Any]:
    return _heat_numpy(inputs, np.float64)


def _absolute_error(want: npt.NDArray[Any], out: npt.NDArray[Any]) -> float:
    return float(np.abs(out - want).max())


def families() -> dict[str, Family]:
    """The families of the study, by name."""
    return {
        "geometric_algebra": Family(
            "geometric_algebra",
            "geometric_product",
            lambda n: f"Cl(3,0) geometric product, N = {n:,}",
            _ga_inputs,
            lambda ctx, x, s: ctx.geometric_product(x[0], x[1], strategy=s),
            _ga_reference,
            _ga_error,
            1e-5,
            _ga_baselines(),
        ),
        "tropical": Family(
            "tropical",
            "tropical_matmul",
            lambda n: f"max-plus matrix product, {n}x{n} @ {n}x{n}",
            _tropical_inputs,
            lambda ctx, x, s: ctx.tropical_matmul(x[0], x[1], strategy=s),
            numpy_max_plus,
            _exact_error,
            0.0,
            (Baseline("numpy max-plus (float32, broadcast in blocks)", "numpy", numpy_max_plus),),
        ),
        "information_geometry": Family(
            "information_geometry",
            "fisher_information",
            lambda n: f"empirical Fisher matrix, N = {n:,} samples x P = {FISHER_PARAMS}",
            _fisher_inputs,
            lambda ctx, x, s: ctx.fisher_information(x[0], strategy=s),
            _fisher64,
            _fisher_error,
            1e-4,
            (
                Baseline("numpy X.T @ X (float64)", "numpy", _fisher64),
                Baseline("numpy X.T @ X (float32)", "numpy", _fisher32),
            ),
        ),
        "grids": Family(
            "grids",
            "stencil",
            lambda n: f"heat equation, {n}x{n} periodic grid, {GRID_STEPS} steps, halo 4",
            _grid_inputs,
            lambda ctx, x, s: ctx.stencil(x[0], GRID_STEPS, GRID_ALPHA, "periodic", halo=4),
            _heat_reference,
            _absolute_error,
            1e-5,
            (Baseline("numpy np.roll steps (float32)", "numpy", _heat_numpy),),
            strategies=False,
        ),
    }
