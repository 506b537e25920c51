"""Domain decomposition: 2-D grids cut into row bands across the devices, with halo exchange
through the host and bands rebalanced from measured round times.

``ctx.stencil`` runs explicit Jacobi steps of the 2-D heat equation, ``ctx.life`` Conway's
Game of Life on a torus. Each band stays on its device between exchanges, with ``halo``
ghost rows on each side: a device runs ``halo`` steps between two exchanges, recomputing the
ghost rows it shares with its neighbours (redundant work traded for fewer synchronisations).
Results are bit-identical for any number of devices, halo width and layout: every cell is
computed by the same arithmetic wherever it sits. The host device, when the context has it,
takes bands like any device: they live in host memory and are stepped by native kernels that
reproduce the shaders' arithmetic, rounding ``fma`` as the context's wgpu devices do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from . import _native
from ._dtypes import FLOAT16, FLOAT32, FLOAT64, result_dtype
from ._validate import (
    contiguous,
    integer,
    is_u64,
    output,
    plain_array,
    positive_int,
    sequence,
)
from .errors import InvalidArgumentError, ShapeError
from .planning import Plan

if TYPE_CHECKING:
    from ._mixin import Kernels

BOUNDARIES: tuple[str, ...] = _native.BOUNDARIES
"""Boundary conditions of ``stencil``."""


@dataclass(frozen=True)
class DomainReport:
    """What a ``stencil`` or ``life`` call did, measured on the host clock.

    ``rounds`` lists every round (up to ``halo`` steps between two exchanges) with its wall
    time, the slowest device's compute time, its exchange time (the slowest device's ghost
    upload and border readback plus the host's assembly of the rows) and per device the rows
    it owned, bands, work, upload/compute/readback seconds. ``layouts`` lists every band
    layout (the first, then each rebalance with the seconds it took to move the rows);
    ``failures`` lists devices that failed, after which the run started again without them;
    ``left_out`` lists devices given no rows because they cannot compute in the grid's dtype,
    with why (a float64 grid on a device without ``SHADER_F64``, e.g. llvmpipe GL);
    ``download_s`` is the time taken to read the final grid back. The keys of ``rounds`` and
    ``layouts`` entries are named by ``_native.RoundDict`` and ``_native.LayoutDict``.
    The bindings build it (``_native.stencil`` and ``_native.life`` return it with the grid),
    and a RayContext's driver builds its own; it pickles, so a node's report crosses Ray.
    """

    steps: int
    halo: int
    wall_s: float
    rounds: list[dict[str, Any]] = field(default_factory=list)
    layouts: list[dict[str, Any]] = field(default_factory=list)
    failures: list[tuple[int, str]] = field(default_factory=list)
    download_s: float = 0.0
    left_out: list[tuple[int, str]] = field(default_factory=list)

    @property
    def rounds_s(self) -> float:
        """Seconds of all rounds (the run without its layouts and set-up)."""
        return float(sum(r["wall_s"] for r in self.rounds))

    @property
    def step_s(self) -> float:
        """Seconds per step over the rounds (nan for a run of no steps)."""
        return self.rounds_s / self.steps if self.steps else math.nan

    @property
    def compute_s(self) -> float:
        """Seconds of the slowest device's computation, summed over rounds."""
        return float(sum(r["compute_s"] for r in self.rounds))

    @property
    def exchange_s(self) -> float:
        """Seconds moving halos (upload, readback, host assembly), summed over rounds."""
        return float(sum(r["exchange_s"] for r in self.rounds))

    @property
    def exchange_share(self) -> float:
        """Share of the rounds' time spent moving halos (nan for a run of no steps)."""
        total = self.rounds_s
        return self.exchange_s / total if total > 0 else math.nan

    @property
    def final_split(self) -> list[tuple[int, int]]:
        """(device, rows) of the last layout."""
        if not self.layouts:
            return []
        return [(int(d), int(rows)) for d, rows in self.layouts[-1]["split"]]


_LIFE_CELLS = "an array of 0/1 cells (bool, integer, float16, float32 or float64 dtype)"


