"""Outputs too large for the host's memory raise OutOfMemoryError naming the bytes asked,
never abort the interpreter. Each repro runs in a fresh interpreter: an abort would kill it."""

from __future__ import annotations

import textwrap

import pytest
from _process import python

_SCRIPT = """
import numpy as np
import amari_gpu
from amari_gpu import OutOfMemoryError

ctx = amari_gpu.MultiGpuContext(backends=["vulkan"])
try:
    {call}
except OutOfMemoryError as e:
    print("OOM:", e)
else:
    print("no error")
# The context still works after the refusal.
a = np.ones((4, 8), np.float32)
assert ctx.geometric_product(a, a).shape == (4, 8)
print("still usable")
"""

CASES = {
    "tropical_matmul": "ctx.tropical_matmul(np.zeros((300000, 1), np.float32), "
    "np.zeros((1, 300000), np.float32))",
    "fisher_categorical": "ctx.fisher_categorical(logits=np.zeros((100000, 1000), np.float32))",
    "fisher_gaussian": "ctx.fisher_gaussian(np.zeros((1000, 2896), np.float32), "
    "np.ones((1000, 2896), np.float32))",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_output_too_large_raises_out_of_memory_in_a_fresh_interpreter(name: str) -> None:
    script = textwrap.dedent(_SCRIPT).format(call=CASES[name])
    done = python("-c", script, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OOM: output: cannot allocate" in done.stdout, done.stdout
    assert "bytes of host memory" in done.stdout
    assert "still usable" in done.stdout
