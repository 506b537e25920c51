"""Calibration per dtype: each device's float64 rate relative to float32 is measured when a
plan first splits float64 work (never for float32 work, whose first calls stay as cheap as
before), kept in the calibration cache with the device's other figures, read back by later
contexts, and shown by ``capabilities`` and ``amari-gpu calibrate``. (How the plan uses it is
the core's unit test ``calibration::dtypes::tests``.) Every check is on behaviour (the log,
the cache file), none on time."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu.tools.cli import main

CACHE_FILE = "calibration-v2.json"


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty calibration cache directory for this test only."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("AMARI_GPU_CACHE_DIR", str(directory))
    return directory


def _rates(directory: Path) -> dict[str, dict[str, float]]:
    """The dtype rates each device entry of the cache holds, by key."""
    entries = json.loads((directory / CACHE_FILE).read_text())["entries"]
    return {
        key: dict(value.get("dtype_rates", {}))
        for key, value in entries.items()
        if isinstance(value, dict) and "family_items_per_s" in value
    }


def _messages(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(
        r.getMessage() for r in caplog.records if r.name.startswith("amari_gpu.calibration")
    )


def test_float64_rates_are_measured_when_a_float64_split_first_needs_them(
    cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="amari_gpu")
    p = np.random.default_rng(1).dirichlet(np.ones(6), size=3000)
    ctx = ag.MultiGpuContext(backends=["vulkan", "gl", "host"], chunk_items=256)
    try:
        # float32 work: the figures it needs, no float64 rate.
        ctx.fisher_categorical(p.astype(np.float32), strategy="balanced")
        assert "float64 at" not in _messages(caplog)
        assert all(rates == {} for rates in _rates(cache).values()), _rates(cache)

        caplog.clear()
        ctx.fisher_categorical(p, strategy="balanced")
        message = _messages(caplog)
        float64 = [d for d in ctx.devices if d.adapter.backend in ("vulkan", "host")]
        for device in float64:
            assert f"device {device.id} (" in message
        assert message.count("float64 at") == len(float64), message
        # Kept in the cache for the Vulkan adapter and the host; GL runs no float64.
        rates = _rates(cache)
        measured = {key: r["float64"] for key, r in rates.items() if "float64" in r}
        assert len(measured) == 2, rates
        assert all(0 < r <= 4 for r in measured.values())
        assert not any("gl" in key.split("|")[0].lower() for key in measured), measured

        # Measured once: the next float64 split measures nothing.
        caplog.clear()
        ctx.fisher_gaussian(np.zeros((3000, 2)), np.ones((3000, 2)), strategy="balanced")
        assert "float64 at" not in _messages(caplog)
        shown = {d.id: d.capabilities.dtype_rates for d in ctx.devices}
    finally:
        ctx.close()
    for device in float64:
        assert set(shown[device.id]) == {"float64"}
    assert all(shown[d.id] == {} for d in ctx.devices if d not in float64)

    # A later context reads them back from the cache, and the CLI shows them.
    again = ag.MultiGpuContext(backends=["vulkan", "gl", "host"])
    try:
        for device in again.devices:
            capabilities = device.capabilities
            assert capabilities.from_cache
            assert capabilities.dtype_rates == shown[device.id]
    finally:
        again.close()


def test_the_cli_shows_each_devices_rate_per_dtype(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", "--backends", "vulkan,host"]) == 0
    text = capsys.readouterr().out
    lines = [line for line in text.splitlines() if "rate per dtype" in line]
    assert len(lines) == 2, text
    for line in lines:
        assert line.strip().startswith("rate per dtype: float32 1x, float64 "), line
