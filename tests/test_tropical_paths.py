"""``MultiGpuContext.shortest_paths``: all-pairs shortest paths by blocked Floyd-Warshall.

Graphs are random dense weight matrices with missing edges (inf), negative edges and no
negative cycle (see ``graph_without_negative_cycles``), and an unreachable vertex. With
small integer weights every path sum is exact in float32, so the result must equal a float64
Floyd-Warshall exactly. With real weights, the GPU sums float32 weights along a path in a
different order than the float64 reference: a length of a path of at most n - 1 edges is
within (n - 1) * eps32 * (sum of |weights| on it) of the exact value, so we accept
|got - want| <= n * 2^-23 * n * max|w| (and exact agreement on which pairs are reachable).
"""

from __future__ import annotations

import numpy as np
import pytest
from _tropical_helpers import floyd_warshall, graph_without_negative_cycles
from amari_gpu import InvalidArgumentError, MultiGpuContext, ShapeError
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=8, deadline=None)
@given(
    n=st.integers(1, 140),
    density=st.sampled_from([0.03, 0.2, 0.8]),
    seed=st.integers(0, 2**32 - 1),
)
def test_integer_weights_give_exact_distances(
    adapter_ctx: MultiGpuContext, n: int, density: float, seed: int
) -> None:
    w = graph_without_negative_cycles(np.random.default_rng(seed), n, density, integer=True)
    got = adapter_ctx.shortest_paths(w)
    assert got.dtype == np.float32 and got.shape == (n, n)
    want = floyd_warshall(w)
    assert np.array_equal(got, want.astype(np.float32))
    if n > 1:
        assert np.isinf(got[: n - 1, n - 1]).all()  # nothing reaches the last vertex


@settings(max_examples=5, deadline=None)
@given(n=st.integers(2, 200), density=st.sampled_from([0.05, 0.5]), seed=st.integers(0, 2**32 - 1))
def test_real_weights_within_float32_rounding(
    devices3: MultiGpuContext, n: int, density: float, seed: int
) -> None:
    w = graph_without_negative_cycles(np.random.default_rng(seed), n, density, integer=False)
    got = devices3.shortest_paths(w)
    want = floyd_warshall(w)
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    tolerance = n * 2.0**-23 * n * float(np.abs(w[np.isfinite(w)]).max(initial=0.0))
    assert np.abs(got[finite] - want[finite]).max(initial=0.0) <= tolerance


def test_a_hand_checked_graph(default_ctx: MultiGpuContext) -> None:
    inf = np.inf
    w = np.full((4, 4), inf, dtype=np.float32)
    w[0, 1], w[1, 2], w[0, 2], w[2, 0] = 2.0, -1.0, 4.0, 3.0
    w[3, 3] = 5.0  # a positive self-loop: the empty path (0) is shorter
    want = np.array(
        [[0, 2, 1, inf], [2, 0, -1, inf], [3, 5, 0, inf], [inf, inf, inf, 0]], dtype=np.float32
    )
    assert np.array_equal(default_ctx.shortest_paths(w), want)


def test_negative_cycles_raise(default_ctx: MultiGpuContext) -> None:
    w = graph_without_negative_cycles(np.random.default_rng(5), 90, 0.1, integer=True)
    w[10, 20], w[20, 30], w[30, 10] = 1.0, 1.0, -3.0  # a cycle of weight -1
    with pytest.raises(InvalidArgumentError, match=r"^w: the graph has a negative cycle"):
        default_ctx.shortest_paths(w)
    loop = np.zeros((3, 3), dtype=np.float32)
    loop[1, 1] = -0.5  # a negative self-loop is a negative cycle
    with pytest.raises(InvalidArgumentError, match=r"negative cycle \(through vertex 1"):
        default_ctx.shortest_paths(loop)


def test_bad_weights_are_refused_and_inputs_kept(default_ctx: MultiGpuContext) -> None:
    with pytest.raises(ShapeError, match=r"^w: expected shape \(n, n\), got \(2, 3\)"):
        default_ctx.shortest_paths(np.zeros((2, 3)))
    w = np.zeros((3, 3), dtype=np.float32)
    w[0, 2] = np.nan
    with pytest.raises(
        InvalidArgumentError, match=r"^w: expected edge weights .* got NaN at \(0, 2\)"
    ):
        default_ctx.shortest_paths(w)
    w[0, 2] = -np.inf
    with pytest.raises(InvalidArgumentError, match=r"got -inf at \(0, 2\)"):
        default_ctx.shortest_paths(w)
    ints = np.array([[0, 3], [1, 0]], dtype=np.int16)
    before = ints.copy()
    assert np.array_equal(default_ctx.shortest_paths(ints), np.array([[0, 3], [1, 0]], np.float32))
    assert np.array_equal(ints, before)
    assert default_ctx.shortest_paths(np.zeros((0, 0))).shape == (0, 0)
