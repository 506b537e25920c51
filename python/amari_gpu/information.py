"""Information geometry: Fisher information matrices, batched.

The empirical Fisher matrix is reduced over rows: every chunk of rows gives one partial matrix
on a device, and the partials are summed on the host in chunk order in float64, so the result
is the same bits whatever the devices or the strategy. The categorical and Gaussian Fisher
matrices are per-sample maps.

Dtypes (the package's rule, :mod:`amari_gpu._dtypes`): every function computes in the
promoted dtype of its numpy operands (bool and integer as float64), or in ``dtype=`` when
given. ``fisher_information`` and ``natural_gradient`` return float64 (the partials are
summed, and the system solved, in float64 on the host); float64 scores accumulate in float64
on the devices that run float64, float32 and float16 ones in float32. ``fisher_categorical``
and ``fisher_gaussian`` return the dtype they compute in: float64 computed in float64 on the
devices that run it, float32 as always, float16 computed in float32 (the operands rounded to
float16 first) and rounded once to float16. DeviceArray scores of ``fisher_information`` and
``natural_gradient`` compute in their dtype, float32 or float64 (float64 ones reduced in
float64 where their rows live, the bits of float64 numpy scores); the per-sample maps'
DeviceArrays compute in their dtype, float32 or float64, where their rows live. A DeviceArray
must hold the dtype its call computes in (the promotion over the operands, numpy's rule, as
for every family): a float32 one beside a float64 numpy operand is refused, naming it, as is
a float16 one (gathered and uploaded as float32 or float64, it computes); ``weights`` are not
an operand of the promotion (they take the scores' dtype, as on the numpy path).

Every method takes ``out=``: an array of the result's shape and dtype (C-contiguous,
writeable, sharing no memory with the inputs) that the result is written into and that is
returned. The per-sample batches are read back straight into it; the reduced matrix and the
natural gradient, which the host computes in float64, are copied into it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _shapes
from ._dtypes import FLOAT16, FLOAT32, FLOAT64, requested, resident_dtype, result_dtype
from ._mixin import KernelHost
from ._validate import as_float32, contiguous, output, plain_array, real_array, shape_text
from .array import DeviceArray, returned
from .errors import InvalidArgumentError, ShapeError
from .planning import optional_strategy

PROBS_SUM_TOLERANCE = 1e-3
"""Rows of ``probs`` must sum to 1 within this (absolute; the sum is taken in float64)."""

MAX_SCORE_COLUMNS = 4096
"""Largest P of ``fisher_information`` (one chunk's partial must fit a storage binding)."""


_KERNELS = (FLOAT16, FLOAT32, FLOAT64)
"""The dtypes every Fisher function computes in (float16 as numpy computes it: operands
rounded to float16, float32 accumulation, results rounded once)."""


def _kept(
    named: list[tuple[str, Any]], dtype: Any, resident: tuple[np.dtype[Any], ...] = (FLOAT32,)
) -> np.dtype[Any]:
    """The dtype a call on ``named`` operands computes in (see the module header): with a
    DeviceArray, one of ``resident`` (the promotion, which the DeviceArrays must hold)."""
    if any(isinstance(value, DeviceArray) for _, value in named):
        return resident_dtype(named, dtype, resident, "a Fisher function", DeviceArray)
    return result_dtype(named, dtype, kernels=_KERNELS)


def _rows(ctx: Any, name: str, value: Any, kept: np.dtype[Any]) -> tuple[Any, tuple[int, ...], Any]:
    """``value`` as the native functions take it, its shape as the caller gave it, and that
    shape for the native call when the handle cannot tell it: a live DeviceArray's handle
    (which knows its rows and row width, not an (N, K, K) shape), else a copy-free when
    possible array of the dtype that computes ``kept``: float64 for float64, float32 for
    float32 and for float16 (whose values are rounded to float16 first, on a copy). The core
    checks the shape is (N, W), naming ``name``, before any work."""
    if isinstance(value, DeviceArray):
        return value._live(name, ctx), value.shape, value.shape
    array = real_array(name, value)
    if kept == FLOAT16:
        array = array.astype(np.float16)
    native = contiguous(name, array, FLOAT64 if kept == FLOAT64 else FLOAT32)
    return native, native.shape, None


def _native_out(target: Any, kept: np.dtype[Any]) -> Any:
    """What the native call writes into: the caller's ``out`` (a DeviceArray's handle),
    except for float16, computed in float32 and rounded after (see :func:`_finished`)."""
    if kept == FLOAT16:
        return None
    return target._handle if isinstance(target, DeviceArray) else target


def _finished(result: Any, target: Any, kept: np.dtype[Any]) -> Any:
    """A float16 call's float32 result rounded once to float16, into ``target`` when given;
    any other call's result as it came."""
    if kept != FLOAT16:
        return result
    if target is None:
        return result.astype(np.float16)
    target[...] = result
    return None


class InformationGeometryMixin(KernelHost):
    """Information-geometry methods of ``MultiGpuContext``."""

    def fisher_information(
        self,
        scores: Any,
        weights: Any = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float64] | None = None,
    ) -> npt.NDArray[np.float64]:
        """Empirical Fisher matrix ``sum_i w_i g_i g_i^T / sum_i w_i`` of per-sample scores.

        ``scores`` is (N, P): row i is the score (gradient of the log-likelihood) g_i of
        sample i, P <= 4096. Without ``weights`` the result is the plain mean over rows;
        ``weights`` is (N,), finite, non-negative and not all zero. Returns a new float64
        (P, P) array, exactly symmetric and positive semi-definite up to rounding.

        float32 and float16 scores are computed in float32 on the devices (a tiled SYRK:
        64 x 64 tiles staged in workgroup memory, 8 x 8 blocks for P <= 64; rows split
        across devices, one partial matrix per chunk of rows; weights rounded to float32),
        summed in float64 on the host in chunk order: the result is bit-identical for any
        device count and strategy, and within 1e-4 of max |F| of the exact value (tested;
        typically about 1e-7). The chunks (unless the context's ``chunk_items`` says) are a
        function of N, P and the dtype only: about 64 of a power-of-two count of rows, but
        never fewer rows than make a chunk's rows 16 times the size of its partial
        (16,384 rows at P = 256, 1,024 at P = 64) nor more than the kernels' loop bounds
        or a 128 MiB binding holds.

        float64 (and bool or integer) numpy scores are accumulated in float64 on the devices
        that compute in float64 (the host device; wgpu adapters with ``SHADER_F64``, e.g.
        lavapipe; others are left out, and a context of none raises
        ``InvalidArgumentError`` naming them), weights taken in float64: one partial per
        chunk of at most 16,384 rows (and, by the same rule as float32's, at least enough
        rows to outweigh its partial 16-fold: 2,048 at P = 256), each entry one fused (or,
        as the devices round it,
        unfused) multiply-add chain over the chunk's rows in order, the partials summed in
        chunk order. The result is bit-identical for any device count, mix and strategy
        and within N eps of the exact value relative to the sum of the terms' magnitudes
        (tested against longdouble). No scaling in float64: products beyond its range raise
        ``InvalidArgumentError`` naming the entry, tiny ones underflow gradually as in
        numpy's ``g.T @ g``. A float32 DeviceArray's scores accumulate in float32; a float64
        one's in float64 where its rows live, the bits of the numpy path (see below).

        ``dtype=`` (float16, float32 or float64) sets the accumulation instead of the scores'
        dtype: ``np.float32`` accumulates float64 scores in float32 on purpose (scores and
        weights rounded to float32), ``np.float64`` float32 scores in float64, ``np.float16``
        rounds the scores to float16 and accumulates in float32 as numpy would. The result
        is float64 whatever ``dtype``; a DeviceArray's scores must hold the dtype it
        accumulates in (float32 or float64; one of another dtype is refused naming it).

        Scores or weights whose float32 products would underflow or overflow (a column's
        largest |score|, or the largest weight, outside about [2^-40, 2^40]) are scaled by
        exact powers of two chosen from the whole input before the rows are split, and the
        result is unscaled exactly in float64: tiny (1e-25) and huge (1e30) scores and
        subnormal weights come back to float32 precision, bit-identical for any device count.
        Ordinary inputs are used as given.

        Errors name the argument: ``ShapeError`` for N = 0 (a mean of nothing) or a wrong
        shape; ``InvalidArgumentError`` for NaN or infinite scores (rejected rather than
        propagated: WGSL does not promise IEEE NaN behaviour) and bad weights.
        ``ctx.last_plan`` holds the plan the call followed.

        A (N, P) :class:`DeviceArray` ``scores`` is reduced where its rows live, with the
        same bits whatever its sharding and the numpy path's errors: every column's largest
        magnitude is found on the devices (P words per chunk read back), the rows are
        scaled and padded there when needed (a resident copy while the call runs), and
        each device computes the partials of the chunks it holds; only the partials, and
        the rows of chunks cut by a shard boundary (run by the engine from the host), cross
        to the host. ``weights`` (N words) stay on the host (a DeviceArray is gathered)
        and are uploaded to each device. Scores holding NaN or infinities are gathered to
        name the first one. ``ctx.last_plan`` is left as it was. A float64 DeviceArray is
        reduced the same way in float64 (no scaling: the maxima pass only looks for NaN
        and infinities; the padded copy only when P is not a multiple of 4), each device
        running the float64 partials of the chunks it holds, weights taken in float64.
        """
        kept = _kept([("scores", scores)], dtype, (FLOAT32, FLOAT64))
        wide = kept == FLOAT64
        native, shape, native_shape = _rows(self, "scores", scores, kept)
        w_native = None
        if weights is not None:
            if isinstance(weights, DeviceArray):
                weights._live("weights", self)
            # Weights take the scores' dtype: float32 scores keep float32 weights (and bits).
            w_native = (
                contiguous("weights", real_array("weights", weights), np.float64)
                if wide
                else as_float32("weights", weights)
            )
        # (P, P) from the last axis: the core checks the shapes of scores and weights.
        target = output(out, shape[-1:] * 2, np.float64, {"scores": scores, "weights": weights})
        result, plan = self._kernels.fisher_information(
            self._native, native, w_native, optional_strategy(strategy), target, native_shape
        )
        self._record(plan)
        return result

    @_shapes.shaped[_shapes.FisherCategorical]
    def fisher_categorical(
        self,
        probs: Any = None,
        logits: Any = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Fisher information ``diag(p) - p p^T`` of N categorical distributions.

        Give exactly one of ``probs`` or ``logits``, (N, K). ``probs`` rows must be finite,
        non-negative and sum to 1 within ``PROBS_SUM_TOLERANCE`` (1e-3, summed in float64).
        With ``logits`` (finite), p = softmax(logits) is computed once on the host, in float64
        (the row maximum subtracted first) and rounded to the dtype it computes in, so every
        device mix gives the same bits; ``ctx.last_plan`` is then the plan of the outer
        products. Returns a new (N, K, K) array of the dtype it computes in; K <= 5792. Each
        entry is one correctly rounded fused multiply-add, so entries below float32's range
        (``p_r p_c`` under about 1e-45, for probabilities under about 1e-23) come back as 0
        or subnormal: the nearest float32, not an error.

        Dtypes: float64 (and bool or integer) values compute in float64 on the devices that
        run it (the host device; wgpu adapters with ``SHADER_F64``, e.g. lavapipe; others are
        left out, named in ``ctx.last_plan.left_out``, and a context of none raises
        ``InvalidArgumentError`` naming them), bit-identical for any device count, mix and
        strategy; float32 values as always; float16 ones compute in float32 and are rounded
        once to float16. ``dtype=`` (float16, float32 or float64) overrides the values'
        dtype: ``np.float32`` computes float64 values in float32 on purpose. A DeviceArray
        computes in its dtype, float32 or float64 (a float64 one in float64 where its rows
        live, on the devices holding them, giving a float64 DeviceArray with the numpy
        path's bits); it must hold the dtype the call computes in (``dtype=`` does not
        convert it; a float16 DeviceArray is refused, naming the argument and the
        conversion to make).

        A DeviceArray ``probs`` runs where its rows live and gives a DeviceArray (N, K, K)
        with its sharding, bit-identical to the numpy path; the checks run there too (a
        reduction flags rows that are not clearly valid: 64 bytes per chunk of rows read
        back), and only when a row is flagged are the rows gathered for the numpy path's
        exact checks and errors. DeviceArray ``logits`` are gathered (N x K words) for the
        float64 softmax on the host, and the probabilities uploaded beside the logits' rows;
        the result stays on the devices. ``out=`` takes a DeviceArray (the result takes its
        sharding) or a numpy array (the result is gathered into it).
        """
        if (probs is None) == (logits is None):
            got = "neither" if probs is None else "both"
            raise InvalidArgumentError(
                f"probs: expected exactly one of probs and logits, got {got}"
            )
        name, value = ("probs", probs) if logits is None else ("logits", logits)
        kept = _kept([(name, value)], dtype, (FLOAT32, FLOAT64))
        native, given, native_shape = _rows(self, name, value, kept)
        resident = isinstance(value, DeviceArray)
        inputs = {"probs": probs, "logits": logits}
        # (N, K, K) from (N, K): the core checks the shape.
        shape = (*given, *given[-1:])
        target = output(out, shape, kept, inputs, resident=self if resident else None)
        result, plan = self._kernels.fisher_categorical(
            self._native,
            native,
            logits is not None,
            optional_strategy(strategy),
            _native_out(target, kept),
            native_shape,
        )
        self._record(plan)
        return returned(self, _finished(result, target, kept), target, shape)

    @_shapes.shaped[_shapes.FisherGaussian]
    def fisher_gaussian(
        self,
        mean: Any,
        var: Any,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Fisher information of N diagonal Gaussians in parameters (mu_1..mu_D, var_1..var_D).

        ``mean`` and ``var`` are (N, D), ``var`` finite and > 0, ``mean`` finite. Returns a
        new (N, 2D, 2D) array of the dtype it computes in (float64 for float64 inputs,
        float32 for float32 ones): block-diag(diag(1 / var),
        diag(1 / (2 var^2))) per sample (it does not depend on the mean, which is checked
        but not sent to the devices); D <= 2896. Entries beyond the range of that dtype (in
        float32, var below about 1e-19) come back as inf. Dtypes as in
        :meth:`fisher_categorical`, promoted over ``mean`` and ``var`` as numpy does: every
        entry is correctly rounded IEEE divisions in the dtype, bit-identical on every
        device of a context.

        With ``var`` a DeviceArray the map runs where its rows live and gives a DeviceArray
        (N, 2D, 2D) with its sharding, bit-identical to the numpy path (a resident ``mean``
        is checked where it lives; a numpy one on the host). With only ``mean`` resident,
        ``var`` is uploaded beside its rows. The checks run on the devices (a reduction
        flags bad rows); only when one is flagged are the rows gathered, for the numpy
        path's error. ``out=`` as in :meth:`fisher_categorical`. A float64 DeviceArray
        computes in float64 where its rows live (a numpy partner float64 too); with a
        float32 DeviceArray and a float64 numpy partner the promotion is float64, which the
        DeviceArray does not hold: refused, naming it.
        """
        kept = _kept([("mean", mean), ("var", var)], dtype, (FLOAT32, FLOAT64))
        m_native, m_shape, m_native_shape = _rows(self, "mean", mean, kept)
        v_native, _, v_native_shape = _rows(self, "var", var, kept)
        resident = isinstance(mean, DeviceArray) or isinstance(var, DeviceArray)
        # (N, 2D, 2D) from (N, D): the core checks the shapes.
        edge = tuple(2 * d for d in m_shape[-1:])
        shape = (*m_shape[:-1], *edge, *edge)
        inputs = {"mean": mean, "var": var}
        target = output(out, shape, kept, inputs, resident=self if resident else None)
        result, plan = self._kernels.fisher_gaussian(
            self._native,
            m_native,
            v_native,
            optional_strategy(strategy),
            _native_out(target, kept),
            m_native_shape,
            v_native_shape,
        )
        self._record(plan)
        return returned(self, _finished(result, target, kept), target, shape)

    def natural_gradient(
        self,
        scores: Any,
        grad: Any,
        damping: float,
        *,
        weights: Any = None,
        fisher: Any = None,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float64] | None = None,
    ) -> npt.NDArray[np.float64]:
        """Natural gradient: the solution x of (F + damping I) x = grad.

        F is :meth:`fisher_information` of ``scores`` (and ``weights``), computed on the
        devices, or ``fisher``: a Fisher matrix computed already (a training loop that
        needs F anyway pays for it once), then ``scores`` is None, ``weights`` is not
        given and no device runs (``ctx.last_plan`` is left as it was). ``fisher`` is a
        (P, P) array of real numbers (converted to float64; ``fisher_information``'s own
        float64 result gives the same bits as the call that computes it), finite and
        exactly symmetric (F == F.T, as ``fisher_information`` returns it). The solve is
        done on the host in float64 (Cholesky factorisation, then ``numpy.linalg.solve``).
        ``grad`` is (P,) or (P, M) (several right-hand sides) and is converted to float64;
        ``damping`` is a finite number >= 0. Returns a new float64 array shaped like
        ``grad``. When F + damping I is not positive definite (damping 0 and a singular F,
        or a ``fisher`` that is not positive semi-definite), raises InvalidArgumentError
        naming ``damping``. Scores at the float32 extremes are handled as in
        :meth:`fisher_information`. ``out=`` (float64, shaped like ``grad``) receives the
        solution. ``dtype=`` is the accumulation of F, as in :meth:`fisher_information`
        (refused with ``fisher=``, whose F is computed already).
        """
        if (
            isinstance(damping, bool)
            or not isinstance(damping, (int, float, np.integer, np.floating))
            or not math.isfinite(damping)
            or damping < 0
        ):
            raise InvalidArgumentError(f"damping: expected a finite number >= 0, got {damping!r}")
        g = plain_array("grad", grad)
        if g.dtype.kind not in "biuf":
            raise TypeError(
                f"grad: expected an array of real numbers (converted to float64), "
                f"got dtype {g.dtype}"
            )
        if requested(dtype) is not None and fisher is not None:
            raise InvalidArgumentError(
                "dtype: expected None with fisher= (the accumulation of a Fisher matrix "
                f"computed already), got {np.dtype(dtype)}"
            )
        f = None if fisher is None else _given_fisher(scores, weights, fisher)
        if f is not None:
            shape = f.shape
        elif scores is None:
            raise InvalidArgumentError(
                "scores: expected (N, P) per-sample scores, or None with fisher= a Fisher "
                "matrix computed already; got None and no fisher"
            )
        elif isinstance(scores, DeviceArray):
            shape = scores.shape
        else:
            shape = plain_array("scores", scores).shape
        if len(shape) == 2:
            # Checked before the Fisher matrix is computed, so a bad grad or out costs no work.
            p = shape[1]
            if g.ndim not in (1, 2) or g.shape[0] != p:
                source = "" if f is None else f" (fisher is {shape_text(f.shape)})"
                raise ShapeError(
                    f"grad: expected shape ({p},) or ({p}, M), got {shape_text(g.shape)}" + source
                )
        g64 = np.array(g, dtype=np.float64)
        if not np.isfinite(g64).all():
            raise InvalidArgumentError("grad: expected finite values, got NaN or inf")
        inputs = {"scores": scores, "grad": grad, "weights": weights, "fisher": fisher}
        target = output(out, g.shape, np.float64, inputs)
        if f is None:
            f = self.fisher_information(scores, weights, strategy=strategy, dtype=dtype)
        else:
            optional_strategy(strategy)  # checked, though nothing is split
        p = f.shape[0]
        system = f + float(damping) * np.eye(p)
        try:
            np.linalg.cholesky(system)
        except np.linalg.LinAlgError:
            why = "F is singular" if fisher is None else "F is singular or indefinite"
            raise InvalidArgumentError(
                f"damping: F + damping I is not positive definite with damping={damping!r} "
                f"({why}); use damping > 0"
            ) from None
        solution = np.asarray(np.linalg.solve(system, g64), dtype=np.float64)
        if target is None:
            return solution
        target[...] = solution
        return target


