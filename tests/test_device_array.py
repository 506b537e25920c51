"""DeviceArray: upload and gather, GA operations where the rows live (bit-identical to the
numpy path), errors, memory held, faults rebuilt from lineage, and the profile of a chain."""

from __future__ import annotations

import copy
import gc
import pickle

import amari_gpu as ag
import numpy as np
import pytest


def _batch(n: int, seed: int) -> np.ndarray:
    """A float32 (n, 8) batch of standard normal numbers."""
    return np.random.default_rng(seed).standard_normal((n, 8), dtype=np.float32)


ROWS = 1000


def _rotor() -> np.ndarray:
    r = np.zeros(8, np.float32)
    r[0], r[3] = np.cos(0.3), np.sin(0.3)
    return r


def _chain(ctx: ag.MultiGpuContext, a, b, r):
    """The benchmark's chain: product, sandwich by one rotor, normalize, reverse, product."""
    x = ctx.geometric_product(a, b, strategy="balanced")
    x = ctx.sandwich(r, x, strategy="balanced")
    x = ctx.normalize(x, strategy="balanced")
    x = ctx.reverse(x, strategy="balanced")
    return ctx.geometric_product(x, b, strategy="balanced")


@pytest.mark.parametrize("fixture", ["ctx3", "mixed"])
def test_upload_gather_round_trip_and_sharding(fixture: str, request) -> None:
    ctx = request.getfixturevalue(fixture)
    x = _batch(ROWS, 1).astype(np.float64)
    d = ctx.asarray(x, strategy="balanced")
    assert isinstance(d, ag.DeviceArray)
    # float64 rows stay float64 (issue 28), on every device of these contexts.
    assert (d.shape, d.dtype, d.ndim, d.nbytes) == ((ROWS, 8), np.float64, 2, ROWS * 64)
    shards = d.sharding
    assert shards[0][1] == 0 and shards[-1][2] == ROWS
    assert all(a[2] == b[1] for a, b in zip(shards, shards[1:], strict=False))
    assert len({s[0] for s in shards}) == len(ctx.devices)
    assert np.array_equal(d.numpy(), x)
    assert np.array_equal(np.asarray(d), x)
    assert np.asarray(d, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="without a copy"):
        np.asarray(d, copy=False)
    assert "sharding=[(" in repr(d) and "(1000, 8)" in repr(d)


@pytest.mark.parametrize("fixture", ["ctx3", "mixed"])
def test_chain_equals_the_numpy_path_bit_for_bit(fixture: str, request) -> None:
    ctx = request.getfixturevalue(fixture)
    a, b = _batch(ROWS, 2), _batch(ROWS, 3)
    expected = _chain(ctx, a, b, _rotor())
    # Operands placed differently: b is resharded to a's layout, rows that match stay put.
    da, db = ctx.asarray(a, strategy="balanced"), ctx.asarray(b, strategy="capability")
    got = _chain(ctx, da, db, _rotor())
    assert isinstance(got, ag.DeviceArray) and got.sharding == da.sharding
    assert np.array_equal(got.numpy(), expected)
    # Mixed: a numpy operand is uploaded to match the resident one.
    mixed_result = _chain(ctx, da, b, _rotor())
    assert np.array_equal(mixed_result.numpy(), expected)


def test_every_ga_operation_accepts_device_arrays(ctx3: ag.MultiGpuContext) -> None:
    a, b = _batch(300, 4), _batch(300, 5)
    da, db = ctx3.asarray(a), ctx3.asarray(b)
    for name in ("geometric_product", "outer_product", "inner_product", "scalar_product"):
        got = getattr(ctx3, name)(da, db)
        assert np.array_equal(np.asarray(got), getattr(ctx3, name)(a, b)), name
    for name in ("reverse", "grade_involution", "normalize", "dual"):
        assert np.array_equal(np.asarray(getattr(ctx3, name)(da)), getattr(ctx3, name)(a)), name
    got = ctx3.grade_projection(da, [0, 2])
    assert np.array_equal(got.numpy(), ctx3.grade_projection(a, [0, 2]))
    assert ctx3.scalar_product(da, db).shape == (300,)


