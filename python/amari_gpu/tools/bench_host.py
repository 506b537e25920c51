"""The host device against the CPU libraries a user would otherwise reach for: the rows of
``benches/host.py`` and of ``amari-gpu bench --family host``.

Every row times the host device alone (``backends=["host"]``) and its peer in one run,
interleaved repetition by repetition so that drift on a busy machine hits both alike (each
timed call settled: after an idle pause and one untimed call of its own, see ``_measure``), and
reports medians with their spread, the ratio (ours over the peer's) and the target of issue
15. The Cl(3,0) row also reports the bytes per second the product moves against the memory
bandwidth the host device's calibration measured, and the last row the default context
against the best single device that is a different choice (never against itself). Peers are
optional (``requirements-bench.txt``): a missing one is reported as such, never replaced by
a figure.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import importlib.metadata
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._adapters import AdapterInfo
from ..context import MultiGpuContext
from ..errors import AmariGpuError

if TYPE_CHECKING:  # the stub's record types exist for type checkers only
    from .._native import DeviceLimitsDict

GRID_STEPS = 16
FISHER_NARROW = 64
"""P of the narrow Fisher row (8 x 8 blocks); the wide one is ``Sizes.fisher_params``."""
FISHER_TARGET = 1.2
"""Fisher rows: ours / numpy's `g.T @ g` at most this (issue 27)."""
GRID_ALPHA = 0.2
CL3_BYTES_PER_ITEM = 3 * 8 * 4
"""Bytes a Cl(3,0) product moves per pair: two 8-float operands read, one result written."""


@dataclass(frozen=True)
class Sizes:
    """Problem sizes of one run."""

    cl3_items: int
    pga_points: int
    maxplus_n: int
    paths_n: int
    fisher_rows: int
    fisher_params: int
    grid_n: int


FULL = Sizes(1 << 20, 1 << 19, 1024, 512, 65_536, 256, 1024)
QUICK = Sizes(1 << 16, 1 << 14, 256, 128, 4096, 64, 256)


@dataclass
class Row:
    """One comparison: our call and the peer's, each timed per repetition."""

    work: str
    ours: Callable[[], Any]
    peer_name: str
    peer: Callable[[], Any] | None
    target: float
    """Met when ours / peer <= target."""
    missing: str = ""
    """Why there is no figure for one side ("peer X not installed", "not available yet")."""
    check: Callable[[Any, Any], bool] | None = None
    ours_s: list[float] = field(default_factory=list)
    peer_s: list[float] = field(default_factory=list)


def _version(module: str) -> str | None:
    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return None


def _import(module: str) -> Any | None:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass  # not Linux: fall back to what the platform module knows
    return platform.processor() or platform.machine()


OPENBLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
"""Variables OpenBLAS reads when numpy loads it; set, they can pin a slower kernel."""


def _openblas_ask(symbols: tuple[str, ...], restype: Any) -> Any:
    """Asks the OpenBLAS numpy loaded (found in this process's map of loaded libraries) the
    first of ``symbols`` it exports. None where it cannot be asked (not Linux, another BLAS)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None  # not Linux: no map of loaded libraries to find it in
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in symbols:
            get = getattr(lib, symbol, None)
            if get is not None:
                get.restype = restype
                return get()
    return None


def _openblas_corename() -> str | None:
    """The kernel the OpenBLAS numpy loaded runs (e.g. ``Haswell``), asked of the library
    itself: its build names only the target it was compiled for, and a DYNAMIC_ARCH build
    picks its kernel at load time."""
    name = _openblas_ask(
        (
            "scipy_openblas_get_corename64_",
            "scipy_openblas_get_corename",
            "openblas_get_corename64_",
            "openblas_get_corename",
        ),
        ctypes.c_char_p,
    )
    return name.decode() if name else None


def _openblas_threads() -> int | None:
    """Threads the OpenBLAS numpy loaded runs its kernels on."""
    threads = _openblas_ask(
        (
            "scipy_openblas_get_num_threads64_",
            "scipy_openblas_get_num_threads",
            "openblas_get_num_threads64_",
            "openblas_get_num_threads",
        ),
        ctypes.c_int,
    )
    return int(threads) if threads is not None else None


def blas() -> dict[str, Any]:
    """The BLAS numpy runs: library, version, the kernel it chose, and the OpenBLAS
    variables of this process's environment (None when unset)."""
    # numpy >= 1.25 describes its build in numpy.__config__.CONFIG; older ones do not.
    config: dict[str, Any] = getattr(getattr(np, "__config__", None), "CONFIG", {})
    dep = config.get("Build Dependencies", {}).get("blas", {})
    return {
        "name": dep.get("name"),
        "version": dep.get("version"),
        "kernel": _openblas_corename(),
        "threads": _openblas_threads(),
        "env": {k: os.environ.get(k) for k in OPENBLAS_ENV},
    }


