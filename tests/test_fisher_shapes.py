"""The shapes of Fisher operands are checked by the core, in the caller's shapes: a numpy
array's own, a DeviceArray's logical shape (its handle knows only rows and row width, so an
(N, K, K) array would pass for N·K rows of K), and ``weights`` (N,). The error names the
argument and comes before any work: nothing uploaded or run, the inputs and ``out`` as they
were, no "out may hold part of the result" note."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu import _native


def _work(ctx: ag.MultiGpuContext) -> list[tuple[int, int, int]]:
    """What the devices did so far: bytes up, bytes down and chunks done, per device."""
    return [(s["bytes_up"], s["bytes_down"], s["chunks_done"]) for s in ctx.stats()]


def _probs(n: int, k: int) -> np.ndarray:
    return np.random.default_rng(7).dirichlet(np.ones(k), n).astype(np.float32)


def test_a_device_array_is_checked_in_its_own_shape(ctx2: ag.MultiGpuContext) -> None:
    # An (N, K, K) result fed back as probabilities: N·K rows of K words to its handle.
    p = _probs(6, 3)
    cube = ctx2.fisher_categorical(ctx2.asarray(p))
    assert isinstance(cube, ag.DeviceArray)
    before_values = cube.numpy().tobytes()
    out = np.full((6, 3, 3, 3), np.nan, np.float32)
    before = _work(ctx2)
    with pytest.raises(ag.ShapeError, match=r"^probs: expected shape \(N, W\), got \(6, 3, 3\)$"):
        ctx2.fisher_categorical(cube, out=out)
    with pytest.raises(ag.ShapeError, match=r"^mean: expected shape \(N, W\), got \(6, 3, 3\)$"):
        ctx2.fisher_gaussian(cube, np.ones((6, 3), np.float32))
    with pytest.raises(ag.ShapeError, match=r"^var: expected shape \(N, W\), got \(6, 3, 3\)$"):
        ctx2.fisher_gaussian(np.ones((6, 3), np.float32), cube)
    with pytest.raises(ag.ShapeError, match=r"^scores: expected shape \(N, W\), got \(6, 3, 3\)$"):
        ctx2.fisher_information(cube, out=np.full((3, 3), np.nan))
    assert _work(ctx2) == before
    assert np.isnan(out).all()
    assert cube.numpy().tobytes() == before_values


def test_the_native_entries_take_the_callers_shape(ctx2: ag.MultiGpuContext) -> None:
    arrays = [ctx2.asarray(_probs(5, 3)), ctx2.asarray(np.ones((5, 1), np.float32))]
    handle, narrow = (a._handle for a in arrays)
    before = _work(ctx2)
    # The handle alone is (5, 3); the caller's shape says what it is.
    with pytest.raises(ag.ShapeError, match=r"^logits: expected shape \(N, W\), got \(15,\)$"):
        _native.fisher_categorical(ctx2._native, handle, True, values_shape=(15,))
    message = r"^probs: expected shape \(3, 5\) \(the DeviceArray's rows and row width\)"
    with pytest.raises(ag.ShapeError, match=message + r", got 5 rows of 3$"):
        _native.fisher_categorical(ctx2._native, handle, False, values_shape=(3, 5))
    with pytest.raises(ag.ShapeError, match=r"^var: expected shape \(5, 3\), got \(5, 1\)$"):
        _native.fisher_gaussian(ctx2._native, handle, narrow)
    with pytest.raises(ag.ShapeError, match=r"^scores: expected shape \(N, W\), got \(1, 5, 3\)"):
        _native.fisher_information(ctx2._native, handle, scores_shape=(1, 5, 3))
    assert _work(ctx2) == before


def test_host_arrays_of_any_shape_reach_the_core(ctx2: ag.MultiGpuContext) -> None:
    # Numpy arrays of other than two axes get the core's ShapeError (not a conversion's
    # TypeError), with a numpy out untouched and no partly-written note.
    out = np.full((2, 3, 4, 4), np.nan, np.float32)
    before = _work(ctx2)
    with pytest.raises(ag.ShapeError) as raised:
        _native.fisher_categorical(ctx2._native, np.zeros((2, 3, 4), np.float32), False, out=None)
    assert str(raised.value) == "probs: expected shape (N, W), got (2, 3, 4)"
    with pytest.raises(ag.ShapeError) as raised:
        ctx2.fisher_categorical(logits=np.zeros((2, 3, 4), np.float32), out=out)
    assert str(raised.value) == "logits: expected shape (N, W), got (2, 3, 4)"
    scores = np.ones((5, 2), np.float32)
    with pytest.raises(ag.ShapeError, match=r"^weights: expected shape \(5,\), got \(5, 1\)$"):
        _native.fisher_information(ctx2._native, scores, np.ones((5, 1), np.float32))
    with pytest.raises(ag.ShapeError, match=r"^weights: expected shape \(5,\), got \(\)$"):
        ctx2.fisher_information(scores, np.array(1.0))
    with pytest.raises(ag.ShapeError, match=r"^mean: expected shape \(N, W\), got \(\)$"):
        _native.fisher_gaussian(
            ctx2._native, np.array(1.0, np.float32), np.ones((1, 1), np.float32)
        )
    assert _work(ctx2) == before
    assert np.isnan(out).all()
    assert (scores == 1).all()


def test_the_cluster_checks_take_any_shape() -> None:
    # A RayContext's driver runs these on the whole call: the same errors, no context.
    with pytest.raises(ag.ShapeError, match=r"^probs: expected shape \(N, W\), got \(4,\)$"):
        _native.check_fisher_categorical(np.ones(4, np.float32), False)
    with pytest.raises(ag.ShapeError, match=r"^var: expected shape \(N, W\), got \(2, 2, 1\)$"):
        _native.check_fisher_gaussian(np.ones((2, 2), np.float32), np.ones((2, 2, 1), np.float32))
    with pytest.raises(ag.ShapeError, match=r"^scores: expected shape \(N, W\), got \(3,\)$"):
        _native.fisher_prepare(np.ones(3, np.float32))
    with pytest.raises(ag.ShapeError, match=r"^weights: expected shape \(3,\), got \(1, 3\)$"):
        _native.fisher_prepare(np.ones((3, 2), np.float32), np.ones((1, 3), np.float32))
