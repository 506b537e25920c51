"""The kernels of the roofline (``bench_roofline``): one case per kernel, with what it runs
and the bytes its WGSL kernel moves in global memory as written (docs/roofline.md says how
each figure is read from its shader). The cases cover every kernel entry point of the
registry (``_surface.NATIVE``, ``@kernel``) and ``map_rows``; ``tests/test_roofline.py``
checks it, so a new entry point cannot be left out."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algebra import Algebra
from ..context import MultiGpuContext

if TYPE_CHECKING:  # the stub's record types exist for type checkers only
    from .._native import KernelCallDict

    Calls = list[KernelCallDict]


@dataclass(frozen=True)
class Case:
    """One kernel run: the registry entry point it goes through, a name, what it runs (built
    once per device: returns the call to time) and the bytes the WGSL kernel moves in global
    memory as written, from the profiled calls and the problem (``None``: the calls'
    per-item inputs and outputs, what a map kernel reads and writes). ``wgsl_only``: a
    user's WGSL kernel, which the host device does not run (its row says so)."""

    entry: str
    name: str
    make: Callable[[MultiGpuContext, bool], Callable[[], Any]]
    global_bytes: Callable[[Calls, bool], float] | None = None
    wgsl_only: bool = False


def least_bytes(calls: Calls) -> float:
    return float(sum(c["items"] * c["bytes_per_item"] for c in calls))


def _rng() -> np.random.Generator:
    return np.random.default_rng(27)


def _rows(quick: bool, full: int, small: int) -> int:
    return small if quick else full


