"""The driver's side of Ray's object store: a message's arrays put in all at once, and each
node's rows of a result, read-only in the store, copied straight into the call's output
(the caller's ``out``, or a new array) by the core's row copy on the machine's threads,
where numpy's assignment would copy on one."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray

from .. import _native
from ..errors import InvalidArgumentError
from . import shared
from .shared import Pool, Segment, SharedRows

INLINE_BYTES = 64 << 10
"""Arrays up to this size travel inside the actor call (Ray inlines small arguments), which
saves the object-store round trip of ``ray.put``; larger ones go through the store."""

PUT_THREADS = 3
"""Threads that put a message's arrays into the object store beside the calling thread
(see :func:`put_all`): a call's operands, a few per node."""

_putter: ThreadPoolExecutor | None = None
"""The threads of :func:`put_all`, started by the first call that puts two arrays."""


@dataclass(frozen=True)
class Shared:
    """An array every chunk of a call binds whole (a broadcast operand, ``b`` of a matmul):
    put in the object store once per call."""

    array: Any


def put_all(arrays: list[Any]) -> list[Any]:
    """``ray.put`` of each of ``arrays`` (their refs, in order), all at the same time: the
    first on the calling thread, the others on :data:`PUT_THREADS` threads. Each put copies
    its array into the store, and between those copies Ray creates and seals the object
    with a round trip to the store: puts one after the other leave the cores idle in
    those round trips (benches/cluster.py's stages measure a call's puts)."""
    if len(arrays) < 2:
        return [ray.put(a) for a in arrays]
    global _putter
    if _putter is None:
        _putter = ThreadPoolExecutor(PUT_THREADS, thread_name_prefix="amari-gpu-put")
    later = [_putter.submit(ray.put, a) for a in arrays[1:]]
    first = ray.put(arrays[0])
    return [first, *(f.result() for f in later)]


class Assembly:
    """The call's output: the caller's ``out`` (checked by the family method), else, when
    ``spec`` (the result's shape and dtype) is known and a node shares the driver's
    machine, lent from the driver's shared memory for the nodes to write in place (see
    :meth:`out_rows`), else allocated when the first run's result shows its dtype and
    trailing shape; each run's rows written straight into place along ``axis`` (through
    shared memory into a caller's ``out``: in place when it is a result lent before, else
    copied from a segment of the pool the nodes write)."""

    def __init__(
        self,
        items: int,
        axis: int = 0,
        out: np.ndarray[Any, Any] | None = None,
        spec: tuple[tuple[int, ...], Any] | None = None,
    ) -> None:
        self.items = items
        self.axis = axis
        self.out = out
        self.given = out is not None
        # Rows along ``axis`` are one run of memory when every axis before it has one entry.
        whole = spec is not None and math.prod(spec[0][:axis]) == 1
        fits = out is None or (
            spec is not None
            and out.shape == spec[0]
            and out.dtype == spec[1]
            and out.flags.c_contiguous
        )
        self.spec = spec if whole and fits else None
        self.segment: Segment | None = None
        self.offset = 0
        """Where the output starts in ``segment``."""
        self.scratch = False
        """Whether ``segment`` is the pool's, copied into the caller's ``out`` run by run."""

    def _rows(self, start: int, stop: int) -> tuple[int, tuple[int, ...]]:
        """The offset of the output's rows ``start..stop`` from its start, and their shape."""
        assert self.spec is not None
        shape, dtype = self.spec
        row_bytes = np.dtype(dtype).itemsize * math.prod(shape[self.axis + 1 :])
        part = list(shape)
        part[self.axis] = stop - start
        return start * row_bytes, tuple(part)

    def out_rows(
        self, pool: Pool, start: int, stop: int
    ) -> tuple[Segment, SharedRows, bool] | None:
        """The rows ``start..stop`` of the output in shared memory (the first call lends the
        output from ``pool``, finds the caller's ``out`` in a lent segment, or takes a
        segment to copy into ``out`` from), with whether that segment goes back to the pool
        after the call; None when the output is not there: an unknown shape, an output
        allocated from a result already, one too small to gain from it, or too many lent."""
        if self.spec is None:
            return None
        shape, dtype = self.spec
        if self.segment is None:
            # The offset past the last row: the output's bytes.
            nbytes = self._rows(shape[self.axis], shape[self.axis])[0]
            if nbytes < shared.MIN_BYTES:
                return None
            if self.out is None:
                if not pool.can_lend():
                    return None
                self.segment = pool.take(nbytes)
                self.out = pool.lend(self.segment, shape, dtype)
            elif not self.given:
                return None
            elif (held := pool.holding(self.out)) is not None:
                self.segment, self.offset = held
            else:
                self.segment = pool.take(nbytes)
                self.scratch = True
        offset, part = self._rows(start, stop)
        rows = self.segment.rows(self.offset + offset, part, dtype)
        return self.segment, rows, self.scratch

    def take(self, _chunk: int, start: int, stop: int, result: Any) -> None:
        part = result[0]
        if part is None:
            # Written in place by the node (see ``out_rows``), or into the pool's segment
            # for the caller's ``out``.
            if self.scratch:
                assert self.segment is not None and self.spec is not None and self.out is not None
                offset, rows = self._rows(start, stop)
                index = [slice(None)] * self.out.ndim
                index[self.axis] = slice(start, stop)
                place(self.out[tuple(index)], self.segment.array(offset, rows, self.spec[1]))
            return
        if self.out is None:
            shape = list(part.shape)
            shape[self.axis] = self.items
            self.out = new_output(tuple(shape), part.dtype)
        index = [slice(None)] * self.out.ndim
        index[self.axis] = slice(start, stop)
        # A slice along the items' axis is C-contiguous: every axis before it has one
        # entry (a batch of products is split along its first axis).
        place(self.out[tuple(index)], part)


def new_output(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """A new output that the caller writes whole: float32 in reused memory, as a local
    call's new output is (not fresh pages to fault in), other dtypes numpy's."""
    if dtype == np.float32:
        return _native.pooled_output(shape)
    return np.empty(shape, dtype=dtype)


def place(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    """Writes ``src`` (a node's result, read-only in the object store) into ``dst`` (the
    call's output or its rows of ``src``, of ``src``'s shape and dtype), both C-contiguous:
    the core's row copy on the machine's threads, where numpy's assignment copies on one
    (for a large result, as long as Ray's own copy of it into the store)."""
    _native.copy_rows(_byte_rows(dst), _byte_rows(src))


def _byte_rows(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A view of a C-contiguous ``array``'s rows (along its last axis) as rows of bytes."""
    if not array.flags.c_contiguous:
        # Reshaping would copy it, and the copy, not ``array``, would be written.
        raise InvalidArgumentError(
            f"expected a C-contiguous array, got one with strides {array.strides}"
        )
    flat = array.reshape(1) if array.ndim == 0 else array
    return flat.reshape(math.prod(flat.shape[:-1]), flat.shape[-1]).view(np.uint8)
