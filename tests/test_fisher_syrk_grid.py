"""The Fisher SYRK's default chunk grid and the one generic host SYRK (float32 and float64).

The default grid is a function of N, P and the dtype alone: chunks hold at least enough rows
to outweigh their partial 16-fold (before, 65,536 x 256 float32 scores were 64 chunks whose
partials were 40 MB). These tests use the default grid (no ``chunk_items``), so they run the
chunks a user's call runs: the host (alone, and beside lavapipe as two logical devices each)
gives lavapipe's bits in float32 and in float64 (alone, where it fuses ``fma`` and lavapipe
may not, its own bits at any device count), on P not a multiple of the 64 x 64 tile, one
row, more rows than lavapipe's 65,535-trip loop budget, tiny and huge scores; and at the
AVX2 level (``AMARI_GPU_SIMD=avx2`` in a fresh interpreter) the host gives the bits it gives
at its own level. Results are checked against float64 and longdouble references.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import amari_gpu as ag
import numpy as np
import pytest
from _fisher_helpers import FISHER_REL_TOL, random_scores, reference_fisher, relative_error
from _process import python

# (N, P, scale): one row; P = 1; P past one tile and not a multiple of 4, 8 or 64; a chunk
# floor of 16,384 rows crossed (P = 130: 3 tile pairs, 4 slices); 70,001 rows, past
# lavapipe's loop budget in one call; tiny and huge scores (float32 scales them exactly).
SIZES = [
    (1, 70, 1.0),
    (1, 1, 1.0),
    (300, 257, 1.0),
    (20_011, 130, 1.0),
    (70_001, 9, 1.0),
    (5_003, 67, 1e-25),
    (5_003, 67, 1e30),
]
IDS = [f"{n}x{p}x{s:g}" for n, p, s in SIZES]

SCRIPT = """
import json, sys
import numpy as np
import amari_gpu as ag
sys.path.insert(0, sys.argv[3])
from test_fisher_syrk_grid import compute_all
ctx = ag.MultiGpuContext(backends=["host"])
np.savez(sys.argv[2], **compute_all(ctx, dict(np.load(sys.argv[1]))))
print(json.dumps(ctx.devices[0].adapter.features[0]))
"""


def inputs(n: int, p: int, scale: float) -> dict[str, np.ndarray]:
    """float32 scores and weights, and float64 ones that float32 cannot hold (x (1 + 2^-40))."""
    g = random_scores(n, p, seed=n + p, scale=scale)
    g[:: max(1, n // 5), -1] = -0.0
    w = np.random.default_rng(p).random(n).astype(np.float32) + np.float32(0.25)
    g64 = g.astype(np.float64) * (1.0 + 2.0**-40)
    return {"g": g, "w": w, "g64": g64, "w64": w.astype(np.float64) / 3.0}


def compute(ctx: ag.MultiGpuContext, given: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The float32 and float64 Fisher matrices of ``given`` on ``ctx``, weighted and not
    (the last one spread over every device)."""
    return {
        "f32": ctx.fisher_information(given["g"]),
        "f32w": ctx.fisher_information(given["g"], given["w"]),
        "f64": ctx.fisher_information(given["g64"]),
        "f64w": ctx.fisher_information(given["g64"], given["w64"], strategy="balanced"),
    }


# The sizes the AVX2 level is compared on (those a fresh interpreter runs in seconds).
LEVEL_SIZES = SIZES[:4]


def inputs_all() -> dict[str, np.ndarray]:
    """[`inputs`] of every size of ``LEVEL_SIZES``, keys suffixed with ``_N_P``."""
    return {f"{k}_{n}_{p}": v for n, p, s in LEVEL_SIZES for k, v in inputs(n, p, s).items()}


