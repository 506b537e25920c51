"""Ten million multivectors in one call: the product is chunked under every device's binding
limit and dispatched on a folded grid, so N is bounded by memory, not by the 65,535
workgroups-per-dimension cap. Checked on a random sample of rows and on both ends."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
from cl3 import reference_product


def test_ten_million_multivectors_on_every_device():
    n = 10_000_000
    ctx = ag.MultiGpuContext(adapters=[0], devices_per_adapter=2)
    rng = np.random.default_rng(10)
    a = rng.standard_normal((n, 8), dtype=np.float32)
    b = rng.standard_normal((n, 8), dtype=np.float32)
    out = ctx.geometric_product(a, b)
    assert out.shape == (n, 8) and out.dtype == np.float32
    plan = ctx.last_plan
    assert plan is not None and plan.items == n
    assert sum(w.items for w in plan) == n
    rows = np.concatenate([[0, 1, n // 2, n - 2, n - 1], rng.integers(0, n, 20_000)])
    want = reference_product(a[rows], b[rows])
    scale = np.maximum(np.abs(want).max(axis=1, keepdims=True), 1e-3)
    assert np.max(np.abs(out[rows] - want) / scale) < 1e-5
