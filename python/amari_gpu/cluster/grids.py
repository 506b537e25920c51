"""Grids across nodes: ``stencil`` and ``life`` with the grid cut into one row band per
node, each band kept by its node's actor between rounds, and only halo rows travelling
through the object store.

A round of ``g`` steps (``g`` = ``halo``, or what is left): every node gets the ``g`` rows
above and below its band from its neighbours' edges, runs ``g`` steps on band plus ghosts
with its own context (which splits them over its devices as a local call does), keeps the
band and returns its top and bottom ``g`` rows for its neighbours. Whatever the ghost rows'
own boundary handling does to them reaches at most ``g`` rows inward in ``g`` steps, so
every band row is computed from exact neighbours: the bits of one context, for any node
count. Grids the core would scale (max |u| above 2^123) or refuse (non-finite cells, cells
other than 0/1) run whole on one node, so their results and errors are the single
context's (the core's own checks, ``_native.check_stencil`` and ``_native.check_life``, say
which: its errors, and the scaling it would apply). A node that fails mid-run is left out
and the run starts again from the input without it, as a single context does with a device.

With ``rebalance`` (the default, as locally) the core's balancer (``_native.Balancer``) is
given each node's measured round (seconds of its own stepping, or work over a rate injected
by :meth:`~amari_gpu.RayContext.inject_grid_rate`) and proposes a new split when moving the
rows pays by its rule; rows then move between the nodes' bands node to node through the
object store. Every cell is computed by the same arithmetic in any band: the bits stay."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from .. import _native
from ..domain import DomainReport
from ..errors import AmariGpuError, InvalidArgumentError
from .array import row_ranges
from .dispatch import ARGUMENT_ERRORS, Dispatcher, Job, Node, devices_text
from .node import ArraySlot
from .planner import split as apportion

STENCIL = "stencil"


def _into(
    out: np.ndarray[Any, Any] | None, result: Any, report: DomainReport
) -> tuple[Any, DomainReport]:
    """The grid gathered on the driver, copied into the caller's ``out`` when given."""
    if out is None:
        return result, report
    out[...] = result
    return out, report


def _whole(
    ctx: Dispatcher, method: str, template: tuple[Any, ...], grid: Any
) -> tuple[Any, DomainReport]:
    """The call run as it is by one node (its context's own bands and report, the
    ``DomainReport`` its bindings built, pickled through the object store)."""
    results: list[Any] = []

    def call(_s: int, _e: int) -> tuple[str, Any, list[Any]]:
        return method, template, [grid]

    def take(_c: int, _s: int, _e: int, r: Any) -> None:
        results.append((np.array(r[0]), r[1]))

    # The node calls _native.<method>(context, *template, None): None is the progress.
    job = Job(STENCIL, 1, float(2 * grid.nbytes), call, take, whole=True, dtype=_dtype(grid))
    ctx.run(job, None)
    out, report = results[0]
    return out, report


def _dtype(grid: np.ndarray[Any, Any]) -> str | None:
    """The dtype a grid's bands compute in when not every device computes in it (float64),
    else None (float32 grids and Life's uint8 cells: every device)."""
    return "float64" if grid.dtype == np.float64 else None


def _left_out(ctx: Dispatcher, dtype: str | None) -> list[tuple[int, str]]:
    """The healthy nodes given no rows because none of their devices computes in ``dtype``,
    and why (the local ``DomainReport.left_out``, with nodes as devices)."""
    able = ctx.computing(dtype)
    return [
        (n.index, f"{dtype} grids need a device that computes in {dtype}: {devices_text(n.info)}")
        for n in ctx.healthy()
        if n not in able
    ]


