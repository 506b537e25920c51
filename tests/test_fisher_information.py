"""``MultiGpuContext.fisher_information``: the empirical Fisher matrix of per-sample scores.

Checked against the float64 reference in ``_fisher_helpers.py`` (within ``FISHER_REL_TOL`` of
max |F|): property-based over N, P, weights and scale; P on either side of the 64-column tiles
and up to the 4096 limit; N spanning many chunks of several logical devices. Also: exact
symmetry, positive semi-definiteness, weights (zeros drop rows, integers repeat them), input
conversion and immutability, and every error naming its argument.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from _fisher_helpers import FISHER_REL_TOL, random_scores, reference_fisher, relative_error
from amari_gpu import InvalidArgumentError, MultiGpuContext, ShapeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CHUNK = 37  # rows per chunk of the ``chunked`` context: most N leave a ragged last chunk


@pytest.fixture(scope="module")
def single() -> MultiGpuContext:
    """One device on adapter 0 (lavapipe here), default chunks."""
    return MultiGpuContext(adapters=[0])


@pytest.fixture(scope="module")
def chunked() -> MultiGpuContext:
    """Three logical devices on adapter 0, 37 rows per chunk: every device takes several."""
    ctx = MultiGpuContext(adapters=[0], devices_per_adapter=3, chunk_items=CHUNK)
    assert len(ctx.devices) == 3
    return ctx


def _check(f: np.ndarray, want: np.ndarray) -> None:
    assert isinstance(f, np.ndarray) and f.dtype == np.float64
    assert f.shape == want.shape and f.flags.c_contiguous and f.flags.writeable
    assert np.array_equal(f, f.T), "F must be exactly symmetric"
    assert relative_error(f, want) < FISHER_REL_TOL


# --- agreement with the reference -----------------------------------------------------------


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(1, 400),
    p=st.integers(1, 140),
    weighted=st.booleans(),
    scale=st.sampled_from([1e-3, 1.0, 50.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_matches_reference_on_several_devices(chunked, n, p, weighted, scale, seed):
    g = random_scores(n, p, seed, scale)
    w = None
    if weighted:
        w = np.random.default_rng(seed + 1).random(n).astype(np.float32) * 4
        w[0] += 0.5  # never all zero
    _check(chunked.fisher_information(g, w), reference_fisher(g, w))
    plan = chunked.last_plan
    assert plan is not None and plan.items == n and plan.chunk_items == CHUNK
    assert plan.n_chunks == -(-n // CHUNK)


# 8 x 8 blocks up to P = 64, 64 x 64 tiles beyond: both sides of both edges, P % 4 != 0.
@pytest.mark.parametrize("p", [1, 3, 4, 5, 7, 8, 9, 31, 33, 63, 64, 65, 127, 128, 129, 200, 257])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_columns_on_either_side_of_tile_edges(chunked, p, weighted):
    n = 11 * CHUNK + 5
    g = random_scores(n, p, seed=p)
    w = np.random.default_rng(p).random(n).astype(np.float32) if weighted else None
    _check(chunked.fisher_information(g, w), reference_fisher(g, w))


@pytest.mark.parametrize("adapter", [0, 1])
def test_default_chunks_many_rows_each_adapter(adapter):
    ctx = MultiGpuContext(adapters=[adapter])
    g = random_scores(60_001, 48, seed=3)
    _check(ctx.fisher_information(g), reference_fisher(g))
    assert ctx.last_plan is not None and ctx.last_plan.n_chunks > 1


def test_wide_scores_p_1024(single):
    g = random_scores(300, 1024, seed=4)
    w = np.random.default_rng(4).random(300)
    _check(single.fisher_information(g, w), reference_fisher(g, w.astype(np.float32)))


def test_largest_p_4096_is_accepted(single):
    g = random_scores(3, 4096, seed=5)
    _check(single.fisher_information(g), reference_fisher(g))


def test_single_row_gives_its_outer_product_exactly(single):
    # Every entry is one product of two multiples of 1/8: exact in float32.
    g = np.arange(1, 71, dtype=np.float32)[None, :] / 8
    f = single.fisher_information(g)
    np.testing.assert_array_equal(f, np.outer(g[0], g[0]).astype(np.float64))


# --- properties ---------------------------------------------------------------------------------


def test_positive_semidefinite(chunked):
    g = random_scores(500, 90, seed=6)
    f = chunked.fisher_information(g)
    eig = np.linalg.eigvalsh(f)
    assert eig.min() >= -1e-6 * np.abs(f).max(), eig.min()
    # Fewer rows than columns: rank <= N, the rest of the spectrum is (numerically) zero.
    f = chunked.fisher_information(g[:10])
    eig = np.linalg.eigvalsh(f)
    assert eig.min() >= -1e-6 * np.abs(f).max()
    assert (eig > 1e-4 * eig.max()).sum() <= 10


def test_zero_weights_drop_rows_and_integer_weights_repeat_them(chunked):
    g = random_scores(300, 20, seed=7)
    w = np.zeros(300, dtype=np.float32)
    w[::3] = 1.0
    assert relative_error(chunked.fisher_information(g, w), reference_fisher(g[::3])) < 1e-5
    counts = np.random.default_rng(7).integers(0, 4, size=300)
    counts[0] = 1
    repeated = np.repeat(g, counts, axis=0)
    got = chunked.fisher_information(g, counts)
    assert relative_error(got, reference_fisher(repeated)) < FISHER_REL_TOL


def test_uniform_weights_give_the_plain_mean(chunked):
    g = random_scores(200, 30, seed=8)
    plain = chunked.fisher_information(g)
    # Weights of 1 are exact: the same bits as no weights.
    assert np.array_equal(chunked.fisher_information(g, np.ones(200)), plain)
    assert relative_error(chunked.fisher_information(g, np.full(200, 7.5)), plain) < 1e-5


# --- inputs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint8, np.bool_, np.float16])
def test_real_dtypes_are_converted_to_float32(single, dtype):
    g = np.random.default_rng(9).integers(0, 2 if dtype is np.bool_ else 9, size=(64, 6))
    g = g.astype(dtype)
    got = single.fisher_information(g)
    # Small integers: every product and float32 sum is exact.
    np.testing.assert_array_equal(got, reference_fisher(g.astype(np.float32)))


def test_non_contiguous_and_read_only_inputs(single):
    base = random_scores(400, 30, seed=10)
    view = base[::2, ::3]  # neither C- nor F-contiguous
    weights = np.linspace(0.5, 2.0, 400)[::2]
    base.setflags(write=False)
    _check(single.fisher_information(view, weights), reference_fisher(view, weights))
    fortran = np.asfortranarray(random_scores(100, 9, seed=11))
    _check(single.fisher_information(fortran), reference_fisher(fortran))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inputs_are_never_modified(single, dtype):
    g = random_scores(300, 17, seed=12).astype(dtype)
    w = np.random.default_rng(12).random(300).astype(dtype)
    g_before, w_before = g.copy(), w.copy()
    f = single.fisher_information(g, w)
    np.testing.assert_array_equal(g, g_before)
    np.testing.assert_array_equal(w, w_before)
    assert not np.shares_memory(f, g) and not np.shares_memory(f, w)
    f[:] = 0
    np.testing.assert_array_equal(g, g_before)


def test_nested_lists(single):
    f = single.fisher_information([[1, 2], [3, 4]], weights=[1, 3])
    np.testing.assert_array_equal(f, [[7.0, 9.5], [9.5, 13.0]])


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scores", "pattern"),
    [
        (np.zeros((0, 5)), r"^scores\b.*N >= 1.*\(0, 5\)"),
        (np.zeros(5), r"^scores\b.*\(N, W\).*\(5,\)"),
        (np.zeros((2, 3, 4)), r"^scores\b.*\(N, W\).*\(2, 3, 4\)"),
        (np.zeros((4, 0)), r"^scores\b.*1 <= W <= 4096.*W = 0"),
        (np.zeros((1, 4097)), r"^scores\b.*1 <= W <= 4096.*W = 4097"),
    ],
    ids=["no-rows", "1d", "3d", "no-columns", "too-wide"],
)
def test_bad_score_shapes_are_shape_errors(single, scores, pattern):
    with pytest.raises(ShapeError, match=pattern):
        single.fisher_information(scores)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_scores_are_rejected_naming_the_entry(single, bad):
    g = random_scores(10, 4, seed=13)
    g[7, 2] = bad
    with pytest.raises(InvalidArgumentError, match=r"^scores: expected finite values.*\[7, 2\]"):
        single.fisher_information(g)


def test_products_beyond_float32_are_scaled_not_refused(single):
    # Finite scores whose float32 products overflow: scaled by an exact power of two on the
    # host, so F = 1e40 (a float64 result) comes back to float32 precision (issue 14, item 4).
    g = np.full((4, 3), 1e20, dtype=np.float32)
    want = float(np.float32(1e20)) ** 2
    np.testing.assert_allclose(single.fisher_information(g), want, rtol=1e-6)


@pytest.mark.parametrize(
    ("weights", "error", "pattern"),
    [
        (np.ones(4), ShapeError, r"^weights: expected shape \(5,\), got \(4,\)"),
        (np.ones((5, 1)), ShapeError, r"^weights: expected shape \(5,\), got \(5, 1\)"),
        (np.array([1, 1, -1, 1, 1.0]), InvalidArgumentError, r"^weights: .*>= 0.*-1.*\[2\]"),
        (np.array([1, np.nan, 1, 1, 1.0]), InvalidArgumentError, r"^weights: .*finite.*\[1\]"),
        (np.array([1, 1, 1, 1, np.inf]), InvalidArgumentError, r"^weights: .*finite.*\[4\]"),
        (np.zeros(5), InvalidArgumentError, r"^weights: expected at least one weight > 0"),
    ],
    ids=["short", "2d", "negative", "nan", "inf", "all-zero"],
)
def test_bad_weights_name_weights(single, weights, error, pattern):
    with pytest.raises(error, match=pattern):
        single.fisher_information(np.ones((5, 3)), weights)


@pytest.mark.parametrize("argument", ["scores", "weights"])
def test_non_real_dtypes_raise_type_error(single, argument):
    good, bad = np.ones((5, 3)), np.zeros((5, 3), dtype=np.complex64)
    args = (bad, None) if argument == "scores" else (good, np.zeros(5, dtype=object))
    with pytest.raises(TypeError, match=rf"^{argument}\b.*(complex64|object)"):
        single.fisher_information(*args)


def test_unknown_strategy_is_named(single):
    with pytest.raises(InvalidArgumentError, match=re.escape("strategy: expected one of")):
        single.fisher_information(np.ones((3, 2)), strategy="fastest")
