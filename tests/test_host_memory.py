"""Peak memory of a large product on the host device: a 10**7-row Cl(3,0) product needs no
more than its inputs, its output and 64 MiB (the host reads the numpy inputs in place and
writes straight into the output array). Measured in a fresh interpreter, whose peak RSS
(``ru_maxrss``) is that process's alone."""

from __future__ import annotations

import textwrap

from _process import python

ROWS = 10**7
SLACK_BYTES = 64 << 20

_SCRIPT = """
import resource
import numpy as np
import amari_gpu as ag

rows = {rows}
ctx = ag.MultiGpuContext(backends=["host"])
# Calibration and the kernel's first run allocate what they need once: done on a small call.
ctx.geometric_product(np.ones((4096, 8), np.float32), np.ones((4096, 8), np.float32))
a = np.full((rows, 8), 0.5, np.float32)
b = np.full((rows, 8), 0.25, np.float32)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out = ctx.geometric_product(a, b)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
assert out.shape == (rows, 8)
# (0.5 + ...) * 0.25: every blade's 8 terms are 0.125 with the Cayley table's signs.
print(before, after, out.nbytes, float(out[rows - 1, 0]))
"""


def test_a_ten_million_row_product_on_the_host_needs_inputs_output_and_64_mib():
    done = python("-c", textwrap.dedent(_SCRIPT).format(rows=ROWS))
    assert done.returncode == 0, done.stderr
    before, after, out_bytes, scalar = done.stdout.split()
    growth = int(after) - int(before)
    assert growth <= int(out_bytes) + SLACK_BYTES, (
        f"peak RSS grew by {growth / 2**20:.0f} MiB for a {int(out_bytes) / 2**20:.0f} MiB output"
    )
    # The scalar blade of (0.5 everywhere)(0.25 everywhere) in Cl(3,0): 0.125 times the
    # sum of the signs of the 8 terms a_i b_i, which are +1 for 1, e1, e2, e3 and -1 for
    # e12, e13, e23, e123: 0.
    assert float(scalar) == 0.0
