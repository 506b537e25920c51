"""Resident ``fisher_information`` (scores a DeviceArray: column maxima, SYRK partials on the
devices holding the rows) against the numpy path (scores uploaded chunk by chunk, partials read
back), on the same devices in the same run.

Cases: 65,536 x 256 scores with weights (64 x 64 tiles), and 262,144 x 30 without (P not a
multiple of 4: the resident path pads the rows on the devices first; 8 x 8 blocks). Both paths
are timed interleaved, round by round; the results are checked to be bit-identical. Printed
per case: medians (and minima), their ratio, the bytes each path moved (``ctx.stats()``).

    python benches/resident_fisher.py [--repeats 5] [--devices 1] [--backend vulkan]

``--backend host`` runs the host CPU device alone (no bytes move there: shards are host memory).
"""

from __future__ import annotations

import os
import statistics
import tempfile

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))

import amari_gpu as ag
from _resident import main, measured, print_paths

CASES = [(65_536, 256, True), (262_144, 30, False)]


def run_case(ctx: ag.MultiGpuContext, n: int, p: int, weighted: bool, repeats: int) -> None:
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((n, p), dtype=np.float32)
    weights = rng.random(n, dtype=np.float32) if weighted else None
    resident = ctx.asarray(scores)
    # Compile the pipelines outside the timings.
    ctx.fisher_information(scores, weights)
    ctx.fisher_information(resident, weights)

    numpy_s, resident_s = [], []
    numpy_bytes = resident_bytes = 0
    for _ in range(repeats):
        expected, seconds, numpy_bytes = measured(
            ctx, lambda: ctx.fisher_information(scores, weights)
        )
        numpy_s.append(seconds)
        got, seconds, resident_bytes = measured(
            ctx, lambda: ctx.fisher_information(resident, weights)
        )
        resident_s.append(seconds)
        if got.tobytes() != expected.tobytes():
            raise SystemExit("resident fisher_information differs from the numpy path")
    sharding = resident.sharding
    resident.free()

    med = statistics.median
    print(
        f"\n{n} x {p} scores{' with weights' if weighted else ''} "
        f"({scores.nbytes / 2**20:.0f} MiB), sharded {[(d, b - a) for d, a, b in sharding]}"
    )
    paths = [
        ("numpy path (scores uploaded, partials read back)", numpy_s, numpy_bytes),
        ("resident (scores stay on the devices)", resident_s, resident_bytes),
    ]
    print_paths(paths, 50)
    print(f"  ratio numpy / resident: {med(numpy_s) / med(resident_s):.2f}x; bit-identical: yes")


def run_cases(ctx: ag.MultiGpuContext, repeats: int) -> None:
    for n, p, weighted in CASES:
        run_case(ctx, n, p, weighted, repeats)


if __name__ == "__main__":
    raise SystemExit(main(__doc__, "fisher_information", run_cases))
