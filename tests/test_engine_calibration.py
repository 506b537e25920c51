"""``MultiGpuContext.calibrate`` and ``Device.capabilities``: measured device figures.

Checks that every measured figure is a positive finite number, that the figures are cached on
disk per adapter (``AMARI_GPU_CACHE_DIR``) so a second context on the same adapter does not
measure again, that ``force=True`` measures again, that logical devices of one adapter share one
measurement, and that a fresh measurement on lavapipe is quick. Tests that need an empty cache
point ``AMARI_GPU_CACHE_DIR`` at their own temporary directory (the native code reads it each
time it calibrates); the others use the private directory the conftest sets for the session.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

import amari_gpu
import pytest
from amari_gpu import Capabilities, MultiGpuContext
from amari_gpu._native import family_of

CACHE_FILE = "calibration-v2.json"
MEASURED = ("memory_bandwidth_gb_s", "transfer_gb_s", "h2d_gb_s", "d2h_gb_s", "launch_latency_s")
DEVICE_SET = ("shares_hardware_with", "group_speedup")
"""Fields that depend on which devices share the hardware in the context, not on the adapter."""
"""Upper bound for measuring one adapter on lavapipe (it takes a few tenths of a second)."""


def _figures(caps: Capabilities) -> dict[str, object]:
    """What the measurement of an adapter determines: every field but the device id, the
    fields about the context's devices sharing its hardware, whether it came from the cache,
    and the memory budget (half of the host's *currently* available memory for CPU adapters,
    read from /proc/meminfo each time, so it moves between two reads)."""
    fields = dataclasses.asdict(caps)
    for name in ("device_id", "from_cache", "memory_budget_bytes", *DEVICE_SET):
        fields.pop(name, None)
    return fields


def _assert_close_figures(got: Capabilities, want: Capabilities) -> None:
    """Same figures up to a couple of float64 ulps: what a trip through the on-disk cache is
    allowed to change (see ``test_cached_figures_are_exactly_the_measured_ones``)."""
    got_fields, want_fields = _figures(got), _figures(want)
    assert got_fields.keys() == want_fields.keys()
    for name, value in want_fields.items():
        if name in MEASURED:
            assert math.isclose(got_fields[name], value, rel_tol=1e-15), name
        elif name == "throughput":
            assert got.throughput.keys() == want.throughput.keys()
            for family, rate in want.throughput.items():
                assert math.isclose(got.throughput[family], rate, rel_tol=1e-15), family
        else:
            assert got_fields[name] == value, name


def _cache_entries(directory: Path) -> dict[str, dict[str, object]]:
    """The per-adapter measurements in the cache file, by key. (The file also holds the
    measured speedups of groups of devices sharing hardware, as plain numbers; those are left
    out here.)"""
    path = directory / CACHE_FILE
    assert path.is_file(), f"no {CACHE_FILE} in {directory}: {sorted(os.listdir(directory))}"
    data = json.loads(path.read_text())
    entries = data["entries"]
    assert isinstance(entries, dict)
    return {key: value for key, value in entries.items() if isinstance(value, dict)}


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty calibration cache directory for this test only."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("AMARI_GPU_CACHE_DIR", str(directory))
    return directory


def _check_capabilities(caps: Capabilities, ctx: MultiGpuContext, device_id: int) -> None:
    assert isinstance(caps, Capabilities)
    assert caps.device_id == device_id
    for name in MEASURED:
        value = getattr(caps, name)
        assert isinstance(value, float), (name, value)
        assert math.isfinite(value) and value > 0, (name, value)
    assert set(caps.throughput) >= {"geometric_algebra"}
    for family, rate in caps.throughput.items():
        assert isinstance(rate, float) and math.isfinite(rate) and rate > 0, (family, rate)
    # transfer_gb_s is documented as the harmonic mean of both directions.
    harmonic = 2.0 / (1.0 / caps.h2d_gb_s + 1.0 / caps.d2h_gb_s)
    assert math.isclose(caps.transfer_gb_s, harmonic, rel_tol=1e-12)
    for name in ("max_buffer_bytes", "max_storage_binding_bytes"):
        value = getattr(caps, name)
        assert isinstance(value, int) and value > 0, (name, value)
    assert caps.max_storage_binding_bytes <= caps.max_buffer_bytes
    # The CPU adapters run on host memory, which the OS reports.
    adapter = ctx.devices[device_id].adapter
    assert adapter.device_type == "cpu"
    assert isinstance(caps.memory_budget_bytes, int) and caps.memory_budget_bytes > 0
    assert caps.device_type == adapter.device_type
    assert caps.backend == adapter.backend
    assert isinstance(caps.from_cache, bool)


def test_calibrate_reports_positive_finite_figures_for_every_device(engine_ctx):
    caps = engine_ctx.calibrate()
    assert isinstance(caps, list)
    assert len(caps) == len(engine_ctx.devices) == 4
    for device_id, c in enumerate(caps):
        _check_capabilities(c, engine_ctx, device_id)
    assert {c.backend for c in caps} == {"vulkan", "gl"}


def test_device_capabilities_agree_with_calibrate(engine_ctx):
    caps = engine_ctx.calibrate()
    for device, c in zip(engine_ctx.devices, caps):
        own = device.capabilities
        assert own.device_id == device.id == c.device_id
        assert own.from_cache == c.from_cache
        assert _figures(own) == _figures(c)


def test_calibrating_again_without_force_keeps_the_figures(engine_ctx):
    first = engine_ctx.calibrate()
    second = engine_ctx.calibrate()
    assert [_figures(c) for c in second] == [_figures(c) for c in first]
    assert [c.from_cache for c in second] == [c.from_cache for c in first]


def test_session_cache_lives_in_the_private_directory(default_ctx, session_cache_dir):
    assert os.environ["AMARI_GPU_CACHE_DIR"] == str(session_cache_dir)
    default_ctx.calibrate()
    entries = _cache_entries(session_cache_dir)
    names = {d.adapter.name for d in default_ctx.devices}
    assert all(any(name in key for key in entries) for name in names), sorted(entries)


def test_fresh_measurement_is_quick_then_cached_then_forced(fresh_cache):
    ctx = MultiGpuContext(adapters=[0])
    first = ctx.calibrate()
    assert len(first) == 1
    _check_capabilities(first[0], ctx, 0)
    assert first[0].from_cache is False

    # One entry, keyed by the adapter's identity, its driver and the package version.
    entries = _cache_entries(fresh_cache)
    assert len(entries) == 1
    (key,) = entries
    adapter = ctx.devices[0].adapter
    assert adapter.name in key and adapter.driver_info in key, key
    assert amari_gpu.__version__ in key, key
    cache = fresh_cache / CACHE_FILE
    written = cache.stat()

    # A second context on the same adapter loads the figures instead of measuring: the
    # figures are exactly the stored ones and the cache file is not written again.
    other = MultiGpuContext(adapters=[0])
    cached = other.calibrate()
    assert cached[0].from_cache is True
    assert other.devices[0].capabilities.from_cache is True
    _assert_close_figures(cached[0], first[0])
    unchanged = cache.stat()
    assert (unchanged.st_ino, unchanged.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)

    # force=True measures again and rewrites the cache (atomically: a new file is renamed
    # over the old one). How long calibration takes is measured by benches/model.py, not
    # asserted here: a test that fails on a busy machine is a broken test.
    forced = other.calibrate(force=True)
    assert forced[0].from_cache is False
    _check_capabilities(forced[0], other, 0)
    assert other.devices[0].capabilities.from_cache is False
    assert cache.stat().st_ino != written.st_ino
    assert len(_cache_entries(fresh_cache)) == 1


def test_logical_devices_of_one_adapter_share_one_measurement(fresh_cache):
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=3)
    assert len(ctx.devices) == 3
    ctx.calibrate()
    caps = ctx.calibrate(force=True)  # one measurement for the three devices, cached now
    assert [c.device_id for c in caps] == [0, 1, 2]
    assert [c.from_cache for c in caps] == [False, False, False]
    assert _figures(caps[1]) == _figures(caps[0])
    assert _figures(caps[2]) == _figures(caps[0])
    assert len(_cache_entries(fresh_cache)) == 1


def test_each_adapter_is_measured_and_cached_separately(fresh_cache):
    ctx = MultiGpuContext(adapters=[0, 1], devices_per_adapter=2)
    ctx.calibrate()
    caps = ctx.calibrate(force=True)  # these figures are the cached ones now
    assert [c.backend for c in caps] == ["vulkan", "vulkan", "gl", "gl"]
    assert _figures(caps[0]) == _figures(caps[1])
    assert _figures(caps[2]) == _figures(caps[3])
    entries = _cache_entries(fresh_cache)
    assert len(entries) == 2
    for device in (ctx.devices[0], ctx.devices[2]):
        driver = device.adapter.driver_info
        assert sum(driver in key for key in entries) == 1, (driver, sorted(entries))

    # A new context over both adapters finds both in the cache.
    again = MultiGpuContext(adapters=[1, 0])
    cached = again.calibrate()
    assert [c.from_cache for c in cached] == [True, True]
    measured = {"vulkan": caps[0], "gl": caps[2]}
    assert sorted(c.backend for c in cached) == ["gl", "vulkan"]
    for c in cached:
        _assert_close_figures(c, measured[c.backend])


def test_device_capabilities_calibrate_on_first_need(fresh_cache):
    ctx = MultiGpuContext(adapters=[0])
    assert not (fresh_cache / CACHE_FILE).exists()
    caps = ctx.devices[0].capabilities
    _check_capabilities(caps, ctx, 0)
    assert caps.from_cache is False
    assert len(_cache_entries(fresh_cache)) == 1
    assert _figures(ctx.calibrate()[0]) == _figures(caps)


def test_cached_figures_are_exactly_the_measured_ones(fresh_cache):
    MultiGpuContext(adapters=[0]).calibrate()
    path = fresh_cache / CACHE_FILE
    data = json.loads(path.read_text())
    (entry,) = (value for value in data["entries"].values() if isinstance(value, dict))
    # Figures as a measurement could produce them, written the way the cache writes every
    # float: the shortest decimal that reads back as exactly that float. These two are among
    # those the native loader reads back one ulp off.
    latency = 0.0009106487934085577
    items_per_s = 51616197.415492244
    entry["launch_latency_s"] = latency
    entry["family_items_per_s"]["geometric_algebra"] = items_per_s
    path.write_text(json.dumps(data))
    assert json.loads(path.read_text())["entries"] == data["entries"]  # Python reads it back

    cached = MultiGpuContext(adapters=[0]).calibrate()[0]
    if not cached.from_cache:
        pytest.fail("the edited cache entry was not used")
    assert (cached.launch_latency_s, cached.throughput["geometric_algebra"]) == (
        latency,
        items_per_s,
    )


def test_devices_sharing_hardware_know_each_other(engine_ctx, default_ctx):
    caps = engine_ctx.calibrate()
    # Two logical devices on each backend of one llvmpipe: one piece of hardware.
    assert [c.shares_hardware_with for c in caps] == [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]
    speedups = {c.group_speedup for c in caps}
    assert len(speedups) == 1
    (speedup,) = speedups
    assert isinstance(speedup, float) and math.isfinite(speedup) and speedup > 0
    alone = default_ctx.calibrate()
    assert len(alone) == 1
    assert (alone[0].shares_hardware_with, alone[0].group_speedup) == ([], None)


def test_families_keep_the_names_caches_and_histories_are_keyed_by(engine_ctx):
    # Calibration caches and cost-model histories written by earlier builds key their
    # figures by these names, and a cluster plans by them (``family_of``).
    measured = {"geometric_algebra", "information_geometry", "tropical", "elementwise"}
    for c in engine_ctx.calibrate():
        assert set(c.throughput) == measured, c.throughput
    names = {
        "geometric_product": "geometric_algebra",
        "sandwich": "geometric_algebra",
        "tropical_matmul": "tropical",
        "shortest_paths": "tropical",
        "fisher_information": "information_geometry",
        "fisher_gaussian": "information_geometry",
        "information_geometry": "information_geometry",
        "add": "elementwise",
        "sqrt": "elementwise",
        "stencil/heat": "stencil",
        "calibration/peak": "calibration",
        "map_rows/user": "map_rows",
        "map_rows": "map_rows",
        "not_a_kernel": None,
    }
    assert {name: family_of(name) for name in names} == names