def _given_fisher(scores: Any, weights: Any, fisher: Any) -> npt.NDArray[np.float64]:
    """``natural_gradient``'s ``fisher=`` as float64, checked: without ``scores`` or
    ``weights`` (F is theirs already), (P, P), finite and exactly symmetric (the Cholesky
    check reads one triangle, the solve both: they must agree)."""
    if scores is not None:
        raise InvalidArgumentError(
            "scores: expected None with fisher= (the Fisher matrix of the scores, computed "
            f"already), got {type(scores).__name__}"
        )
    if weights is not None:
        raise InvalidArgumentError(
            "weights: expected None with fisher= (weights are part of the Fisher matrix "
            f"given), got {type(weights).__name__}"
        )
    if isinstance(fisher, DeviceArray):
        raise TypeError(
            "fisher: expected a numpy array (fisher_information returns one), got a DeviceArray"
        )
    f = plain_array("fisher", fisher)
    if f.dtype.kind not in "biuf":
        raise TypeError(
            f"fisher: expected an array of real numbers (converted to float64), got dtype {f.dtype}"
        )
    if f.ndim != 2 or f.shape[0] != f.shape[1]:
        raise ShapeError(f"fisher: expected a square (P, P) matrix, got {shape_text(f.shape)}")
    f64 = np.array(f, dtype=np.float64)
    bad = np.argwhere(~np.isfinite(f64))
    if len(bad):
        i, j = bad[0]
        raise InvalidArgumentError(f"fisher: expected finite values, got {f64[i, j]} at [{i}, {j}]")
    off = np.argwhere(f64 != f64.T)
    if len(off):
        i, j = off[0]
        upper, lower = float(f64[i, j]), float(f64[j, i])
        raise InvalidArgumentError(
            f"fisher: expected a symmetric matrix (F == F.T exactly, as fisher_information "
            f"returns it), got F[{i}, {j}] = {upper!r} and F[{j}, {i}] = {lower!r} "
            "(symmetrise it with (F + F.T) / 2)"
        )
    return f64
