"""Float32 extremes: the right answer or a clear error, never a quietly wrong one.

Each repro of issue 14 (items 4-6) against a float64 (or exact) reference: Fisher matrices of
tiny and huge scores and subnormal weights (scaled by exact powers of two), heat steps on grids
near the float32 limit (scaled likewise), shortest paths and tropical products whose sums
leave the float32 range (an error naming the overflow, never a wrong inf or -inf). The scaled
paths are checked for bit-identity across device counts and layouts.
"""

from __future__ import annotations

import numpy as np
import pytest
from _domain_helpers import heat_reference
from _fisher_helpers import reference_fisher, relative_error
from _tropical_helpers import floyd_warshall
from amari_gpu import InvalidArgumentError

F32_MAX = float(np.finfo(np.float32).max)
TINY = float(np.finfo(np.float32).smallest_subnormal)


def _scores(n: int = 200, p: int = 7, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, p)).astype(np.float32)


# --- item 4: Fisher information --------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e-25, 1e-22, 1e-30, 1e-38, 1e-42, 1e20, 1e30, 3e37])
def test_fisher_of_scaled_scores_matches_float64(default_ctx, scale):
    s = (_scores().astype(np.float64) * scale).astype(np.float32)
    want = reference_fisher(s)
    got = default_ctx.fisher_information(s)
    assert np.isfinite(got).all()
    # Down to 1e-38 the scores are normal floats: float32 precision. Below, the inputs
    # themselves are subnormal (few bits), and the reference takes them as they are.
    assert relative_error(got, want) < 1e-5, (scale, relative_error(got, want))
    assert np.array_equal(got, got.T)


def test_fisher_1e_minus_25_is_not_zero(default_ctx):
    s = (_scores() * np.float32(1e-25)).astype(np.float32)
    got = default_ctx.fisher_information(s)
    want = reference_fisher(s)
    assert got[0, 0] > 0
    assert abs(got[0, 0] / want[0, 0] - 1) < 1e-6


@pytest.mark.parametrize("w", [TINY, 1e-45, 1e-40, 1e-30, 1e35])
def test_fisher_with_extreme_weights_matches_float64(default_ctx, w):
    s = _scores()
    weights = np.full(s.shape[0], w, np.float32)
    weights[::3] *= np.float32(2.0) if w < 1e30 else np.float32(0.5)
    got = default_ctx.fisher_information(s, weights)
    assert relative_error(got, reference_fisher(s, weights)) < 1e-5


def test_fisher_of_mixed_column_magnitudes_is_right_in_every_entry(default_ctx):
    # Column scales 1e-30, 1, 1e25 and a zero column: each entry is compared to the exact
    # value relative to sqrt(F_ii F_jj), the scale float32 can promise for that entry.
    s = _scores(p=4)
    s[:, 0] *= np.float32(1e-30)
    s[:, 2] *= np.float32(1e25)
    s[:, 3] = 0
    got = default_ctx.fisher_information(s)
    want = reference_fisher(s)
    d = np.sqrt(np.outer(np.diag(want), np.diag(want)))
    nonzero = d > 0
    assert (np.abs(got - want)[nonzero] <= 1e-5 * d[nonzero]).all()
    assert (got[~nonzero] == 0).all()


def test_fisher_scaled_path_is_bit_identical_across_devices(default_ctx, devices3):
    s = (_scores(n=3000, p=9) * np.float32(1e-28)).astype(np.float32)
    w = np.linspace(1e-44, 3e-44, s.shape[0]).astype(np.float32)
    one = default_ctx.fisher_information(s, w)
    three = devices3.fisher_information(s, w, strategy="balanced")
    assert one.tobytes() == three.tobytes()
    assert relative_error(one, reference_fisher(s, w)) < 1e-5


def test_natural_gradient_of_tiny_scores(default_ctx):
    s = (_scores(p=3) * np.float32(1e-24)).astype(np.float32)
    f = reference_fisher(s)
    g = np.array([1e-48, -2e-48, 3e-48])
    got = default_ctx.natural_gradient(s, g, 0.0)
    np.testing.assert_allclose(got, np.linalg.solve(f, g), rtol=1e-4)


# --- item 5: heat steps near the float32 limit -----------------------------------------------


@pytest.mark.parametrize("boundary", ["dirichlet", "periodic"])
@pytest.mark.parametrize("value", [1e38, -3e38, F32_MAX])
def test_uniform_huge_field_stays_uniform(default_ctx, boundary, value):
    grid = np.full((4, 4), value, np.float32)
    out = default_ctx.stencil(grid, 5, 0.25, boundary)
    assert np.array_equal(out, grid)


