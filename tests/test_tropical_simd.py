"""The host's tropical kernels at every SIMD level this CPU has give the bits lavapipe's
WGSL kernels give: products (numpy path, resident rows, batched, accumulated into ``c``-less
and tiled shapes whose sizes are not multiples of any tile), matrix-vector products and
shortest paths, in float32 and float64, on values full of ties, signed zeros and
infinities. The narrower levels run in a fresh interpreter with ``AMARI_GPU_SIMD`` capping
the level, which the host device then reports."""

from __future__ import annotations

import json
import os
from pathlib import Path

import amari_gpu as ag
import numpy as np
import pytest
from _process import python

# (batch or None, m, k, n): one row, tails of every tile (4, 6, 12 rows; 16, 32 columns),
# k past a 256-wide block, a batch, and 64-row chunks shared between threads in tiles of
# 12, 12 and 8 rows (6s and a 2 at AVX2) with k past the host's 128-wide k block; rows
# that leave 4 and 8 for a shorter last tile (20, 9 for the resident rows path).
SHAPES = [
    (None, 1, 1, 1),
    (None, 13, 7, 33),
    (None, 70, 300, 65),
    (3, 25, 17, 40),
    (None, 136, 130, 47),
    (None, 20, 5, 9),
    (None, 9, 3, 70),
]
PATHS_N = 75

SCRIPT = """
import json, sys
import numpy as np
import amari_gpu as ag
sys.path.insert(0, sys.argv[3])
from test_tropical_simd import compute
ctx = ag.MultiGpuContext(backends=["host"])
inputs = dict(np.load(sys.argv[1]))
np.savez(sys.argv[2], **compute(ctx, inputs))
print(json.dumps(ctx.devices[0].adapter.features[0]))
"""


def _operand(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values on a coarse grid (many ties), a tenth of them ±0, ±inf sprinkled."""
    a = (rng.integers(-4, 5, size=shape) / 2.0).astype(np.float32)
    flat = a.reshape(-1)
    pick = rng.random(flat.shape)
    flat[pick < 0.1] = -0.0
    flat[(pick >= 0.1) & (pick < 0.15)] = 0.0
    flat[(pick >= 0.15) & (pick < 0.2)] = -np.inf
    flat[(pick >= 0.2) & (pick < 0.22)] = np.inf
    return a


def inputs() -> dict[str, np.ndarray]:
    """Every operand of the comparison, by name."""
    rng = np.random.default_rng(27)
    out: dict[str, np.ndarray] = {}
    for i, (batch, m, k, n) in enumerate(SHAPES):
        lead = () if batch is None else (batch,)
        out[f"a{i}"] = _operand(rng, (*lead, m, k))
        out[f"b{i}"] = _operand(rng, (*lead, k, n))
        out[f"x{i}"] = _operand(rng, (*lead, k))
    w = (rng.integers(0, 9, size=(PATHS_N, PATHS_N)) / 2.0).astype(np.float32)
    w[rng.random(w.shape) < 0.3] = np.inf
    out["w"] = w
    return out


def compute(ctx: ag.MultiGpuContext, given: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every result on ``ctx``: per shape and semiring the numpy-path product, the product of
    a resident left operand (rows), and the matrix-vector product; then shortest paths."""
    out: dict[str, np.ndarray] = {}
    for i in range(len(SHAPES)):
        a, b, x = given[f"a{i}"], given[f"b{i}"], given[f"x{i}"]
        for s in ("max_plus", "min_plus"):
            out[f"mm{i}{s}"] = ctx.tropical_matmul(a, b, s)
            out[f"rows{i}{s}"] = ctx.tropical_matmul(ctx.asarray(a), b, s).numpy()
            out[f"mv{i}{s}"] = ctx.tropical_matvec(a, x, s)
    out["paths"] = ctx.shortest_paths(given["w"])
    # float64 (the host's 8- and 4-lane float64 kernels): the same operands scaled by
    # 1 + 2^-40, which float32 cannot hold.
    scale = 1.0 + 2.0**-40
    for i in range(len(SHAPES)):
        a, b, x = (given[f"{v}{i}"].astype(np.float64) * scale for v in "abx")
        for s in ("max_plus", "min_plus"):
            out[f"mm64{i}{s}"] = ctx.tropical_matmul(a, b, s)
            out[f"mv64{i}{s}"] = ctx.tropical_matvec(a, x, s)
    out["paths64"] = ctx.shortest_paths(given["w"].astype(np.float64) * scale)
    return out


def _bits(results: dict[str, np.ndarray]) -> dict[str, list[int]]:
    return {k: np.ascontiguousarray(v).view(np.uint32).ravel().tolist() for k, v in results.items()}


def _host_level() -> str:
    return next(a for a in ag.adapters() if a.backend == "host").features[0]


@pytest.fixture(scope="module")
def given() -> dict[str, np.ndarray]:
    return inputs()


@pytest.fixture(scope="module")
def on_lavapipe(given: dict[str, np.ndarray]) -> dict[str, list[int]]:
    ctx = ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2, chunk_items=1)
    try:
        return _bits(compute(ctx, given))
    finally:
        ctx.close()


def test_the_host_at_its_own_level_and_beside_lavapipe_gives_lavapipes_bits(
    given: dict[str, np.ndarray], on_lavapipe: dict[str, list[int]], host: ag.MultiGpuContext
) -> None:
    assert _bits(compute(host, given)) == on_lavapipe
    mixed = ag.MultiGpuContext(backends=["vulkan", "host"], devices_per_adapter=2, chunk_items=1)
    try:
        assert _bits(compute(mixed, given)) == on_lavapipe
    finally:
        mixed.close()


@pytest.mark.parametrize("level", ["avx2", "portable"])
def test_every_narrower_simd_level_gives_lavapipes_bits(
    level: str, given: dict[str, np.ndarray], on_lavapipe: dict[str, list[int]], tmp_path: Path
) -> None:
    np.savez(tmp_path / "in.npz", **given)
    env = {**os.environ, "AMARI_GPU_SIMD": level}
    run = python(
        "-c",
        SCRIPT,
        str(tmp_path / "in.npz"),
        str(tmp_path / "out.npz"),
        str(Path(__file__).parent),
        env=env,
    )
    assert run.returncode == 0, run.stderr
    detected = _host_level()
    ran = json.loads(run.stdout.strip().splitlines()[-1])
    # The cap lowers the level this CPU has and never raises it.
    order = ["portable", "avx2", "avx512f"] if detected != "neon" else ["portable", "neon"]
    want = order[min(order.index(level), order.index(detected))] if level in order else detected
    assert ran == want
    assert _bits(dict(np.load(tmp_path / "out.npz"))) == on_lavapipe


def test_a_right_operand_changed_in_place_between_calls_is_packed_again() -> None:
    # The host kernel packs `b` once per call, keyed by its memory: a second call on the same
    # array, written in place since, must read the new values (several chunks per call).
    rng = np.random.default_rng(5)
    a = rng.standard_normal((300, 40)).astype(np.float32)
    b = rng.standard_normal((40, 50)).astype(np.float32)
    with ag.MultiGpuContext(backends=["host"], chunk_items=16) as ctx:
        for _ in range(3):
            got = ctx.tropical_matmul(a, b)
            want = (a.astype(np.float64)[:, :, None] + b.astype(np.float64)[None]).max(axis=1)
            np.testing.assert_array_equal(got, want.astype(np.float32))
            b += 1.0
