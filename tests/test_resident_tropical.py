"""``tropical_matmul`` with a resident ``a``, and the resident tropical checks on every device
kind: computed where the rows live (several lavapipe devices, the host device alone, both
together), a DeviceArray bit-identical to the numpy path whatever the sharding and wherever
a shard boundary cuts a batch or a 64-row tile; the numpy path's errors word for word; a
device failing mid-call; ``out=``; chains that stay resident.

The numpy path is itself checked against float32 references in test_tropical_matmul.py; here
it is the reference, compared with ``np.array_equal`` (infinities and zero signs included)."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from _resident_helpers import assert_faults_change_nothing, sharding_settings
from _tropical_helpers import SEMIRINGS, batched_products, random_operand, reference_matmul
from hypothesis import given
from hypothesis import strategies as st

PLACEMENTS = ["balanced", "capability", "memory", "latency", "adaptive", "auto"]

# Shapes of (a, b): m below 64, m and n not multiples of 64, n above 64, batches whose
# rows cut 64-row tiles (and, with chunk_items=64, shards) anywhere.
SHAPES = [
    ((700, 37), (37, 130)),
    ((40, 5), (5, 3)),
    ((4, 90, 37), (4, 37, 70)),
    ((5, 7, 9), (5, 9, 66)),
    ((3, 64, 16), (3, 16, 64)),
    ((1, 1, 1), (1, 1, 1)),
]


def _operand(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """float32 values on a 1/8 grid (so ties decide entries) with ±inf sprinkled."""
    return random_operand(np.random.default_rng(seed), shape, 0.1)


@pytest.mark.parametrize("fixture", ["ctx3", "mixed", "host"])
@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("strategy", ["balanced", "capability"])
def test_resident_matmul_equals_the_numpy_path(
    fixture: str, semiring: str, strategy: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    for seed, (a_shape, b_shape) in enumerate(SHAPES):
        a, b = _operand(2 * seed, a_shape), _operand(2 * seed + 1, b_shape)
        a_before, b_before = a.copy(), b.copy()
        da = ctx.asarray(a, strategy=strategy)
        got = ctx.tropical_matmul(da, b, semiring)
        assert isinstance(got, ag.DeviceArray)
        assert got.shape == (*a_shape[:-1], b_shape[-1])
        assert [s[1:] for s in got.sharding] == [s[1:] for s in da.sharding]
        want = ctx.tropical_matmul(a, b, semiring)
        assert np.array_equal(got.numpy(), want), (a_shape, b_shape)
        assert np.array_equal(want, reference_matmul(a, b, semiring))
        assert np.array_equal(a, a_before) and np.array_equal(b, b_before)
        assert np.array_equal(da.numpy(), a)


def test_shards_cut_batches_and_tiles_anywhere(ctx3: ag.MultiGpuContext) -> None:
    # chunk_items=64 rows per chunk, batches of 50 rows: shards and 64-row tiles start in
    # the middle of batches, and a tile spans two or three batches.
    a, b = _operand(20, (7, 50, 33)), _operand(21, (7, 33, 100))
    da = ctx3.asarray(a, strategy="balanced")
    assert len({device for device, _, _ in da.sharding}) >= 2
    assert any(start % 50 for _, start, _ in da.sharding)
    for semiring in SEMIRINGS:
        got = ctx3.tropical_matmul(da, b, semiring).numpy()
        assert np.array_equal(got, ctx3.tropical_matmul(a, b, semiring))


@sharding_settings(25)
@given(
    **batched_products(4, 150, (1, 70), 140),
    placement=st.sampled_from(PLACEMENTS),
    batched=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_products_on_random_shardings(
    mixed: ag.MultiGpuContext,
    batch: int,
    m: int,
    k: int,
    n: int,
    placement: str,
    semiring: str,
    batched: bool,
    seed: int,
) -> None:
    a_shape, b_shape = ((batch, m, k), (batch, k, n)) if batched else ((m, k), (k, n))
    a, b = _operand(seed, a_shape), _operand(seed + 1, b_shape)
    got = mixed.tropical_matmul(mixed.asarray(a, strategy=placement), b, semiring)
    assert np.array_equal(got.numpy(), mixed.tropical_matmul(a, b, semiring))


@pytest.mark.parametrize("fixture", ["ctx3", "mixed"])
def test_a_device_failing_mid_call_changes_nothing(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    a, b = _operand(30, (3, 100, 20)), _operand(31, (3, 20, 70))
    want = ctx.tropical_matmul(a, b)
    assert_faults_change_nothing(
        ctx,
        lambda: ctx.asarray(a, strategy="balanced"),
        lambda da: np.array_equal(ctx.tropical_matmul(da, b).numpy(), want),
        attempts=3,
    )


def test_out_numpy_and_device_array(mixed: ag.MultiGpuContext) -> None:
    a, b = _operand(40, (300, 24)), _operand(41, (24, 24))
    want = mixed.tropical_matmul(a, b, "min_plus")
    da = mixed.asarray(a)
    out = np.full((300, 24), 7.0, np.float32)
    assert mixed.tropical_matmul(da, b, "min_plus", out=out) is out
    assert np.array_equal(out, want)
    # A DeviceArray out keeps its own sharding and takes the result's bits.
    target = mixed.asarray(np.zeros((300, 24), np.float32), strategy="capability")
    sharding = target.sharding
    assert mixed.tropical_matmul(da, b, "min_plus", out=target) is target
    assert target.sharding == sharding
    assert np.array_equal(target.numpy(), want)
    # out may be a itself: the result replaces its shards.
    assert mixed.tropical_matmul(da, b, "min_plus", out=da) is da
    assert np.array_equal(da.numpy(), want)
    # A failed call leaves out as it was.
    before = target.numpy()
    bad = b.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ag.InvalidArgumentError):
        mixed.tropical_matmul(mixed.asarray(a), bad, out=target)
    assert np.array_equal(target.numpy(), before)
    with pytest.raises(ag.ShapeError, match=r"out: expected shape \(300, 24\)"):
        mixed.tropical_matmul(
            mixed.asarray(a), b, out=mixed.asarray(np.zeros((300, 23), np.float32))
        )


def test_chains_stay_resident(ctx3: ag.MultiGpuContext) -> None:
    a, b1, b2 = _operand(50, (2, 130, 40)), _operand(51, (2, 40, 90)), _operand(52, (2, 90, 3))
    x = _operand(53, (2, 3))
    da = ctx3.asarray(a, strategy="balanced")
    first = ctx3.tropical_matmul(da, b1)
    second = ctx3.tropical_matmul(first, b2, "min_plus")
    third = ctx3.tropical_matvec(second, x)
    assert [s[1:] for s in third.sharding] == [s[1:] for s in da.sharding]
    host_first = ctx3.tropical_matmul(a, b1)
    host_second = ctx3.tropical_matmul(host_first, b2, "min_plus")
    assert np.array_equal(second.numpy(), host_second)
    assert np.array_equal(third.numpy(), ctx3.tropical_matvec(host_second, x))


@pytest.mark.parametrize("fixture", ["ctx3", "mixed"])
def test_a_lost_product_is_rebuilt_from_its_lineage(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    # The first product's shards on the failed device are replayed through the engine (its
    # kernel on host rows of a, chunked as the engine cuts them) for the second product.
    ctx = request.getfixturevalue(fixture)
    a, b1, b2 = _operand(54, (3, 70, 30)), _operand(55, (3, 30, 50)), _operand(56, (3, 50, 20))
    want = ctx.tropical_matmul(ctx.tropical_matmul(a, b1), b2)
    try:
        for device in range(len(ctx.devices)):
            ctx.reset_health()
            da = ctx.asarray(a, strategy="balanced")
            first = ctx.tropical_matmul(da, b1)
            if device not in {d for d, _, _ in first.sharding}:
                continue
            ctx.inject_fault(device, after_chunks=0)
            assert np.array_equal(ctx.tropical_matmul(first, b2).numpy(), want), device
            assert not ctx.health()[device]["healthy"]
    finally:
        ctx.reset_health()


@pytest.mark.parametrize(
    ("a_shape", "b_shape"), [((0, 5), (5, 3)), ((2, 0, 5), (2, 5, 3)), ((0, 4, 5), (0, 5, 3))]
)
def test_empty_products(ctx3: ag.MultiGpuContext, a_shape, b_shape) -> None:
    # No rows, so nothing runs; the shape is the numpy path's. (k = 0 cannot be resident:
    # asarray refuses rows of no elements.)
    a, b = np.zeros(a_shape, np.float32), np.zeros(b_shape, np.float32)
    got = ctx3.tropical_matmul(ctx3.asarray(a), b)
    assert got.shape == ctx3.tropical_matmul(a, b).shape == got.numpy().shape


def test_a_resident_b_is_gathered(ctx3: ag.MultiGpuContext) -> None:
    a, b = _operand(57, (90, 12)), _operand(58, (12, 70))
    got = ctx3.tropical_matmul(ctx3.asarray(a), ctx3.asarray(b))
    assert np.array_equal(got.numpy(), ctx3.tropical_matmul(a, b))


def _message(ctx: ag.MultiGpuContext, a, b) -> str:
    """The error ``tropical_matmul(a, b)`` raises: its type and text."""
    with pytest.raises(ag.AmariGpuError) as info:
        ctx.tropical_matmul(a, b)
    return f"{type(info.value).__name__}: {info.value}"


@pytest.mark.parametrize("fixture", ["ctx3", "host"])
def test_errors_are_the_numpy_paths_word_for_word(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    a, b = _operand(60, (200, 30)), _operand(61, (30, 20))
    bad = a.copy()
    bad[123, 7] = np.nan
    bad[150, 2] = np.nan
    nan_b = b.copy()
    nan_b[4, 19] = np.nan
    cases = [
        (bad, b),  # NaN in a: its first position
        (a, nan_b),  # NaN in b
        (a, b[:-1]),  # b of the wrong inner dimension
        (a, b[None]),  # b with a batch axis a does not have
        # A finite term beyond float32 decides entries: the overflow error.
        (np.full((200, 30), 3e38, np.float32), np.full((30, 20), 3e38, np.float32)),
    ]
    for host_a, host_b in cases:
        want = _message(ctx, host_a, host_b)
        assert _message(ctx, ctx.asarray(host_a), host_b) == want
    bad3 = _operand(62, (3, 50, 30))
    bad3[2, 49, 29] = np.nan
    b3 = _operand(63, (3, 30, 5))
    assert _message(ctx, ctx.asarray(bad3), b3) == _message(ctx, bad3, b3)
    assert _message(ctx, ctx.asarray(bad3[:, :, :4]), b3) == _message(ctx, bad3[:, :, :4], b3)
    # Large but not overflowing magnitudes: the numpy path's exact check, then the same bits.
    big = np.full((200, 30), 3e38, np.float32)
    small = np.full((30, 20), -3e38, np.float32)
    got = ctx.tropical_matmul(ctx.asarray(big), small)
    assert np.array_equal(got.numpy(), ctx.tropical_matmul(big, small))


def test_bad_arrays_are_named(ctx3: ag.MultiGpuContext, host: ag.MultiGpuContext) -> None:
    a, b = _operand(70, (100, 8)), _operand(71, (8, 9))
    freed = ctx3.asarray(a)
    freed.free()
    with pytest.raises(ag.InvalidArgumentError, match="a: expected a live DeviceArray"):
        ctx3.tropical_matmul(freed, b)
    with pytest.raises(ag.InvalidArgumentError, match="a: expected a DeviceArray of this"):
        ctx3.tropical_matmul(host.asarray(a), b)
    with pytest.raises(ag.ShapeError, match=r"a: expected shape \(m, k\) or \(batch, m, k\)"):
        ctx3.tropical_matmul(ctx3.asarray(a[0]), b)
    with pytest.raises(ag.ShapeError, match=r"b: expected shape \(8, n\) with n >= 1 when a is a"):
        ctx3.tropical_matmul(ctx3.asarray(a), b[:, :0])
    with pytest.raises(ag.InvalidArgumentError, match="semiring"):
        ctx3.tropical_matmul(ctx3.asarray(a), b, "plus_times")


@pytest.mark.parametrize("default", [True, False])
def test_resident_matvec_on_the_host_device_alone(default: bool, host: ag.MultiGpuContext) -> None:
    # The checks ran as a map_rows kernel, which the host device cannot run: in a host-only
    # context (the default one on a machine without a GPU) the call failed as a lost device.
    ctx = ag.MultiGpuContext() if default else host
    try:
        a, x = _operand(80, (3, 70, 21)), _operand(81, (3, 21))
        for semiring in SEMIRINGS:
            got = ctx.tropical_matvec(ctx.asarray(a), x, semiring)
            assert np.array_equal(got.numpy(), ctx.tropical_matvec(a, x, semiring))
        bad = a.copy()
        bad[1, 5, 20] = np.nan
        with pytest.raises(ag.InvalidArgumentError, match=r"got NaN at \[1, 5, 20\]"):
            ctx.tropical_matvec(ctx.asarray(bad), x)
    finally:
        if default:
            ctx.close()


def test_resident_matvec_with_the_host_device_beside_lavapipe(mixed: ag.MultiGpuContext) -> None:
    a, x = _operand(90, (500, 33)), _operand(91, (33,))
    da = mixed.asarray(a, strategy="balanced")
    assert len({device for device, _, _ in da.sharding}) == len(mixed.devices)
    assert np.array_equal(mixed.tropical_matvec(da, x).numpy(), mixed.tropical_matvec(a, x))


def test_large_magnitudes_give_the_numpy_bits_where_the_rows_live(
    mixed: ag.MultiGpuContext,
) -> None:
    # A term could overflow (3e38 + |-3e38|), so a is gathered and the product checked
    # exactly; the result still lands where the rows live: a's sharding for a new array,
    # out's own for a DeviceArray out.
    big = np.full((300, 24), 3e38, np.float32)
    big[::7] = 1.0
    small = np.full((24, 24), -3e38, np.float32)
    want = mixed.tropical_matmul(big, small)
    da = mixed.asarray(big, strategy="balanced")
    got = mixed.tropical_matmul(da, small)
    assert [s[1:] for s in got.sharding] == [s[1:] for s in da.sharding]
    assert np.array_equal(got.numpy(), want)
    target = mixed.asarray(np.zeros((300, 24), np.float32), strategy="capability")
    sharding = target.sharding
    assert mixed.tropical_matmul(da, small, out=target) is target
    assert target.sharding == sharding
    assert np.array_equal(target.numpy(), want)
    host_out = np.full((300, 24), 7.0, np.float32)
    assert mixed.tropical_matmul(da, small, out=host_out) is host_out
    assert np.array_equal(host_out, want)
    # An overflow found by the exact check leaves a DeviceArray out as it was.
    before = target.numpy()
    with pytest.raises(ag.InvalidArgumentError, match="tropical products overflow float32"):
        mixed.tropical_matmul(da, np.full((24, 24), 3e38, np.float32), out=target)
    assert target.sharding == sharding
    assert np.array_equal(target.numpy(), before)


@pytest.mark.parametrize("resident", [False, True])
def test_argument_errors_come_before_out_is_written(
    resident: bool, ctx3: ag.MultiGpuContext
) -> None:
    # The core checks the operands before the bindings take out: the error is the
    # argument's, without the note of a call that began writing, and out is untouched.
    a, b = _operand(100, (90, 12)), _operand(101, (12, 5))
    a[40, 3] = np.nan
    out = np.full((90, 5), 7.0, np.float32)
    left = ctx3.asarray(a) if resident else a
    with pytest.raises(ag.InvalidArgumentError) as info:
        ctx3.tropical_matmul(left, b, out=out)
    assert str(info.value).startswith("a: expected no NaN")
    assert "at [40, 3] of shape (90, 12)" in str(info.value)
    assert "out may hold part" not in str(info.value)
    assert np.all(out == 7.0)
