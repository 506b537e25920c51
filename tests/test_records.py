"""Records cross the native boundary once, as the package's dataclasses: the bindings build
``Device`` (``_native.Context.devices``) and ``DomainReport`` (``_native.stencil`` and
``_native.life``) themselves, with no dict beside them for the package to convert; a report
pickles, as a RayContext's node sends it to the driver."""

from __future__ import annotations

import dataclasses
import pickle

import amari_gpu as ag
import numpy as np
from amari_gpu import _native

OPTIONS: _native.RunOptions = {"steps": 3, "halo": 1, "rebalance": False, "split": None}


def test_devices_are_built_by_the_bindings(ctx2: ag.MultiGpuContext) -> None:
    devices = ctx2._native.devices()
    assert [type(d) for d in devices] == [ag.Device, ag.Device]
    assert devices == ctx2.devices
    assert [d.id for d in devices] == [0, 1]
    for device in devices:
        assert isinstance(device.adapter, ag.AdapterInfo)
        assert device.adapter.backend == "vulkan"
        assert isinstance(device.gpu_timestamps, bool)
        # The context the bindings put in it answers the device's capabilities.
        assert device._native is ctx2._native
        assert device.capabilities.device_id == device.id


def test_grid_reports_are_built_by_the_bindings(ctx2: ag.MultiGpuContext) -> None:
    grid = np.random.default_rng(1).random((40, 9), dtype=np.float32)
    cells, report = _native.stencil(ctx2._native, grid, 0.2, "periodic", OPTIONS)
    assert type(report) is ag.DomainReport
    assert (report.steps, report.halo, report.failures) == (3, 1, [])
    assert [r["steps"] for r in report.rounds] == [1, 1, 1]
    assert sum(rows for _, rows in report.final_split) == 40
    assert cells.tobytes() == ctx2.stencil(grid, 3, 0.2, "periodic", rebalance=False).tobytes()
    assert type(ctx2.last_run) is ag.DomainReport
    life = (np.arange(40 * 9).reshape(40, 9) % 3 == 0).astype(np.uint8)
    _, report = _native.life(ctx2._native, life, OPTIONS)
    assert type(report) is ag.DomainReport
    assert report.steps == 3


def test_a_report_pickles_whole(ctx2: ag.MultiGpuContext) -> None:
    # A RayContext's node returns the report its bindings built through the object store.
    grid = np.ones((16, 4), np.float32)
    _, report = _native.stencil(ctx2._native, grid, 0.1, "dirichlet", OPTIONS)
    copy = pickle.loads(pickle.dumps(report))
    assert copy == report
    assert dataclasses.asdict(copy) == dataclasses.asdict(report)
    assert copy.step_s == report.step_s