def map_entries(algebra: Algebra, blades: list[int] | None = None) -> int:
    """The entries of a one-rotor sandwich's map ``M`` (``ga::sandwich_map``) that some rotor
    makes non-zero, on the rows and columns of ``blades`` (every blade by default): the
    words of ``M`` each item of the map kernel loads, as written (the cost model's
    ``flops_per_item`` is twice this). Counted on a generic multivector (every blade
    non-zero) in float64, from the Cayley table."""
    from ..reference import cayley_tensor

    t = cayley_tensor(algebra.p, algebra.q, algebra.r)
    n = algebra.n_blades
    grades = np.array([bin(k).count("1") for k in range(n)])
    r = np.random.default_rng(5).uniform(1, 2, n)
    reverse = np.where((grades * (grades - 1) // 2) % 2 == 0, 1.0, -1.0)
    left = np.einsum("a,abk->bk", r, t)  # row b: r e_b
    m = np.einsum("bk,kcj,c->jb", left, t, r * reverse)  # M[j][b]: (r e_b r̃)_j
    chosen = list(range(n)) if blades is None else blades
    return int(np.count_nonzero(np.abs(m[np.ix_(chosen, chosen)]) > 1e-9))


def _ga(op: str, algebra: Algebra | None, broadcast: bool = False) -> Case:
    """A GA binary product over rows; ``broadcast``: one (2ⁿ,) left operand for every row. A
    sandwich by one rotor runs as its linear map: ``M``'s possible non-zero entries bound
    whole and loaded by every item (:func:`map_entries` words more per item as written)."""
    blades = 8 if algebra is None else algebra.n_blades
    extra = 0
    if broadcast:
        extra = 4 * (map_entries(algebra or Algebra(3)) if op == "sandwich" else blades)

    def make(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
        n = _rows(quick, 1 << 18, 1 << 10)
        rng = _rng()
        a = rng.standard_normal((blades,) if broadcast else (n, blades), dtype=np.float32)
        b = rng.standard_normal((n, blades), dtype=np.float32)
        out = np.empty((n, blades), dtype=np.float32)
        method = getattr(ctx, op)
        return lambda: method(a, b, algebra, out=out)

    def global_bytes(calls: Calls, quick: bool) -> float:
        return float(sum(c["items"] * (c["bytes_per_item"] + extra) for c in calls))

    name = f"{op} {algebra or 'Cl(3,0,0)'}{' one rotor' if broadcast else ''}"
    return Case("ga_apply", name, make, global_bytes)


PGA_POINTS = [k for k in range(16) if bin(k).count("1") == 3]
"""The blades of a PGA point (grade 3 in Cl(3,0,1))."""


def _pga_motor() -> np.ndarray:
    """A normalised PGA motor (even grades), which maps points to points."""
    r = np.zeros(16, dtype=np.float32)
    r[[0, 3, 5, 6, 9, 10, 12, 15]] = _rng().standard_normal(8)
    r /= np.float32(np.sqrt(np.sum(r[[0, 3, 5, 6]] ** 2)))
    return r


def _sandwich_blades(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _rows(quick, 1 << 18, 1 << 10)
    x = _rng().standard_normal((n, 4), dtype=np.float32)
    out = np.empty_like(x)
    r, pga = _pga_motor(), Algebra(3, 0, 1)
    return lambda: ctx.sandwich(r, x, pga, blades=PGA_POINTS, out=out)


def _sandwich_blades_bytes(calls: Calls, quick: bool) -> float:
    """The map kernel on rows of the 4 point blades: the row in and out (32 B) and the
    entries of the points' 4 x 4 block of ``M`` some rotor makes non-zero (4 B each)."""
    extra = 4 * map_entries(Algebra(3, 0, 1), PGA_POINTS)
    return float(sum(c["items"] * (c["bytes_per_item"] + extra) for c in calls))


def _normalize(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _rows(quick, 1 << 18, 1 << 10)
    x = _rng().standard_normal((n, 8), dtype=np.float32)
    out = np.empty_like(x)
    return lambda: ctx.normalize(x, out=out)


def _matmul_shape(quick: bool) -> tuple[int, int, int]:
    return (64, 48, 64) if quick else (512, 512, 512)


def _matmul(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    m, k, n = _matmul_shape(quick)
    rng = _rng()
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    out = np.empty((m, n), dtype=np.float32)
    return lambda: ctx.tropical_matmul(a, b, out=out)


def _tiled_bytes(calls: Calls, quick: bool) -> float:
    """matmul_tiled: each 64 x 64 output tile stages its 64 rows of A and 64 columns of B
    over all of K (64 K words each) and stores its tile; per item (64 rows) that is
    ceil(n / 64) tiles."""
    _, k, n = _matmul_shape(quick)
    tiles = math.ceil(n / 64)
    items = sum(c["items"] for c in calls)
    return 4.0 * items * (tiles * 2 * 64 * k + 64 * n + 1)


def _matmul_rows(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    m, k, n = _matmul_shape(quick)
    rng = _rng()
    a = ctx.asarray(rng.standard_normal((m, k), dtype=np.float32))
    b = rng.standard_normal((k, n), dtype=np.float32)
    return lambda: ctx.tropical_matmul(a, b)


def _rows_bytes(calls: Calls, quick: bool) -> float:
    """matmul_rows: the tiled kernel's tiles over rows of any batch (a resident `a`): the
    same traffic per 64 rows as matmul_tiled, counted per row. The call's other steps (the
    rows' statistics, the result's gather) move their per-item inputs and outputs."""
    _, k, n = _matmul_shape(quick)
    tiles = math.ceil(n / 64)
    product = [c for c in calls if c["kernel"].endswith("matmul_rows")]
    rest = [c for c in calls if c not in product]
    rows = sum(c["items"] for c in product)
    return 4.0 * rows * (tiles * 2 * k + n + 1) + least_bytes(rest)


def _matvec_shape(quick: bool) -> tuple[int, int]:
    return (256, 256) if quick else (4096, 4096)


def _matvec(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    m, k = _matvec_shape(quick)
    rng = _rng()
    a = rng.standard_normal((m, k), dtype=np.float32)
    x = rng.standard_normal(k, dtype=np.float32)
    out = np.empty(m, dtype=np.float32)
    return lambda: ctx.tropical_matvec(a, x, out=out)


def _matvec_bytes(calls: Calls, quick: bool) -> float:
    """matvec: one workgroup per row reads the row and the whole vector (k words each)."""
    _, k = _matvec_shape(quick)
    rows = sum(c["items"] for c in calls)
    return 4.0 * rows * (2 * k + 2)


def _paths_n(quick: bool) -> int:
    return 96 if quick else 512


def _paths(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _paths_n(quick)
    w = _rng().uniform(1.0, 10.0, (n, n)).astype(np.float32)
    np.fill_diagonal(w, 0.0)
    return lambda: ctx.shortest_paths(w)


def _fisher_shape(quick: bool) -> tuple[int, int]:
    return (2048, 96) if quick else (65536, 256)


def _fisher(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    g = _rng().standard_normal(_fisher_shape(quick), dtype=np.float32)
    return lambda: ctx.fisher_information(g)


def _fisher_narrow(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = 2048 if quick else 65536
    g = _rng().standard_normal((n, 48), dtype=np.float32)
    return lambda: ctx.fisher_information(g)


def _syrk_bytes(p: int, calls: Calls) -> float:
    """fisher_tiled (P > 64): each tile pair ti <= tj reads its two 64-column strips of
    every row and the row's weight; fisher_rows (P <= 64): each 8 x 8 block pair its two
    8-column strips and the weight. Partials (one tile set per chunk) are left out."""
    width = 4 * math.ceil(p / 4)
    tile = 64 if p > 64 else 8
    blocks = math.ceil(width / tile)
    pairs = blocks * (blocks + 1) // 2
    rows = sum(c["items"] for c in calls if c["kernel"].startswith("information_geometry/"))
    return 4.0 * rows * pairs * (2 * tile + 1)


def _categorical(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _rows(quick, 1 << 15, 1 << 9)
    p = _rng().dirichlet(np.ones(16), size=n).astype(np.float32)
    return lambda: ctx.fisher_categorical(p)


def _categorical_bytes(calls: Calls, quick: bool) -> float:
    """categorical_outer: one thread per output entry loads p_r and p_c and stores the entry,
    3 K² words an item (K = 16)."""
    return 4.0 * 3 * 16 * 16 * sum(c["items"] for c in calls)


def _gaussian(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _rows(quick, 1 << 15, 1 << 9)
    rng = _rng()
    mean = rng.standard_normal((n, 8), dtype=np.float32)
    var = rng.uniform(0.5, 2.0, (n, 8)).astype(np.float32)
    return lambda: ctx.fisher_gaussian(mean, var)


def _gaussian_bytes(calls: Calls, quick: bool) -> float:
    """gaussian_diag: one thread per entry of the (2D)² matrix stores it; the 2D diagonal
    ones load their variance first (D = 8)."""
    edge = 16
    return 4.0 * (edge * edge + edge) * sum(c["items"] for c in calls)


def _grid_side(quick: bool) -> int:
    return 128 if quick else 1024


def _heat(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    side = _grid_side(quick)
    grid = _rng().random((side, side), dtype=np.float32)
    return lambda: ctx.stencil(grid, 4 if quick else 16, rebalance=False)


def _heat_bytes(calls: Calls, quick: bool) -> float:
    """heat.wgsl: per 4 cells, the vec4 above, below and at the cells, the two scalar
    neighbours at the ends, and the vec4 stored: 18 bytes a cell."""
    return 18.0 * sum(c["items"] for c in calls)


def _life(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    side = _grid_side(quick)
    grid = (_rng().random((side, side)) < 0.3).astype(np.uint8)
    return lambda: ctx.life(grid, 4 if quick else 16, rebalance=False)


def _life_bytes(calls: Calls, quick: bool) -> float:
    """life.wgsl: per word of 4 cells, the words above, at and below, six edge neighbours
    (one word load each) and the word stored: 10 words per 4 cells, 10 bytes a cell."""
    return 10.0 * sum(c["items"] for c in calls)


_COPY = "fn row(x: array<f32, 8>) -> array<f32, 8> {\n    return x;\n}\n"


def _map_rows(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _rows(quick, 1 << 18, 1 << 10)
    x = _rng().standard_normal((n, 8), dtype=np.float32)
    out = np.empty_like(x)
    return lambda: ctx.map_rows(_COPY, x, out_cols=8, out=out)


CASES: tuple[Case, ...] = (
    _ga("geometric_product", None),
    _ga("geometric_product", Algebra(4, 1)),
    _ga("sandwich", None, broadcast=True),
    _ga("sandwich", Algebra(3, 0, 1), broadcast=True),
    Case(
        "ga_apply",
        "sandwich Cl(3,0,1) one motor, blades= (points)",
        _sandwich_blades,
        _sandwich_blades_bytes,
    ),
    Case("ga_apply", "normalize Cl(3,0,0)", _normalize),
    Case("tropical_matmul", "tropical_matmul max-plus (tiled)", _matmul, _tiled_bytes),
    Case("tropical_matmul", "tropical_matmul resident a (rows)", _matmul_rows, _rows_bytes),
    Case("tropical_matvec", "tropical_matvec max-plus", _matvec, _matvec_bytes),
    Case("shortest_paths", "shortest_paths (blocked, tiled and naive)", _paths),
    Case(
        "fisher_information",
        "fisher_information P > 64 (fisher_tiled)",
        _fisher,
        lambda calls, quick: _syrk_bytes(_fisher_shape(quick)[1], calls),
    ),
    Case(
        "fisher_information",
        "fisher_information P = 48 (fisher_rows)",
        _fisher_narrow,
        lambda calls, quick: _syrk_bytes(48, calls),
    ),
    Case("fisher_categorical", "fisher_categorical K = 16", _categorical, _categorical_bytes),
    Case("fisher_gaussian", "fisher_gaussian D = 8", _gaussian, _gaussian_bytes),
    Case("stencil", "heat stencil", _heat, _heat_bytes),
    Case("life", "life", _life, _life_bytes),
    Case("map_rows", "map_rows copy (8 words)", _map_rows, wgsl_only=True),
)
