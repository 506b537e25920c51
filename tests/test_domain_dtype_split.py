"""A grid's first split follows each device's rate in the grid's dtype: the streaming
bandwidth calibration measured, scaled by the device's measured rate in that dtype relative
to float32 as every plan's cost model scales it (a float64 grid splits by the float64
rates, a float32 one as before). The rates are pinned through the calibration cache, the
seam every later context reads its figures from, on real devices (lavapipe and the host)."""

from __future__ import annotations

import json
from pathlib import Path

import amari_gpu as ag
import numpy as np
import pytest

CACHE_FILE = "calibration-v2.json"
HEIGHT = 400


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A calibration cache of lavapipe and the host measured here, then given one streaming
    bandwidth for both and float64 rates of 1/2 (lavapipe) and 1/8 (host) of float32."""
    monkeypatch.setenv("AMARI_GPU_CACHE_DIR", str(tmp_path))
    with ag.MultiGpuContext(backends=["vulkan", "host"]) as ctx:
        ctx.calibrate()
    path = tmp_path / CACHE_FILE
    data = json.loads(path.read_text())
    devices = {k: v for k, v in data["entries"].items() if isinstance(v, dict)}
    assert len(devices) == 2, list(devices)
    for key, figures in devices.items():
        figures["kernel_copy_bytes_per_s"] = 4e9
        figures["dtype_rates"] = {"float64": 0.125 if key.split("|")[1] == "host" else 0.5}
    path.write_text(json.dumps(data))
    return path


def _first_split(ctx: ag.MultiGpuContext, dtype: type) -> list[tuple[int, int]]:
    grid = np.random.default_rng(3).random((HEIGHT, 64)).astype(dtype)
    out = ctx.stencil(grid, 2, rebalance=False)
    assert out.dtype == dtype
    report = ctx.last_run
    assert report is not None
    return [tuple(part) for part in report.layouts[0]["split"]]


def test_a_float64_grid_splits_by_the_float64_rates(pinned: Path) -> None:
    with ag.MultiGpuContext(backends=["vulkan", "host"]) as ctx:
        kinds = {d.id: d.adapter.backend for d in ctx.devices}
        assert sorted(kinds.values()) == ["host", "vulkan"], kinds
        rates = {d.id: d.capabilities.dtype_rates["float64"] for d in ctx.devices}
        assert all(d.capabilities.from_cache for d in ctx.devices)
        # float32: one bandwidth, so halves, as before per-dtype rates.
        assert _first_split(ctx, np.float32) == [(0, HEIGHT // 2), (1, HEIGHT // 2)]
        # float64: in proportion to the float64 rates, 1/2 : 1/8 = 4 : 1.
        got = dict(_first_split(ctx, np.float64))
    vulkan = next(i for i, kind in kinds.items() if kind == "vulkan")
    host = next(i for i, kind in kinds.items() if kind == "host")
    assert (rates[vulkan], rates[host]) == (0.5, 0.125)
    assert (got[vulkan], got[host]) == (HEIGHT * 4 // 5, HEIGHT // 5), got
