"""A calibration cache that parses but holds nonsense heals itself.

Figures no cost model can use (a throughput of 0 or -5, a zero transfer rate, a negative
latency, a group speedup of 0) are measured again in the next process, with a warning in the
log, and the file is rewritten with sane figures. Each case runs in a fresh interpreter, as
a user's next process would, against its own cache directory.
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
import numpy as np, amari_gpu
ctx = amari_gpu.MultiGpuContext(adapters=[0], devices_per_adapter=2)
a = np.ones((64, 8), np.float32)
out = ctx.geometric_product(a, a)
assert np.isfinite(out).all()
print("ok")
"""


def _run(cache_dir: Path) -> None:
    env = dict(os.environ, AMARI_GPU_CACHE_DIR=str(cache_dir), RUST_LOG="warn")
    done = python("-c", CALL, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok"), done.stdout


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


def test_nan_in_the_file_is_measured_again(tmp_path: Path, sane_cache: dict[str, Any]) -> None:
    # JSON has no NaN; Python writes the bare token, which the core's parser refuses.
    entries = json.loads(json.dumps(sane_cache))
    for value in entries.values():
        if isinstance(value, dict):
            value["copy_bytes_per_s"] = float("nan")
    (tmp_path / CACHE_FILE).write_text(json.dumps({"entries": entries}))
    _run(tmp_path)
    _assert_sane(tmp_path)
