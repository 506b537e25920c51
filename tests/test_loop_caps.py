"""Kernels whose loops grow with the input, past the loop cap of Mesa's software drivers.

llvmpipe and lavapipe (gallivm) silently stop the loops of a shader invocation once 65,535
trips have run over all of them together. Every built-in kernel whose loop trips grow with the
input walks them in passes or bounds its chunks (``LOOP_BUDGET`` in the core), so on those
drivers it must still give the host device's bits, and the float64 reference's values. Each
test here uses sizes at which one unbounded invocation would pass 65,535 trips.
"""

from __future__ import annotations

from collections.abc import Iterator

import amari_gpu as ag
import numpy as np
import pytest
from _domain_helpers import heat_reference, life_reference
from _tropical_helpers import floyd_warshall, reference_matmul, reference_matvec

# Past the cap for the tiled product (about 37,445 inner indices: 28 trips per 16 of them)
# and past four passes of 16,384.
K_PAST = 70_000


@pytest.fixture(scope="module")
def vulkan() -> Iterator[ag.MultiGpuContext]:
    """Two lavapipe devices."""
    ctx = ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def gl() -> Iterator[ag.MultiGpuContext]:
    """One llvmpipe (GL) device."""
    ctx = ag.MultiGpuContext(backends=["gl"])
    yield ctx
    ctx.close()


@pytest.fixture(params=["vulkan", "gl"])
def mesa(request: pytest.FixtureRequest) -> ag.MultiGpuContext:
    """Each of Mesa's two capped drivers in turn."""
    return request.getfixturevalue(request.param)


def test_the_issue_example_sees_the_last_inner_index(mesa: ag.MultiGpuContext) -> None:
    k = 37_446
    a = np.zeros((64, k), np.float32)
    b = np.zeros((k, 3), np.float32)
    a[:, -1] = 5
    b[-1, :] = 7
    assert np.all(mesa.tropical_matmul(a, b) == 12.0)


@pytest.mark.parametrize("semiring", ["max_plus", "min_plus"])
def test_long_products_equal_the_reference_and_the_host(
    mesa: ag.MultiGpuContext, host: ag.MultiGpuContext, semiring: str
) -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(-1000, 1000, (70, K_PAST)).astype(np.float32) / 8
    b = rng.integers(-1000, 1000, (K_PAST, 5)).astype(np.float32) / 8
    # The decisive terms sit in the last pass, where an unbounded walk never gets.
    a[:, K_PAST - 3] = 500 if semiring == "max_plus" else -500
    got = mesa.tropical_matmul(a, b, semiring=semiring)
    assert np.array_equal(got, reference_matmul(a, b, semiring))
    assert np.array_equal(got, host.tropical_matmul(a, b, semiring=semiring))


def test_signed_zero_ties_keep_the_earliest_term_across_passes(
    mesa: ag.MultiGpuContext, host: ag.MultiGpuContext
) -> None:
    # Every term is -0 but one +0 in a later pass: one walk keeps the first -0, and so must
    # the passes (what a pass stored wins a tie with what the next finds).
    a = np.full((64, K_PAST), -0.0, np.float32)
    b = np.full((K_PAST, 2), -0.0, np.float32)
    b[40_000, :] = 0.0
    got = mesa.tropical_matmul(a, b)
    want = host.tropical_matmul(a, b)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    assert np.all(np.signbit(got))


def test_long_batched_and_accumulated_products(
    mesa: ag.MultiGpuContext, host: ag.MultiGpuContext
) -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(-800, 800, (3, 20, 40_000)).astype(np.float32) / 8
    b = rng.integers(-800, 800, (3, 40_000, 4)).astype(np.float32) / 8
    got = mesa.tropical_matmul(a, b)
    assert np.array_equal(got, reference_matmul(a, b, "max_plus"))
    assert np.array_equal(got, host.tropical_matmul(a, b))


