"""``_native.copy_rows``, the row copy a cluster's driver places each node's result with (read
from Ray's object store, read-only) into the call's output: every byte copied whatever the
rows' count and width (rows under one block of the copy threads, several blocks and a
shorter rest, rows across a block's end, and none) and the arrays' addresses, the source
unchanged, and clear errors
for arrays of different shapes, strided, read-only or overlapping ones."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu import _native


@pytest.mark.parametrize(
    ("rows", "width"),
    [(0, 32), (1, 3), (7, 0), (40_000, 32), (3001, 5), (300_001, 32), (1_000_003, 5)],
)
def test_every_byte_is_copied_and_the_source_left_as_it_was(rows: int, width: int) -> None:
    rng = np.random.default_rng(rows + width)
    src = rng.integers(0, 256, (rows, width), dtype=np.uint8)
    src.flags.writeable = False
    before = src.copy()
    dst = np.full((rows, width), 0xA5, dtype=np.uint8)
    assert _native.copy_rows(dst, src) is None
    assert np.array_equal(dst, src)
    assert np.array_equal(src, before)


def test_bytes_at_odd_addresses_are_copied_whole() -> None:
    # A large copy streams whole 16-byte-aligned lines of the destination: its bytes before
    # the first such line and after the last are copied apart.
    rows, width = 700_001, 9
    rng = np.random.default_rng(5)
    src_buffer = rng.integers(0, 256, rows * width + 3, dtype=np.uint8)
    src = src_buffer[3:].reshape(rows, width)
    dst_buffer = np.zeros(rows * width + 21, dtype=np.uint8)
    dst = dst_buffer[7 : 7 + rows * width].reshape(rows, width)
    _native.copy_rows(dst, src)
    assert np.array_equal(dst, src)
    assert not dst_buffer[:7].any() and not dst_buffer[7 + rows * width :].any()


def test_float_rows_keep_their_bits() -> None:
    # A result's rows viewed as bytes, NaN payloads and signed zeros included.
    values = np.random.default_rng(2).standard_normal((50_000, 8), dtype=np.float32)
    values[::7, 3] = np.float32(-0.0)
    values.view(np.uint32)[::11, 5] = 0x7FC0_1234
    out = np.empty_like(values)
    _native.copy_rows(out.view(np.uint8), values.view(np.uint8))
    assert out.tobytes() == values.tobytes()


def test_arrays_of_different_shapes_are_refused_unwritten() -> None:
    dst = np.zeros((4, 8), dtype=np.uint8)
    expected = r"src: expected shape \(4, 8\) \(dst's\), got \(4, 7\)"
    with pytest.raises(ag.ShapeError, match=expected):
        _native.copy_rows(dst, np.ones((4, 7), dtype=np.uint8))
    with pytest.raises(ag.ShapeError, match=r"got \(5, 8\)"):
        _native.copy_rows(dst, np.ones((5, 8), dtype=np.uint8))
    assert not dst.any()


def test_strided_arrays_are_refused_unwritten() -> None:
    dst = np.zeros((4, 8), dtype=np.uint8)
    wide = np.ones((4, 16), dtype=np.uint8)
    with pytest.raises(ag.InvalidArgumentError, match="src: expected a C-contiguous array"):
        _native.copy_rows(dst, wide[:, ::2])
    strided = np.zeros((8, 8), dtype=np.uint8)[::2]
    with pytest.raises(ag.InvalidArgumentError, match="dst: expected a C-contiguous array"):
        _native.copy_rows(strided, np.ones((4, 8), dtype=np.uint8))
    assert not dst.any() and not strided.any()


def test_a_read_only_or_overlapping_destination_is_refused() -> None:
    dst = np.zeros((4, 8), dtype=np.uint8)
    dst.flags.writeable = False
    with pytest.raises(ag.InvalidArgumentError, match="dst: expected a writeable array"):
        _native.copy_rows(dst, np.ones((4, 8), dtype=np.uint8))
    assert not dst.any()
    both = np.arange(64, dtype=np.uint8).reshape(8, 8)
    with pytest.raises(ag.InvalidArgumentError, match="dst: expected an array that shares no"):
        _native.copy_rows(both[2:6], both[:4])
    assert np.array_equal(both, np.arange(64, dtype=np.uint8).reshape(8, 8))
