"""Errors that name the argument, what was expected and what came (issue 14, items 8 to 10).

Unaligned but contiguous arrays are accepted (copied), integers beyond the core's 64-bit range
are an ``InvalidArgumentError`` naming the argument, NaN positions are given in the shape the
caller passed, 0-d arrays are reported as 0-d, masked arrays are refused rather than having
their mask silently dropped, ``Workload`` takes numpy scalars, ``NoAdapterError`` speaks in
words and ``DeviceLostError`` never calls a device healthy.
"""

from __future__ import annotations

import re

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu import InvalidArgumentError, ShapeError

BIG = 2**64
HUGE = 10**30


def _unaligned(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A C-contiguous float32 array whose data starts one byte past an aligned address."""
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    buf = bytearray(values.nbytes + 1)
    array = np.frombuffer(buf, np.float32, count=values.size, offset=1).reshape(shape)
    array[...] = values
    assert array.flags.c_contiguous and not array.flags.aligned
    return array


# --- item 8: unaligned arrays are accepted ------------------------------------------------------


def test_unaligned_contiguous_arrays_are_accepted_and_not_modified(default_ctx):
    a, b = _unaligned((33, 8), 1), _unaligned((33, 8), 2)
    before = a.copy(), b.copy()
    got = default_ctx.geometric_product(a, b)
    np.testing.assert_array_equal(got, default_ctx.geometric_product(a.copy(), b.copy()))
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(b, before[1])

    m = _unaligned((5, 4), 3)
    np.testing.assert_array_equal(
        default_ctx.tropical_matmul(m, m.T.copy()), default_ctx.tropical_matmul(m.copy(), m.T)
    )
    s = _unaligned((20, 3), 4)
    np.testing.assert_array_equal(
        default_ctx.fisher_information(s), default_ctx.fisher_information(s.copy())
    )
    grid = np.abs(_unaligned((6, 7), 5)) % 1
    np.testing.assert_array_equal(default_ctx.stencil(grid, 2), default_ctx.stencil(grid.copy(), 2))


def test_a_memmap_with_an_odd_header_is_accepted(default_ctx, tmp_path):
    path = tmp_path / "odd.bin"
    values = np.arange(24, dtype=np.float32).reshape(3, 8)
    path.write_bytes(b"h" + values.tobytes())
    mm = np.memmap(path, dtype=np.float32, mode="r", offset=1, shape=(3, 8))
    assert not mm.flags.aligned
    np.testing.assert_array_equal(default_ctx.reverse(mm), default_ctx.reverse(values))


# --- item 9: integers beyond 64 bits, split, devices_per_adapter ---------------------------------


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("max_devices", BIG),
        ("devices_per_adapter", BIG),
        ("chunk_items", BIG),
        ("sync_timeout_ms", BIG),
        ("chunk_items", HUGE),
    ],
)
def test_context_integers_beyond_64_bits_name_the_argument(argument, value):
    with pytest.raises(InvalidArgumentError, match=rf"^{argument}: expected an integer .*to "):
        ag.MultiGpuContext(**{argument: value})


def test_adapter_indices_beyond_64_bits_name_the_argument():
    with pytest.raises(InvalidArgumentError, match=r"^adapters: expected adapter indices"):
        ag.MultiGpuContext(adapters=BIG)
    with pytest.raises(InvalidArgumentError, match=r"^adapters: expected adapter indices"):
        ag.MultiGpuContext(adapters=[0, BIG])
    with pytest.raises(InvalidArgumentError, match=r"^adapters: expected a sequence, got float"):
        ag.MultiGpuContext(adapters=1.5)
    with pytest.raises(InvalidArgumentError, match=r"^backends: expected a sequence, got int"):
        ag.MultiGpuContext(backends=5)


def test_devices_per_adapter_has_a_documented_bound():
    assert ag.context.MAX_DEVICES_PER_ADAPTER == 64
    with pytest.raises(
        InvalidArgumentError, match=r"^devices_per_adapter: expected an integer from 1 to 64, "
    ):
        ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=65)
    with pytest.raises(InvalidArgumentError, match=r"^devices_per_adapter: .*got 1000$"):
        ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=1000)


def test_after_chunks_beyond_64_bits_names_the_argument(default_ctx):
    with pytest.raises(InvalidArgumentError, match=r"^after_chunks: expected an integer from 0"):
        default_ctx.inject_fault(0, BIG)
    assert all(h["healthy"] for h in default_ctx.health().values())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"steps": BIG}, r"^steps: expected an integer from 0 to 2\*\*64 - 1, got 18446"),
        ({"steps": 1, "halo": BIG}, r"^halo: expected an integer from 1 to 2\*\*64 - 1"),
        ({"steps": 1, "split": 5}, r"^split: expected a sequence, got int 5$"),
        ({"steps": 1, "split": [BIG]}, r"^split: expected integers >= 0 .*got 18446"),
    ],
)
def test_grid_integers_name_the_argument(default_ctx, kwargs, message):
    grid = np.zeros((4, 4), np.float32)
    with pytest.raises(InvalidArgumentError, match=message):
        default_ctx.stencil(grid, **kwargs)
    with pytest.raises(InvalidArgumentError, match=message):
        default_ctx.life(grid.astype(np.uint8), **kwargs)


# --- item 10: NaN positions, 0-d, numpy scalars, messages ---------------------------------------


def test_nan_positions_are_given_in_the_callers_shape(default_ctx):
    a = np.zeros((2, 3, 4), np.float32)
    a[1, 2, 1] = np.nan
    b = np.zeros((2, 4, 5), np.float32)
    with pytest.raises(
        InvalidArgumentError, match=r"^a: .*NaN at \[1, 2, 1\] of shape \(2, 3, 4\)"
    ):
        default_ctx.tropical_matmul(a, b)
    b[1, 3, 4] = np.nan
    with pytest.raises(
        InvalidArgumentError, match=r"^b: .*NaN at \[1, 3, 4\] of shape \(2, 4, 5\)"
    ):
        default_ctx.tropical_matmul(np.zeros((2, 3, 4), np.float32), b)
    x = np.zeros(4, np.float32)
    x[3] = np.nan
    with pytest.raises(InvalidArgumentError, match=r"^x: .*NaN at \[3\] of shape \(4,\)$"):
        default_ctx.tropical_matvec(np.zeros((3, 4), np.float32), x)
    xb = np.zeros((2, 4), np.float32)
    xb[1, 0] = np.nan
    with pytest.raises(InvalidArgumentError, match=r"^x: .*NaN at \[1, 0\] of shape \(2, 4\)$"):
        default_ctx.tropical_matvec(np.zeros((2, 3, 4), np.float32), xb)
    w = np.ones(6, np.float32)
    w[4] = np.nan
    with pytest.raises(InvalidArgumentError, match=r"^weights: .*got NaN at \[4\]$"):
        default_ctx.fisher_information(np.ones((6, 2), np.float32), w)


def test_zero_dimensional_inputs_are_refused_with_their_shape(default_ctx):
    with pytest.raises(ShapeError, match=r"^x: expected shape \(1,\), got \(\)$"):
        default_ctx.tropical_matvec(np.zeros((3, 1), np.float32), np.float32(2.0))
    with pytest.raises(ShapeError, match=r"^x: expected shape \(\.\.\., 8\), got \(\)$"):
        default_ctx.reverse(np.float32(1.0))
    with pytest.raises(ShapeError, match=r"^weights: expected shape \(1,\), got \(\)$"):
        default_ctx.fisher_information(np.ones((1, 1)), np.array(1.0))
    with pytest.raises(ShapeError, match=r"^scores: expected shape \(N, W\), got \(\)$"):
        default_ctx.fisher_information(np.array(1.0))


@pytest.mark.parametrize(
    "cost", [np.float32(1.0), np.float64(2.5), np.int64(8), np.uint8(3), np.int32(0)]
)
def test_workload_takes_numpy_scalars(cost):
    w = ag.Workload("geometric_product", np.int64(10), cost, cost, cost)
    assert w.bytes_in_per_item == float(cost)
    assert type(w.bytes_in_per_item) is float and type(w.items) is int


def test_workload_still_refuses_non_numbers():
    with pytest.raises(InvalidArgumentError, match=r"^flops_per_item: expected a finite number"):
        ag.Workload("geometric_product", 10, 1.0, 1.0, np.bool_(True))
    with pytest.raises(InvalidArgumentError, match=r"^bytes_in_per_item: expected a finite"):
        ag.Workload("geometric_product", 10, "1", 1.0, 1.0)


def test_no_adapter_error_speaks_in_words(all_adapters):
    missing = [
        b for b in ("metal", "dx12", "vulkan", "gl") if b not in {a.backend for a in all_adapters}
    ]
    if not missing:
        pytest.skip("every backend has an adapter here")
    with pytest.raises(ag.NoAdapterError) as info:
        ag.MultiGpuContext(backends=missing[0])
    message = str(info.value)
    # The backend, why it has no adapter here (from the core's selection), then what is there.
    assert re.match(
        rf"No adapter on backends {missing[0]} \(backend {missing[0]}: no adapter: [^)]+\); "
        r"available: \[0\] ",
        message,
    ), message
    assert "Some(" not in message and "None" not in message


def test_device_lost_names_the_failed_devices_and_calls_none_healthy():
    ctx = ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2)
    a = np.ones((20000, 8), np.float32)
    for device in range(len(ctx.devices)):
        ctx.inject_fault(device, 0)
    with pytest.raises(ag.DeviceLostError) as info:
        ctx.geometric_product(a, a)
    message = str(info.value)
    assert message.startswith("no healthy device left for this call ("), message
    assert "healthy again" not in message
    for device in range(len(ctx.devices)):
        assert re.search(rf"device {device}: [^;]*fault", message), message
    assert not re.search(r"device \d+: healthy", message), message
    ctx.reset_health()


def test_masked_arrays_are_refused_naming_the_argument(default_ctx):
    a = np.ma.masked_array(np.ones((3, 8)), mask=np.zeros((3, 8), bool))
    with pytest.raises(TypeError, match=r"^a: expected a plain array, got a masked array"):
        default_ctx.geometric_product(a, np.ones(8))
    with pytest.raises(TypeError, match=r"^scores: expected a plain array, got a masked"):
        default_ctx.fisher_information(np.ma.masked_invalid(np.ones((3, 2))))
    with pytest.raises(TypeError, match=r"^grad: expected a plain array, got a masked"):
        default_ctx.natural_gradient(np.ones((3, 2)), np.ma.masked_array(np.ones(2)), 1.0)
    with pytest.raises(TypeError, match=r"^w: expected a plain array, got a masked"):
        default_ctx.shortest_paths(np.ma.masked_array(np.zeros((2, 2))))
    with pytest.raises(TypeError, match=r"^grid: expected a plain array, got a masked"):
        default_ctx.stencil(np.ma.masked_array(np.zeros((4, 4))), 1)
    with pytest.raises(TypeError, match=r"^grid: expected a plain array, got a masked"):
        default_ctx.life(np.ma.masked_array(np.zeros((4, 4), np.uint8)), 1)
