"""A calibration cache that holds nonsense heals itself.

Figures no cost model can use (a throughput of 0 or -5, a zero transfer rate, a negative
latency, a group speedup of 0) or outside physical bounds (10^308 items/s or bytes/s, a
latency of 10^300 s, a group speedup of 10^308), and NaN or infinity in the file, are
measured again in the next process, with a WARNING naming the figure (or the file), and the
file is rewritten with sane figures. Each case runs in a fresh interpreter, as a user's next
process would, against its own cache directory.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Callable

import pytest
from _process import python

CACHE_FILE = "calibration-v2.json"

CALL = """
import logging
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
import numpy as np, amari_gpu
# Chunks of 16 rows: the call is split, so its plan measures (and caches).
ctx = amari_gpu.MultiGpuContext(adapters=[0], devices_per_adapter=2, chunk_items=16)
a = np.ones((64, 8), np.float32)
out = ctx.geometric_product(a, a)
assert np.isfinite(out).all()
print("ok")
"""


def _run(cache_dir: Path) -> list[str]:
    """Runs a call in a fresh process on ``cache_dir``; its WARNING lines."""
    env = dict(os.environ, AMARI_GPU_CACHE_DIR=str(cache_dir), RUST_LOG="warn")
    done = python("-c", CALL, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok"), done.stdout
    return [line for line in done.stderr.splitlines() if line.startswith("WARNING ")]


def _warned(warnings: list[str], *parts: str) -> None:
    """Some WARNING of the package's calibration holds every one of ``parts``."""
    ours = [w for w in warnings if w.startswith("WARNING amari_gpu.calibration.")]
    assert any(all(p in w for p in parts) for w in ours), (parts, warnings)


def _entries(cache_dir: Path) -> dict[str, Any]:
    entries = json.loads((cache_dir / CACHE_FILE).read_text())["entries"]
    assert isinstance(entries, dict)
    return entries


def _assert_sane(cache_dir: Path) -> None:
    for key, value in _entries(cache_dir).items():
        if isinstance(value, dict):
            for name in ("h2d_bytes_per_s", "d2h_bytes_per_s", "copy_bytes_per_s"):
                assert math.isfinite(value[name]) and value[name] > 0, (key, name, value[name])
            assert math.isfinite(value["launch_latency_s"]) and value["launch_latency_s"] >= 0
            for family, rate in value["family_items_per_s"].items():
                assert math.isfinite(rate) and rate > 0, (key, family, rate)
        else:
            assert math.isfinite(value) and value > 0, (key, value)


def _throughput(value: float) -> Callable[[dict[str, Any]], None]:
    def spoil(entry: dict[str, Any]) -> None:
        for family in entry["family_items_per_s"]:
            entry["family_items_per_s"][family] = value

    return spoil


def _field(name: str, value: float) -> Callable[[dict[str, Any]], None]:
    def spoil(entry: dict[str, Any]) -> None:
        entry[name] = value

    return spoil


def _spoiled(sane_cache: dict[str, Any], spoil: Callable[[dict[str, Any]], None]) -> Any:
    entries = json.loads(json.dumps(sane_cache))
    for value in entries.values():
        if isinstance(value, dict):
            spoil(value)
    return entries