def test_bad_operands_are_named_before_any_work(ctx3: ag.MultiGpuContext) -> None:
    a = ctx3.asarray(_batch(100, 6))
    short = ctx3.asarray(_batch(99, 7))
    with pytest.raises(ag.ShapeError, match="b: expected leading shape"):
        ctx3.geometric_product(a, short)
    with pytest.raises(ag.ShapeError, match="x: expected shape"):
        ctx3.reverse(ctx3.asarray(np.ones((10, 4))))
    other = ag.MultiGpuContext(backends=["vulkan"])
    try:
        foreign = other.asarray(_batch(100, 8))
        with pytest.raises(
            ag.InvalidArgumentError, match="b: expected a DeviceArray of this context"
        ):
            ctx3.geometric_product(a, foreign)
    finally:
        other.close()
    assert foreign.freed
    short.free()
    with pytest.raises(ag.InvalidArgumentError, match="b: expected a live DeviceArray"):
        ctx3.geometric_product(a, short)
    with pytest.raises(ag.InvalidArgumentError, match="freed"):
        short.numpy()
    assert "freed" in repr(short)
    with pytest.raises(ag.ShapeError, match=r"out: expected shape \(100, 8\)"):
        ctx3.reverse(a, out=np.zeros((99, 8), np.float32))
    with pytest.raises(ag.ShapeError, match=r"out: expected shape \(100, 8\)"):
        ctx3.reverse(a, out=ctx3.asarray(_batch(99, 7)))
    with pytest.raises(ag.ShapeError):
        ctx3.asarray(np.float32(1.0))
    with pytest.raises(TypeError):
        ctx3.asarray(np.ones((4, 8), complex))
    for copier in (pickle.dumps, copy.deepcopy):
        with pytest.raises(TypeError, match="DeviceArray cannot be pickled or deep-copied"):
            copier(a)
    assert np.array_equal(a.numpy(), _batch(100, 6))


def test_held_bytes_and_no_growth_over_create_free_cycles(ctx3: ag.MultiGpuContext) -> None:
    gc.collect()
    base = sum(s["resident_bytes"] for s in ctx3.stats())
    x = _batch(512, 9)
    d = ctx3.asarray(x)
    held = {s["device_id"]: s["resident_bytes"] for s in ctx3.stats()}
    assert sum(held.values()) - base == x.nbytes
    for dev, start, stop in d.sharding:
        assert held[dev] >= (stop - start) * 32
    d.free()
    assert sum(s["resident_bytes"] for s in ctx3.stats()) == base

    def cycle() -> None:
        y = ctx3.asarray(x)
        ctx3.reverse(y).free()
        y.free()

    for _ in range(20):
        cycle()
    pools = [s["memory_in_use_bytes"] for s in ctx3.stats()]
    for _ in range(1000):
        cycle()
    assert sum(s["resident_bytes"] for s in ctx3.stats()) == base
    assert [s["memory_in_use_bytes"] for s in ctx3.stats()] == pools
    # Release on garbage collection too.
    ctx3.asarray(x)
    gc.collect()
    assert sum(s["resident_bytes"] for s in ctx3.stats()) == base


def test_closing_the_context_releases_its_arrays() -> None:
    ctx = ag.MultiGpuContext(backends=["vulkan"])
    d = ctx.asarray(_batch(64, 10))
    ctx.close()
    assert d.freed


