"""New large outputs live in memory the bindings keep for reuse: each is an ordinary writeable
numpy array that owns its memory through its base object, outlives its context, pickles,
keeps its views valid whatever is deleted first, and holds every word the call wrote (a
reused block's old words never show). The kept memory stays bounded, is reused rather than
grown by calls in a loop, and goes back to the OS when a context closes."""

from __future__ import annotations

import gc
import itertools
import pickle
from collections.abc import Iterator

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu import _native

# 65,536 Cl(3,0) rows of float32: a 2 MiB output, one block of the pool.
ROWS = 1 << 16
BLOCK = 2 << 20
MAX_KEPT = 512 << 20


class Call:
    """A host context of its own (closed by the test or at its end), two operands and their
    product computed into a plain numpy array (the same bits, as the docs promise)."""

    def __init__(self) -> None:
        rng = np.random.default_rng(7)
        self.a = rng.standard_normal((ROWS, 8), dtype=np.float32)
        self.b = rng.standard_normal((ROWS, 8), dtype=np.float32)
        self.ctx = ag.MultiGpuContext(backends=["host"])
        self.want = np.empty((ROWS, 8), np.float32)
        self.ctx.geometric_product(self.a, self.b, out=self.want)

    def new(self) -> np.ndarray:
        """The product into a new array."""
        return self.ctx.geometric_product(self.a, self.b)


@pytest.fixture
def call() -> Iterator[Call]:
    c = Call()
    yield c
    c.ctx.close()


def test_a_large_new_output_is_an_ordinary_array_on_an_aligned_block(call: Call) -> None:
    got, want = call.new(), call.want
    call.ctx.close()
    assert type(got) is np.ndarray
    assert got.dtype == np.float32 and got.shape == (ROWS, 8)
    assert got.flags.writeable and got.flags.c_contiguous and got.flags.aligned
    assert not got.flags.owndata and got.base is not None
    # On a block of its own, 2 MiB aligned: a huge page's boundary.
    assert got.ctypes.data % BLOCK == 0
    assert np.array_equal(got, want)
    got[3] = 1.5
    assert np.all(got[3] == 1.5) and np.array_equal(got[4:], want[4:])


def test_a_reused_block_shows_only_the_new_calls_words(call: Call) -> None:
    first = call.new()
    where = first.ctypes.data
    first.fill(np.nan)
    del first
    gc.collect()
    again = call.new()
    assert again.ctypes.data == where  # the kept block, reused
    assert np.array_equal(again, call.want)


def test_calls_in_a_loop_reuse_the_kept_memory_instead_of_growing_it(call: Call) -> None:
    # Any context's close empties the pool: this test starts from nothing kept.
    ag.MultiGpuContext(backends=["host"]).close()
    assert _native.pooled_output_bytes() == 0
    call.new()
    gc.collect()
    assert _native.pooled_output_bytes() == BLOCK
    for _ in range(20):
        call.new()
    assert _native.pooled_output_bytes() == BLOCK
    # Three alive at once take three blocks (the kept one among them); released, all three
    # are kept.
    held = [call.new() for _ in range(3)]
    assert len({h.ctypes.data for h in held}) == 3
    assert _native.pooled_output_bytes() == 0
    del held
    gc.collect()
    assert _native.pooled_output_bytes() == 3 * BLOCK


def test_the_kept_memory_is_bounded() -> None:
    # Ten 64 MiB outputs released together: the pool keeps at most 512 MiB of them.
    with ag.MultiGpuContext(backends=["host"]):
        arrays = [_native.pooled_output((16 << 20,)) for _ in range(10)]
        assert all(x.ctypes.data % BLOCK == 0 for x in arrays)
        del arrays
        gc.collect()
        kept = _native.pooled_output_bytes()
        assert 0 < kept <= MAX_KEPT


def test_closing_the_context_releases_the_kept_memory_and_outputs_outlive_it(
    call: Call,
) -> None:
    alive = call.new()
    call.new()  # released at once: kept
    gc.collect()
    assert _native.pooled_output_bytes() >= BLOCK
    call.ctx.close()
    assert _native.pooled_output_bytes() == 0
    # The live array keeps its block past the close, and frees it (not kept) when it dies.
    assert np.array_equal(alive, call.want)
    alive[0] = 0.0
    del alive
    gc.collect()
    assert _native.pooled_output_bytes() == 0


@pytest.mark.parametrize("order", list(itertools.permutations(["array", "view", "context"])))
def test_views_and_pickles_stay_valid_whatever_goes_first(
    call: Call, order: tuple[str, ...]
) -> None:
    want = call.want
    held: dict[str, object] = {"context": call.ctx}
    held["array"] = call.new()
    held["view"] = held["array"][1::3, 2:5]  # type: ignore[index]
    copied = pickle.loads(pickle.dumps(held["array"]))
    assert type(copied) is np.ndarray and copied.flags.writeable
    assert np.array_equal(copied, want)
    for name in order:
        gone = held.pop(name)
        if name == "context":
            gone.close()  # type: ignore[attr-defined]
        del gone
        gc.collect()
        if "array" in held:
            assert np.array_equal(held["array"], want)  # type: ignore[arg-type]
        if "view" in held:
            assert np.array_equal(held["view"], want[1::3, 2:5])  # type: ignore[arg-type]
    assert np.array_equal(copied, want)
