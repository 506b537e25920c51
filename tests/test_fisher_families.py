"""``fisher_categorical``, ``fisher_gaussian`` and ``natural_gradient`` against float64
references in ``_fisher_helpers.py``: property-based inputs, extreme logits, batches spanning
many chunks of several devices, empty batches, and every error naming its argument.
"""

from __future__ import annotations

import numpy as np
import pytest
from _fisher_helpers import (
    FISHER_REL_TOL,
    LOGITS_ABS_TOL,
    MAP_ABS_TOL,
    random_probs,
    random_scores,
    reference_categorical,
    reference_fisher,
    reference_gaussian,
    reference_softmax,
)
from amari_gpu import InvalidArgumentError, MultiGpuContext, ShapeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

FAST = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def ctx() -> MultiGpuContext:
    """Two logical devices on each of lavapipe and llvmpipe, 50 samples per chunk."""
    return MultiGpuContext(adapters=[0, 1], devices_per_adapter=2, chunk_items=50)


# --- categorical ----------------------------------------------------------------------------------


@FAST
@given(n=st.integers(0, 300), k=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_categorical_from_probs_matches_reference(ctx, n, k, seed):
    p = random_probs(n, k, seed)
    out = ctx.fisher_categorical(p)
    assert out.dtype == np.float32 and out.shape == (n, k, k)
    if n:
        assert np.abs(out - reference_categorical(p)).max() < MAP_ABS_TOL
        # Exactly symmetric (each entry is computed the same way as its mirror).
        assert np.array_equal(out, out.transpose(0, 2, 1))


@FAST
@given(
    logits=hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=30),
        elements=st.floats(-80, 80, width=32),
    )
)
def test_categorical_from_logits_matches_reference(ctx, logits):
    out = ctx.fisher_categorical(logits=logits)
    want = reference_categorical(reference_softmax(logits))
    assert np.abs(out - want).max() < LOGITS_ABS_TOL


def test_extreme_logits_are_stable(ctx):
    # Without subtracting the maximum, exp(1000) overflows and exp(-1000) underflows.
    logits = np.array([[1000.0, 0.0, -1000.0], [-1000.0, -1000.0, -1001.0], [3e38, 0, 0]])
    out = ctx.fisher_categorical(logits=logits.astype(np.float32))
    assert np.isfinite(out).all()
    want = reference_categorical(reference_softmax(logits))
    assert np.abs(out - want).max() < LOGITS_ABS_TOL


def test_logit_shift_invariance_and_rows_summing_to_zero(ctx):
    logits = np.random.default_rng(1).standard_normal((700, 9)).astype(np.float32)
    a = ctx.fisher_categorical(logits=logits)
    b = ctx.fisher_categorical(logits=logits + np.float32(37.0))
    assert np.abs(a - b).max() < LOGITS_ABS_TOL
    # Each row of diag(p) - p p^T sums to p_r (1 - sum p) = 0.
    assert np.abs(a.astype(np.float64).sum(axis=2)).max() < LOGITS_ABS_TOL


def test_probs_within_tolerance_are_accepted(ctx):
    p = np.array([[0.5, 0.5009], [0.2, 0.7991]], dtype=np.float32)
    out = ctx.fisher_categorical(probs=p)
    assert np.abs(out - reference_categorical(p)).max() < MAP_ABS_TOL


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        (
            {},
            InvalidArgumentError,
            r"^probs: expected exactly one of probs and logits, got neither",
        ),
        (
            {"probs": [[1.0]], "logits": [[0.0]]},
            InvalidArgumentError,
            r"^probs: expected exactly one of probs and logits, got both",
        ),
        (
            {"probs": [[0.5, 0.6]]},
            InvalidArgumentError,
            r"^probs: expected rows summing to 1 \(within 0\.001\), got 1\.1\d* in row 0",
        ),
        ({"probs": [[1.2, -0.2]]}, InvalidArgumentError, r"^probs: .*>= 0.*\[0, 1\]"),
        ({"probs": [[np.nan, 1.0]]}, InvalidArgumentError, r"^probs: .*finite.*\[0, 0\]"),
        ({"probs": [0.5, 0.5]}, ShapeError, r"^probs: expected shape \(N, W\), got \(2,\)"),
        ({"probs": np.ones((1, 5793)) / 5793}, ShapeError, r"^probs: .*W <= 5792"),
        ({"logits": [[0.0, np.inf]]}, InvalidArgumentError, r"^logits: .*finite.*\[0, 1\]"),
        ({"logits": [[np.nan]]}, InvalidArgumentError, r"^logits: .*finite"),
        ({"logits": np.zeros((3, 0))}, ShapeError, r"^logits: .*W = 0"),
        ({"logits": np.zeros((2, 2, 2))}, ShapeError, r"^logits: expected shape \(N, W\)"),
    ],
    ids=[
        "neither",
        "both",
        "sum",
        "negative",
        "nan-probs",
        "1d",
        "too-many",
        "inf-logits",
        "nan-logits",
        "no-categories",
        "3d",
    ],
)
def test_categorical_errors_name_the_argument(ctx, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        ctx.fisher_categorical(**kwargs)


def test_categorical_inputs_are_never_modified(ctx):
    logits = np.random.default_rng(2).standard_normal((120, 5))
    before = logits.copy()
    ctx.fisher_categorical(logits=logits)
    np.testing.assert_array_equal(logits, before)


# --- Gaussian -------------------------------------------------------------------------------------


@FAST
@given(n=st.integers(0, 200), d=st.integers(1, 12), seed=st.integers(0, 2**32 - 1))
def test_gaussian_matches_reference(ctx, n, d, seed):
    rng = np.random.default_rng(seed)
    # float32 operands: a float64 mean would promote the call to float64, as numpy does.
    mean = rng.standard_normal((n, d)).astype(np.float32)
    var = np.exp(rng.uniform(-6, 6, size=(n, d))).astype(np.float32)
    out = ctx.fisher_gaussian(mean, var)
    assert out.dtype == np.float32 and out.shape == (n, 2 * d, 2 * d)
    want = reference_gaussian(var)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=0)