def test_a_resident_chain_moves_no_rows_between_upload_and_gather(ctx3: ag.MultiGpuContext) -> None:
    a, b = _batch(ROWS, 11), _batch(ROWS, 12)
    with ctx3.profile() as prof:
        da, db = ctx3.asarray(a, strategy="balanced"), ctx3.asarray(b, strategy="balanced")
        out = _chain(ctx3, da, db, _rotor()).numpy()
    labels = [c["kernel"] for c in prof.kernel_calls]
    assert labels[:2] == ["resident/upload"] * 2 and labels[-1] == "resident/gather"
    ops = set(range(2, len(labels) - 1))
    assert len(ops) == 5
    between = [e for e in prof.events if e["call"] in ops]
    assert {e["call"] for e in between if e["kind"] == "kernel"} == ops
    # The one rotor's map of the sandwich (8 x 8 floats) is the only thing uploaded in
    # between: 256 bytes per device.
    assert all(e["bytes"] == 8 * 8 * 4 for e in between if e["kind"] == "upload")
    assert not [e for e in between if e["kind"] == "readback"]
    assert {e["kind"] for e in prof.events if e["call"] == len(labels) - 1} == {"readback"}
    assert np.array_equal(out, _chain(ctx3, a, b, _rotor()))


def test_faults_at_every_chunk_of_a_chain_are_rebuilt_from_lineage(
    ctx3: ag.MultiGpuContext,
) -> None:
    a, b = _batch(ROWS, 13), _batch(ROWS, 14)
    expected = _chain(ctx3, a, b, _rotor())
    chunks = 5 * len(ctx3.devices)
    try:
        for device in range(len(ctx3.devices)):
            fired = 0
            for k in range(chunks + 1):
                ctx3.reset_health()
                # Fresh operands: rows rebuilt after a fault stay where they were rebuilt.
                da = ctx3.asarray(a, strategy="balanced")
                db = ctx3.asarray(b, strategy="balanced")
                ctx3.inject_fault(device, after_chunks=k)
                got = _chain(ctx3, da, db, _rotor())
                assert np.array_equal(got.numpy(), expected), (device, k)
                fired += not ctx3.health()[device]["healthy"]
            # One fault per chunk the device ran in the chain, each one recovered from.
            assert fired >= 5, (device, fired)
    finally:
        ctx3.reset_health()
    # The source arrays' own shards survive too: gathered from the lineage when lost, and
    # once an operation rebuilt them elsewhere they stay there.
    da = ctx3.asarray(a, strategy="balanced")
    ctx3.inject_fault(0, after_chunks=0)
    try:
        assert np.array_equal(ctx3.reverse(da).numpy(), ctx3.reverse(a))
        assert np.array_equal(da.numpy(), a)
        assert 0 not in {device for device, _, _ in da.sharding}
    finally:
        ctx3.reset_health()


def test_shapes_other_than_rows_of_multivectors(ctx3: ag.MultiGpuContext) -> None:
    empty = ctx3.asarray(np.zeros((0, 8)))
    assert empty.shape == (0, 8) and empty.sharding == []
    assert ctx3.reverse(empty).numpy().shape == (0, 8)
    column = ctx3.asarray(np.arange(10))
    assert column.shape == (10,) and np.array_equal(column.numpy(), np.arange(10, dtype=np.float32))
    cube = _batch(6, 15).reshape(2, 3, 8)
    got = ctx3.geometric_product(ctx3.asarray(cube), cube)
    assert got.shape == (2, 3, 8)
    assert np.array_equal(got.numpy(), ctx3.geometric_product(cube, cube))


# --- single multivectors as DeviceArrays -------------------------------------------------------

UNARY_OPS = ["reverse", "grade_involution", "normalize", "dual"]
BINARY_OPS = ["geometric_product", "outer_product", "inner_product", "scalar_product", "sandwich"]


def _unary(ctx: ag.MultiGpuContext, name: str, x, **kwargs):
    if name == "grade_projection":
        return ctx.grade_projection(x, [0, 2], **kwargs)
    return getattr(ctx, name)(x, **kwargs)