@pytest.fixture(scope="module")
def sane_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The entries a clean first process writes."""
    directory = tmp_path_factory.mktemp("sane-cache")
    _run(directory)
    _assert_sane(directory)
    return _entries(directory)


@pytest.mark.parametrize(
    "spoil",
    [
        _throughput(0.0),
        _throughput(-5.0),
        _field("h2d_bytes_per_s", 0.0),
        _field("d2h_bytes_per_s", -1.0),
        _field("launch_latency_s", -0.5),
        _field("peak_flops_per_s", 0.0),
    ],
    ids=["throughput-0", "throughput-neg5", "h2d-0", "d2h-neg", "latency-neg", "peak-0"],
)
def test_nonsense_figures_are_measured_again_and_rewritten(
    tmp_path: Path, sane_cache: dict[str, Any], spoil: Callable[[dict[str, Any]], None]
) -> None:
    entries = json.loads(json.dumps(sane_cache))
    for value in entries.values():
        if isinstance(value, dict):
            spoil(value)
    (tmp_path / CACHE_FILE).write_text(json.dumps({"entries": entries}))
    _run(tmp_path)
    _assert_sane(tmp_path)
    # Measured again, not the spoiled figures kept: the rewritten entries differ.
    assert _entries(tmp_path) != entries


@pytest.mark.parametrize(
    ("spoil", "named"),
    [
        (_throughput(1e308), "= 1e308 (outside 0.01 to 1e13 items/s)"),
        (_field("launch_latency_s", 1e300), "launch_latency_s = 1e300 (outside 0 to 60 s)"),
        (
            _field("h2d_bytes_per_s", 1e308),
            "h2d_bytes_per_s = 1e308 (outside 0.01 to 1e14 bytes/s)",
        ),
        (
            _field("peak_flops_per_s", 1e30),
            "peak_flops_per_s = 1e30 (outside 0.01 to 1e17 flops/s)",
        ),
    ],
    ids=["throughput-1e308", "latency-1e300", "h2d-1e308", "peak-1e30"],
)
def test_figures_past_physical_bounds_are_named_and_measured_again(
    tmp_path: Path,
    sane_cache: dict[str, Any],
    spoil: Callable[[dict[str, Any]], None],
    named: str,
) -> None:
    entries = _spoiled(sane_cache, spoil)
    (tmp_path / CACHE_FILE).write_text(json.dumps({"entries": entries}))
    warnings = _run(tmp_path)
    _warned(warnings, "holds an unusable figure", named, "measuring again")
    _assert_sane(tmp_path)
    rewritten = _entries(tmp_path)
    for key, value in rewritten.items():
        if isinstance(value, dict):
            assert value != entries[key], key
            assert value["measured_unix_s"] >= entries[key]["measured_unix_s"]


@pytest.mark.parametrize(
    ("speedup", "shown"), [(1e308, "1e308"), (1e-30, "1e-30")], ids=["1e308", "1e-30"]
)
def test_a_group_speedup_past_its_bounds_is_named_and_measured_again(
    tmp_path: Path, sane_cache: dict[str, Any], speedup: float, shown: str
) -> None:
    entries = json.loads(json.dumps(sane_cache))
    groups = [key for key, value in entries.items() if key.endswith("capability split")]
    assert groups, "two logical devices on one adapter should have cached a group speedup"
    for key in groups:
        entries[key] = speedup
    (tmp_path / CACHE_FILE).write_text(json.dumps({"entries": entries}))
    warnings = _run(tmp_path)
    _warned(warnings, groups[0], f"({shown} outside 0.01 to 4 for this many members)")
    _assert_sane(tmp_path)
    for key in groups:
        assert 0.01 <= _entries(tmp_path)[key] <= 4, key


def test_nonsense_group_speedup_is_measured_again(
    tmp_path: Path, sane_cache: dict[str, Any]
) -> None:
    entries = json.loads(json.dumps(sane_cache))
    groups = [key for key, value in entries.items() if not isinstance(value, dict)]
    assert groups, "two logical devices on one adapter should have cached a group speedup"
    for key in groups:
        entries[key] = 0.0
    (tmp_path / CACHE_FILE).write_text(json.dumps({"entries": entries}))
    _run(tmp_path)
    _assert_sane(tmp_path)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_nan_or_infinity_in_the_file_is_a_warning_and_measured_again(
    tmp_path: Path, sane_cache: dict[str, Any], value: float
) -> None:
    # JSON has no NaN or infinity; Python writes the bare tokens, which the core's parser
    # refuses: the file cannot be used, which the log says.
    entries = _spoiled(sane_cache, _field("copy_bytes_per_s", value))
    (tmp_path / CACHE_FILE).write_text(json.dumps({"entries": entries}))
    warnings = _run(tmp_path)
    _warned(warnings, str(tmp_path / CACHE_FILE), "is not a calibration cache", "measuring again")
    _assert_sane(tmp_path)
