"""The host's blocked Fisher SYRK gives the same bits as lavapipe's ``fisher_tiled`` and
``fisher_rows`` on every size that reaches an edge of its blocking.

The host packs a slice's rows 64 at a time (64 x 64 tiles) or runs the 8 x 8 blocks' 64
threads as vector lanes over the chunk transposed, continuing every entry's chain across
blocks. Sizes here put slices at one row, at, just past and far past a block or a 64-thread
round, P not a multiple of 4, 8 or 64, and chunks of odd length. The host takes the devices'
``fma`` rounding beside lavapipe, so a mixed context equals lavapipe alone bit for bit; the
host alone fuses, so it is checked against float64 and against itself at other thread counts.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from _fisher_helpers import FISHER_REL_TOL, random_scores, reference_fisher, relative_error
from amari_gpu import STRATEGIES, MultiGpuContext

# (N, P): one row; P = 1; around the 64-row block and round (slices of 16, 64, 65, 257 rows
# for chunks of 300 rows); P narrow (8 x 8 blocks) and wide (64 x 64 tiles, 2 to 4 tiles).
SIZES = [(1, 1), (1, 70), (63, 8), (65, 13), (257, 64), (300, 3), (1031, 65), (1201, 130)]
CHUNK = 300


@pytest.fixture(scope="module")
def contexts() -> Iterator[dict[str, MultiGpuContext]]:
    made = {
        "lavapipe": MultiGpuContext(backends=["vulkan"], chunk_items=CHUNK),
        "lavapipe-x2+host": MultiGpuContext(
            backends=["vulkan", "host"], devices_per_adapter=2, chunk_items=CHUNK
        ),
        "host": MultiGpuContext(backends=["host"], chunk_items=CHUNK),
        "host-3-threads": MultiGpuContext(backends=["host"], chunk_items=CHUNK, host_threads=3),
    }
    yield made
    for ctx in made.values():
        ctx.close()


def _inputs(n: int, p: int, weighted: bool) -> tuple[np.ndarray, np.ndarray | None]:
    scores = random_scores(n, p, seed=n * 1000 + p)
    # A zero column, signed zeros and a row of small values: chains that stay at (or pass
    # through) zero and products near the bottom of the range, which scaling leaves alone.
    scores[:, 0] = 0.0
    scores[::7, -1] = -0.0
    scores[n // 2] *= np.float32(2.0**-20)
    rng = np.random.default_rng(n + p)
    weights = rng.random(n).astype(np.float32) + np.float32(0.25) if weighted else None
    return scores, weights


@pytest.mark.parametrize("weighted", [False, True], ids=["mean", "weighted"])
@pytest.mark.parametrize(("n", "p"), SIZES, ids=[f"{n}x{p}" for n, p in SIZES])
def test_host_and_lavapipe_give_the_same_bits(
    contexts: dict[str, MultiGpuContext], n: int, p: int, weighted: bool
) -> None:
    scores, weights = _inputs(n, p, weighted)
    before = (scores.copy(), None if weights is None else weights.copy())
    got = {name: ctx.fisher_information(scores, weights) for name, ctx in contexts.items()}
    want = reference_fisher(scores, weights)
    for name, matrix in got.items():
        assert matrix.shape == (p, p) and matrix.dtype == np.float64, name
        assert relative_error(matrix, want) < FISHER_REL_TOL, name
    # The mixed context's host chunks round as lavapipe does: one result, word for word.
    lavapipe = got["lavapipe"].view(np.uint64)
    assert np.array_equal(got["lavapipe-x2+host"].view(np.uint64), lavapipe)
    # The host alone fuses: the same bits at any thread count.
    assert np.array_equal(got["host-3-threads"].view(np.uint64), got["host"].view(np.uint64))
    # Inputs untouched.
    assert np.array_equal(scores.view(np.uint32), before[0].view(np.uint32))
    if weights is not None and before[1] is not None:
        assert np.array_equal(weights.view(np.uint32), before[1].view(np.uint32))


def test_the_mixed_context_runs_chunks_on_both_kinds(
    contexts: dict[str, MultiGpuContext],
) -> None:
    # The bit comparison above means something only if the host took chunks beside lavapipe,
    # and gives the same bits whichever device takes which chunks.
    scores, weights = _inputs(1201, 130, True)
    ctx = contexts["lavapipe-x2+host"]
    (host,) = [d.id for d in ctx.devices if d.adapter.backend == "host"]
    want = contexts["lavapipe"].fisher_information(scores, weights).view(np.uint64)
    for strategy in STRATEGIES:
        got = ctx.fisher_information(scores, weights, strategy=strategy)
        assert np.array_equal(got.view(np.uint64), want), strategy
    ctx.fisher_information(scores, weights, strategy="balanced")
    plan = ctx.last_plan
    assert plan is not None
    busy = {w.device_id for w in plan if w.chunks > 0}
    assert host in busy and len(busy) >= 2, plan


def test_calls_after_a_larger_one_give_a_fresh_contexts_bits(
    contexts: dict[str, MultiGpuContext],
) -> None:
    # A call's partials reuse the buffer the context's previous reduction handed back: a
    # smaller call after a larger one (other values, other P, stale words in the buffer)
    # must give exactly what a context that never ran anything gives.
    big, big_w = _inputs(1201, 130, True)
    small, small_w = _inputs(257, 64, True)
    fresh_options = {
        "host": {"backends": ["host"]},
        "lavapipe-x2+host": {"backends": ["vulkan", "host"], "devices_per_adapter": 2},
    }
    for name, options in fresh_options.items():
        ctx = contexts[name]
        ctx.fisher_information(big, big_w)
        got = ctx.fisher_information(small, small_w).view(np.uint64)
        with MultiGpuContext(chunk_items=CHUNK, **options) as fresh:
            want = fresh.fisher_information(small, small_w).view(np.uint64)
        assert np.array_equal(got, want), name