def _layout(
    ctx: Dispatcher, height: int, halo: int, split: list[int] | None, dtype: str | None = None
) -> list[int]:
    """Rows per healthy node: ``split`` (rows per node index, see :func:`_check_split`), or
    by each node's measured stencil rate, with no band thinner than ``halo`` rows (fewer
    nodes if need be); only nodes with a device that computes in ``dtype`` get rows (a
    ``split`` giving another node rows is refused, naming it)."""
    nodes = ctx.healthy()
    able = ctx.computing(dtype)
    if split is not None:
        rows = [split[n.index] for n in nodes]
        for n, r in zip(nodes, rows):
            if r > 0 and n not in able:
                raise InvalidArgumentError(
                    f"split: expected 0 rows for node {n.index}, which has no device that "
                    f"computes in {dtype} ({devices_text(n.info)}), got {r}"
                )
        thin = [r for r in rows if 0 < r < halo]
        if thin:
            raise InvalidArgumentError(
                f"split: expected every band of a cluster run to have 0 or at least halo={halo} "
                f"rows (its ghost rows come from one neighbour), got {thin[0]}"
            )
        return rows
    usable = max(1, min(len(able), height // max(halo, 1)))
    chosen = sorted(able, key=lambda n: -n.model.throughput.get(STENCIL, 0.0))[:usable]
    weights = [n.model.throughput.get(STENCIL, 1.0) for n in chosen]
    rows = apportion(weights, height)
    by_node = {n.index: r for n, r in zip(chosen, rows)}
    return [by_node.get(n.index, 0) for n in nodes]


def _check_split(ctx: Dispatcher, grid: np.ndarray[Any, Any], options: _native.RunOptions) -> None:
    """The caller's ``split`` checked by the core as a local run's first layout checks it
    (an entry per node, adding up to the grid's rows, none for a failed node), before
    anything runs, whichever way the grid then runs."""
    if options["split"] is not None:
        healthy = [n.index for n in ctx.healthy()]
        _native.check_split(options["split"], len(ctx.nodes), healthy, grid.shape[0])


def _judged(node: Node, work: int, seconds: float) -> float:
    """A node's round as the balancer judges it: measured, unless a test injected a rate."""
    return work / node.grid_rate if node.grid_rate is not None else seconds


class _Run:
    """One attempt of a grid run on the healthy nodes; raises ``_NodeLost`` if one fails."""

    def __init__(self, ctx: Dispatcher, method: str, params: tuple[Any, ...], grid: Any) -> None:
        self.ctx = ctx
        self.method = method
        self.params = params
        self.grid = grid
        self.key = uuid.uuid4().hex
        self.periodic = method == "life" or params[1] == "periodic"
        self.row_bytes = grid.shape[1] * grid.itemsize

    def round(
        self, bands: list[tuple[Node, int, int]], edges: list[Any], g: int, halo: int
    ) -> tuple[list[Any], list[float]]:
        """``g`` steps on every band; the bands' new edges and each node's seconds."""
        refs = []
        for i, (node, _s, _e) in enumerate(bands):
            above = i - 1 if i > 0 else (len(bands) - 1 if self.periodic else None)
            below = i + 1 if i + 1 < len(bands) else (0 if self.periodic else None)
            top = None if above is None else edges[above][1][-g:]
            bottom = None if below is None else edges[below][0][:g]
            refs.append(
                node.actor.band_round.remote(
                    self.key, self.method, self.params, top, bottom, g, halo
                )
            )
        answers = _call(self.ctx, refs, bands)
        return [(a[0], a[1]) for a in answers], [float(a[2]) for a in answers]

    def relayout(
        self, bands: list[tuple[Node, int, int]], split: list[tuple[int, int]], halo: int
    ) -> tuple[list[tuple[Node, int, int]], list[Any]]:
        """Moves rows to the bands of ``split`` ((node index, rows), the bands' order):
        each node's new band assembled from the old bands' rows, node to node through the
        object store; the new bands and their edges."""
        by_index = {n.index: n for n, _s, _e in bands}
        new = row_ranges([by_index[i] for i, _ in split], [r for _, r in split])
        pieces = []
        for _node, s, e in new:
            parts = []
            for owner, os_, oe in bands:
                lo, hi = max(s, os_), min(e, oe)
                if lo < hi:
                    parts.append(owner.actor.band_rows.remote(self.key, lo - os_, hi - os_))
            pieces.append(parts)
        kept = {n.index for n, _s, _e in new}
        gone = [(n, s, e) for n, s, e in bands if n.index not in kept]
        _call(self.ctx, [n.actor.band_close.remote(self.key, False) for n, _s, _e in gone], gone)
        refs = [
            node.actor.band_set.remote(self.key, halo, *parts)
            for (node, _s, _e), parts in zip(new, pieces)
        ]
        return new, _call(self.ctx, refs, new)

    def propose(
        self,
        balancer: _native.Balancer,
        bands: list[tuple[Node, int, int]],
        round_s: float,
        remaining: int,
        halo: int,
    ) -> list[tuple[int, int]] | None:
        """The balancer's new split when moving pays (the cost of a move: two round trips
        and the moved rows at the slowest node's measured transfer rate); None also when
        it would leave a band thinner than ``halo`` rows (its ghosts come from one
        neighbour)."""
        nodes = [n for n, _s, _e in bands]
        latency = max(n.info.get("latency_s", 0.0) for n in nodes)
        rate = min(
            min(n.info.get("upload_bytes_per_s", 1e9), n.info.get("download_bytes_per_s", 1e9))
            for n in nodes
        )
        split = [(n.index, e - s) for n, s, e in bands]
        proposal = balancer.propose(
            split, round_s, remaining, latency, 2.0 * self.row_bytes / rate, halo
        )
        if proposal is None or any(0 < r < halo for _, r in proposal):
            return None
        return proposal


def _run_bands(
    ctx: Dispatcher,
    method: str,
    params: tuple[Any, ...],
    grid: np.ndarray[Any, Any],
    options: _native.RunOptions,
    progress: Callable[[int, int], object] | None,
) -> tuple[np.ndarray[Any, Any], DomainReport]:
    """One attempt of the run on the healthy nodes; raises ``_NodeLost`` if one fails."""
    steps, halo = int(options["steps"]), int(options["halo"])
    run = _Run(ctx, method, params, grid)
    dtype = _dtype(grid)
    layout = _layout(ctx, grid.shape[0], halo, options["split"], dtype)
    bands = row_ranges(ctx.healthy(), layout)
    t0 = time.perf_counter()
    _call(ctx, [n.actor.band_open.remote(run.key, grid[s:e]) for n, s, e in bands], bands)
    edges = [(grid[s:e][:halo], grid[s:e][-halo:]) for _, s, e in bands]
    rounds: list[dict[str, Any]] = []
    layouts = [_layout_entry(0, bands, 0.0)]
    balancer = _native.Balancer()
    done = 0
    while done < steps:
        g = min(halo, steps - done)
        round_start = time.perf_counter()
        edges, seconds = run.round(bands, edges, g, halo)
        wall = time.perf_counter() - round_start
        judged = 0.0
        for (node, s, e), busy in zip(bands, seconds):
            work = (e - s + 2 * g) * grid.shape[1] * g
            judged = max(judged, _judged(node, work, busy))
            balancer.observe(node.index, work, _judged(node, work, busy), 0.0)
        rounds.append(_round_entry(g, wall, bands, seconds))
        balancer.round_done()
        done += g
        if progress is not None:
            progress(done, steps)
        if done >= steps or not options["rebalance"]:
            continue
        remaining = -(-(steps - done) // halo)
        split = run.propose(balancer, bands, max(wall, judged), remaining, halo)
        if split is None:
            continue
        t = time.perf_counter()
        bands, edges = run.relayout(bands, split, halo)
        balancer.relaid()
        layouts.append(_layout_entry(done, bands, time.perf_counter() - t))
    t1 = time.perf_counter()
    out = np.empty_like(grid)
    for (_n, s, e), band in zip(
        bands, _call(ctx, [n.actor.band_close.remote(run.key) for n, _, _ in bands], bands)
    ):
        out[s:e] = band
    report = DomainReport(
        steps=steps,
        halo=halo,
        wall_s=time.perf_counter() - t0,
        rounds=rounds,
        layouts=layouts,
        download_s=time.perf_counter() - t1,
        left_out=_left_out(ctx, dtype),
    )
    return out, report


def _layout_entry(
    at_step: int, bands: list[tuple[Node, int, int]], seconds: float
) -> dict[str, Any]:
    return {
        "at_step": at_step,
        "split": [(n.index, e - s) for n, s, e in bands],
        "bands": len(bands),
        "seconds": seconds,
    }


def _round_entry(
    g: int, wall: float, bands: list[tuple[Node, int, int]], seconds: list[float]
) -> dict[str, Any]:
    return {
        "steps": g,
        "wall_s": wall,
        "assemble_s": 0.0,
        "compute_s": max(seconds, default=0.0),
        "exchange_s": max(wall - max(seconds, default=0.0), 0.0),
        "devices": [
            {
                "device": n.index,
                "rows": e - s,
                "bands": 1,
                "work": (e - s) * g,
                "upload_s": 0.0,
                "compute_s": busy,
                "readback_s": 0.0,
            }
            for (n, s, e), busy in zip(bands, seconds)
        ],
    }


class _NodeLost(Exception):
    def __init__(self, node: Node, reason: str) -> None:
        super().__init__(reason)
        self.node = node
        self.reason = reason


def _call(ctx: Dispatcher, refs: list[Any], bands: list[tuple[Node, int, int]]) -> Any:
    """``ray.get`` of one ref per band, all within ``node_timeout_s`` (the bands run at
    once), turning a node's failure into ``_NodeLost``; a node that does not answer in
    time is hung, and its actor is ended."""
    timeout = ctx.node_timeout_s
    deadline = time.monotonic() + timeout
    out = []
    for ref, (node, _s, _e) in zip(refs, bands):
        try:
            out.append(ray.get(ref, timeout=max(deadline - time.monotonic(), 0.0)))
        except GetTimeoutError:
            ray.kill(node.actor, no_restart=True)
            raise _NodeLost(
                node, f"hung: no band round finished within node_timeout_s={timeout}"
            ) from None
        except RayTaskError as e:
            cause = e.cause if isinstance(e.cause, BaseException) else e
            if isinstance(cause, ARGUMENT_ERRORS):
                raise cause from None
            raise _NodeLost(node, f"{type(cause).__name__}: {cause}") from None
        except RayActorError as e:
            raise _NodeLost(node, f"actor died: {type(e).__name__}") from None
    return out


def _grid_run(
    ctx: Dispatcher,
    method: str,
    params: tuple[Any, ...],
    grid: np.ndarray[Any, Any],
    options: _native.RunOptions,
    progress: Callable[[int, int], object] | None,
) -> tuple[Any, DomainReport]:
    if ctx.closed:
        raise AmariGpuError("the context is closed")
    failures: list[tuple[int, str]] = []
    while True:
        if not ctx.healthy():
            raise ctx.no_healthy_node()
        try:
            out, report = _run_bands(ctx, method, params, grid, options, progress)
        except _NodeLost as lost:
            lost.node.healthy = False
            lost.node.reason = lost.reason
            failures.append((lost.node.index, lost.reason))
            # As a local run restarts: the caller's split was for the first layout only;
            # the healthy nodes share the rows by their rates.
            options = {**options, "split": None}
            continue
        return out, dataclasses.replace(report, failures=failures)


def stencil(
    ctx: Dispatcher,
    grid: npt.NDArray[np.float32 | np.float64],
    alpha: float,
    boundary: str,
    options: _native.RunOptions,
    progress: Callable[[int, int], object] | None = None,
    out: npt.NDArray[np.float32 | np.float64] | None = None,
) -> tuple[npt.NDArray[np.float32 | np.float64], DomainReport]:
    """``_native.stencil`` on the cluster: one band per node, halos through the store (a
    grid the core scales, by its own check, runs whole on one node). A float64 grid is
    checked in float64 (its own limit, 2^1019), its bands stay float64 and each node steps
    them in float64: a node without a float64 device refuses, as a local context does."""
    scaled = _native.check_stencil(grid, alpha, boundary, int(options["steps"]))
    _check_split(ctx, grid, options)
    if scaled:
        template = (ArraySlot(0), alpha, boundary, {**options, "split": None})
        return _into(out, *_whole(ctx, "stencil", template, grid))
    return _into(out, *_grid_run(ctx, "stencil", (alpha, boundary), grid, options, progress))


def life(
    ctx: Dispatcher,
    grid: npt.NDArray[np.uint8],
    options: _native.RunOptions,
    progress: Callable[[int, int], object] | None = None,
    out: npt.NDArray[np.uint8] | None = None,
) -> tuple[npt.NDArray[np.uint8], DomainReport]:
    """``_native.life`` on the cluster: one band per node, halos through the store."""
    _native.check_life(grid)
    _check_split(ctx, grid, options)
    return _into(out, *_grid_run(ctx, "life", (), grid, options, progress))
