"""``MultiGpuContext.geometric_product``: Cl(3,0) products of (N, 8) batches on the devices.

Results are checked against the independent float64 reference in ``cl3.py``: on every adapter
alone, on three logical devices of one adapter (with default and with small chunks), for
hand-computed basis products, random property-based inputs, non-contiguous and non-float32
inputs, bad shapes and dtypes, NaN, concurrent calls from several threads, and the release
of the GIL while the devices work.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import amari_gpu
import numpy as np
import pytest
from amari_gpu import AmariGpuError, ShapeError
from cl3 import (
    BLADES,
    PRODUCT_TABLE,
    REL_TOL,
    magnitude_bound,
    random_batch,
    reference_product,
    relative_error,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

SIZES = [0, 1, 65_537, 2_000_000]
CHUNK = 4096  # chunk_items of the ``devices3_chunked`` context
# With 4096-item chunks on 3 devices: nothing, below one chunk, exactly one, one plus a 1-item
# ragged chunk, exactly one round of 3 chunks, several rounds with a ragged last chunk, and the
# large sizes, where every device takes many chunks.
CHUNKED_SIZES = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 7 * CHUNK + 123, 65_537, 2_000_000]

NAMES = ["1", "e1", "e2", "e12", "e3", "e13", "e23", "e123"]


def _blade(name: str, coefficient: float = 1.0) -> np.ndarray:
    row = np.zeros(BLADES, dtype=np.float32)
    row[NAMES.index(name)] = coefficient
    return row


def _check_result(out: object, n: int) -> np.ndarray:
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.float32
    assert out.shape == (n, BLADES)
    return out


# --- agreement with the reference -----------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_matches_reference_on_each_adapter(adapter_ctx, reference_batch, n):
    a, b, want = reference_batch(n)
    out = _check_result(adapter_ctx.geometric_product(a, b), n)
    assert relative_error(out, want) < REL_TOL


@pytest.mark.parametrize("n", SIZES)
def test_matches_reference_on_three_devices_per_adapter(devices3, reference_batch, n):
    a, b, want = reference_batch(n)
    out = _check_result(devices3.geometric_product(a, b), n)
    assert relative_error(out, want) < REL_TOL


@pytest.mark.parametrize("n", CHUNKED_SIZES)
def test_matches_reference_on_three_devices_with_small_chunks(devices3_chunked, reference_batch, n):
    a, b, want = reference_batch(n)
    out = _check_result(devices3_chunked.geometric_product(a, b), n)
    assert relative_error(out, want) < REL_TOL


def test_every_row_lands_in_its_own_place(devices3_chunked):
    # Row i of a is i * 1 (scalar), b is all ones: row i of the product is i * (1, ..., 1).
    # Any chunk written to the wrong offset, or a chunk missing, shows as a wrong row.
    n = 5 * CHUNK + 17
    a = np.zeros((n, BLADES), dtype=np.float32)
    a[:, 0] = np.arange(n)
    b = np.ones((n, BLADES), dtype=np.float32)
    out = devices3_chunked.geometric_product(a, b)
    np.testing.assert_array_equal(out, np.repeat(a[:, :1], BLADES, axis=1))


def test_empty_batch_gives_empty_float32_result(adapter_ctx):
    # float64 and int32 operands compute in float64, which GL adapters lack: float32 here.
    out = adapter_ctx.geometric_product(
        np.empty((0, 8)), np.empty((0, 8), dtype=np.int32), dtype=np.float32
    )
    _check_result(out, 0)


# --- known products ---------------------------------------------------------------------------

KNOWN_PRODUCTS = [
    # (left, right, expected) in blade names, with a sign or a scalar where needed.
    ("e1", "e2", ("e12", 1.0)),
    ("e2", "e1", ("e12", -1.0)),
    ("e12", "e12", ("1", -1.0)),
    ("e123", "e123", ("1", -1.0)),
    ("e1", "e1", ("1", 1.0)),
    ("e2", "e2", ("1", 1.0)),
    ("e3", "e3", ("1", 1.0)),
    ("e1", "e3", ("e13", 1.0)),
    ("e3", "e1", ("e13", -1.0)),
    ("e2", "e3", ("e23", 1.0)),
    ("e12", "e3", ("e123", 1.0)),
    ("e3", "e12", ("e123", 1.0)),
    ("e1", "e23", ("e123", 1.0)),
    ("e2", "e13", ("e123", -1.0)),
    ("e12", "e2", ("e1", 1.0)),
    ("e2", "e12", ("e1", -1.0)),
    ("e13", "e13", ("1", -1.0)),
    ("e23", "e23", ("1", -1.0)),
    ("1", "e123", ("e123", 1.0)),
]


def test_known_basis_products(adapter_ctx):
    a = np.stack([_blade(left) for left, _, _ in KNOWN_PRODUCTS])
    b = np.stack([_blade(right) for _, right, _ in KNOWN_PRODUCTS])
    want = np.stack([_blade(name, sign) for _, _, (name, sign) in KNOWN_PRODUCTS])
    out = adapter_ctx.geometric_product(a, b)
    for row, (left, right, (name, sign)) in enumerate(KNOWN_PRODUCTS):
        np.testing.assert_array_equal(
            out[row], want[row], err_msg=f"{left} * {right} should be {sign:+} {name}"
        )


def test_reference_agrees_with_known_basis_products():
    # The test reference itself must satisfy the hand-computed products.
    a = np.stack([_blade(left) for left, _, _ in KNOWN_PRODUCTS])
    b = np.stack([_blade(right) for _, right, _ in KNOWN_PRODUCTS])
    want = np.stack([_blade(name, sign) for _, _, (name, sign) in KNOWN_PRODUCTS])
    np.testing.assert_array_equal(reference_product(a, b), want)


def test_whole_cayley_table(adapter_ctx):
    eye = np.eye(BLADES, dtype=np.float32)
    a = np.repeat(eye, BLADES, axis=0)  # row 8 i + j: blade i ...
    b = np.tile(eye, (BLADES, 1))  # ... times blade j
    out = adapter_ctx.geometric_product(a, b)
    want = np.zeros((BLADES * BLADES, BLADES), dtype=np.float32)
    for i, j, k, sign in PRODUCT_TABLE:
        want[BLADES * i + j, k] = sign
    np.testing.assert_array_equal(out, want)


def test_vector_squares_to_its_squared_norm(default_ctx):
    rng = np.random.default_rng(11)
    v = np.zeros((1000, BLADES), dtype=np.float32)
    v[:, [1, 2, 4]] = rng.standard_normal((1000, 3), dtype=np.float32)
    out = default_ctx.geometric_product(v, v).astype(np.float64)
    norm2 = (v.astype(np.float64) ** 2).sum(axis=1)
    np.testing.assert_allclose(out[:, 0], norm2, rtol=1e-6)
    np.testing.assert_allclose(out[:, 1:], 0.0, atol=1e-6 * norm2.max())


def test_product_is_associative(default_ctx):
    a, b = random_batch(10_000, seed=21)
    c, _ = random_batch(10_000, seed=22)
    left = default_ctx.geometric_product(default_ctx.geometric_product(a, b), c)
    right = default_ctx.geometric_product(a, default_ctx.geometric_product(b, c))
    assert relative_error(left, reference_product(reference_product(a, b), c)) < 1e-4
    np.testing.assert_allclose(left, right, rtol=0, atol=1e-4 * np.abs(right).max())


# --- property-based -----------------------------------------------------------------------------

_element = st.floats(min_value=-1e3, max_value=1e3, width=32)


@st.composite
def _batch_pair(draw):
    n = draw(st.integers(min_value=1, max_value=16))
    a = draw(hnp.arrays(np.float32, (n, BLADES), elements=_element))
    b = draw(hnp.arrays(np.float32, (n, BLADES), elements=_element))
    return a, b


@settings(max_examples=25, deadline=None)
@given(pair=_batch_pair())
def test_property_matches_reference(default_ctx, pair):
    a, b = pair
    out = default_ctx.geometric_product(a, b)
    assert out.dtype == np.float32 and out.shape == a.shape
    # Arbitrary inputs can cancel to (near) zero, so bound the error by what float32 can do:
    # a few ulps of the sum of |terms|, plus a floor for products that underflow float32.
    error = np.abs(out.astype(np.float64) - reference_product(a, b))
    assert (error <= 1e-6 * magnitude_bound(a, b) + 1e-33).all()


# --- input layouts and dtypes ---------------------------------------------------------------------


def _layouts(seed: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    n = 1001
    wide = rng.standard_normal((2 * n, 2 * BLADES), dtype=np.float32)
    return [
        ("row step", wide[::2, :BLADES]),
        ("column step", wide[:n, ::2]),
        ("reversed rows", wide[n - 1 :: -1, BLADES:]),
        ("fortran order", np.asfortranarray(wide[:n, :BLADES])),
        ("transposed", np.ascontiguousarray(wide[:n, BLADES:].T).T),
    ]


@pytest.mark.parametrize("index", range(5), ids=[name for name, _ in _layouts(0)])
def test_non_contiguous_inputs_match_contiguous_copies(adapter_ctx, index):
    name_a, a = _layouts(1)[index]
    _, b = _layouts(2)[(index + 1) % 5]  # a different layout for b
    assert not a.flags.c_contiguous, name_a
    out = adapter_ctx.geometric_product(a, b)
    np.testing.assert_array_equal(
        out, adapter_ctx.geometric_product(np.ascontiguousarray(a), np.ascontiguousarray(b))
    )
    assert relative_error(out, reference_product(a, b)) < REL_TOL


def test_float64_inputs_are_converted_to_float32_on_request(default_ctx):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((777, BLADES))
    b = rng.standard_normal((777, BLADES))
    out = default_ctx.geometric_product(a, b, dtype=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(
        out, default_ctx.geometric_product(a.astype(np.float32), b.astype(np.float32))
    )
    # Without dtype=, float64 stays float64 (tests/test_dtypes_ga.py).
    assert default_ctx.geometric_product(a, b).dtype == np.float64


@pytest.mark.parametrize(
    ("dtype", "result"),
    [
        (np.int8, np.float64),
        (np.int32, np.float64),
        (np.int64, np.float64),
        (np.uint8, np.float64),
        (np.uint64, np.float64),
        (np.bool_, np.float64),
        (np.float16, np.float16),
    ],
)
def test_integer_bool_and_half_inputs_compute_in_float64_and_float16(default_ctx, dtype, result):
    rng = np.random.default_rng(6)
    a = rng.integers(0, 2 if dtype is np.bool_ else 100, size=(300, BLADES)).astype(dtype)
    b = rng.integers(0, 2 if dtype is np.bool_ else 100, size=(300, BLADES)).astype(dtype)
    out = default_ctx.geometric_product(a, b)
    # Integers and bools as numpy's true division would (float64); float16 is kept (float32
    # accumulation, rounded once to float16).
    assert out.dtype == result
    # Small integers: every term and sum is exact in float32, so the result is the exact
    # product rounded once (to infinity past float16's 65504).
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, reference_product(a, b).astype(result))


def test_nested_lists_are_accepted(default_ctx):
    a = [[0, 1, 0, 0, 0, 0, 0, 0]]  # e1
    b = [[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]]  # e2
    out = default_ctx.geometric_product(a, b)
    assert out.dtype == np.float64  # lists are arrays of Python ints and floats: float64
    np.testing.assert_array_equal(out, [_blade("e12")])


@pytest.mark.parametrize(
    ("bad", "dtype_text"),
    [
        (np.zeros((3, 8), dtype=np.complex128), "complex128"),
        (np.zeros((3, 8), dtype=np.complex64), "complex64"),
        (np.zeros((3, 8), dtype=object), "object"),
        (np.full((3, 8), "1.0"), "<U3"),
        (np.zeros((3, 8), dtype="datetime64[s]"), "datetime64"),
    ],
    ids=["complex128", "complex64", "object", "str", "datetime64"],
)
@pytest.mark.parametrize("argument", ["a", "b"])
def test_non_real_dtypes_raise_type_error_naming_the_argument(
    default_ctx, bad, dtype_text, argument
):
    good = np.zeros((3, 8), dtype=np.float32)
    args = (bad, good) if argument == "a" else (good, bad)
    with pytest.raises(TypeError, match=rf"^{argument}\b.*{re.escape(dtype_text)}"):
        default_ctx.geometric_product(*args)


# --- inputs are left alone; the result is new ---------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_inputs_are_never_modified(default_ctx, dtype):
    a, b = random_batch(5000, seed=8)
    a, b = (a * 10).astype(dtype), (b * 10).astype(dtype)
    a_before, b_before = a.copy(), b.copy()
    out = default_ctx.geometric_product(a, b)
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_array_equal(b, b_before)
    assert not np.shares_memory(out, a) and not np.shares_memory(out, b)
    assert out.flags.writeable
    out[:] = 0  # writing the result must not reach the inputs either
    np.testing.assert_array_equal(a, a_before)


def test_same_array_for_both_arguments(default_ctx):
    a, _ = random_batch(2000, seed=9)
    a_before = a.copy()
    out = default_ctx.geometric_product(a, a)
    np.testing.assert_array_equal(a, a_before)
    assert relative_error(out, reference_product(a, a)) < REL_TOL


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_read_only_inputs_are_accepted(default_ctx, dtype):
    a, b = random_batch(3000, seed=10)
    a, b = a.astype(dtype), b.astype(dtype)
    a.setflags(write=False)
    b.setflags(write=False)
    out = default_ctx.geometric_product(a, b)
    assert out.flags.writeable
    assert relative_error(out, reference_product(a, b)) < REL_TOL


# --- shapes ---------------------------------------------------------------------------------------

SHAPE_CASES = [
    # (shape of a, shape of b, argument named, expected shape text, actual shape text)
    ((5, 7), (5, 8), "a", "(..., 8)", "(5, 7)"),
    ((5,), (5, 8), "a", "(..., 8)", "(5,)"),
    ((5, 8, 1), (5, 8), "a", "(..., 8)", "(5, 8, 1)"),
    ((8, 5), (5, 8), "a", "(..., 8)", "(8, 5)"),
    ((5, 16), (5, 8), "a", "(..., 8)", "(5, 16)"),
    ((5, 8), (5, 7), "b", "(..., 8)", "(5, 7)"),
    # Leading axes broadcast like a numpy gufunc's: (5,) and (4,) do not.
    ((5, 8), (4, 8), "b", "broadcast with a's (5,)", "(4, 8)"),
    ((5, 8), (6, 8), "b", "broadcast with a's (5,)", "(6, 8)"),
    ((5, 8), (7,), "b", "(..., 8)", "(7,)"),  # (8,) would broadcast: see test_ga_api.py
    ((0, 8), (2, 8), "b", "broadcast with a's (0,)", "(2, 8)"),
    ((5, 8), (5, 8, 1), "b", "(..., 8)", "(5, 8, 1)"),
]


@pytest.mark.parametrize(
    ("shape_a", "shape_b", "argument", "expected", "actual"),
    SHAPE_CASES,
    ids=[f"{a}x{b}" for a, b, *_ in SHAPE_CASES],
)
def test_wrong_shapes_raise_shape_error(default_ctx, shape_a, shape_b, argument, expected, actual):
    a = np.zeros(shape_a, dtype=np.float32)
    b = np.zeros(shape_b, dtype=np.float32)
    pattern = rf"^{argument}\b.*{re.escape(expected)}.*{re.escape(actual)}"
    with pytest.raises(ShapeError, match=pattern) as info:
        default_ctx.geometric_product(a, b)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, AmariGpuError)
    # Plain ValueError handlers catch it too.
    with pytest.raises(ValueError, match=pattern):
        default_ctx.geometric_product(a, b)


def test_zero_dimensional_input_reports_its_real_shape(default_ctx):
    with pytest.raises(ShapeError, match=r"^a\b.*\(\.\.\., 8\).*got \(\)"):
        default_ctx.geometric_product(np.float32(1.0), np.zeros((1, 8), dtype=np.float32))


def test_adapter_info_is_hashable(all_adapters):
    assert len({hash(a) for a in all_adapters}) == len(all_adapters)


# --- NaN ------------------------------------------------------------------------------------------


def test_nan_and_inf_propagate_to_the_affected_outputs(adapter_ctx):
    a, b = random_batch(64, seed=12)
    a, b = a.copy(), b.copy()
    a[3, 0] = np.nan  # scalar part of a: every output of row 3
    b[10, 5] = np.nan  # e13 part of b: every output of row 10
    a[20, 7] = np.nan  # e123 part of a (and again NaN in b's row 20)
    b[20, 2] = np.nan
    a[30, 6] = np.inf  # inf times b[30]'s nonzero entries: every output of row 30 is inf or NaN
    b[40, :] = 0.0
    a[40, 1] = np.inf  # inf * 0: NaN in every output of row 40
    out = adapter_ctx.geometric_product(a, b)
    # For a fixed blade j, i -> i ^ j reaches every output blade, so one NaN in a row
    # reaches all 8 outputs of that row.
    for row in (3, 10, 20, 40):
        assert np.isnan(out[row]).all(), (row, out[row])
    assert (~np.isfinite(out[30])).all(), out[30]
    clean = np.setdiff1d(np.arange(64), [3, 10, 20, 30, 40])
    assert np.isfinite(out[clean]).all()
    assert relative_error(out[clean], reference_product(a[clean], b[clean])) < REL_TOL


# --- threads and the GIL --------------------------------------------------------------------------


@pytest.mark.parametrize("ctx_name", ["default_ctx", "devices3_chunked"])
def test_two_threads_share_one_context(request, ctx_name):
    ctx = request.getfixturevalue(ctx_name)
    n, iterations, threads = 200_000, 4, 2
    data = {}
    for t in range(threads):
        for it in range(iterations):
            a, b = random_batch(n - 1000 * it - 37 * t, seed=1000 + 10 * t + it)
            data[t, it] = (a, b, reference_product(a, b))
    barrier = threading.Barrier(threads, timeout=60)

    def work(t: int) -> list[float]:
        errors = []
        for it in range(iterations):
            a, b, want = data[t, it]
            barrier.wait()  # both threads enter geometric_product together
            out = ctx.geometric_product(a, b)
            assert out.shape == want.shape
            errors.append(relative_error(out, want))
        return errors

    with ThreadPoolExecutor(max_workers=threads) as pool:
        results = [f.result(timeout=120) for f in [pool.submit(work, t) for t in range(threads)]]
    assert len(results) == threads
    for errors in results:
        assert len(errors) == iterations
        assert max(errors) < REL_TOL, errors


def test_gil_is_released_during_device_work(reference_batch):
    # A state, not a clock: the chunk counter of the call's device only moves while a call
    # runs. Another Python thread reading it (``stats()`` holds the GIL throughout) can see
    # a value strictly between the counts before and after a call only if it ran Python
    # while the call was in progress, which a call holding the GIL would not allow. Calls
    # are repeated until the watcher sees such a value: with the GIL held it never would,
    # and the bound on calls (not on time) ends the test.
    ctx = amari_gpu.MultiGpuContext(backends=["vulkan"], chunk_items=1 << 14)
    a, b, want = reference_batch(1 << 20)
    assert a.flags.c_contiguous and a.dtype == np.float32  # nothing to convert in Python

    def done() -> int:
        return int(sum(s["chunks_done"] for s in ctx.stats()))

    # How many chunks one call counts (the first call also calibrates, uncounted).
    first = done()
    assert relative_error(ctx.geometric_product(a, b), want) < REL_TOL
    chunks = done() - first
    assert chunks >= 2, chunks

    window: list[int] = []  # the counts before and after the call in progress
    seen_inside = threading.Event()
    stop = threading.Event()
    watching = threading.Event()

    def watch() -> None:
        watching.set()
        while not stop.is_set() and not seen_inside.is_set():
            now = done()
            if len(window) == 1 and window[0] < now < window[0] + chunks:
                seen_inside.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert watching.wait(60)
    try:
        for _ in range(50):
            window[:] = [done()]
            out = ctx.geometric_product(a, b)
            window.append(done())
            assert window[1] == window[0] + chunks  # every chunk of the call is counted
            assert relative_error(out, want) < REL_TOL
            if seen_inside.is_set():
                break
    finally:
        stop.set()
        watcher.join(60)
        ctx.close()
    assert not watcher.is_alive()
    assert seen_inside.is_set(), (
        "no other Python thread ran while geometric_product was in progress: "
        "the GIL is held during device work"
    )