@pytest.mark.parametrize("name", [*UNARY_OPS, "grade_projection"])
def test_a_single_resident_multivector_is_taken_by_every_unary_operation(
    ctx3: ag.MultiGpuContext, name: str
) -> None:
    # asarray of a 1-D array keeps 2^n rows of one word, which once reached the kernels as a
    # shape (8, 1) the caller never passed.
    x = np.arange(1.0, 9.0, dtype=np.float32)
    want = _unary(ctx3, name, x)
    got = _unary(ctx3, name, ctx3.asarray(x))
    assert isinstance(got, ag.DeviceArray)
    assert got.shape == want.shape == (8,)
    assert np.array_equal(got.numpy(), want)
    # The result is a DeviceArray like any other: an operand of the next call.
    assert np.array_equal(ctx3.reverse(got).numpy(), ctx3.reverse(want))
    # A DeviceArray out of the result's shape takes it; a numpy one gets it gathered.
    out = ctx3.asarray(np.zeros(8, np.float32))
    assert _unary(ctx3, name, ctx3.asarray(x), out=out) is out
    assert np.array_equal(out.numpy(), want)
    host = np.zeros(8, np.float32)
    assert _unary(ctx3, name, ctx3.asarray(x), out=host) is host
    assert np.array_equal(host, want)


@pytest.mark.parametrize("name", BINARY_OPS)
@pytest.mark.parametrize(
    "kinds",
    [
        ("single", "single"),
        ("single", "numpy single"),
        ("numpy single", "single"),
        ("single", "batch"),
        ("batch", "single"),
        ("single", "numpy batch"),
        ("numpy batch", "single"),
        ("single", "unit batch"),
    ],
)
def test_a_single_resident_multivector_is_taken_by_every_binary_operation(
    ctx3: ag.MultiGpuContext, name: str, kinds: tuple[str, str]
) -> None:
    # "single": a 1-D DeviceArray (8,); "batch": a DeviceArray (50, 8); "unit batch": a
    # DeviceArray (1, 8); numpy operands as given. Results as for numpy operands of the
    # same shapes, bit for bit, and a DeviceArray whenever an operand is one.
    single, batch = _rotor() + np.float32(0.25), _batch(50, 21)
    values = {"single": single, "numpy single": single, "batch": batch, "numpy batch": batch}
    values["unit batch"] = batch[:1]
    operands = [values[k] for k in kinds]
    want = getattr(ctx3, name)(*operands)
    resident = [
        ctx3.asarray(v) if not k.startswith("numpy") else v
        for k, v in zip(kinds, operands, strict=True)
    ]
    got = getattr(ctx3, name)(*resident)
    assert isinstance(got, ag.DeviceArray), kinds
    assert got.shape == want.shape, kinds
    assert np.array_equal(got.numpy(), want), kinds


def test_two_single_resident_multivectors_give_a_single_result(
    ctx3: ag.MultiGpuContext,
) -> None:
    a, b = _rotor(), np.arange(8.0, dtype=np.float32)
    s = ctx3.scalar_product(ctx3.asarray(a), ctx3.asarray(b))
    assert isinstance(s, ag.DeviceArray) and s.shape == () and s.ndim == 0
    assert np.array_equal(s.numpy(), ctx3.scalar_product(a, b))
    with pytest.raises(TypeError, match="0-d DeviceArray"):
        len(s)


def test_shape_errors_of_resident_operands_speak_the_callers_shape(
    ctx3: ag.MultiGpuContext,
) -> None:
    with pytest.raises(ag.ShapeError, match=r"x: expected shape \(\.\.\., 8\), got \(16,\)"):
        ctx3.reverse(ctx3.asarray(np.ones(16)))
    with pytest.raises(ag.ShapeError, match=r"b: expected shape \(\.\.\., 8\), got \(4,\)"):
        ctx3.geometric_product(ctx3.asarray(np.ones(8)), ctx3.asarray(np.ones(4)))
    with pytest.raises(ag.ShapeError, match=r"out: expected shape \(8,\) \(the result's\), got"):
        ctx3.reverse(ctx3.asarray(np.ones(8)), out=ctx3.asarray(np.ones((1, 8))))
