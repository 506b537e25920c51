"""The roofline (``amari-gpu bench --roofline``, ``benches/roofline.py``): the limit kernels
run on the host device and on lavapipe and give positive finite rates; the report holds
every kernel entry point of the registry on every device of a context; the call records
carry the cost model the report reads. Behaviour only: no figure is compared with a time."""

from __future__ import annotations

import contextlib
import io
import json
import math
from typing import Any

import amari_gpu
import numpy as np
import pytest
from amari_gpu import _native, _surface
from amari_gpu.tools import bench_roofline, cli

_RATES = ("stream_bytes_per_s", "fma_flops_per_s", "add_ops_per_s", "max_ops_per_s")


@pytest.mark.parametrize("backend", ["host", "vulkan"])
def test_limit_kernels_give_positive_finite_rates(backend: str) -> None:
    with amari_gpu.MultiGpuContext(backends=[backend]) as ctx:
        limits = _native.device_limits(ctx._native)
        assert [lim["device"] for lim in limits] == [d.id for d in ctx.devices]
    for lim in limits:
        for rate in _RATES:
            assert math.isfinite(lim[rate]) and lim[rate] > 0, (backend, rate, lim)
        if backend == "host":
            # The SIMD level the host kernels dispatch to, and every thread of its pool.
            assert lim["measured_with"].split(" x ")[0] in ("avx512f", "avx2", "neon", "portable")
        else:
            assert lim["measured_with"] == "wgsl"


@pytest.mark.parametrize(
    ("backend", "timestamps", "clock"),
    [("host", None, "host"), ("vulkan", True, "gpu"), ("vulkan", False, "host+wait")],
)
def test_limits_are_timed_on_the_clock_that_times_the_kernels(
    backend: str, timestamps: bool | None, clock: str
) -> None:
    # lavapipe records GPU timestamps: its limits are timed by them when the context asks for
    # them, by the host clock with the wait when it does not, as its profiled kernels are.
    options: dict[str, Any] = {} if timestamps is None else {"gpu_timestamps": timestamps}
    a = np.ones((4096, 8), dtype=np.float32)
    with amari_gpu.MultiGpuContext(backends=[backend], **options) as ctx:
        (limits,) = _native.device_limits(ctx._native)
        with ctx.profile() as prof:
            ctx.geometric_product(a, a)
    assert limits["clock"] == clock, limits
    kernel_clocks = {e["clock"] for e in prof.events if e["kind"] == "kernel"}
    # The profile names the host clock "host" on every device; the limits say "host+wait"
    # for a wgpu device, whose host-timed kernels the report counts with their waits.
    assert kernel_clocks == {"gpu" if clock == "gpu" else "host"}, prof.events


def test_call_records_carry_the_kernels_cost_model(host: amari_gpu.MultiGpuContext) -> None:
    a = np.ones((64, 8), dtype=np.float32)
    with host.profile() as prof:
        host.geometric_product(a, a)
    (call,) = prof.kernel_calls
    # Two 8-word rows in, one out: 96 bytes an item; the product's operations are positive.
    assert call["bytes_per_item"] == 96.0
    assert call["flops_per_item"] > 0


def test_sandwich_cases_count_the_map_entries_the_kernel_loads(
    host: amari_gpu.MultiGpuContext,
) -> None:
    # The as-written bytes of a one-rotor sandwich count the entries of its map each item
    # loads; the kernel's cost model counts an FMA (2 flops) per entry: the two must agree.
    from amari_gpu.tools.roofline_cases import PGA_POINTS, map_entries

    pga = amari_gpu.Algebra(3, 0, 1)
    r = np.zeros(16, dtype=np.float32)
    r[[0, 3, 5, 6, 9, 10, 12, 15]] = [1.0, 0.5, -0.25, 0.75, 0.5, -1.0, 0.25, 2.0]
    for algebra, blades in ((amari_gpu.Algebra(3), None), (pga, None), (pga, PGA_POINTS)):
        width = algebra.n_blades if blades is None else len(blades)
        x = np.ones((16, width), dtype=np.float32)
        rotor = r if algebra == pga else r[:8]
        with host.profile() as prof:
            if blades is None:
                host.sandwich(rotor, x, algebra)
            else:
                host.sandwich(rotor, x, algebra, blades=blades)
        (call,) = prof.kernel_calls
        assert call["flops_per_item"] == 2 * map_entries(algebra, blades), (algebra, blades)
    assert [map_entries(amari_gpu.Algebra(3)), map_entries(pga, PGA_POINTS)] == [32, 13]


