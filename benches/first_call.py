"""The first call in a fresh process with no calibration cache: how long until it returns.

Each sample is a new Python process with an empty ``AMARI_GPU_CACHE_DIR``, timing the
import of the package, opening the context, the first 1-row Cl(3,0) geometric product (what
calibration it needs included) and the second one, then ``calibrate()`` (every figure of
every device: what the first call measured before calibration was on demand), for the host
device alone, lavapipe alone (``backends=["vulkan"]``) and the default context. Prints the
medians over the samples (and their spread), the adapters each context opened (name,
backend, driver) and the calibration line the first call logged. ``open_and_first_call_s``
is what a user waits from ``MultiGpuContext(...)`` to the first result. The machine may be
shared: read the medians.

    python benches/first_call.py [--samples N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, logging, sys, time
t0 = time.perf_counter()
import numpy as np
t1 = time.perf_counter()
import amari_gpu as ag
t2 = time.perf_counter()
lines = []
class Keep(logging.Handler):
    def emit(self, record):
        if record.name.startswith("amari_gpu.calibration"):
            lines.append(record.getMessage())
logging.getLogger("amari_gpu").addHandler(Keep())
logging.getLogger("amari_gpu").setLevel(logging.INFO)
options = json.loads(sys.argv[1])
t3 = time.perf_counter()
ctx = ag.MultiGpuContext(**options)
t4 = time.perf_counter()
a = np.ones((1, 8), np.float32)
ctx.geometric_product(a, a)
t5 = time.perf_counter()
first_lines = list(lines)
ctx.geometric_product(a, a)
t6 = time.perf_counter()
ctx.calibrate()
t7 = time.perf_counter()
print(json.dumps({
    "import_s": t2 - t1,
    "open_s": t4 - t3,
    "first_call_s": t5 - t4,
    "open_and_first_call_s": t5 - t3,
    "second_call_s": t6 - t5,
    "calibrate_s": t7 - t6,
    "adapters": [
        f"{d.adapter.name} ({d.adapter.backend}, driver {d.adapter.driver_info or '-'})"
        for d in ctx.devices
    ],
    "calibration": first_lines,
}))
"""

KEYS = (
    "import_s",
    "open_s",
    "first_call_s",
    "open_and_first_call_s",
    "second_call_s",
    "calibrate_s",
)

CONTEXTS = {
    "host device": {"backends": ["host"]},
    "lavapipe": {"backends": ["vulkan"]},
    "default context": {},
}


def sample(options: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="amari-gpu-first-call-") as cache:
        env = dict(
            os.environ,
            AMARI_GPU_CACHE_DIR=cache,
            XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR") or tempfile.mkdtemp(),
        )
        done = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(options)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=5, help="fresh processes per context")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args()
    results = {}
    # Interleaved, so that a burst of load elsewhere on the machine hits every context alike.
    runs: dict[str, list[dict]] = {name: [] for name in CONTEXTS}
    for _ in range(args.samples):
        for name, options in CONTEXTS.items():
            runs[name].append(sample(options))
    for name, samples in runs.items():
        figures = {}
        for key in KEYS:
            values = [s[key] for s in samples]
            figures[key] = {
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
            }
        results[name] = {
            "options": CONTEXTS[name],
            "adapters": samples[-1]["adapters"],
            "calibration": samples[-1]["calibration"],
            "figures": figures,
        }
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print(f"first call in a fresh process, empty calibration cache, {args.samples} samples each")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} hardware threads")
    for name, r in results.items():
        print(f"\n{name}: MultiGpuContext(**{r['options']})")
        for adapter in r["adapters"]:
            print(f"  device: {adapter}")
        for line in r["calibration"]:
            print(f"  log: {line[:300]}")
        for key, f in r["figures"].items():
            print(
                f"  {key:<22} median {f['median'] * 1e3:8.1f} ms"
                f"  (min {f['min'] * 1e3:.1f}, max {f['max'] * 1e3:.1f})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