def test_gaussian_does_not_depend_on_the_mean(ctx):
    var = np.random.default_rng(3).random((80, 4)) + 0.5
    a = ctx.fisher_gaussian(np.zeros((80, 4)), var)
    b = ctx.fisher_gaussian(np.full((80, 4), 1e6), var)
    assert np.array_equal(a, b)


@pytest.mark.parametrize(
    ("mean", "var", "error", "pattern"),
    [
        (
            np.zeros((3, 2)),
            np.ones((3, 3)),
            ShapeError,
            r"^var: expected shape \(3, 2\), got \(3, 3\)",
        ),
        (
            np.zeros((3, 2)),
            np.ones((4, 2)),
            ShapeError,
            r"^var: expected shape \(3, 2\), got \(4, 2\)",
        ),
        (np.zeros(3), np.ones(3), ShapeError, r"^mean: expected shape \(N, W\), got \(3,\)"),
        (np.zeros((3, 0)), np.ones((3, 0)), ShapeError, r"^mean: .*W = 0"),
        (np.zeros((2, 2)), [[1, 0], [1, 1]], InvalidArgumentError, r"^var: .*> 0.*\[0, 1\]"),
        (np.zeros((2, 2)), [[1, 1], [-1, 1]], InvalidArgumentError, r"^var: .*> 0.*\[1, 0\]"),
        (np.zeros((2, 2)), [[1, np.nan], [1, 1]], InvalidArgumentError, r"^var: .*finite"),
        (np.zeros((2, 2)), [[1, 1], [np.inf, 1]], InvalidArgumentError, r"^var: .*finite"),
        (
            [[0, np.nan], [0, 0]],
            np.ones((2, 2)),
            InvalidArgumentError,
            r"^mean: .*finite.*\[0, 1\]",
        ),
    ],
    ids=["cols", "rows", "1d", "empty-d", "zero", "negative", "nan", "inf", "nan-mean"],
)
def test_gaussian_errors_name_the_argument(ctx, mean, var, error, pattern):
    with pytest.raises(error, match=pattern):
        ctx.fisher_gaussian(mean, var)


# --- natural gradient -----------------------------------------------------------------------------


def test_natural_gradient_solves_the_damped_system(ctx):
    g = random_scores(400, 12, seed=4)
    grad = np.random.default_rng(4).standard_normal(12)
    f = reference_fisher(g)
    for damping in (0.0, 1e-3, 10.0):
        x = ctx.natural_gradient(g, grad, damping)
        assert x.dtype == np.float64 and x.shape == (12,)
        want = np.linalg.solve(f + damping * np.eye(12), grad)
        np.testing.assert_allclose(x, want, rtol=50 * FISHER_REL_TOL)
    rhs = np.random.default_rng(5).standard_normal((12, 3))
    x = ctx.natural_gradient(g, rhs, 0.5, weights=np.ones(400))
    np.testing.assert_allclose(x, np.linalg.solve(f + 0.5 * np.eye(12), rhs), rtol=1e-4)


@pytest.mark.parametrize(
    ("grad", "damping", "error", "pattern"),
    [
        (np.ones(5), 0.0, ShapeError, r"^grad: expected shape \(4,\) or \(4, M\), got \(5,\)"),
        (np.ones((4, 2, 1)), 0.0, ShapeError, r"^grad: expected shape"),
        (np.ones(4), -1.0, InvalidArgumentError, r"^damping: expected a finite number >= 0"),
        (np.ones(4), float("nan"), InvalidArgumentError, r"^damping: "),
        (np.ones(4), "1", InvalidArgumentError, r"^damping: "),
        (np.array([1, np.nan, 0, 0]), 1.0, InvalidArgumentError, r"^grad: expected finite"),
        (np.ones(4), 0.0, InvalidArgumentError, r"^damping: F \+ damping I is not positive"),
    ],
    ids=["length", "3d", "negative", "nan", "str", "nan-grad", "singular"],
)
def test_natural_gradient_errors(ctx, grad, damping, error, pattern):
    scores = np.zeros((6, 4), dtype=np.float32)
    scores[:, 0] = 1.0  # rank one: singular without damping
    with pytest.raises(error, match=pattern):
        ctx.natural_gradient(scores, grad, damping)