def test_resident_long_products(vulkan: ag.MultiGpuContext, host: ag.MultiGpuContext) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(-800, 800, (130, K_PAST)).astype(np.float32) / 8
    b = rng.integers(-800, 800, (K_PAST, 3)).astype(np.float32) / 8
    a[129, K_PAST - 1] = 1000
    got = vulkan.tropical_matmul(vulkan.asarray(a, strategy="balanced"), b)
    assert np.array_equal(got.numpy(), reference_matmul(a, b, "max_plus"))
    # Rows of several batches in one 64-row tile: each tile walks K once per batch.
    a3 = rng.integers(-800, 800, (5, 30, 20_000)).astype(np.float32) / 8
    b3 = rng.integers(-800, 800, (5, 20_000, 3)).astype(np.float32) / 8
    got3 = vulkan.tropical_matmul(vulkan.asarray(a3), b3, semiring="min_plus")
    assert np.array_equal(got3.numpy(), host.tropical_matmul(a3, b3, semiring="min_plus"))


def test_resident_checks_read_whole_long_rows(vulkan: ag.MultiGpuContext) -> None:
    # The resident product's row statistics find a NaN near the end of a long row, and
    # the magnitude that decides the overflow check, as the numpy path does.
    a = np.zeros((70, K_PAST), np.float32)
    b = np.zeros((K_PAST, 3), np.float32)
    a[33, K_PAST - 10] = np.nan
    with pytest.raises(ag.AmariGpuError) as host_error:
        vulkan.tropical_matmul(a, b)
    with pytest.raises(ag.AmariGpuError) as resident_error:
        vulkan.tropical_matmul(vulkan.asarray(a), b)
    assert str(resident_error.value) == str(host_error.value)
    assert str(K_PAST - 10) in str(resident_error.value)
    big = np.zeros((70, K_PAST), np.float32)
    big[5, K_PAST - 2] = 3e38
    huge_b = np.zeros((K_PAST, 3), np.float32)
    huge_b[K_PAST - 2, :] = 3e38
    with pytest.raises(ag.AmariGpuError) as host_overflow:
        vulkan.tropical_matmul(big, huge_b)
    with pytest.raises(ag.AmariGpuError) as resident_overflow:
        vulkan.tropical_matmul(vulkan.asarray(big), huge_b)
    assert str(resident_overflow.value) == str(host_overflow.value)


def test_long_matvec(mesa: ag.MultiGpuContext, host: ag.MultiGpuContext) -> None:
    # 64 threads per row: one walk passes the cap past 64 x 65,535 indices.
    k = 64 * 65_535 + 70_000
    rng = np.random.default_rng(4)
    a = rng.integers(-800, 800, (2, k)).astype(np.float32) / 8
    x = rng.integers(-800, 800, k).astype(np.float32) / 8
    a[1, k - 5] = 900
    got = mesa.tropical_matvec(a, x)
    assert np.array_equal(got, reference_matvec(a, x, "max_plus"))
    assert np.array_equal(got, host.tropical_matvec(a, x))


def test_shortest_paths_on_large_graphs(
    vulkan: ag.MultiGpuContext, host: ag.MultiGpuContext
) -> None:
    # Blocks of at most 128 vertices bound every invocation's walk whatever n is; a graph
    # of this size has 1,100 vertices on each path's inner walk all the same.
    rng = np.random.default_rng(5)
    n = 1100
    w = rng.integers(1, 50, (n, n)).astype(np.float32)
    w[rng.random((n, n)) < 0.9] = np.inf
    got = vulkan.shortest_paths(w)
    assert np.array_equal(got, host.shortest_paths(w))
    assert np.array_equal(got, floyd_warshall(w).astype(np.float32))


def _fisher_reference(scores: np.ndarray) -> np.ndarray:
    s = scores.astype(np.float64)
    return s.T @ s / len(s)


