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
context's. A node that fails mid-run is left out and the run starts again from the input
without it, as a single context does with a device."""

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
from .dispatch import ARGUMENT_ERRORS, Dispatcher, Job, Node
from .node import ArraySlot
from .planner import split as apportion

HEAT_LIMIT = 2.0**123
"""Largest |u| the core runs as given (above it, it scales the whole grid)."""

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
    ctx.run(Job(STENCIL, 1, float(2 * grid.nbytes), call, take, whole=True), None)
    out, report = results[0]
    return out, report


def _layout(ctx: Dispatcher, height: int, halo: int, split: list[int] | None) -> list[int]:
    """Rows per healthy node: ``split`` (rows per node index), or by each node's measured
    stencil rate, with no band thinner than ``halo`` rows (fewer nodes if need be)."""
    nodes = ctx.healthy()
    if split is not None:
        rows = [split[n.index] for n in nodes]
        if sum(rows) != height:
            raise InvalidArgumentError(
                f"split: expected rows summing to the grid's height {height}, got {sum(rows)}"
            )
        thin = [r for r in rows if 0 < r < halo]
        if thin:
            raise InvalidArgumentError(
                f"split: expected every band of a cluster run to have 0 or at least halo={halo} "
                f"rows (its ghost rows come from one neighbour), got {thin[0]}"
            )
        return rows
    usable = max(1, min(len(nodes), height // max(halo, 1)))
    chosen = sorted(nodes, key=lambda n: -n.model.throughput.get(STENCIL, 0.0))[:usable]
    weights = [n.model.throughput.get(STENCIL, 1.0) for n in chosen]
    rows = apportion(weights, height)
    by_node = {n.index: r for n, r in zip(chosen, rows)}
    return [by_node.get(n.index, 0) for n in nodes]


def _run_bands(
    ctx: Dispatcher,
    method: str,
    params: tuple[Any, ...],
    grid: np.ndarray[Any, Any],
    steps: int,
    halo: int,
    split: list[int] | None,
    progress: Callable[[int, int], object] | None,
) -> tuple[np.ndarray[Any, Any], DomainReport]:
    """One attempt of the run on the healthy nodes; raises ``_NodeLost`` if one fails."""
    height = grid.shape[0]
    periodic = method == "life" or params[1] == "periodic"
    nodes = ctx.healthy()
    rows = _layout(ctx, height, halo, split)
    bands: list[tuple[Node, int, int]] = []
    start = 0
    for node, r in zip(nodes, rows):
        if r:
            bands.append((node, start, start + r))
        start += r
    key = uuid.uuid4().hex
    t0 = time.perf_counter()
    _call(ctx, [n.actor.band_open.remote(key, grid[s:e]) for n, s, e in bands], bands)
    edges = [(grid[s:e][:halo], grid[s:e][-halo:]) for _, s, e in bands]
    rounds: list[dict[str, Any]] = []
    done = 0
    while done < steps:
        g = min(halo, steps - done)
        refs = []
        round_start = time.perf_counter()
        for i, (node, _s, _e) in enumerate(bands):
            above = i - 1 if i > 0 else (len(bands) - 1 if periodic else None)
            below = i + 1 if i + 1 < len(bands) else (0 if periodic else None)
            top = None if above is None else edges[above][1][-g:]
            bottom = None if below is None else edges[below][0][:g]
            refs.append(node.actor.band_round.remote(key, method, params, top, bottom, g, halo))
        edges = _call(ctx, refs, bands)
        wall = time.perf_counter() - round_start
        rounds.append(
            {
                "steps": g,
                "wall_s": wall,
                "assemble_s": 0.0,
                "compute_s": wall,
                "exchange_s": 0.0,
                "devices": [
                    {
                        "device": n.index,
                        "rows": e - s,
                        "bands": 1,
                        "work": (e - s) * g,
                        "upload_s": 0.0,
                        "compute_s": wall,
                        "readback_s": 0.0,
                    }
                    for n, s, e in bands
                ],
            }
        )
        done += g
        if progress is not None:
            progress(done, steps)
    t1 = time.perf_counter()
    out = np.empty_like(grid)
    for (_n, s, e), band in zip(
        bands, _call(ctx, [n.actor.band_close.remote(key) for n, _, _ in bands], bands)
    ):
        out[s:e] = band
    report = DomainReport(
        steps=steps,
        halo=halo,
        wall_s=time.perf_counter() - t0,
        rounds=rounds,
        layouts=[
            {
                "at_step": 0,
                "split": [(n.index, e - s) for n, s, e in bands],
                "bands": len(bands),
                "seconds": 0.0,
            }
        ],
        download_s=time.perf_counter() - t1,
    )
    return out, report


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
            out, report = _run_bands(
                ctx,
                method,
                params,
                grid,
                int(options["steps"]),
                int(options["halo"]),
                options["split"],
                progress,
            )
        except _NodeLost as lost:
            lost.node.healthy = False
            lost.node.reason = lost.reason
            failures.append((lost.node.index, lost.reason))
            continue
        return out, dataclasses.replace(report, failures=failures)


def stencil(
    ctx: Dispatcher,
    grid: npt.NDArray[np.float32],
    alpha: float,
    boundary: str,
    options: _native.RunOptions,
    progress: Callable[[int, int], object] | None = None,
    out: npt.NDArray[np.float32] | None = None,
) -> tuple[npt.NDArray[np.float32], DomainReport]:
    """``_native.stencil`` on the cluster: one band per node, halos through the store."""
    if not np.isfinite(grid).all() or (grid.size and float(np.abs(grid).max()) > HEAT_LIMIT):
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
    if grid.size and int(grid.max()) > 1:
        return _into(out, *_whole(ctx, "life", (ArraySlot(0), {**options, "split": None}), grid))
    return _into(out, *_grid_run(ctx, "life", (), grid, options, progress))
