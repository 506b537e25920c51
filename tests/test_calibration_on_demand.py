"""Calibration on demand: a call measures only what its plan needs, when it first needs it.

A call with nothing to split (one device, or one chunk) measures nothing; a call split across
devices measures the device figures and its own family's rate on each of them (and, for
devices sharing hardware, the group's speedup, timed with the first family's reference
kernel); what is measured is cached and reused by later contexts; ``capabilities`` measures
the rest when asked. Each context says what its first call's calibration did in one INFO
line. Every check is on behaviour (the log, the cache file), none on time.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import amari_gpu as ag
import amari_gpu.reference
import numpy as np
import pytest

CACHE_FILE = "calibration-v2.json"
GA, FISHER = "geometric_algebra", "information_geometry"
ALL_FAMILIES = {GA, "tropical", FISHER, "elementwise"}


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty calibration cache directory for this test only (the core reads
    ``AMARI_GPU_CACHE_DIR`` each time it loads or stores figures)."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("AMARI_GPU_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def info(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="amari_gpu")
    return caplog


def _calibration_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The package's INFO records about calibration."""
    return [
        r
        for r in caplog.records
        if r.name.startswith("amari_gpu.calibration") and r.levelno == logging.INFO
    ]


def _families(directory: Path) -> dict[str, set[str]]:
    """The families whose rates each adapter entry of the cache holds, by key."""
    entries = json.loads((directory / CACHE_FILE).read_text())["entries"]
    return {
        key: set(value["family_items_per_s"])
        for key, value in entries.items()
        if isinstance(value, dict)
    }


def _groups(directory: Path) -> list[str]:
    entries = json.loads((directory / CACHE_FILE).read_text())["entries"]
    return [key for key in entries if key.endswith("capability split")]


def _ga(rows: int) -> np.ndarray:
    return np.random.default_rng(rows).standard_normal((rows, 8), dtype=np.float32)


def test_a_lone_host_device_measures_nothing_on_its_first_call(cache, info):
    ctx = ag.MultiGpuContext(backends=["host"])
    a = _ga(1)
    out = ctx.geometric_product(a, a)
    np.testing.assert_allclose(out, ag.reference.geometric_product(a, a), rtol=1e-5, atol=1e-5)
    # Nothing was measured, so nothing was cached.
    assert not (cache / CACHE_FILE).exists()
    lines = _calibration_lines(info)
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].name == "amari_gpu.calibration.demand"
    assert "nothing measured" in lines[0].getMessage()
    assert "nothing to split" in lines[0].getMessage()
    # The next calls say nothing more.
    info.clear()
    ctx.geometric_product(_ga(1000), _ga(1000))
    assert _calibration_lines(info) == []
    assert not (cache / CACHE_FILE).exists()


def test_one_chunk_on_several_devices_measures_nothing(cache, info):
    ctx = ag.MultiGpuContext(backends=["vulkan", "host"])
    a = _ga(64)
    out = ctx.geometric_product(a, a)
    np.testing.assert_allclose(out, ag.reference.geometric_product(a, a), rtol=1e-5, atol=1e-5)
    assert not (cache / CACHE_FILE).exists()
    (line,) = _calibration_lines(info)
    assert "nothing measured" in line.getMessage()


def test_a_split_measures_its_own_family_and_the_group_once(cache, info):
    ctx = ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2, chunk_items=64)
    a = _ga(1000)
    ctx.geometric_product(a, a, strategy="balanced")
    # One adapter entry holding the GA rate only, and the two devices' group speedup.
    assert list(_families(cache).values()) == [{GA}]
    assert len(_groups(cache)) == 1
    (line,) = _calibration_lines(info)
    message = line.getMessage()
    assert line.name == "amari_gpu.calibration.demand"
    assert message.startswith(f"calibration for a call of {GA} split across devices [0, 1]")
    assert "device figures" in message and f"{GA} rate" in message and "speedup" in message
    assert message.endswith(" s)")

    # A split of another family measures that family's rate, nothing else.
    info.clear()
    p = np.random.default_rng(1).dirichlet(np.ones(8), size=1000).astype(np.float32)
    ctx.fisher_categorical(p, strategy="balanced")
    assert list(_families(cache).values()) == [{GA, FISHER}]
    (line,) = _calibration_lines(info)
    message = line.getMessage()
    assert message.startswith(f"calibration for a call of {FISHER} split across devices [0, 1]")
    assert "measured device 0 (" in message and f"{FISHER} rate" in message
    assert "device figures" not in message and "speedup" not in message

    # Known figures are not measured again.
    info.clear()
    written = (cache / CACHE_FILE).stat()
    ctx.geometric_product(a, a, strategy="balanced")
    ctx.fisher_categorical(p, strategy="balanced")
    assert _calibration_lines(info) == []
    assert (cache / CACHE_FILE).stat().st_mtime_ns == written.st_mtime_ns


def test_cached_figures_are_reused_by_a_later_context(cache, info):
    a = _ga(1000)
    first = ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2, chunk_items=64)
    want = first.geometric_product(a, a, strategy="balanced")
    first.close()
    written = (cache / CACHE_FILE).stat()
    info.clear()

    later = ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2, chunk_items=64)
    got = later.geometric_product(a, a, strategy="balanced")
    assert np.array_equal(got, want)
    (line,) = _calibration_lines(info)
    assert "nothing measured: the figures were in the cache" in line.getMessage()
    unchanged = (cache / CACHE_FILE).stat()
    assert (unchanged.st_ino, unchanged.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    # Figures from the cache, as capabilities say, once they hold every family.
    assert list(_families(cache).values()) == [{GA}]


def test_capabilities_measure_what_the_calls_did_not(cache):
    ctx = ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2, chunk_items=64)
    a = _ga(1000)
    ctx.geometric_product(a, a, strategy="balanced")
    assert list(_families(cache).values()) == [{GA}]
    caps = ctx.devices[1].capabilities
    assert set(caps.throughput) == ALL_FAMILIES
    assert caps.group_speedup is not None and caps.group_speedup > 0
    assert list(_families(cache).values()) == [ALL_FAMILIES]
    # The GA figure measured for the split is the one capabilities show.
    entry = next(
        v
        for v in json.loads((cache / CACHE_FILE).read_text())["entries"].values()
        if isinstance(v, dict)
    )
    assert caps.throughput[GA] == entry["family_items_per_s"][GA]


def test_a_host_context_capabilities_are_measured_when_asked(cache):
    ctx = ag.MultiGpuContext(backends=["host"])
    a = _ga(1)
    ctx.geometric_product(a, a)
    assert not (cache / CACHE_FILE).exists()
    caps = ctx.devices[0].capabilities
    assert set(caps.throughput) == ALL_FAMILIES
    assert caps.from_cache is False
    assert list(_families(cache).values()) == [ALL_FAMILIES]
    assert os.environ["AMARI_GPU_CACHE_DIR"] == str(cache)
