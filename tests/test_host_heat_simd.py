"""The host heat row kernel's vectors (AVX-512 with a masked tail, AVX2 with a tail overlapping
the cells before it, the portable loop below one vector) against the kernels' emulation and
lavapipe, bit for bit: every width from 1 to 70 cells (around the 4-, 8- and 16-lane vectors of
float32 and float64 and their tails) and a 1024-cell one, float32 and float64, both boundaries,
step counts that are not a multiple of a round's, on the host alone (fused) and beside lavapipe
(its rounding); and the AVX2 level (``AMARI_GPU_SIMD=avx2`` in a fresh interpreter) giving the
bits of the detected one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import amari_gpu as ag
import numpy as np
import pytest
from _domain_helpers import heat_bits
from _process import python

WIDTHS = [*range(1, 71), 1024]
DTYPES = [np.float32, np.float64]
ALPHA = 0.23
# Steps 7 in rounds of halo 3 (3, 3, 1 steps), on 6 rows: the host's blocked passes of 3
# steps, then one of a single step.
H, STEPS, HALO = 6, 7, 3


def _grid(w: int, dtype: Any) -> np.ndarray:
    rng = np.random.default_rng(w)
    return rng.uniform(-1, 1, (H, w)).astype(dtype)


def _split(ctx: ag.MultiGpuContext) -> list[int]:
    """Four of the six rows on the host, one on each of the two lavapipe devices."""
    return [4 if d.adapter.backend == "host" else 1 for d in ctx.devices]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("boundary", ["periodic", "dirichlet"])
def test_every_width_gives_the_kernels_bits_alone_and_beside_lavapipe(
    host, default_ctx, mixed, boundary, dtype
):
    # conftest's contexts: the host alone, lavapipe alone, two lavapipe devices and the host.
    assert sum(_split(mixed)) == H
    for w in WIDTHS:
        grid = _grid(w, dtype)
        before = grid.copy()
        fused = heat_bits(grid, STEPS, ALPHA, boundary, fused=True, dtype=dtype)
        got = host.stencil(grid, STEPS, ALPHA, boundary, HALO)
        assert got.dtype == dtype
        assert np.array_equal(got, fused), w
        separate = heat_bits(grid, STEPS, ALPHA, boundary, fused=False, dtype=dtype)
        assert np.array_equal(default_ctx.stencil(grid, STEPS, ALPHA, boundary, HALO), separate), w
        beside = mixed.stencil(
            grid, STEPS, ALPHA, boundary, HALO, split=_split(mixed), rebalance=False
        )
        assert np.array_equal(beside, separate), w
        assert np.array_equal(grid, before), w


SCRIPT = """
import json, sys
import numpy as np
import amari_gpu as ag
sys.path.insert(0, sys.argv[2])
from test_host_heat_simd import WIDTHS, DTYPES, STEPS, HALO, ALPHA, _grid
out = {}
with ag.MultiGpuContext(backends=["host"]) as ctx:
    for dtype in DTYPES:
        for w in WIDTHS:
            for b in ("periodic", "dirichlet"):
                got = ctx.stencil(_grid(w, dtype), STEPS, ALPHA, b, HALO)
                out[f"{np.dtype(dtype).name} {w} {b}"] = got
    np.savez(sys.argv[1], **out)
    print(json.dumps(ctx.devices[0].adapter.features[0]))
"""


def test_the_avx2_level_gives_the_bits_of_the_detected_one(host, tmp_path: Path) -> None:
    env = {**os.environ, "AMARI_GPU_SIMD": "avx2"}
    run = python("-c", SCRIPT, str(tmp_path / "out.npz"), str(Path(__file__).parent), env=env)
    assert run.returncode == 0, run.stderr
    detected = host.devices[0].adapter.features[0]
    ran = json.loads(run.stdout.strip().splitlines()[-1])
    assert ran == ("avx2" if detected in ("avx2", "avx512f") else detected)
    narrow = dict(np.load(tmp_path / "out.npz"))
    assert len(narrow) == len(DTYPES) * len(WIDTHS) * 2
    for dtype in DTYPES:
        for w in WIDTHS:
            for b in ("periodic", "dirichlet"):
                here = host.stencil(_grid(w, dtype), STEPS, ALPHA, b, HALO)
                assert np.array_equal(narrow[f"{np.dtype(dtype).name} {w} {b}"], here), (w, b)
