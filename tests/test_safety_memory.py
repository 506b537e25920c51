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


# Inputs whose conversion to the kernels' dtype needs more host memory than there is: views
# of a few bytes (np.broadcast_to) whose contiguous copy would take 1-32 GiB, under an
# address-space limit of 512 MiB above what the interpreter already maps, so that numpy's
# allocation fails at once whatever the machine has.
_CONVERSION_SCRIPT = """
import resource
import numpy as np
import amari_gpu
from amari_gpu import OutOfMemoryError

ctx = amari_gpu.MultiGpuContext(backends=["host"])
a = np.ones((4, 8), np.float32)
assert ctx.geometric_product(a, a).shape == (4, 8)
with open("/proc/self/status") as f:
    mapped = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (mapped + 2**29, resource.RLIM_INFINITY))
huge = np.broadcast_to({value}, {shape})
try:
    {call}
except OutOfMemoryError as e:
    print("OOM:", e)
except MemoryError as e:
    print("bare MemoryError:", e)
else:
    print("no error")
assert ctx.geometric_product(a, a).shape == (4, 8)
print("still usable")
"""

CONVERSIONS = {
    # name: (value, shape, call, argument, bytes, dtype)
    # Geometric and tropical algebra and Fisher keep float64 (integers compute in it): a
    # float64 copy.
    "geometric_product": (
        "np.float64(1.0)",
        (2**28, 8),
        "ctx.geometric_product(huge, np.ones(8))",
        "a",
        2**34,
        "float64",
    ),
    "broadcast rows": (
        "np.float32(1.0)",
        (2**15, 1, 8),
        "ctx.outer_product(huge, np.ones((1, 2**15, 8), np.float32))",
        "a",
        2**35,
        "float32",
    ),
    "reverse": ("np.int64(3)", (2**28, 8), "ctx.reverse(huge)", "x", 2**34, "int64"),
    # float64 stays float64 (a contiguous copy of the broadcast rows).
    "asarray": ("np.float64(1.0)", (2**28, 8), "ctx.asarray(huge)", "x", 2**34, "float64"),
    "tropical_matmul": (
        "np.float64(1.0)",
        (2**16, 2**15),
        "ctx.tropical_matmul(huge, np.ones((2**15, 2), np.float32))",
        "a",
        2**34,
        "float64",
    ),
    "fisher_information": (
        "np.float64(1.0)",
        (2**26, 32),
        "ctx.fisher_information(huge)",
        "scores",
        2**34,
        "float64",
    ),
    "life": ("np.int64(1)", (2**15, 2**15), "ctx.life(huge, 1)", "grid", 2**30, "int64"),
}


@pytest.mark.parametrize("name", sorted(CONVERSIONS))
def test_an_input_conversion_too_large_raises_out_of_memory_naming_it(name: str) -> None:
    value, shape, call, argument, size, dtype = CONVERSIONS[name]
    script = _CONVERSION_SCRIPT.format(value=value, shape=shape, call=call)
    done = python("-c", script, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"OOM: {argument}: cannot allocate {size} bytes of host memory" in done.stdout, (
        done.stdout
    )
    assert f"(from dtype {dtype})" in done.stdout, done.stdout
    assert "still usable" in done.stdout, done.stdout
