"""The Cl(3,0) product's host kernels at and past the sizes where they stream their output
past the caches (non-temporal stores, for a call whose operands and result outgrow the
last-level cache, or the cores' private caches where the host device measured streaming
faster past them): float32, float64 and float16 rows give lavapipe's bits on the host device
alone and beside lavapipe, into a new output or a caller's ``out=`` at any alignment numpy
allows (a view one value or 16 bytes past an aligned start), with tails that are not whole
blocks and a single row; strided or unaligned ``out=`` arrays are refused as before, and a
float16 ``out=`` 2 bytes past a word before any work."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import amari_gpu
import numpy as np
import pytest
from amari_gpu.errors import InvalidArgumentError

DTYPES = [np.float32, np.float64, np.float16]


def _cache_bytes() -> dict[int, int]:
    """Bytes of each cache level Linux lists for cpu0, as the host device reads them."""
    found: dict[int, int] = {}
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
        found[level] = max(found.get(level, 0), int(size.rstrip("KM")) * scale)
    return found


def _thresholds(dtype: type) -> list[int]:
    """Rows past which a call may stream, as the host device decides it: its two operands
    and result outgrow the last-level cache (32 MiB where Linux does not say), or the private
    caches (level 2 times the CPUs, 1 MiB each where Linux does not say) on a CPU where the
    device measured streaming faster past them."""
    caches = _cache_bytes()
    last = caches[max(caches)] if caches else 32 << 20
    private = caches.get(2, 1 << 20) * (os.cpu_count() or 1)
    per_row = 3 * 8 * np.dtype(dtype).itemsize
    return sorted({private // per_row, last // per_row})


@pytest.fixture(scope="module")
def contexts() -> Iterator[dict[str, amari_gpu.MultiGpuContext]]:
    made = {
        "vulkan": amari_gpu.MultiGpuContext(backends=["vulkan"]),
        "host": amari_gpu.MultiGpuContext(backends=["host"]),
        "vulkan+host": amari_gpu.MultiGpuContext(backends=["vulkan", "host"]),
    }
    yield made
    for ctx in made.values():
        ctx.close()


def _operands(n: int, dtype: type, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two batches of ``n`` rows in ``dtype``: ordinary values, large ones whose products
    overflow, tiny ones, and an infinity in the second row (its products give infinities and
    NaNs)."""
    rng = np.random.default_rng(seed)
    big = {np.float16: 200.0, np.float32: 1e30, np.float64: 1e300}[dtype]
    scale = np.choose(np.arange(n) % 3, [1.0, big, 1.0 / 4096.0])[:, None]
    a, b = (rng.uniform(-1.0, 1.0, (n, 8)) * scale for _ in range(2))
    if n > 1:
        a[1, 3] = np.inf
    with np.errstate(over="ignore"):
        return a.astype(dtype), b.astype(dtype)


def _out_views(n: int, dtype: type) -> dict[str, np.ndarray]:
    """``out=`` arrays of ``n`` rows: 64-byte aligned, one value past that, 16 bytes past it."""
    size = np.dtype(dtype).itemsize
    views = {}
    for name, skip in (("aligned", 0), ("one value in", size), ("16 bytes in", 16)):
        raw = np.full(n * 8 * size + 128, 0x55, np.uint8)
        start = (-raw.ctypes.data) % 64 + skip
        views[name] = raw[start : start + n * 8 * size].view(dtype).reshape(n, 8)
    return views


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_products_at_and_past_the_streaming_size_have_lavapipes_bits_at_any_alignment(
    contexts: dict[str, amari_gpu.MultiGpuContext], dtype: type
) -> None:
    thresholds = _thresholds(dtype)
    both = contexts["vulkan+host"]
    sizes = [1, 37] + [t + d for t in thresholds for d in (0, 1, 13)]
    for n in sizes:
        a, b = _operands(n, dtype, seed=n % 1000)
        kept = (a.copy(), b.copy())
        unsigned = f"u{np.dtype(dtype).itemsize}"
        want = contexts["vulkan"].geometric_product(a, b).view(unsigned)
        # Beside lavapipe the host device rounds fma as lavapipe does: its rows, streamed
        # or not, are lavapipe's bits.
        got = both.geometric_product(a, b, strategy="balanced")
        assert got.dtype == dtype
        assert np.isinf(got).any() or n == 1
        if n >= thresholds[-1]:
            assert {w.device_id for w in both.last_plan or []} == {d.id for d in both.devices}
        np.testing.assert_array_equal(got.view(unsigned), want, f"vulkan+host n={n}")
        # The host device alone (its own fma rounding): the same bits into every out=,
        # and a call too small to stream gives the same rows.
        host = contexts["host"]
        alone = host.geometric_product(a, b).view(unsigned)
        small = host.geometric_product(a[:37], b[:37]).view(unsigned)
        np.testing.assert_array_equal(alone[:37], small, f"host n={n}: first rows alone")
        for where, out in _out_views(n, dtype).items():
            if dtype == np.float16 and where == "one value in":
                continue  # refused: see the test below
            for ctx, bits in ((host, alone), (both, want)):
                assert ctx.geometric_product(a, b, out=out, strategy="balanced") is out
                np.testing.assert_array_equal(out.view(unsigned), bits, f"n={n} out {where}")
        np.testing.assert_array_equal(a, kept[0], "a kept")
        np.testing.assert_array_equal(b, kept[1], "b kept")


def test_strided_and_unaligned_outputs_are_refused_before_any_work(
    contexts: dict[str, amari_gpu.MultiGpuContext],
) -> None:
    host = contexts["host"]
    n = _thresholds(np.float32)[-1] + 1
    a, b = _operands(n, np.float32, seed=1)
    strided = np.full((2 * n, 8), 7.0, np.float32)[::2]
    with pytest.raises(
        InvalidArgumentError, match=r"^out: expected a C-contiguous array, got a strided one$"
    ):
        host.geometric_product(a, b, out=strided)
    assert (strided == 7.0).all()
    a64, b64 = _operands(5, np.float64, seed=2)
    raw = np.full(5 * 64 + 12, 0x55, np.uint8)
    start = (-raw.ctypes.data) % 8 + 4
    unaligned = raw[start : start + 5 * 64].view(np.float64).reshape(5, 8)
    with pytest.raises(
        InvalidArgumentError, match=r"^out: expected an aligned array, got an unaligned one$"
    ):
        host.geometric_product(a64, b64, out=unaligned)
    assert (raw == 0x55).all()
    # float16 values are written two to a 4-byte word: a view 2 bytes past an aligned start
    # (which numpy calls aligned) is refused as clearly, not failed midway.
    a16, b16 = _operands(5, np.float16, seed=3)
    half = _out_views(5, np.float16)["one value in"]
    before = half.copy()
    with pytest.raises(
        InvalidArgumentError,
        match=r"^out: expected float16 rows starting at a 4-byte aligned address \(as numpy "
        r"allocates them\), got a view 2 bytes past one$",
    ):
        host.geometric_product(a16, b16, out=half)
    np.testing.assert_array_equal(half.view(np.uint16), before.view(np.uint16))
