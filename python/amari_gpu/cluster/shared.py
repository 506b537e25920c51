"""The same-host transport of a ``RayContext``: a node on the driver's machine reads a call's
operands from, and writes its rows of the result into, the driver's shared memory instead
of Ray's object store, which would copy each of them once more (the operands into the
store, the node's result into the store, the driver's copy of it out of the store).

Segments are anonymous shared memory (``memfd_create``) that the node opens through the
driver's ``/proc/<pid>/fd/<fd>``: there is no name to remove, so nothing outlives the
processes that map a segment, whichever of them dies. Whether a node can is decided by a
test, not by its address (:func:`probe`): the node opens a segment holding a random token
and reads the token back.

The driver keeps free segments for reuse (:class:`Pool`, by size), and each node keeps its
mappings of them: a call of the size of the last one touches no fresh page on either side.
A call's result lives in a segment lent to the caller (the array returned is a view of its
mapping); when the caller's array is gone the segment goes back to the pool. A segment a
call used when a node failed, or that an interrupted call used, is never reused: a node
the driver gave up on may still read or write it."""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from dataclasses import dataclass
from itertools import count
from typing import Any

import numpy as np

from .. import _native
from ..errors import InvalidArgumentError

TRANSPORT_ENV = "AMARI_GPU_RAY_TRANSPORT"
"""Environment variable choosing how arrays travel to and from the nodes: ``auto`` (the
default: shared memory with the nodes that pass :func:`probe`, the object store with the
others), ``object_store`` (every node through the store) or ``shared_memory`` (every node
through shared memory; a node that fails the probe is an error when the context opens)."""

TRANSPORTS = ("auto", "object_store", "shared_memory")

MIN_BYTES = 1 << 20
"""Arrays (and results) smaller than this keep the object store: their copies are cheap,
while each segment holds a file descriptor for as long as it lives."""

ALIGN = 64
"""Byte alignment of each array in a segment (the core reads aligned rows)."""

KEEP_BYTES = 1 << 30
"""Bytes of free segments the driver keeps for reuse; the oldest past it are closed."""

MAX_LENT = 256
"""Results lent to callers at a time; past it, results come through the object store (each
lent result holds a file descriptor)."""

_ids = count(1)


def transport() -> str:
    """The transport :data:`TRANSPORT_ENV` asks for (``auto`` when unset)."""
    value = os.environ.get(TRANSPORT_ENV, "auto").strip() or "auto"
    if value not in TRANSPORTS:
        raise InvalidArgumentError(
            f"{TRANSPORT_ENV}: expected one of {', '.join(TRANSPORTS)}, got {value!r}"
        )
    return value


def available() -> bool:
    """Whether this process can make segments (Linux's ``memfd_create``)."""
    return hasattr(os, "memfd_create") and os.path.isdir(f"/proc/{os.getpid()}/fd")


@dataclass(frozen=True)
class SharedRows:
    """An array in a segment of the driver's shared memory, as a node is told of it: the
    segment (the driver's process id and the segment's number, and the path the node opens
    it by), its size, and the array's offset, shape and dtype."""

    owner: int
    segment: int
    path: str
    size: int
    offset: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        n = np.dtype(self.dtype).itemsize
        for s in self.shape:
            n *= s
        return n