def _numpy_fisher(g: npt.NDArray[np.floating[Any]]) -> Any:
    """The Fisher row's peer: numpy's BLAS `g.T @ g` (one SYRK), over N, in g's dtype."""
    return g.T @ g / g.dtype.type(g.shape[0])


def _close(ours: Any, peer: Any, rtol: float, atol: float) -> bool:
    """A row's check: ours within ``rtol``/``atol`` of the peer's."""
    return bool(np.allclose(ours, peer, rtol=rtol, atol=atol))


def _same_grid(ours: Any, peer: Any, dtype: np.dtype[Any], atol: float) -> bool:
    """Whether a grid of ours has ``dtype`` and agrees with the peer's within ``atol``."""
    return bool(ours.dtype == dtype and np.allclose(ours, peer, rtol=0, atol=atol))


def _timed(f: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = f()
    return time.perf_counter() - start, result


# --- peers ------------------------------------------------------------------------------------


def _kingdon_product(
    a: npt.NDArray[Any], b: npt.NDArray[Any]
) -> tuple[Callable[[], Any], Callable[[], npt.NDArray[Any]]] | None:
    """kingdon's vectorised Cl(3,0) product on (8, N) coefficient arrays in its blade order,
    in the operands' dtype: the timed product, and the same product as (N, 8) rows in our
    blade order (checked)."""
    kingdon = _import("kingdon")
    if kingdon is None:
        return None
    alg = kingdon.Algebra(3, 0, 0)
    keys = list(alg.multivector(np.zeros((8, 1), dtype=a.dtype)).keys())
    x = alg.multivector(np.ascontiguousarray(a.T[keys]))
    y = alg.multivector(np.ascontiguousarray(b.T[keys]))

    def run() -> npt.NDArray[Any]:
        z = x * y
        values = np.asarray(z.values())
        out = np.empty((values.shape[1], 8), dtype=a.dtype)
        out[:, list(z.keys())] = values.T
        return out

    # The timed call is the product; the transpose back to rows is checked, not timed.
    return (lambda: x * y), run


def _kingdon_sandwich(
    r: npt.NDArray[np.float32], points: npt.NDArray[np.float32], point_blades: list[int]
) -> Callable[[], Any] | None:
    """kingdon's ``r >> x`` in PGA Cl(3,0,1) with the null vector last (so its blade keys are
    our bitmask indices): one motor on a batch of points, each a multivector of the point
    blades only (kingdon generates code for the non-zero blades it is given), from the
    (N, 4) coefficients of ``point_blades``."""
    kingdon = _import("kingdon")
    if kingdon is None:
        return None
    alg = kingdon.Algebra(signature=[1, 1, 1, 0], start_index=1)
    even = tuple(k for k in range(16) if bin(k).count("1") % 2 == 0)
    motor = alg.multivector(r[list(even)], keys=even)
    x = alg.multivector(np.ascontiguousarray(points.T), keys=tuple(point_blades))
    return lambda: motor >> x


def _numba_max_plus() -> Callable[[Any, Any], Any] | None:
    """A ``numba.njit(parallel=True)`` max-plus product written the way numba's users write it
    for speed: rows in parallel, and for each row a local accumulator updated along rows of b
    with a branch-free ``max``, so the inner loop vectorises (writing ``out[i, j]`` in that
    loop instead keeps it scalar: about 9x slower here, and no fair peer)."""
    numba = _import("numba")
    if numba is None:
        return None

    @numba.njit(parallel=True, fastmath=False, cache=False)  # type: ignore[untyped-decorator]
    def max_plus(a: Any, b: Any) -> Any:
        n, k = a.shape
        m = b.shape[1]
        out = np.empty((n, m), dtype=np.float32)
        for i in numba.prange(n):
            acc = np.full(m, -np.inf, dtype=np.float32)
            for kk in range(k):
                x = a[i, kk]
                for j in range(m):
                    acc[j] = max(acc[j], x + b[kk, j])
            out[i, :] = acc
        return out

    return max_plus  # type: ignore[no-any-return]


def _numba_heat() -> Callable[[Any, int, Any], Any] | None:
    """Periodic heat steps in ``numba.njit(parallel=True)`` written the way numba's users
    write a stencil for speed: rows in parallel (``prange``), each row's inner cells in one
    loop over whole rows that vectorises (the wrapped first and last cells outside it), two
    buffers swapped between steps; the arithmetic of ``stencil`` unfused."""
    numba = _import("numba")
    if numba is None:
        return None

    @numba.njit(parallel=True, fastmath=False, cache=False)  # type: ignore[untyped-decorator]
    def heat(u0: Any, steps: int, alpha: Any) -> Any:
        h, w = u0.shape
        a = u0.copy()
        b = np.empty_like(a)
        four = np.float32(4.0)
        for _ in range(steps):
            for i in numba.prange(h):
                up = a[i - 1 if i > 0 else h - 1]
                down = a[i + 1 if i + 1 < h else 0]
                row = a[i]
                out = b[i]
                for j in range(1, w - 1):
                    s = (up[j] + down[j]) + (row[j - 1] + row[j + 1])
                    out[j] = row[j] + alpha * (s - four * row[j])
                for j in (0, w - 1):
                    s = (up[j] + down[j]) + (row[j - 1] + row[(j + 1) % w])
                    out[j] = row[j] + alpha * (s - four * row[j])
            a, b = b, a
        return a

    return heat  # type: ignore[no-any-return]


# --- rows -------------------------------------------------------------------------------------


def _pga_sandwich_rows(host: MultiGpuContext, n: int, rng: np.random.Generator) -> list[Row]:
    """One normalised motor on ``n`` PGA points (grade 3) against kingdon's ``r >> x`` on the
    same (N, 4) point coefficients, checked on every blade: ours on the points alone
    (``blades=``, 16 bytes in and out per point, as kingdon reads them), and on dense rows of
    16 with the other blades 0 (64 bytes in and out per point)."""
    from .. import Algebra

    pga = Algebra(3, 0, 1)
    points = [k for k in range(16) if bin(k).count("1") == 3]
    r = np.zeros(16, dtype=np.float32)
    r[[0, 3, 5, 6, 9, 10, 12, 15]] = rng.standard_normal(8)
    r /= np.float32(np.sqrt(np.sum(r[[0, 3, 5, 6]] ** 2)))
    compact = rng.standard_normal((n, 4), dtype=np.float32)
    dense = np.zeros((n, 16), dtype=np.float32)
    dense[:, points] = compact
    peer = _kingdon_sandwich(r, compact, points)

    def agree(ours: Any, theirs: Any) -> bool:
        want = np.zeros((len(ours), 16), dtype=np.float32)
        want[:, list(theirs.keys())] = np.asarray(theirs.values()).T
        if ours.shape[1] == 4:
            others = [k for k in range(16) if k not in points]
            if not np.allclose(want[:, others], 0.0, atol=1e-4):
                return False
            want = want[:, points]
        return bool(np.allclose(ours, want, rtol=1e-4, atol=1e-4))

    def row(work: str, ours: Callable[[], Any], target: float) -> Row:
        return Row(
            work,
            ours,
            f"kingdon {_version('kingdon')} r >> x",
            peer,
            target,
            "" if peer else "peer kingdon not installed",
            agree if peer else None,
        )

    return [
        row(
            f"PGA sandwich, one motor on {n:,} points, blades= (rows of 4)",
            lambda: host.sandwich(r, compact, pga, blades=points),
            0.5,
        ),
        row(
            f"PGA sandwich, one motor on {n:,} points as dense rows of 16",
            lambda: host.sandwich(r, dense, pga),
            0.5,
        ),
    ]


def _float16_rows(
    host: MultiGpuContext, a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]
) -> list[Row]:
    """The Cl(3,0) product in float16 storage against the same product in float32 on the
    same device (into reused out= arrays, so that only the kernel's traffic is timed): on the
    host device and on lavapipe when there is one. The work names the gigabytes each moves;
    the float16 result must be the float32 one rounded once to float16 (numpy's
    round-to-nearest-even), bit for bit."""
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    a32, b32 = a16.astype(np.float32), b16.astype(np.float32)
    n = a.shape[0]
    gb = {
        d: CL3_BYTES_PER_ITEM * n * np.dtype(d).itemsize / 4 / 1e9 for d in (np.float16, np.float32)
    }
    out16, out32 = np.empty_like(a16), np.empty_like(a32)

    def row(ctx: MultiGpuContext, where: str, missing: str = "") -> Row:
        return Row(
            f"Cl(3,0) geometric product float16 on {where}, {n:,} pairs into out= "
            f"({gb[np.float16]:.3f} GB moved; peer: float32 on it, {gb[np.float32]:.3f} GB)",
            lambda: ctx.geometric_product(a16, b16, out=out16),
            f"amari_gpu float32 on {where}",
            (lambda: ctx.geometric_product(a32, b32, out=out32)) if not missing else None,
            0.6,
            missing,
            lambda ours, peer: bool(
                np.array_equal(ours.view(np.uint16), _rounded_f16(peer).view(np.uint16))
            ),
        )

    rows = [row(host, "the host device")]
    lavapipe = next((i for i in _all_adapters() if i.backend == "vulkan"), None)
    if lavapipe is None:
        rows.append(row(host, "a Vulkan adapter", "no Vulkan adapter"))
    else:
        vulkan = MultiGpuContext(adapters=[lavapipe.index])
        rows.append(row(vulkan, f"{lavapipe.name} (Vulkan)"))
    return rows