def _grid(value: Any, dtype_kinds: str, what: str) -> np.ndarray[Any, Any]:
    array = plain_array("grid", value)
    if array.dtype.kind not in dtype_kinds:
        raise TypeError(f"grid: expected {what}, got dtype {array.dtype}")
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
        raise ShapeError(
            f"grid: expected shape (H, W) with H >= 1 and W >= 1, got {tuple(array.shape)}"
        )
    return array


def _steps(value: Any) -> int:
    steps: int = integer("steps", value, 0)
    return steps


def _split(value: Any, devices: int) -> list[int] | None:
    if value is None:
        return None
    items = sequence("split", value)
    if len(items) != devices:
        raise InvalidArgumentError(
            f"split: expected rows for each of the {devices} devices, got {len(items)} entries"
        )
    for item in items:
        if not is_u64(item):
            raise InvalidArgumentError(
                f"split: expected integers >= 0 (at most 2**64 - 1), got {item!r}"
            )
    return [int(i) for i in items]


def _cells(array: np.ndarray[Any, Any]) -> npt.NDArray[np.uint8]:
    """Integer cells as uint8 without wrapping: a value uint8 cannot hold is refused here,
    where the conversion would lose it; 0/1 values are the core's check. Float cells other
    than 0.0 and 1.0 (0.5, NaN...) are refused here too, as the conversion would lose them."""
    if array.dtype.kind == "f":
        bad = np.flatnonzero((array != 0) & (array != 1))
        if bad.size:
            r, c = divmod(int(bad[0]), array.shape[1])
            raise InvalidArgumentError(
                f"grid: expected cells 0 or 1, found {array[r, c]} at ({r}, {c})"
            )
        return contiguous("grid", array, np.uint8)
    # min and max allocate nothing: a mask of the whole grid could itself exhaust memory.
    if (
        array.dtype not in (np.bool_, np.uint8)
        and array.size
        and (array.min() < 0 or array.max() > 255)
    ):
        r, c = (int(i) for i in np.argwhere((array < 0) | (array > 255))[0])
        raise InvalidArgumentError(
            f"grid: expected cells 0 or 1, found {array[r, c]} at ({r}, {c})"
        )
    return contiguous("grid", array, np.uint8)