class Segment:
    """A segment of shared memory the driver made: its descriptor stays open while it
    lives (a node opens the segment through it), its mapping is the driver's view."""

    def __init__(self, size: int) -> None:
        self.fd = os.memfd_create("amari-gpu-ray", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            self.map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise
        self.size = size
        probe = np.frombuffer(self.map, dtype=np.uint8)
        self.address = int(probe.ctypes.data)
        """Where the driver's mapping starts (an array there is in the segment)."""
        del probe
        self.id = next(_ids)
        self.path = f"/proc/{os.getpid()}/fd/{self.fd}"
        self.tainted = False
        """Used by a call a node failed in: never reused (see the module's docstring)."""

    def rows(self, offset: int, shape: tuple[int, ...], dtype: Any) -> SharedRows:
        return SharedRows(
            os.getpid(), self.id, self.path, self.size, offset, shape, np.dtype(dtype).name
        )

    def array(self, offset: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
        """The driver's view of an array in the segment."""
        return _view(self.map, offset, shape, dtype)

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:
            # A view of it is still alive: the mapping goes with the last one.
            pass
        os.close(self.fd)


def _view(buffer: Any, offset: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
    dt = np.dtype(dtype)
    n = 1
    for s in shape:
        n *= s
    return np.frombuffer(buffer, dtype=dt, count=n, offset=offset).reshape(shape)


def aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


class Pool:
    """The driver's segments of one context: free ones kept for reuse by size, those lent
    to callers as results, and the ids of those closed since (which the nodes drop)."""

    def __init__(self) -> None:
        # Reentrant: a result's finalizer gives its segment back from wherever the garbage
        # collector runs, which may be inside this pool's own methods.
        self._lock = threading.RLock()
        self._free: list[Segment] = []
        self._lent: dict[int, Segment] = {}
        self.closed_ids: list[int] = []
        self.closed = False

    def take(self, size: int) -> Segment:
        """A free segment of at least ``size`` bytes (the smallest, if not much larger),
        else a new one."""
        with self._lock:
            fits = [s for s in list(self._free) if size <= s.size <= size + size // 4 + (2 << 20)]
            if fits:
                best = min(fits, key=lambda s: s.size)
                if best in self._free:
                    self._free.remove(best)
                    return best
        # Sizes rounded up so that calls of nearly one size share segments (and an empty
        # array still has a segment to map).
        return Segment(max(-(-size // (1 << 20)), 1) * (1 << 20))

    def give(self, segment: Segment) -> None:
        """Takes ``segment`` back after a call (closed when tainted, when the pool is
        closed, or past :data:`KEEP_BYTES` of free segments, the oldest first)."""
        with self._lock:
            if segment.tainted or self.closed:
                self._close(segment)
                return
            self._free.append(segment)
            while sum(s.size for s in self._free) > KEEP_BYTES:
                self._close(self._free.pop(0))

    def _close(self, segment: Segment) -> None:
        segment.close()
        self.closed_ids.append(segment.id)

    def can_lend(self) -> bool:
        return len(self._lent) < MAX_LENT and not self.closed

    def holding(self, array: np.ndarray[Any, Any]) -> tuple[Segment, int] | None:
        """The lent segment a C-contiguous ``array`` lies in (a result of an earlier call,
        or a view of one: a node reads it where it is) and its offset there, else None."""
        if not array.flags.c_contiguous or not array.nbytes:
            return None
        start = int(array.ctypes.data)
        with self._lock:
            for segment in list(self._lent.values()):
                offset = start - segment.address
                if 0 <= offset and offset + array.nbytes <= segment.size:
                    return segment, offset
        return None

    def lend(self, segment: Segment, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
        """The caller's array of ``shape`` and ``dtype`` at the start of ``segment``: a
        writeable view of the driver's mapping that keeps it alive; the segment comes back
        to the pool when the last view of it is gone."""
        holder = np.frombuffer(segment.map, dtype=np.uint8, count=segment.size)
        # Views of the array keep ``holder`` as their base (numpy stops at the last array
        # before the mapping), so the finalizer runs when the caller holds none of them.
        weakref.finalize(holder, self._returned, segment)
        with self._lock:
            self._lent[segment.id] = segment
        dt = np.dtype(dtype)
        n = 1
        for s in shape:
            n *= s
        lent: np.ndarray[Any, Any] = holder[: n * dt.itemsize].view(dt).reshape(shape)
        return lent

    def _returned(self, segment: Segment) -> None:
        with self._lock:
            self._lent.pop(segment.id, None)
        self.give(segment)

    def close(self) -> None:
        """Closes the free segments; lent ones close when their callers let them go."""
        with self._lock:
            self.closed = True
            while self._free:
                self._close(self._free.pop())


def copy_into(segment: Segment, offset: int, array: np.ndarray[Any, Any]) -> None:
    """Copies ``array`` into ``segment`` at ``offset``: the core's row copy on the machine's
    threads for a C-contiguous one, numpy's otherwise."""
    dst = segment.array(offset, array.shape, array.dtype)
    if array.flags.c_contiguous and array.size:
        _native.copy_rows(dst.reshape(1, -1).view(np.uint8), array.reshape(1, -1).view(np.uint8))
    else:
        dst[...] = array


class Mappings:
    """A node's mappings of the driver's segments, by driver and segment id: opened once,
    kept for the calls that reuse the segment, dropped when the driver closes it."""

    def __init__(self) -> None:
        self._maps: dict[tuple[int, int], mmap.mmap] = {}

    def view(self, rows: SharedRows, writeable: bool) -> np.ndarray[Any, Any]:
        key = (rows.owner, rows.segment)
        mapped = self._maps.get(key)
        if mapped is None:
            fd = os.open(rows.path, os.O_RDWR)
            try:
                mapped = mmap.mmap(fd, rows.size)
            finally:
                os.close(fd)
            self._maps[key] = mapped
        array = _view(mapped, rows.offset, rows.shape, rows.dtype)
        array.flags.writeable = writeable
        return array

    def forget(self, owner: int, ids: list[int]) -> None:
        for i in ids:
            self._maps.pop((owner, i), None)

    def clear(self) -> None:
        self._maps.clear()


def probe_token() -> tuple[Segment, bytes]:
    """A segment holding a random token, for :func:`probe`."""
    token = os.urandom(16)
    segment = Segment(len(token))
    segment.map[:] = token
    return segment, token


def probe(path: str, token: bytes) -> bool:
    """On a node: whether it can open the driver's segment at ``path`` and read ``token``
    there (it shares the driver's machine and may open its memory)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(token)) == token
    except OSError:
        return False