def _registered_entries() -> set[str]:
    """Every kernel entry point of the registry, and the users' row kernels."""
    return {n.name for n in _surface.NATIVE if n.kernel} | {"map_rows"}


def test_cases_cover_every_registered_kernel_entry() -> None:
    missing = _registered_entries() - {c.entry for c in bench_roofline.CASES}
    assert not missing, f"no roofline case runs {sorted(missing)}"


def test_quick_report_has_every_kernel_on_every_device() -> None:
    out = io.StringIO()
    argv = ["bench", "--roofline", "--quick", "--rounds", "1", "--json"]
    with contextlib.redirect_stdout(out):
        assert cli.main([*argv, "--backends", "vulkan,host"]) == 0
    result: dict[str, Any] = json.loads(out.getvalue())
    with amari_gpu.MultiGpuContext(backends=["vulkan", "host"], devices_per_adapter=1) as ctx:
        names = sorted(d.adapter.name for d in ctx.devices)
    assert sorted(d["name"] for d in result["devices"]) == names
    for i, device in enumerate(result["devices"]):
        assert all(v > 0 for v in device["limits"].values()), device
        # lavapipe has timestamps (the report asks for them), the host device its own clock.
        assert device["limits_clock"] == ("host" if device["backend"] == "host" else "gpu")
        stream = device["limits"]["stream_gb_s"]
        rows = [r for r in result["rows"] if r["device"] == i]
        assert {r["entry"] for r in rows} == _registered_entries()
        assert [r["case"] for r in rows] == [c.name for c in bench_roofline.CASES]
        for r in rows:
            if "not_run" in r:
                # Only a user's WGSL kernel is left out, and only on the host device.
                assert device["backend"] == "host" and r["entry"] == "map_rows", r
                continue
            assert r["kernels"], r
            assert r["ops"] > 0 and r["bytes_written"] >= r["bytes_least"] > 0, r
            assert r["kernel_s"] > 0 and 0 < r["op_fraction"] and 0 < r["bw_fraction"], r
            # The bandwidth fraction is the compulsory bytes'; the as-written one beside it.
            assert r["bw_fraction"] == pytest.approx(r["least_gb_s"] / stream), r
            assert r["written_fraction"] == pytest.approx(r["gb_s"] / stream), r
    text = "\n".join(bench_roofline.lines(result))
    for device in result["devices"]:
        assert device["name"] in text and device["backend"] in text
    assert text.count("  timing: ") == len(result["devices"])


def _report(op_fraction: float, bw_fraction: float, written_fraction: float, clock: str) -> str:
    """The printed report of one device ("gpu"-timed limits) with one kernel row."""
    limits = {"stream_gb_s": 1.0, "fma_gflop_s": 1.0, "add_gop_s": 1.0, "max_gop_s": 1.0}
    device = {
        "name": "dev",
        "backend": "vulkan",
        "driver": "",
        "threads": None,
        "simd": None,
        "measured_with": "wgsl",
        "limits_clock": "gpu",
        "limits": limits,
    }
    row = {
        "device": 0,
        "entry": "geometric_product",
        "case": "case",
        "kernels": ["k"],
        "kernel_s": 1e-3,
        "clock": clock,
        "intensity_ops_per_byte": 1.0,
        "gop_s": op_fraction,
        "op_limit": "fma",
        "op_fraction": op_fraction,
        "least_gb_s": bw_fraction,
        "bw_fraction": bw_fraction,
        "gb_s": written_fraction,
        "written_fraction": written_fraction,
    }
    result = {"cpu": "cpu", "python": "3", "rounds": 1, "devices": [device], "rows": [row]}
    return "\n".join(bench_roofline.lines(result))


def test_report_marks_fractions_above_one_and_explains_them() -> None:
    plain = _report(0.5, 0.5, 0.9, "gpu")
    assert "limits and kernels on the same clock (gpu)" in plain
    assert "\n* " not in plain and "\n! " not in plain
    # As-written bytes past the stream figure (cache re-reads on a CPU): marked, explained.
    cached = _report(0.5, 0.5, 2.0, "gpu")
    assert "200.0%*" in cached and "\n* bytes as written above the stream figure" in cached
    # Any fraction of a limit above 1 is marked and the footnote says what it means.
    over = _report(1.2, 0.5, 0.5, "gpu")
    assert "120.0%!" in over and "\n! above the measured limit" in over
    # A kernel the engine timed on another clock than the limits is said to be.
    mixed = _report(0.5, 0.5, 0.5, "host+wait")
    assert "limits on the gpu clock, as 0 of 1 kernels; the others on host+wait" in mixed