def _rounded_f16(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float16]:
    """``x`` rounded once to float16 (past 65504 to infinity, as the kernels round it)."""
    with np.errstate(over="ignore"):
        return x.astype(np.float16)


def _graph(n: int, rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """A random digraph: positive weights, 30% of the pairs without an edge (inf)."""
    w = rng.uniform(1.0, 10.0, (n, n)).astype(np.float32)
    w[rng.random((n, n)) < 0.3] = np.inf
    np.fill_diagonal(w, 0.0)
    return w


def build_rows(host: MultiGpuContext, sizes: Sizes) -> list[Row]:
    """The comparison rows on inputs of ``sizes`` (the host device alone is ``host``)."""
    rng = np.random.default_rng(15)
    rows: list[Row] = []

    n = sizes.cl3_items
    a = rng.standard_normal((n, 8), dtype=np.float32)
    b = rng.standard_normal((n, 8), dtype=np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)

    def against_kingdon(work: str, ours: Callable[[], Any], f64: bool = False) -> Row:
        """Our Cl(3,0) product of ``a`` and ``b`` (float64 copies of them when ``f64``;
        however ``ours`` calls it) against kingdon's in the same dtype, checked to agree
        with it (float64 within 1e-12)."""
        kingdon = _kingdon_product(a64, b64) if f64 else _kingdon_product(a, b)
        tol = 1e-12 if f64 else 1e-4
        return Row(
            work,
            ours,
            f"kingdon {_version('kingdon')}" + (" float64" if f64 else ""),
            kingdon[0] if kingdon else None,
            0.5,
            "" if kingdon else "peer kingdon not installed",
            (lambda ours, _: bool(np.allclose(ours, kingdon[1](), rtol=tol, atol=tol)))
            if kingdon
            else None,
        )

    rows.append(
        against_kingdon(
            f"Cl(3,0) geometric product, {n:,} pairs", lambda: host.geometric_product(a, b)
        )
    )
    # The same product into a reused out= array: what the kernel streams once the output's
    # pages are the process's (a new array pays their first touch on every call).
    reused = np.empty_like(a)
    rows.append(
        against_kingdon(
            f"Cl(3,0) geometric product into out=, {n:,} pairs",
            lambda: host.geometric_product(a, b, out=reused),
        )
    )
    # float64 in, float64 out (kingdon's default dtype).
    rows.append(
        against_kingdon(
            f"Cl(3,0) geometric product float64, {n:,} pairs",
            lambda: host.geometric_product(a64, b64),
            f64=True,
        )
    )

    rows.extend(_float16_rows(host, a, b))

    rows.extend(_pga_sandwich_rows(host, sizes.pga_points, rng))

    m = sizes.maxplus_n
    ma = rng.standard_normal((m, m), dtype=np.float32)
    mb = rng.standard_normal((m, m), dtype=np.float32)
    max_plus = _numba_max_plus()
    rows.append(
        Row(
            f"max-plus {m} x {m}",
            lambda: host.tropical_matmul(ma, mb),
            f"numba {_version('numba')} njit(parallel=True), row accumulator",
            (lambda: max_plus(ma, mb)) if max_plus else None,
            0.8,
            "" if max_plus else "peer numba not installed",
            lambda ours, peer: bool(np.array_equal(ours, peer)),
        )
    )

    p = sizes.paths_n
    w = _graph(p, rng)
    csgraph = _import("scipy.sparse.csgraph")
    rows.append(
        Row(
            f"shortest paths, n = {p}",
            lambda: host.shortest_paths(w),
            f"scipy {_version('scipy')} floyd_warshall",
            (lambda: csgraph.floyd_warshall(w, directed=True)) if csgraph else None,
            0.5,
            "" if csgraph else "peer scipy not installed",
            lambda ours, peer: bool(np.allclose(ours, peer, rtol=1e-5)),
        )
    )
    # float64 in, float64 out (scipy's dtype), against scipy's Floyd-Warshall and its
    # Dijkstra (the faster of its methods on other graphs). The float32 weights in float64
    # make every path sum exact (at most 36 significant bits), so both must agree exactly.
    w64 = w.astype(np.float64)
    for method, name in (("FW", "Floyd-Warshall"), ("D", "Dijkstra")):
        rows.append(
            Row(
                f"shortest paths float64, n = {p}",
                lambda: host.shortest_paths(w64),
                f"scipy {_version('scipy')} shortest_path(method={method!r}) {name}",
                functools.partial(csgraph.shortest_path, w64, method=method) if csgraph else None,
                0.5,
                "" if csgraph else "peer scipy not installed",
                lambda ours, peer: bool(ours.dtype == np.float64 and np.array_equal(ours, peer)),
            )
        )

    # Narrow scores (8 x 8 blocks) and wide ones (64 x 64 tiles); the peer is the BLAS call
    # users write (numpy runs `g.T @ g` as one SYRK), float32 like ours, and for the wide
    # scores also in float64 (our result is float64, summed from float32 partials), and our
    # float64 scores (accumulated in float64, issue 28) against it, agreeing to float64
    # summation rounding, at both widths (one host SYRK serves both dtypes).
    loose = (1e-3, 1e-4)
    for p in sorted({min(FISHER_NARROW, sizes.fisher_params), sizes.fisher_params}):
        g = rng.standard_normal((sizes.fisher_rows, p), dtype=np.float32)
        g64 = g.astype(np.float64)
        runs: list[tuple[str, npt.NDArray[Any], str, npt.NDArray[Any], tuple[float, float]]]
        runs = [("", g, "float32", g, loose)]
        if p == sizes.fisher_params:
            runs.append(("", g, "float64", g64, loose))
        runs.append((", float64 accumulation", g64, "float64", g64, (1e-12, 1e-13)))
        for label, ours, dtype, scores, (rtol, atol) in runs:
            rows.append(
                Row(
                    f"Fisher {sizes.fisher_rows:,} x {p}{label}",
                    functools.partial(host.fisher_information, ours),
                    f"numpy {np.__version__} g.T @ g / N (BLAS, {dtype})",
                    functools.partial(_numpy_fisher, scores),
                    FISHER_TARGET,
                    check=functools.partial(_close, rtol=rtol, atol=atol),
                )
            )

    q = sizes.grid_n
    u = rng.random((q, q), dtype=np.float32)
    heat = _numba_heat()
    stencil_missing = "" if heat else "peer numba not installed"
    try:
        host.stencil(u[:8, :8], 1, GRID_ALPHA, "periodic")
    except AmariGpuError as e:
        stencil_missing = f"not available yet ({type(e).__name__}: {e})"
    # halo = steps: the host device runs them all in one round, blocked over passes of
    # several steps per tile of rows (the default halo=1 exchanges halos every step). The
    # same grid in float64 is stepped in float64, beside the same numba stencil on float64.
    for cells, alpha, kind, agree in (
        (u, np.float32(GRID_ALPHA), "", 1e-5),
        (u.astype(np.float64), np.float64(GRID_ALPHA), " float64", 1e-12),
    ):
        rows.append(
            Row(
                f"heat {q} x {q}{kind}, {GRID_STEPS} steps, halo {GRID_STEPS}",
                functools.partial(
                    host.stencil, cells, GRID_STEPS, GRID_ALPHA, "periodic", halo=GRID_STEPS
                ),
                f"numba {_version('numba')} njit(parallel=True) stencil{kind}, prange rows, "
                "two buffers",
                functools.partial(heat, cells, GRID_STEPS, alpha) if heat else None,
                0.5,
                stencil_missing,
                functools.partial(_same_grid, dtype=cells.dtype, atol=agree),
            )
        )
    return rows


SETTLE_S = 0.05
"""Least idle time before each side's untimed call of a round (see :func:`_measure`)."""

QUIET_S = 0.01
"""The window over which the process must use (almost) no CPU before a call is timed."""

QUIET_LIMIT_S = 1.0
"""The longest wait for the process to fall quiet."""


def _cpu_s() -> float:
    """CPU seconds of every thread of this process so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _quiesce() -> None:
    """Waits :data:`SETTLE_S`, then until the process's threads stop spinning: until a
    :data:`QUIET_S` window passes with under a tenth of it in CPU time (at most
    :data:`QUIET_LIMIT_S`). The pool threads a parallel call leaves behind spin-wait on the
    cores for a while: rayon's and numba's OpenMP ones for a few ms, OpenBLAS's for about
    105 ms on the 2-core Xeon VM (about 10 ms on an earlier EPYC), so a fixed 50 ms slowed
    whatever row came after a numpy row by up to 5x there."""
    time.sleep(SETTLE_S)
    deadline = time.perf_counter() + QUIET_LIMIT_S
    while time.perf_counter() < deadline:
        before = _cpu_s()
        time.sleep(QUIET_S)
        if _cpu_s() - before < QUIET_S / 10:
            return


ALLOCATOR_WARM_BYTES = 16 << 20
"""Bytes of the array :func:`_reuse_freed_arrays` frees before the rows."""


def _reuse_freed_arrays() -> None:
    """Frees one 16 MiB array before any row, as a numpy program that has freed any array
    of 4-32 MiB already has: glibc then raises its threshold for mapping a block of its own
    (to the freed block's size) and keeps freed blocks below it for reuse, so a peer that
    allocates its arrays on every call (numba's stencil: a copy of the grid and a second
    buffer) reuses memory instead of faulting fresh pages in. Without it, whether a peer
    faulted depended on which rows ran before it: on a Zen 3 VM numba's 1024² stencil took
    8.2-10.5 ms with 2,016 page faults a call in a fresh process and 3.0-3.2 ms with none
    in this run. The host device's large outputs come from its own pool either way."""
    freed = np.ones(ALLOCATOR_WARM_BYTES // 4, dtype=np.float32)
    del freed


def _settled(f: Callable[[], Any]) -> float:
    """Seconds of one call of ``f`` as a user calling it repeatedly sees it: once the process
    is quiet (:func:`_quiesce`: the other side's threads have stopped spinning) and after
    one untimed call (``f``'s own threads are awake, its buffers kept)."""
    _quiesce()
    f()
    return _timed(f)[0]


def _measure(rows: list[Row], repeats: int) -> None:
    """One warm-up each (calibration, JIT compilation), then ``repeats`` interleaved rounds.

    Each round times each side's call once, settled (:func:`_settled`): in one process, a
    call timed right after the other side's spends its start beside that side's pool threads
    still spin-waiting on the same cores (on 2 cores a 5 ms stencil measured 9-10 ms after
    numba's OpenMP call and 4.5 ms after its own), which a user of either library alone
    never pays."""
    runnable = [r for r in rows if not r.missing.startswith("not available")]
    for r in runnable:
        ours = r.ours()
        if r.peer is not None:
            peer = r.peer()
            if r.check is not None and not r.check(ours, peer):
                r.missing = "results disagree with the peer's: figures withheld"
    for i in range(repeats):
        for r in runnable:
            # Alternate who goes first, so neither always runs on a cache the other warmed.
            sides = [("ours", r.ours), ("peer", r.peer)]
            for side, f in sides if i % 2 == 0 else sides[::-1]:
                if f is not None:
                    (r.ours_s if side == "ours" else r.peer_s).append(_settled(f))


def _fmt_s(samples: list[float]) -> str:
    if not samples:
        return "-"
    med = statistics.median(samples)
    return f"{med * 1e3:9.2f} ms ({min(samples) * 1e3:.2f}-{max(samples) * 1e3:.2f})"


def row_dict(r: Row) -> dict[str, Any]:
    """One row as plain data (medians in seconds, ratio ours / peer)."""
    ours = statistics.median(r.ours_s) if r.ours_s else None
    peer = statistics.median(r.peer_s) if r.peer_s else None
    ratio = ours / peer if ours and peer else None
    return {
        "work": r.work,
        "peer": r.peer_name,
        "ours_s": ours,
        "ours_range_s": [min(r.ours_s), max(r.ours_s)] if r.ours_s else None,
        "peer_s": peer,
        "peer_range_s": [min(r.peer_s), max(r.peer_s)] if r.peer_s else None,
        "ratio": ratio,
        "target": r.target,
        "met": None if ratio is None else ratio <= r.target,
        "note": r.missing,
    }


def _single_device_contexts() -> list[tuple[str, frozenset[int], MultiGpuContext]]:
    """One context per adapter, that adapter alone: its label, its adapter set, the context."""
    return [
        (
            f"{info.name} ({info.backend})",
            frozenset({info.index}),
            MultiGpuContext(adapters=[info.index]),
        )
        for info in _all_adapters()
    ]


def _all_adapters() -> list[AdapterInfo]:
    from .._adapters import adapters

    return adapters()


def run(sizes: Sizes, repeats: int) -> dict[str, Any]:
    """Measures every row; returns the machine, the rows and the bandwidth and default-context
    figures as plain data."""
    infos = _all_adapters()
    host_info = next(i for i in infos if i.is_host)
    _reuse_freed_arrays()
    with MultiGpuContext(backends=["host"]) as host:
        # Measured in this run (not read from the cache), before the rows, on the same load.
        (caps,) = host.calibrate(force=True)
        bandwidth = caps.memory_bandwidth_gb_s
        limit_before = _max_plus_limit(host)
        rows = build_rows(host, sizes)
        _measure(rows, repeats)
        max_plus = _max_plus_share(rows, sizes, host, limit_before)
    result: dict[str, Any] = {
        "cpu": cpu_model(),
        "simd": host_info.features[0] if host_info.features else "unknown",
        "threads": host_info.limits.get("threads"),
        "placement": _placement(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "peers": {m: _version(m) for m in ("kingdon", "numba", "scipy")},
        "blas": blas(),
        "rows": [row_dict(r) for r in rows],
        "repeats": repeats,
    }
    moved = sizes.cl3_items * CL3_BYTES_PER_ITEM
    achieved = moved / statistics.median(rows[0].ours_s) / 1e9
    best = moved / min(rows[0].ours_s) / 1e9
    into_out = moved / statistics.median(rows[1].ours_s) / 1e9
    result["bandwidth"] = {
        "achieved_gb_s": achieved,
        "best_gb_s": best,
        "out_gb_s": into_out,
        "out_share": into_out / bandwidth if bandwidth else None,
        "fresh_over_out": statistics.median(rows[0].ours_s) / statistics.median(rows[1].ours_s),
        "calibrated_gb_s": bandwidth,
        "share": achieved / bandwidth if bandwidth else None,
        "best_share": best / bandwidth if bandwidth else None,
        "target": 0.7,
    }
    result["max_plus"] = max_plus
    result["default_context"] = _default_vs_single(sizes, repeats)
    return result


PIN_ENV = "AMARI_GPU_HOST_PIN"
"""1: the host pool's threads are pinned one to a CPU; 0: they run anywhere; unset: one to a
CPU while the rest of the machine is quiet (the report says which)."""

MAX_PLUS_SHARE_TARGET = 0.6
"""Issue 27: the max-plus product at >= 60% of the host's measured add/max issue rate."""


def _max_plus_limit(host: MultiGpuContext) -> DeviceLimitsDict:
    """The host's max-plus issue rate measured now by the roofline's limits (the host
    device's SIMD level and threads), with what measured it."""
    from .. import _native

    (limit,) = _native.device_limits(host._native)
    return limit


def _max_plus_share(
    rows: list[Row], sizes: Sizes, host: MultiGpuContext, before: DeviceLimitsDict
) -> dict[str, Any]:
    """The max-plus row's (add, max) pairs per second at its median against the host's
    max-plus issue rate, measured before the rows (``before``) and again after them, the
    better kept (a busy machine only ever slows a measurement down); its operations are an
    add and a max a step, so half of them are pairs."""
    limit = max(before, _max_plus_limit(host), key=lambda lim: lim["max_ops_per_s"])
    row = next(r for r in rows if r.work.startswith("max-plus"))
    pairs = sizes.maxplus_n**3
    achieved = pairs / statistics.median(row.ours_s) if row.ours_s else None
    best = pairs / min(row.ours_s) if row.ours_s else None
    rate = limit["max_ops_per_s"] / 2
    return {
        "pairs_per_s": achieved,
        "best_pairs_per_s": best,
        "limit_pairs_per_s": rate,
        "limit_measured_with": limit["measured_with"],
        "share": achieved / rate if achieved else None,
        "target": MAX_PLUS_SHARE_TARGET,
    }


def _default_vs_single(sizes: Sizes, repeats: int) -> dict[str, Any]:
    """``MultiGpuContext()`` as it is against each single device that is a different choice,
    Cl(3,0) product: did the default selection choose at least as well as any one device?

    A single device whose context would be the default context itself (on a machine without a
    hardware GPU the default is the host device alone) is timed and listed, but never the
    comparison's other side: that would time one configuration against itself."""
    rng = np.random.default_rng(16)
    a = rng.standard_normal((sizes.cl3_items, 8), dtype=np.float32)
    b = rng.standard_normal((sizes.cl3_items, 8), dtype=np.float32)
    default = MultiGpuContext()
    default_adapters = frozenset(d.adapter.index for d in default.devices)
    singles = _single_device_contexts()
    contexts = [("default context", default), *((name, ctx) for name, _, ctx in singles)]
    others = {name for name, adapters, _ in singles if adapters != default_adapters}
    samples: dict[str, list[float]] = {name: [] for name, _ in contexts}
    for _, ctx in contexts:  # warm-up: calibration, pipelines
        ctx.geometric_product(a, b)
    for _ in range(repeats):
        for name, ctx in contexts:
            start = time.perf_counter()
            ctx.geometric_product(a, b)
            samples[name].append(time.perf_counter() - start)
    default_devices = [d.adapter.describe() for d in default.devices]
    for _, ctx in contexts:
        ctx.close()
    medians = {name: statistics.median(s) for name, s in samples.items()}
    compared = {k: v for k, v in medians.items() if k in others}
    if not compared:
        return {
            "default_devices": default_devices,
            "medians_s": medians,
            "best_single": None,
            "ratio": None,
            "target": 1.10,
            "met": None,
        }
    best = min(compared, key=lambda k: compared[k])
    ratio = medians["default context"] / compared[best]
    return {
        "default_devices": default_devices,
        "medians_s": medians,
        "best_single": best,
        "ratio": ratio,
        "target": 1.10,
        "met": ratio <= 1.10,
    }


def _blas_line(b: dict[str, Any]) -> str:
    env = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in b["env"].items())
    return (
        f"numpy's BLAS: {b['name'] or 'unknown'} {b['version'] or ''}, kernel "
        f"{b['kernel'] or 'unknown'}, {b.get('threads') or 'unknown'} threads; {env}"
    )


def _placement() -> str:
    """How the host pool's threads are placed, as ``AMARI_GPU_HOST_PIN`` asks."""
    asked = os.environ.get(PIN_ENV, "").strip()
    if asked == "1":
        return f"pinned one to a CPU, {PIN_ENV}=1"
    if asked == "0":
        return f"free, {PIN_ENV}=0"
    return "one to a CPU while the machine is quiet"


def _pinning(result: dict[str, Any]) -> str:
    return str(result.get("placement", "unknown placement"))


def lines(result: dict[str, Any]) -> list[str]:
    """The report: machine, one line per row, bandwidth and default context."""
    peers = ", ".join(f"{k} {v or 'not installed'}" for k, v in result["peers"].items())
    out = [
        f"CPU: {result['cpu']}; SIMD {result['simd']}; {result['threads']} threads "
        f"({_pinning(result)}); "
        f"python {result['python']}, numpy {result['numpy']}; peers: {peers}",
        _blas_line(result["blas"]),
        f"Host device alone (backends=['host']) against each peer, same run, "
        f"{result['repeats']} interleaved repetitions, each call timed after at least "
        f"{SETTLE_S * 1e3:.0f} ms idle, once the process's threads have stopped spinning, and "
        "one untimed call of its own: median (min-max).",
        "",
        f"{'work':42} {'ours':>32} {'peer':>32} {'ratio':>7} {'target':>7}  met  peer",
    ]
    for r in result["rows"]:
        if r["note"] and r["ours_s"] is None:
            out.append(f"{r['work']:42} {r['note']}")
            continue
        ours = _fmt_s([r["ours_s"], *r["ours_range_s"]]) if r["ours_s"] else "-"
        peer = _fmt_s([r["peer_s"], *r["peer_range_s"]]) if r["peer_s"] else "-"
        ratio = f"{r['ratio']:6.2f}x" if r["ratio"] else "      -"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "no")
        note = f"  [{r['note']}]" if r["note"] else ""
        out.append(
            f"{r['work']:42} {ours:>32} {peer:>32} {ratio} {'<= ' + str(r['target']):>7}"
            f"  {met:3}  {r['peer']}{note}"
        )
    bw = result["bandwidth"]
    share = f"{bw['share']:.0%}" if bw["share"] else "-"
    met = "-" if bw["share"] is None else ("yes" if bw["share"] >= bw["target"] else "no")
    best = f"{bw['best_share']:.0%}" if bw["best_share"] else "-"
    out += [
        "",
        f"Cl(3,0) product moves {bw['achieved_gb_s']:.2f} GB/s at its median "
        f"({bw['best_gb_s']:.2f} GB/s = {best} at its best; {CL3_BYTES_PER_ITEM} B per pair, "
        "a new output array each call);",
        f"the host calibration's memcpy measured {bw['calibrated_gb_s'] or 0:.2f} GB/s in this "
        f"run (bytes read + written): median {share} (target >= 70%): met {met}",
        f"into a reused out= array: {bw['out_gb_s']:.2f} GB/s at its median = "
        f"{bw['out_share'] or 0:.0%} of that memcpy (target >= 70%): met "
        f"{'-' if bw['out_share'] is None else ('yes' if bw['out_share'] >= 0.7 else 'no')}",
        f"a new output array costs {bw['fresh_over_out']:.2f}x the out= call (median over "
        f"median; target <= 1.5): met {'yes' if bw['fresh_over_out'] <= 1.5 else 'no'}",
    ]
    mp = result["max_plus"]
    if mp["share"] is not None:
        out.append(
            f"max-plus: {mp['pairs_per_s'] / 1e9:.1f} G pairs/s at its median "
            f"({mp['best_pairs_per_s'] / 1e9:.1f} at its best) against the add/max issue rate "
            f"measured before and after the rows (the better), "
            f"{mp['limit_pairs_per_s'] / 1e9:.1f} G pairs/s "
            f"({mp['limit_measured_with']}): {mp['share']:.0%} (target >= "
            f"{mp['target']:.0%}): met {'yes' if mp['share'] >= mp['target'] else 'no'}"
        )
    d = result["default_context"]
    chose = f"Default context ({'; '.join(d['default_devices'])})"
    if d["best_single"] is None:
        out.append(f"{chose}: every single device is the default context itself; no comparison")
    else:
        out.append(
            f"{chose}: {d['medians_s']['default context'] * 1e3:.2f} ms against the best "
            f"single device it is not, {d['best_single']}, "
            f"{d['medians_s'][d['best_single']] * 1e3:.2f} ms: {d['ratio']:.2f}x "
            f"(target <= 1.10): met {'yes' if d['met'] else 'no'}"
        )
    for name, s in d["medians_s"].items():
        out.append(f"    {name}: {s * 1e3:.2f} ms")
    return out
