"""``natural_gradient(None, grad, damping, fisher=F)`` with F computed already: the same
bits as the call that computes F itself (on the host device, lavapipe and both together),
no device work, and every error about ``fisher`` naming the argument."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from _fisher_helpers import FISHER_REL_TOL, random_scores, reference_fisher
from amari_gpu import InvalidArgumentError, ShapeError

P = 12


@pytest.fixture(scope="module", params=["host", "vulkan", "both"])
def ctx(request):
    backends = ["vulkan", "host"] if request.param == "both" else [request.param]
    ctx = ag.MultiGpuContext(backends=backends, devices_per_adapter=2, chunk_items=50)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(26)
    scores = random_scores(400, P, seed=26)
    weights = rng.uniform(0.0, 2.0, 400).astype(np.float32)
    return scores, weights, rng.standard_normal(P), rng.standard_normal((P, 3))


@pytest.mark.parametrize("damping", [0.0, 1e-3, 10.0])
def test_a_given_fisher_gives_the_same_bits(ctx, data, damping):
    scores, weights, grad, rhs = data
    for w in (None, weights):
        f = ctx.fisher_information(scores, w)
        for g in (grad, rhs):
            want = ctx.natural_gradient(scores, g, damping, weights=w)
            got = ctx.natural_gradient(None, g, damping, fisher=f)
            assert got.dtype == np.float64 and got.shape == g.shape
            assert np.array_equal(got, want)
    # And it is the natural gradient: the float64 solve of the damped system (the last
    # call's, with the weights; tolerance as in test_fisher_families).
    f = reference_fisher(scores, weights)
    np.testing.assert_allclose(
        got, np.linalg.solve(f + damping * np.eye(P), rhs), rtol=50 * FISHER_REL_TOL
    )


class NoKernels:
    """A context's kernel entry points that must not be called."""

    def __getattr__(self, name):
        raise AssertionError(f"kernel {name} was called although fisher= was given")


def test_a_given_fisher_runs_nothing_on_the_devices(ctx, data, monkeypatch):
    scores, _, grad, _ = data
    f = ctx.fisher_information(scores)
    want = ctx.natural_gradient(scores, grad, 0.1)

    def computed(*args, **kwargs):
        raise AssertionError("fisher_information was called although fisher= was given")

    monkeypatch.setattr(ctx, "fisher_information", computed)
    monkeypatch.setattr(ctx, "_kernels", NoKernels())
    monkeypatch.setattr(ctx, "last_plan", None)
    out = np.empty(P)
    assert ctx.natural_gradient(None, grad, 0.1, fisher=f, out=out) is out
    assert ctx.last_plan is None  # left as it was
    assert np.array_equal(out, want)
    # The spies catch the path that computes F.
    with pytest.raises(AssertionError, match="was called although fisher= was given"):
        ctx.natural_gradient(scores, grad, 0.1)


def test_inputs_are_left_alone_and_other_dtypes_convert(host, data):
    scores, _, grad, _ = data
    f = host.fisher_information(scores)
    f_before, g_before = f.copy(), grad.copy()
    x = host.natural_gradient(None, grad, 0.5, fisher=f)
    assert np.array_equal(f, f_before) and np.array_equal(grad, g_before)
    # A float32 matrix is converted to float64 exactly; an integer one too.
    f32 = f.astype(np.float32)
    assert np.array_equal(
        host.natural_gradient(None, grad, 0.5, fisher=f32),
        host.natural_gradient(None, grad, 0.5, fisher=f32.astype(np.float64)),
    )
    eye = np.eye(P, dtype=np.int64)
    assert np.array_equal(host.natural_gradient(None, grad, 1.0, fisher=eye), grad / 2.0)
    assert x.shape == (P,)
    # A list of lists is an array too.
    assert np.array_equal(
        host.natural_gradient(None, [1.0, 2.0], 0.0, fisher=[[2.0, 0.0], [0.0, 4.0]]),
        [0.5, 0.5],
    )


def bad_fisher(kind: str) -> object:
    f = np.eye(P)
    if kind == "nan":
        f[2, 3] = f[3, 2] = np.nan
    elif kind == "inf":
        f[5, 5] = np.inf
    elif kind == "asymmetric":
        f[0, 1] = 0.25
    return f


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda c, s, g: c.natural_gradient(s, g, 0.1, fisher=np.eye(P)), InvalidArgumentError,
         r"^scores: expected None with fisher= \(the Fisher matrix of the scores, computed "
         r"already\), got ndarray$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, weights=np.ones(400),
                                            fisher=np.eye(P)), InvalidArgumentError,
         r"^weights: expected None with fisher="),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1), InvalidArgumentError,
         r"^scores: expected \(N, P\) per-sample scores, or None with fisher= a Fisher matrix "
         r"computed already; got None and no fisher$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, fisher=np.ones((P, P + 1))),
         ShapeError, r"^fisher: expected a square \(P, P\) matrix, got \(12, 13\)$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, fisher=np.ones(P)),
         ShapeError, r"^fisher: expected a square \(P, P\) matrix, got \(12,\)$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, fisher=np.ones((1, P, P))),
         ShapeError, r"^fisher: expected a square \(P, P\) matrix, got \(1, 12, 12\)$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, fisher=np.eye(P + 1)),
         ShapeError, r"^grad: expected shape \(13,\) or \(13, M\), got \(12,\) \(fisher is "
         r"\(13, 13\)\)$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, fisher=bad_fisher("nan")),
         InvalidArgumentError, r"^fisher: expected finite values, got nan at \[2, 3\]$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, fisher=bad_fisher("inf")),
         InvalidArgumentError, r"^fisher: expected finite values, got inf at \[5, 5\]$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, fisher=bad_fisher("asymmetric")),
         InvalidArgumentError, r"^fisher: expected a symmetric matrix \(F == F.T exactly, as "
         r"fisher_information returns it\), got F\[0, 1\] = 0.25 and F\[1, 0\] = 0.0 "
         r"\(symmetrise it with \(F \+ F.T\) / 2\)$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, fisher=np.eye(P) * 1j), TypeError,
         r"^fisher: expected an array of real numbers \(converted to float64\), got dtype "
         r"complex128$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, fisher=c.asarray(np.eye(P))),
         TypeError, r"^fisher: expected a numpy array \(fisher_information returns one\), got "
         r"a DeviceArray$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.0, fisher=-np.eye(P)),
         InvalidArgumentError, r"^damping: F \+ damping I is not positive definite with "
         r"damping=0.0 \(F is singular or indefinite\); use damping > 0$"),
        (lambda c, s, g: c.natural_gradient(None, g, 0.1, fisher=np.eye(P), strategy="fast"),
         InvalidArgumentError, r"^strategy: "),
        (lambda c, s, g: c.natural_gradient(None, g, -1.0, fisher=np.eye(P)),
         InvalidArgumentError, r"^damping: expected a finite number >= 0"),
    ],
    ids=["scores-too", "weights-too", "neither", "not-square", "1d", "3d", "grad-length",
         "nan", "inf", "asymmetric", "complex", "device-array", "indefinite", "strategy",
         "damping"],
)  # fmt: skip
def test_fisher_errors_name_the_argument(host, data, call, error, pattern):
    scores, _, grad, _ = data
    with pytest.raises(error, match=pattern):
        call(host, scores, grad)


def test_out_may_not_overlap_the_given_fisher(host, data):
    _, _, grad, _ = data
    f = np.eye(P)
    with pytest.raises(InvalidArgumentError, match=r"^out: .*overlaps fisher$"):
        host.natural_gradient(None, grad, 0.1, fisher=f, out=f[0])
