"""Float64 references of the information-geometry kernels, written from the definitions, and
test-data helpers. They deliberately use nothing from ``amari_gpu``, so the tests cannot share
a mistake with the package.
"""

from __future__ import annotations

import numpy as np

FISHER_REL_TOL = 1e-4
"""Largest accepted |GPU - reference| of the empirical Fisher matrix, relative to max |F|.

Each device accumulates its chunk's rows in float32 (error about sqrt(rows) * 6e-8 of the
magnitudes summed) and the host sums the partials in float64; 1e-4 leaves a wide margin for
the largest chunks the tests use."""

MAP_ABS_TOL = 1e-6
"""Largest accepted |GPU - reference| of categorical Fisher entries from ``probs`` (entries
within [-1/4, 1/4], each one or two float32 operations)."""

LOGITS_ABS_TOL = 1e-5
"""The same from ``logits``: WGSL's ``exp`` is only required to be within 3 + 2|x| ULP, so
the probabilities of a softmax over logits spread by tens carry errors of a few hundred ULP."""


def reference_fisher(scores: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """sum_i w_i g_i g_i^T / sum_i w_i in float64 (plain mean without weights)."""
    g = np.asarray(scores, dtype=np.float64)
    w = np.ones(g.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    return (g * w[:, None]).T @ g / w.sum()


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| (absolute when want is all zeros)."""
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = float(np.abs(want).max()) if want.size else 0.0
    diff = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
    return diff / scale if scale > 0 else diff


def reference_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64, maximum subtracted first."""
    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def reference_categorical(probs: np.ndarray) -> np.ndarray:
    """diag(p) - p p^T per row, (N, K) -> (N, K, K), float64."""
    p = np.asarray(probs, dtype=np.float64)
    eye = np.eye(p.shape[1])
    return p[:, :, None] * eye[None] - p[:, :, None] * p[:, None, :]


def reference_gaussian(var: np.ndarray) -> np.ndarray:
    """block-diag(diag(1 / var), diag(1 / (2 var^2))) per row, (N, D) -> (N, 2D, 2D), float64."""
    v = np.asarray(var, dtype=np.float64)
    n, d = v.shape
    out = np.zeros((n, 2 * d, 2 * d))
    k = np.arange(d)
    out[:, k, k] = 1.0 / v
    out[:, d + k, d + k] = 1.0 / (2.0 * v * v)
    return out


def random_scores(n: int, p: int, seed: int, scale: float = 1.0) -> np.ndarray:
    """Float32 (n, p) scores: standard normal around a non-zero mean, times ``scale``."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n, p)) + rng.standard_normal(p)
    return (scale * g).astype(np.float32)


def random_probs(n: int, k: int, seed: int) -> np.ndarray:
    """Float32 (n, k) rows of a Dirichlet(1, ..., 1), renormalised in float32."""
    p = np.random.default_rng(seed).dirichlet(np.ones(k), size=n).astype(np.float32)
    return p / p.sum(axis=1, keepdims=True)
