"""Resident ``tropical_matmul`` (a DeviceArray ``a``, kernel ``matmul_rows``) against the
numpy path (``a`` uploaded, tiled kernel ``matmul_tiled`` on 64-row blocks, result read back).

Cases: 1024x1024 ⊗ 1024x1024, and a batch of 16 products of 256x256 ⊗ 256x256, max-plus. Both
paths are timed interleaved, round by round, in the same run on the devices named at the top;
the results are checked to be bit-identical. Printed per case: the medians (and minima) of the
numpy path, of the resident call (the result stays on the devices) and of the resident call
plus the gather of its result; their ratios; the bytes each path moved (``ctx.stats()``).

    python benches/resident_tropical.py [--repeats 5] [--devices 1] [--backend vulkan]

``--backend host`` runs the host CPU device alone (its resident product runs each run of
same-batch rows through the numpy path's host product code; the host device moves no bytes:
its shards are host memory).
"""

from __future__ import annotations

import os
import statistics
import tempfile

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))

import amari_gpu as ag
from _resident import main, measured, print_paths

CASES = [((1024, 1024), (1024, 1024)), ((16, 256, 256), (16, 256, 256))]


def run_case(ctx: ag.MultiGpuContext, a_shape, b_shape, repeats: int) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape, dtype=np.float32)
    b = rng.standard_normal(b_shape, dtype=np.float32)
    da = ctx.asarray(a)
    # Compile the pipelines outside the timings.
    ctx.tropical_matmul(a, b)
    ctx.tropical_matmul(da, b).free()

    numpy_s, resident_s, gathered_s = [], [], []
    numpy_bytes = resident_bytes = gathered_bytes = 0
    for _ in range(repeats):
        expected, seconds, numpy_bytes = measured(ctx, lambda: ctx.tropical_matmul(a, b))
        numpy_s.append(seconds)
        result, seconds, resident_bytes = measured(ctx, lambda: ctx.tropical_matmul(da, b))
        resident_s.append(seconds)
        got, gather_s, gather_bytes = measured(ctx, result.numpy)
        gathered_s.append(seconds + gather_s)
        gathered_bytes = resident_bytes + gather_bytes
        result.free()
        if not np.array_equal(got, expected):
            raise SystemExit("resident tropical_matmul differs from the numpy path")
    da.free()

    med = statistics.median
    label = " ⊗ ".join("x".join(map(str, s)) for s in (a_shape, b_shape))
    print(f"\n{label} (max-plus), a sharded as {len(ctx.devices)} device(s) place it")
    paths = [
        ("numpy path (upload a, compute, read back)", numpy_s, numpy_bytes),
        ("resident (result stays on the devices)", resident_s, resident_bytes),
        ("resident + gather of the result", gathered_s, gathered_bytes),
    ]
    print_paths(paths, 44)
    print(
        f"  ratio numpy / resident: {med(numpy_s) / med(resident_s):.2f}x; "
        f"numpy / (resident + gather): {med(numpy_s) / med(gathered_s):.2f}x; "
        "bit-identical: yes"
    )


def run_cases(ctx: ag.MultiGpuContext, repeats: int) -> None:
    for a_shape, b_shape in CASES:
        run_case(ctx, a_shape, b_shape, repeats)


if __name__ == "__main__":
    raise SystemExit(main(__doc__, "tropical_matmul", run_cases))