@pytest.mark.parametrize("boundary", ["dirichlet", "periodic"])
def test_huge_grid_matches_float64_and_every_layout(default_ctx, devices3, boundary):
    rng = np.random.default_rng(5)
    grid = (rng.uniform(-1, 1, (24, 13)) * 3e38).astype(np.float32)
    grid[3, 4] = 1e-30  # a small cell among huge ones
    want = heat_reference(grid, 6, 0.2, boundary)
    got = default_ctx.stencil(grid, 6, 0.2, boundary)
    assert np.isfinite(got).all()
    assert np.abs(got - want).max() <= 1e-6 * np.abs(want).max()
    for halo in (1, 2, 4):
        other = devices3.stencil(grid, 6, 0.2, boundary, halo, split=[8, 8, 8])
        assert other.tobytes() == got.tobytes(), halo
    if boundary == "dirichlet":
        frame = np.ones(grid.shape, bool)
        frame[1:-1, 1:-1] = False
        assert got[frame].tobytes() == grid[frame].tobytes()


def test_dirichlet_frame_keeps_subnormal_edges_beside_huge_cells(default_ctx):
    grid = np.full((5, 6), 2e38, np.float32)
    grid[0, :] = TINY
    out = default_ctx.stencil(grid, 3, 0.1)
    assert out[0].tobytes() == grid[0].tobytes()
    assert np.isfinite(out).all()


def test_ordinary_grid_below_the_limit_runs_as_given(default_ctx):
    # 1e37 < 2^123: no scaling; a uniform field is then a fixed point bit for bit as before.
    grid = np.full((6, 6), 1e37, np.float32)
    assert np.array_equal(default_ctx.stencil(grid, 4, 0.25, "periodic"), grid)


# --- item 6: shortest paths and tropical products --------------------------------------------


def _graph(n: int, edges: dict[tuple[int, int], float]) -> np.ndarray:
    w = np.full((n, n), np.inf, np.float32)
    for (i, j), v in edges.items():
        w[i, j] = v
    return w


def test_reachable_vertex_with_huge_edges_is_not_reported_unreachable(default_ctx):
    # 0 -> 1 costs 3e38, 1 -> 2 costs -2.9e38: every distance is finite.
    w = _graph(4, {(0, 1): 3e38, (1, 2): -2.9e38, (2, 3): 3e38, (0, 3): 3.2e38})
    got = default_ctx.shortest_paths(w)
    want = floyd_warshall(w)
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    assert np.allclose(got[finite], want[finite], rtol=1e-6)
    assert got[0, 2] == np.float32(np.float32(3e38) + np.float32(-2.9e38))


def test_path_longer_than_float32_is_an_error(default_ctx):
    w = _graph(3, {(0, 1): 3e38, (1, 2): 3e38})
    with pytest.raises(InvalidArgumentError, match=r"^w: path lengths overflow float32.*0.*2"):
        default_ctx.shortest_paths(w)


def test_path_below_minus_float32_is_an_error_not_minus_inf(default_ctx):
    w = _graph(3, {(0, 1): -3e38, (1, 2): -3e38})
    with pytest.raises(InvalidArgumentError, match=r"^w: path lengths overflow float32"):
        default_ctx.shortest_paths(w)


def test_scaled_paths_are_bit_identical_across_devices(default_ctx, devices3):
    rng = np.random.default_rng(8)
    n = 40
    w = np.where(rng.random((n, n)) < 0.2, rng.uniform(0, 3e36, (n, n)), np.inf).astype(np.float32)
    one = default_ctx.shortest_paths(w)
    three = devices3.shortest_paths(w, strategy="balanced")
    assert one.tobytes() == three.tobytes()
    want = floyd_warshall(w)
    assert np.array_equal(np.isinf(one), np.isinf(want))
    finite = np.isfinite(want)
    assert np.allclose(one[finite], want[finite], rtol=1e-5)


@pytest.mark.parametrize("semiring", ["max_plus", "min_plus"])
def test_tropical_overflow_that_decides_an_entry_is_an_error(default_ctx, semiring):
    big = 3e38 if semiring == "max_plus" else -3e38
    a = np.array([[big, 0.0]], np.float32)
    b = np.array([[big], [1.0]], np.float32)
    with pytest.raises(InvalidArgumentError, match=r"^a: tropical products overflow float32"):
        default_ctx.tropical_matmul(a, b, semiring)
    with pytest.raises(InvalidArgumentError, match=r"overflow float32"):
        default_ctx.tropical_matvec(a, b[:, 0], semiring)


@pytest.mark.parametrize("semiring", ["max_plus", "min_plus"])
def test_tropical_overflow_that_loses_is_harmless_and_infinities_keep_their_meaning(
    default_ctx, semiring
):
    # The overflowing term goes the losing way (to -inf in max-plus): the result is the other
    # term, exactly. Operands that are ±inf are tropical values, not overflows.
    big = -3e38 if semiring == "max_plus" else 3e38
    zero = -np.inf if semiring == "max_plus" else np.inf
    a = np.array([[big, 2.0], [zero, zero], [np.inf, 1.0]], np.float32)
    b = np.array([[big], [1.0]], np.float32)
    got = default_ctx.tropical_matmul(a, b, semiring)
    assert got[0, 0] == 3.0
    assert got[1, 0] == zero
    assert got[2, 0] == (np.inf if semiring == "max_plus" else 2.0)