class DomainMixin:
    """Domain-decomposition methods of ``MultiGpuContext``."""

    _native: Any
    _kernels: Kernels
    devices: Sequence[Any]
    last_run: DomainReport | None = None
    last_plan: Plan | None

    def _record_run(self, report: DomainReport) -> None:
        # A grid call follows no Plan: last_plan says so rather than keep an older call's.
        self.last_run = report
        self.last_plan = None

    def _run_options(self, steps: Any, halo: Any, rebalance: Any, split: Any) -> _native.RunOptions:
        return {
            "steps": _steps(steps),
            "halo": positive_int("halo", halo),
            "rebalance": bool(rebalance),
            "split": _split(split, len(self.devices)),
        }

    def stencil(
        self,
        grid: npt.ArrayLike,
        steps: int,
        alpha: float = 0.1,
        boundary: str = "dirichlet",
        halo: int = 1,
        *,
        rebalance: bool = True,
        split: Sequence[int] | None = None,
        progress: Callable[[int, int], object] | None = None,
        out: npt.NDArray[np.float32 | np.float64] | None = None,
        dtype: npt.DTypeLike | None = None,
    ) -> npt.NDArray[np.float32 | np.float64]:
        """``steps`` explicit Jacobi steps of the 2-D heat equation on a (H, W) grid:
        ``u <- u + alpha * (u_up + u_down + u_left + u_right - 4 u)``, in the grid's dtype.

        Dtypes (:mod:`amari_gpu._dtypes`): float32 and float64 grids compute and return in
        their dtype; bool and integer grids in float64 (as numpy's true division); float16
        grids in float32 (there being no float16 steps); ``dtype=`` (float32 or float64)
        overrides, e.g. ``dtype=np.float32`` to step a float64 grid in float32. float64
        runs on the devices that compute in float64 (the host device, wgpu devices with
        ``SHADER_F64`` such as lavapipe); the others get no rows (``DomainReport.left_out``
        says which and why), and a context with none refuses the call, naming its devices
        and what they lack. ``alpha`` is rounded to the call's dtype.

        The grid is cut into row bands over the devices (one or more per device: a band's
        buffer must fit one storage binding), each kept on its device with ``halo`` ghost
        rows on each side; devices run ``halo`` steps between exchanges of border rows
        through the host. The host device, if the context has it, is one of those devices:
        its bands stay in host memory and exchange halos with the others through the same
        host board, with the same bits as the wgpu devices beside it (alone it rounds
        ``fma`` fused, as hardware GPUs do; see docs/grids.md). Grids take no
        ``strategy=``: ``split`` and ``rebalance`` place their bands, and ``ctx.last_plan``
        is set to None (a grid call follows no ``Plan``); what happened, measured, is in
        ``ctx.last_run`` (a :class:`DomainReport`).

        A device that fails (lost, out of memory, no answer within ``sync_timeout_ms`` for
        a round, ``inject_fault``, which counts rounds as chunks, or a panic in a host-device
        step) is marked unhealthy and the run starts again from ``grid`` without it. Ctrl-C
        stops a run within a round (``KeyboardInterrupt``; the host device stops between the
        steps of its round); the context stays usable (a run without ``progress`` whose
        last run of about the same cells times steps ended within 20 ms runs on the calling
        thread, unwatched: Ctrl-C is raised when it returns). ``steps`` has no upper bound: a
        huge count runs until it is done or interrupted. A float32 grid with max |u| above 2^123
        (about 1.06e37), whose neighbour sums would overflow float32, runs scaled down by an
        exact power of two (2 to 32) and is scaled back at the end, identically on every
        layout; Dirichlet edges are returned bit for bit, and only cells below about 1e-38
        times that factor lose bits (float32's subnormal spacing). A float64 grid does the
        same above 2^1019 (about 5.6e306; 8 max|u| stays a factor 2 below the largest
        float64), cells below about 2.2e-308 times the factor losing bits.

        Args:
            grid: ``(H, W)`` real numbers (converted to the call's dtype; never modified),
                finite in it.
            steps: an integer >= 0 (0 returns a copy).
            alpha: in [0, 0.25] (explicit steps are unstable above 1/4).
            boundary: "dirichlet" keeps the outermost rows and columns at their initial
                values, "periodic" wraps in both directions.
            halo: ghost rows per band side and steps between exchanges, an integer >= 1.
            rebalance: move rows between devices when measured round times say a new split
                saves more than moving them costs.
            split: the first layout's rows per device id, one entry per device, each 0 to H,
                adding up to H (0 leaves a device out); default by measured streaming
                bandwidth times the device's measured rate in the grid's dtype relative to
                float32 (a float64 grid by the float64 rates).
            progress: called as ``progress(steps_done, steps_total)`` between rounds (at
                most every 0.1 s, and once at the end); an exception it raises stops the run
                (nothing returned, the input untouched) and is raised.
            out: a C-contiguous, writeable (H, W) array of the call's dtype sharing no
                memory with ``grid`` (steps are not taken in place: a failed device restarts
                the run from ``grid``); the run writes the final grid into it (rows as they
                are finished, and border rows between rounds: a call that fails or is
                interrupted after it began may leave part of a result there, and the
                package's errors say so) and it is returned. Without it the result is a new
                array, in memory an earlier large result gave back when there is some;
                then, without ``progress`` either, on a context with the host device, a
                grid whose width is a multiple of 4 has its cells checked as the run reads
                them rather than in a pass of its own, the result returned only once all
                were found finite (a refused grid was stepped first: the profiler shows its
                run).
            dtype: float32 or float64 to compute in, overriding the grid's own.

        Returns:
            ``(H, W)`` of the call's dtype (float32 or float64), bit-identical for any
            devices, halo and layout (and, in float64, device kinds: host and lavapipe).

        Raises:
            ShapeError: ``grid`` is not 2-D with at least one row and column.
            InvalidArgumentError: non-finite cells (the first one named), ``alpha`` outside
                [0, 0.25], an unknown ``boundary``, ``steps`` or ``halo`` out of range, a
                ``split`` that does not fit the rule or gives rows to a device that cannot
                compute in the call's dtype, a ``progress`` that is not callable, a
                ``dtype=`` other than float32 or float64, float64 in a context without a
                float64 device.
            TypeError: a non-real dtype, or ``out`` of another dtype than the result's.
            DeviceLostError: no healthy device left.
        """
        array = _grid(grid, "biuf", "an array of real numbers")
        kept = result_dtype([("grid", array)], dtype, (FLOAT32, FLOAT64))
        if not isinstance(alpha, (int, float, np.integer, np.floating)) or isinstance(alpha, bool):
            raise InvalidArgumentError(f"alpha: expected a real number, got {alpha!r}")
        if not (math.isfinite(float(alpha)) and 0.0 <= float(alpha) <= 0.25):
            raise InvalidArgumentError(
                f"alpha: expected 0 <= alpha <= 0.25 (explicit steps are unstable above 1/4), "
                f"got {alpha}"
            )
        if not isinstance(boundary, str) or boundary not in BOUNDARIES:
            raise InvalidArgumentError(
                f"boundary: expected one of {list(BOUNDARIES)}, got {boundary!r}"
            )
        # Finite values are the core's check (it names the first offending cell).
        cells = contiguous("grid", array, kept)
        options = self._run_options(steps, halo, rebalance, split)
        if progress is not None and not callable(progress):
            raise InvalidArgumentError(f"progress: expected a callable, got {progress!r}")
        target = output(out, cells.shape, kept, {"grid": grid})
        result, report = self._kernels.stencil(
            self._native, cells, float(alpha), boundary, options, progress, target
        )
        self._record_run(report)
        return result

    def life(
        self,
        grid: npt.ArrayLike,
        steps: int,
        halo: int = 1,
        *,
        rebalance: bool = True,
        split: Sequence[int] | None = None,
        progress: Callable[[int, int], object] | None = None,
        out: npt.NDArray[np.uint8 | np.float16 | np.float32 | np.float64] | None = None,
    ) -> npt.NDArray[np.uint8 | np.float16 | np.float32 | np.float64]:
        """``steps`` steps of Conway's Game of Life on a (H, W) torus. Bands, failures and
        Ctrl-C as in :meth:`stencil`.

        The cells stay 0 or 1 in the grid's kind: bool and integer grids give uint8, a
        float16, float32 or float64 grid of 0.0/1.0 gives that dtype (the steps are exact
        counts, the same in every dtype).

        Args:
            grid: ``(H, W)`` cells 0 or 1, bool, integer, float16, float32 or float64 dtype
                (never modified).
            steps: an integer >= 0.
            halo: as in :meth:`stencil`.
            rebalance: as in :meth:`stencil`.
            split: as in :meth:`stencil`.
            progress: as in :meth:`stencil`.
            out: a C-contiguous, writeable (H, W) array of the result's dtype, as in
                :meth:`stencil`.

        Returns:
            ``(H, W)``, exact: uint8, or the grid's float dtype.

        Raises:
            ShapeError: ``grid`` is not 2-D with at least one row and column.
            InvalidArgumentError: a cell other than 0 or 1 (the first one named), or
                ``steps``, ``halo``, ``split`` or ``progress`` as for :meth:`stencil`.
            TypeError: a dtype other than bool, integer, float16, float32 or float64.
        """
        array = _grid(grid, "biuf", _LIFE_CELLS)
        kept = np.dtype(np.uint8) if array.dtype.kind in "biu" else array.dtype
        if kept not in (np.uint8, FLOAT16, FLOAT32, FLOAT64):
            raise TypeError(f"grid: expected {_LIFE_CELLS}, got dtype {array.dtype}")
        if progress is not None and not callable(progress):
            raise InvalidArgumentError(f"progress: expected a callable, got {progress!r}")
        cells = _cells(array)
        options = self._run_options(steps, halo, rebalance, split)
        target = output(out, cells.shape, kept, {"grid": grid})
        if kept == np.uint8:
            result, report = self._kernels.life(self._native, cells, options, progress, target)
            self._record_run(report)
            return result
        # The core steps uint8 cells; the 0/1 result is exact in every float dtype, and is
        # written into out only once the run has finished.
        result, report = self._kernels.life(self._native, cells, options, progress, None)
        self._record_run(report)
        if target is None:
            return result.astype(kept)
        target[...] = result
        return target