def compute_all(ctx: ag.MultiGpuContext, given: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """[`compute`] of every size of [`inputs_all`], keys suffixed alike."""
    out = {}
    for n, p, _ in LEVEL_SIZES:
        part = {k: given[f"{k}_{n}_{p}"] for k in ("g", "w", "g64", "w64")}
        out.update({f"{k}_{n}_{p}": v for k, v in compute(ctx, part).items()})
    return out


def _longdouble(g: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    x = np.asarray(g, dtype=np.longdouble)
    v = np.ones(x.shape[0], np.longdouble) if w is None else np.asarray(w, np.longdouble)
    return (x * v[:, None]).T @ x / v.sum()


@pytest.fixture(scope="module")
def contexts() -> Iterator[dict[str, ag.MultiGpuContext]]:
    made = {
        "lavapipe": ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2),
        "mixed": ag.MultiGpuContext(backends=["vulkan", "host"], devices_per_adapter=2),
        "host": ag.MultiGpuContext(backends=["host"], devices_per_adapter=2),
        "host-1": ag.MultiGpuContext(backends=["host"]),
    }
    yield made
    for ctx in made.values():
        ctx.close()


def _bits(results: dict[str, np.ndarray]) -> dict[str, bytes]:
    return {k: np.ascontiguousarray(v).tobytes() for k, v in results.items()}


@pytest.mark.parametrize(("n", "p", "scale"), SIZES, ids=IDS)
def test_host_lavapipe_and_both_together_give_the_same_bits_on_the_default_grid(
    contexts: dict[str, ag.MultiGpuContext], n: int, p: int, scale: float
) -> None:
    given = inputs(n, p, scale)
    before = {k: v.copy() for k, v in given.items()}
    got = {}
    for name, ctx in contexts.items():
        got[name] = compute(ctx, given)
        # Every device of the context took rows when there were chunks enough.
        plan = ctx.last_plan
        assert plan is not None
        if plan.n_chunks >= len(ctx.devices):
            assert all(a.chunks > 0 for a in plan), (name, plan)
    # float32 accumulation against float64; float64 against longdouble (float64 BLAS past
    # 10,000 rows, where numpy's longdouble product is minutes, with its own rounding
    # allowed for), to N eps of the terms' magnitudes.
    wide = _longdouble if n <= 10_000 else reference_fisher
    slack = 4 if n <= 10_000 else 8
    for key, w in (("f32", None), ("f32w", given["w"])):
        want = reference_fisher(given["g"], w)
        for name, r in got.items():
            assert relative_error(r[key], want) < FISHER_REL_TOL, (name, key)
    for key, w in (("f64", None), ("f64w", given["w64"])):
        exact, terms = wide(given["g64"], w), wide(np.abs(given["g64"]), w)
        for name, r in got.items():
            err = np.abs(r[key].astype(np.longdouble) - exact)
            assert (err <= slack * n * np.finfo(np.float64).eps * terms).all(), (name, key)
    # The mixed context's host chunks round `fma` as lavapipe does: lavapipe's bits. The
    # host alone fuses: its bits whatever its device count.
    assert _bits(got["mixed"]) == _bits(got["lavapipe"])
    assert _bits(got["host"]) == _bits(got["host-1"])
    for k, v in given.items():
        assert v.tobytes() == before[k].tobytes(), k


def test_the_default_grid_is_a_function_of_the_problem_only(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    # 65,536 x 256 float32: chunks of 16,384 rows (their scores 16 times their 640 KB
    # partials), not 64 chunks of 1,024; float64: 2,048 rows. The same on every context.
    g = random_scores(65_536, 256, seed=1)
    for name, ctx in contexts.items():
        ctx.fisher_information(g)
        plan = ctx.last_plan
        assert plan is not None and (plan.chunk_items, plan.n_chunks) == (16_384, 4), name
    host = contexts["host"]
    host.fisher_information(g[:8192].astype(np.float64))
    assert host.last_plan is not None and host.last_plan.chunk_items == 2048
    # The mixed context spread those chunks over both kinds of device (the bits above are
    # compared across device kinds, not within one).
    mixed = contexts["mixed"]
    mixed.fisher_information(random_scores(70_001, 130, seed=2), strategy="balanced")
    plan = mixed.last_plan
    assert plan is not None
    kinds = {mixed.devices[a.device_id].adapter.backend for a in plan if a.chunks > 0}
    assert kinds == {"vulkan", "host"}, plan


def test_the_avx2_level_gives_the_bits_of_the_widest(
    contexts: dict[str, ag.MultiGpuContext], tmp_path: Path
) -> None:
    given = inputs_all()
    want = _bits(compute_all(contexts["host"], given))
    np.savez(tmp_path / "in.npz", **given)
    here = str(Path(__file__).parent)
    env = {**os.environ, "AMARI_GPU_SIMD": "avx2"}
    run = python("-c", SCRIPT, str(tmp_path / "in.npz"), str(tmp_path / "out.npz"), here, env=env)
    assert run.returncode == 0, run.stderr
    # The cap lowers the level this CPU has and never raises it.
    level = json.loads(run.stdout.strip().splitlines()[-1])
    widest = next(a for a in ag.adapters() if a.backend == "host").features[0]
    assert level == ("avx2" if widest in ("avx2", "avx512f") else widest)
    assert _bits(dict(np.load(tmp_path / "out.npz"))) == want
