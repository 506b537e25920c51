"""Read-only operands (as Ray's object store hands out, or `setflags(write=False)`): every
entry point takes them as they are, without a host copy, and gives the bits of a writeable
operand."""

from __future__ import annotations

import tracemalloc
from typing import Any

import amari_gpu as ag
import numpy as np
import pytest
from _fisher_helpers import random_probs, random_scores
from _tropical_helpers import graph_without_negative_cycles, random_operand
from amari_gpu._validate import as_float32
from cl3 import random_batch

SHIFT = "fn row(a: array<f32, 8>) -> array<f32, 8> { var r = a; r[0] += params.s; return r; }"


def _read_only(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = np.array(array)
    out.setflags(write=False)
    return out


def test_a_read_only_float32_array_is_not_copied() -> None:
    a, _ = random_batch(64, seed=1)
    ro = _read_only(a)
    assert as_float32("a", ro) is ro
    view = ro[8:40]
    assert as_float32("a", view) is view


@pytest.mark.parametrize("backends", [["vulkan"], ["vulkan", "host"]])
def test_every_entry_point_takes_read_only_operands(backends: list[str]) -> None:
    rng = np.random.default_rng(12)
    a, b = random_batch(2000, seed=12)
    ta = random_operand(rng, (300, 20), 0.05)
    tb = random_operand(rng, (20, 10), 0.05)
    x = random_operand(rng, (20,), 0.0)
    w = graph_without_negative_cycles(rng, 40, 0.3, integer=True)
    scores = random_scores(5000, 6, seed=3)
    weights = rng.uniform(0.0, 2.0, 5000).astype(np.float32)
    probs = random_probs(800, 5, seed=4)
    mean = rng.standard_normal((700, 3)).astype(np.float32)
    var = rng.uniform(0.5, 2.0, (700, 3)).astype(np.float32)
    g = rng.standard_normal(6).astype(np.float32)
    heat = rng.standard_normal((64, 48)).astype(np.float32)
    cells = (rng.uniform(size=(64, 48)) < 0.3).astype(np.uint8)
    calls = {
        "geometric_product": lambda c, r: c.geometric_product(r(a), r(b)),
        "sandwich": lambda c, r: c.sandwich(r(a[:1]), r(b)),
        "reverse": lambda c, r: c.reverse(r(a)),
        "tropical_matmul": lambda c, r: c.tropical_matmul(r(ta), r(tb)),
        "tropical_matvec": lambda c, r: c.tropical_matvec(r(ta), r(x)),
        "shortest_paths": lambda c, r: c.shortest_paths(r(w)),
        "fisher_information": lambda c, r: c.fisher_information(r(scores), r(weights)),
        "fisher_categorical": lambda c, r: c.fisher_categorical(r(probs)),
        "fisher_gaussian": lambda c, r: c.fisher_gaussian(r(mean), r(var)),
        "natural_gradient": lambda c, r: c.natural_gradient(r(scores), r(g), 0.1),
        "stencil": lambda c, r: c.stencil(r(heat), 3, 0.2),
        "life": lambda c, r: c.life(r(cells), 3),
        "map_rows": lambda c, r: c.map_rows(SHIFT, r(a), out_cols=8, params={"s": 2.0}),
        "asarray": lambda c, r: c.asarray(r(a)).numpy(),
    }
    with ag.MultiGpuContext(backends=backends) as ctx:
        for name, call in calls.items():
            want = call(ctx, np.asarray)
            got = call(ctx, _read_only)
            assert np.array_equal(got, want), name


def test_a_read_only_operand_costs_no_host_copy() -> None:
    a, b = random_batch(1 << 16, seed=2)
    ra, rb = _read_only(a), _read_only(b)
    with ag.MultiGpuContext(backends=["vulkan"]) as ctx:
        want = ctx.geometric_product(a, b)  # warm: pipelines and pools allocated
        tracemalloc.start()
        try:
            got = ctx.geometric_product(ra, rb)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert np.array_equal(got, want)
    # The result is the only array the call allocates: a copy of either operand (as large
    # as the result) would double it.
    assert peak < got.nbytes + a.nbytes // 2, peak
