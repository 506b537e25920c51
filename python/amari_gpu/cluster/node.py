"""What runs on each node: a Ray actor holding a ``MultiGpuContext`` over the node's
devices, which runs the chunks the driver sends it with the same native kernels a local
context calls (the node's context splits each chunk over its own devices as it always
does)."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _native
from ..context import MultiGpuContext
from ..errors import DeviceLostError, ShapeError
from ..profiler import Profile, _Recording
from .shared import Mappings, SharedRows, probe


@dataclass(frozen=True)
class ArraySlot:
    """Where the ``index``-th array of a chunk call goes in its arguments: the arrays travel
    as top-level arguments, which Ray resolves from its object store (zero-copy for numpy),
    and are put back in place here."""

    index: int


@dataclass(frozen=True)
class HeldSlot:
    """Where the rows the node holds under ``key`` (a shard of a cluster array, a local
    DeviceArray of its context) go in a call's arguments."""

    key: str


def _fill(template: Any, arrays: tuple[Any, ...], held: dict[str, Any] | None = None) -> Any:
    if isinstance(template, ArraySlot):
        return arrays[template.index]
    if isinstance(template, HeldSlot) and held is not None:
        return held[template.key]
    if isinstance(template, (list, tuple)):
        filled = [_fill(t, arrays, held) for t in template]
        return filled if isinstance(template, list) else tuple(filled)
    return template


@dataclass(frozen=True)
class _Gpus:
    """The GPU ids Ray assigned the actor and the adapters matched to them."""

    ids: list[str]
    adapters: list[int] | None
    how: str


def _gpu_match(options: dict[str, Any]) -> _Gpus:
    import ray

    from .._adapters import adapters
    from .gpus import match_gpu_ids

    ids = [str(i) for i in ray.get_gpu_ids()]
    found = match_gpu_ids(ids, adapters(), options.get("backends"))
    return _Gpus(ids, found.adapters, found.how)