def test_fisher_on_large_chunks_equals_the_host() -> None:
    # Chunks of 2^18 rows cut into 4 slices: 65,536 rows a slice would pass the cap in the
    # tiled SYRK (51 trips per 32 rows); the chunks are bounded on every device alike.
    chunk = 1 << 18
    rng = np.random.default_rng(6)
    scores = rng.standard_normal((200_000, 65)).astype(np.float32)
    gpu = ag.MultiGpuContext(backends=["vulkan"], chunk_items=chunk)
    # Beside lavapipe the host device rounds fma as lavapipe does (alone it fuses, as a
    # hardware GPU does), so a mixed context must give lavapipe's bits.
    mixed = ag.MultiGpuContext(backends=["vulkan", "host"], chunk_items=chunk)
    try:
        got = gpu.fisher_information(scores)
        np.testing.assert_allclose(got, _fisher_reference(scores), rtol=1e-4, atol=1e-4)
        assert np.array_equal(got, mixed.fisher_information(scores, strategy="balanced"))
        assert mixed.last_plan is not None
        assert len({w.device_id for w in mixed.last_plan if w.items}) == 2
        resident = gpu.fisher_information(gpu.asarray(scores))
        assert np.array_equal(resident, got)
    finally:
        gpu.close()
        mixed.close()


def test_resident_column_maxima_over_long_runs() -> None:
    # Column maxima walk 16 runs of a chunk's rows: chunks of 2^21 rows would give runs of
    # 131,072. The one large score sits in the last row; a missed maximum would choose a
    # scaling that overflows its square, so the resident result must be the numpy path's.
    n = 1 << 21
    rng = np.random.default_rng(7)
    scores = (rng.standard_normal((n, 4)) * 1e-30).astype(np.float32)
    scores[n - 1, 2] = 1e30
    gpu = ag.MultiGpuContext(backends=["vulkan"], chunk_items=n)
    try:
        want = gpu.fisher_information(scores)
        got = gpu.fisher_information(gpu.asarray(scores))
        assert np.isfinite(got).all()
        assert np.array_equal(got, want)
    finally:
        gpu.close()


def test_resident_checks_flag_a_bad_row_at_the_end_of_a_long_chunk() -> None:
    # The checks' 64 threads walk every 64th row of 16 runs, k + 2 trips a row: a chunk of
    # 2^25 rows of one word (the binding limit) would take 98,304. A bad last row must be
    # found as the numpy path finds it.
    n, k = 1 << 25, 1
    probs = np.ones((n, k), np.float32)
    probs[n - 1, 0] = 0.5
    gpu = ag.MultiGpuContext(backends=["vulkan"], chunk_items=n)
    try:
        with pytest.raises(ag.AmariGpuError) as numpy_error:
            gpu.fisher_categorical(probs=probs)
        with pytest.raises(ag.AmariGpuError) as resident_error:
            gpu.fisher_categorical(probs=gpu.asarray(probs))
        assert str(resident_error.value) == str(numpy_error.value)
        assert str(n - 1) in str(resident_error.value)
    finally:
        gpu.close()


def test_grids_wider_and_longer_than_the_cap(vulkan: ag.MultiGpuContext) -> None:
    # The grid kernels have no loops (one thread per vec4 of cells, steps as dispatches): a
    # row wider than 65,535 cells gives the float64 reference's values, and the bits of a
    # context whose host device takes rows beside lavapipe (it rounds fma as lavapipe does
    # there; alone it fuses, as hardware GPUs do).
    rng = np.random.default_rng(8)
    grid = rng.random((6, 70_000)).astype(np.float32)
    got = vulkan.stencil(grid, 3, 0.2)
    np.testing.assert_allclose(got, heat_reference(grid, 3, 0.2, "dirichlet"), atol=1e-5)
    with ag.MultiGpuContext(backends=["vulkan", "host"]) as mixed:
        assert np.array_equal(mixed.stencil(grid, 3, 0.2, split=[3, 3]), got)
    cells = (rng.random((8, 70_000)) < 0.3).astype(np.uint8)
    assert np.array_equal(vulkan.life(cells, 4), life_reference(cells, 4))