class NodeWorker:
    """One node's worker (Ray turns it into an actor placed on the node). ``options`` are
    ``MultiGpuContext`` keyword arguments."""

    def __init__(self, options: dict[str, Any], gpus: bool = False) -> None:
        # An actor that asked for num_gpus opens the adapters of the GPUs Ray gave it.
        self._gpus = _gpu_match(options) if gpus else None
        if self._gpus is not None and self._gpus.adapters is not None:
            options = {**options, "backends": None, "adapters": self._gpus.adapters}
        self._ctx = MultiGpuContext(**options)
        self._chunks = 0
        self._fail_at: int | None = None
        self._fault = "kill"
        self._bands: dict[str, Any] = {}
        # Shards of cluster arrays: native DeviceArrays of this node's context, by key.
        self._held: dict[str, Any] = {}
        self._recording: _Recording | None = None
        self._profile: Profile | None = None
        self._profile_t0 = 0.0
        self._last_run = (0.0, 0.0, False)
        # The driver's shared memory this node has mapped (the same-host transport).
        self._shared = Mappings()

    def describe(self, node_id: str, address: str) -> dict[str, Any]:
        """The node, its devices and their calibrated items/s per family (summed: the rate
        of the node's context as one device of the cluster)."""
        caps = self._ctx.calibrate()
        throughput: dict[str, float] = {}
        for c in caps:
            for family, rate in c.throughput.items():
                throughput[family] = throughput.get(family, 0.0) + float(rate)
        return {
            "node_id": node_id,
            "address": address,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "devices": [
                {
                    "id": d.id,
                    "name": d.adapter.name,
                    "backend": d.adapter.backend,
                    "device_type": d.adapter.device_type,
                    "dtypes": list(d.dtypes),
                }
                for d in self._ctx.devices
            ],
            "throughput": throughput,
            "gpus": None
            if self._gpus is None
            else {"ids": list(self._gpus.ids), "how": self._gpus.how},
        }

    def clock(self) -> float:
        """The node's wall clock (the driver aligns the node's timeline with it)."""
        return time.time()

    def receive(self, data: Any) -> int:
        """Takes an array through the object store (the driver times it)."""
        return int(data.nbytes)

    def send(self, nbytes: int) -> Any:
        """Returns ``nbytes`` bytes through the object store (the driver times it)."""
        return np.ones(nbytes, dtype=np.uint8)

    def shared_memory(self, path: str, token: bytes) -> bool:
        """Whether this node can open the driver's shared memory (see ``shared.probe``)."""
        return probe(path, token)

    def run(
        self,
        method: str,
        strategy: str | None,
        template: Any,
        *arrays: Any,
        chunks: int = 1,
        out: SharedRows | None = None,
        forget: tuple[int, list[int]] | None = None,
    ) -> Any:
        """One message, a run of ``chunks`` chunks: ``_native.<method>(context, *args,
        strategy)``, ``args`` being ``template`` with its ``ArraySlot``s replaced by
        ``arrays`` (read from the object store, or the driver's shared memory for those
        given as ``SharedRows``, without a copy: the native entry points borrow read-only
        arrays). With ``out`` (rows in the driver's shared memory) the result is written
        there, and the reply carries None in its place. ``forget``: the driver's process id
        and the segments it closed, which this node unmaps."""
        started = time.time()
        if forget is not None:
            self._shared.forget(*forget)
        self._chunk(chunks)
        arrays = tuple(
            self._shared.view(a, writeable=False) if isinstance(a, SharedRows) else a
            for a in arrays
        )
        args = _fill(template, arrays)
        native = getattr(_native, method)
        if out is None:
            result = native(self._ctx._native, *args, strategy)
        else:
            _, plan = native(
                self._ctx._native, *args, strategy, out=self._shared.view(out, writeable=True)
            )
            result = (None, plan)
        borrowed = all(
            not (a.flags.writeable or a.flags.owndata) for a in arrays if isinstance(a, np.ndarray)
        )
        self._last_run = (started, time.time(), borrowed)
        return result

    def cpu_s(self) -> float:
        """The node process's CPU seconds so far, user and system, all its threads (its
        devices' driver threads included): what ``benches/cluster.py`` counts a call's CPU
        time on the node by."""
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def last_run(self) -> tuple[float, float, bool]:
        """The node clock when the last :meth:`run` started (its arrays read from the store
        already) and ended, and whether its arrays were read-only views of the store (read
        without a copy): what ``benches/cluster.py`` splits a call's time by."""
        return self._last_run

    def _chunk(self, count: int = 1) -> None:
        """Counts ``count`` units of work (the chunks of a message, a grid round, a shard's
        call or upload), failing first when a fault was injected for one of them."""
        if self._fail_at is not None and self._chunks + count > self._fail_at:
            self._inject()
        self._chunks += count

    def part_kept(self, name: str, part: Any) -> tuple[tuple[int, ...], str]:
        """The shape of a caller's array (``from_ray``; ``name`` in errors) and the dtype
        ``asarray`` keeps of it (float16, float32 and float64 kept, bool and integers as
        float64; others refused), after ``asarray``'s checks of its rows: what the driver
        places and checks the parts by before any is uploaded."""
        from .._dtypes import KEPT, result_dtype
        from .._validate import plain_array

        array = plain_array(name, part)
        # The dtype first: its error names the dtypes taken (none is converted to float32).
        kept = result_dtype([(name, array)], None, KEPT)
        if array.ndim == 0:
            raise ShapeError(f"{name}: expected an array with at least one axis, got a scalar")
        cols = array.shape[-1] if array.ndim > 1 else 1
        if kept.itemsize == 2 and cols % 2:
            raise ShapeError(
                f"{name}: expected float16 rows of an even number of values (two to a 4-byte "
                f"word on the devices; a 1-D array is rows of one value), got shape "
                f"{tuple(array.shape)}"
            )
        return tuple(array.shape), kept.name

    def hold(
        self,
        key: str,
        names: list[str],
        slices: list[tuple[int, int | None]],
        *parts: Any,
        dtype: str = "float32",
        values: bool = False,
    ) -> tuple[int, ...]:
        """Uploads rows into this node's devices and keeps them under ``key``: the rows
        ``slices[i]`` of ``parts[i]`` (arrays Ray read from its store; ``names[i]`` in
        errors), in order, holding values of ``dtype``. The parts are rows of the devices'
        words (a cluster array's shard), uploaded as they are; with ``values``, the caller's
        arrays (``from_ray``, checked by :meth:`part_kept`), their values converted to
        ``dtype``. Returns the shape of the first part."""
        from .._validate import contiguous, real_array

        self._chunk()
        rows = []
        for name, (lo, hi), part in zip(names, slices, parts):
            array = real_array(name, part)
            if array.ndim == 0:
                raise ShapeError(f"{name}: expected an array with at least one axis, got a scalar")
            width = array.shape[-1] if array.ndim > 1 else 1
            if width == 0 or array.size == 0:
                return tuple(array.shape)
            part_rows = array.reshape(-1, width)[lo:hi]
            if values:
                part_rows = contiguous(name, part_rows, np.dtype(dtype)).view(np.float32)
            rows.append(part_rows)
        flat = np.ascontiguousarray(rows[0] if len(rows) == 1 else np.concatenate(rows))
        self._held[key] = _native.resident_upload(self._ctx._native, flat, None, dtype)
        return tuple(np.shape(parts[0]))

    def compute(self, key: str, method: str, template: Any, *arrays: Any) -> tuple[int, int, str]:
        """``_native.<method>(context, *args)`` with ``args`` being ``template`` with its
        ``ArraySlot``s replaced by ``arrays`` and its ``HeldSlot``s by held shards; keeps the
        resident result under ``key`` and returns its rows, columns (words) and dtype."""
        self._chunk()
        args = _fill(template, arrays, self._held)
        result = getattr(_native, method)(self._ctx._native, *args)
        # Kernels return (array, plan); indexing and elementwise arithmetic the array.
        if isinstance(result, tuple):
            result = result[0]
        self._held[key] = result
        return int(result.rows), int(result.cols), str(result.dtype)

    def export(self, key: str, start: int, stop: int) -> Any:
        """Rows ``start..stop`` of the shard held under ``key`` (into the object store)."""
        whole = _native.resident_gather(self._ctx._native, self._held[key])
        return whole[start:stop]

    def drop(self, keys: list[str]) -> None:
        """Releases the shards held under ``keys`` (those it holds)."""
        for key in keys:
            handle = self._held.pop(key, None)
            if handle is not None:
                handle.free()

    def band_open(self, key: str, band: Any) -> None:
        """Keeps a grid band (rows of a ``stencil`` or ``life`` call) for its rounds."""
        self._bands[key] = np.array(band)

    def band_round(
        self,
        key: str,
        method: str,
        params: tuple[Any, ...],
        top: Any,
        bottom: Any,
        steps: int,
        halo: int,
    ) -> tuple[Any, Any, float]:
        """``steps`` steps of the band with ghost rows ``top`` and ``bottom`` (None at a
        grid edge without wrap-around); returns the band's first and last ``halo`` rows and
        the seconds the node's context took for the steps."""
        self._chunk()
        band = self._bands[key]
        parts = [p for p in (top, band, bottom) if p is not None]
        options = {"steps": steps, "halo": steps, "rebalance": False, "split": None}
        grid = np.ascontiguousarray(np.concatenate(parts))
        t0 = time.perf_counter()
        out, _ = getattr(_native, method)(self._ctx._native, grid, *params, options, None)
        seconds = time.perf_counter() - t0
        first = 0 if top is None else len(top)
        self._bands[key] = band = out[first : first + len(band)]
        return band[:halo], band[-halo:], seconds

    def band_rows(self, key: str, start: int, stop: int) -> Any:
        """Rows ``start..stop`` of the band (for another node's band after a new split)."""
        return self._bands[key][start:stop]

    def band_set(self, key: str, halo: int, *parts: Any) -> tuple[Any, Any]:
        """The band made of ``parts`` (rows in order, after a new split); returns its
        first and last ``halo`` rows."""
        band = self._bands[key] = np.concatenate(parts)
        return band[:halo], band[-halo:]

    def band_close(self, key: str, give: bool = True) -> Any:
        """The band after the last round, or None when not ``give`` (and forgets it)."""
        band = self._bands.pop(key)
        return band if give else None

    def inject_fault(self, after_chunks: int, fault: str) -> None:
        """Makes this node fail (``fault``: "kill", "hang" or "device_error") when it starts
        a message that would take it past ``after_chunks`` more chunks."""
        self._fail_at = self._chunks + after_chunks
        self._fault = fault

    def _inject(self) -> None:
        if self._fault == "kill":
            # The node's process dies as a crashed node's does, so the driver sees exactly
            # what Ray reports for a lost actor.
            os._exit(1)
        if self._fault == "hang":
            while True:
                time.sleep(1.0)
        raise DeviceLostError("every device of this node was lost (injected fault: device_error)")

    def profile_start(self) -> float:
        """Starts recording; returns the node clock at the start of its timeline."""
        self._recording = _Recording(self._ctx)
        self._profile_t0 = time.time()
        self._profile = self._recording.__enter__()
        return self._profile_t0

    def profile_stop(self) -> dict[str, Any]:
        """Stops recording; the node's events, user and kernel calls, summary and device
        names."""
        if self._recording is None or self._profile is None:
            return {
                "t0": 0.0,
                "events": [],
                "calls": [],
                "kernel_calls": [],
                "names": {},
                "summary": None,
            }
        self._recording.__exit__(None, None, None)
        prof, self._recording, self._profile = self._profile, None, None
        return {
            "t0": self._profile_t0,
            "events": prof.events,
            "calls": prof.calls,
            "kernel_calls": prof.kernel_calls,
            "names": dict(prof._native.device_names()),
            "summary": prof.summary(),
        }

    def stats(self) -> list[dict[str, Any]]:
        """The node context's per-device stats."""
        return self._ctx.stats()

    def health(self) -> dict[int, dict[str, Any]]:
        """The node context's per-device health."""
        return self._ctx.health()

    def close(self) -> None:
        """Releases the node's devices (and its mappings of the driver's memory)."""
        self._shared.clear()
        self._ctx.close()
