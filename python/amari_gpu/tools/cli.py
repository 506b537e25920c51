"""Command line ``amari-gpu`` (also ``python -m amari_gpu``):

info       every adapter wgpu reports, then the host CPU device: backend, type, driver,
           limits, features (the host: threads, SIMD level); which ones the default
           selection uses and why
doctor     is anything usable; smoke-test each adapter and the host device alone; what to
           install
calibrate  measure (or show cached) capabilities of every selected device (default: the
           default selection, the host device included)
bench      the scaling study: device sets x strategies x kernel families vs numpy;
           --family host: the host device alone against kingdon, numba, scipy, numpy
demo       list the adapters, run and check every kernel family on each device
cluster-info  the nodes of a Ray cluster with the amari_gpu resource, their adapters and
           calibrated figures (needs amari-gpu[ray])
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from .. import __version__
from .._adapters import BACKENDS, AdapterInfo, adapters, default_selection
from ..errors import AmariGpuError

_LIMITS = (
    "max_buffer_size",
    "max_storage_buffer_binding_size",
    "max_compute_workgroups_per_dimension",
    "max_compute_invocations_per_workgroup",
    "max_compute_workgroup_storage_size",
)
_NO_ADAPTER = "No adapter found: run `amari-gpu doctor` for what to install."


def _backends(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"expected a comma list of {', '.join(BACKENDS)}")
    return names


def _counts(text: str) -> list[int]:
    try:
        counts = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("expected positive integers, e.g. 1,2,4")
    return counts


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _selected(backends: list[str] | None) -> list[AdapterInfo]:
    return [a for a in adapters() if backends is None or a.backend in backends]


def _info(args: argparse.Namespace) -> int:
    wanted = {a.index for a in _selected(args.backends)}
    explained = [row for row in default_selection() if row[0].index in wanted]
    if args.json:
        listed = [
            {**dataclasses.asdict(a), "default_selection": {"used": used, "reason": why}}
            for a, used, why in explained
        ]
        print(json.dumps({"amari_gpu_version": __version__, "adapters": listed}, indent=2))
        return 0 if listed else 1
    if not explained:
        print(_NO_ADAPTER)
        return 1
    for info, used, why in explained:
        print(info.describe())
        if info.is_host:
            simd = info.features[0] if info.features else "none"
            print(
                f"    {info.limits.get('threads', 0)} hardware threads; SIMD {simd} "
                f"(features: {', '.join(info.features) or 'none'})"
            )
        else:
            limits = (f"{k}={info.limits[k]}" for k in _LIMITS if k in info.limits)
            print("    " + ", ".join(limits))
            used_features = [
                f for f in ("timestamp_query", "shader_f16", "subgroup") if f in info.features
            ]
            print(
                f"    {len(info.features)} features; optional ones used: "
                f"{', '.join(used_features) or 'none'}"
            )
        print(f"    default selection: {'used' if used else 'left out'} ({why})")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import diagnose, render

    report = diagnose(args.backends, show_progress=not args.json)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        render(report)
    return 0 if report["ok"] else 1


def _gb(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


HOST_NA = "n/a (host device)"
"""What ``calibrate`` prints for a GPU-only figure of the host device (it has no GPU
timestamps and no buffer size limit: its buffers are the process's memory)."""


def _capability_lines(cap: dict[str, Any], host: bool = False) -> list[str]:
    latency = cap["launch_latency_s"]
    stamp = cap["timestamp_cost_s"]
    budget = cap["memory_budget_bytes"]
    if host:
        stamp_text = HOST_NA
        max_buffer = HOST_NA
    else:
        stamp_text = "none" if stamp is None else f"{stamp * 1e6:.0f} us"
        max_buffer = f"{cap['max_buffer_bytes'] / 1e9:.2f} GB"
    lines = [
        f"device {cap['device_id']}: {cap['adapter']}",
        f"    {'from the cache' if cap['from_cache'] else 'measured now'}; launch latency "
        f"{'?' if latency is None else f'{latency * 1e3:.3f} ms'}; GPU timestamp cost "
        f"{stamp_text}",
        f"    transfer {_gb(cap['transfer_gb_s'])} GB/s (host->device {_gb(cap['h2d_gb_s'])}, "
        f"device->host {_gb(cap['d2h_gb_s'])}); on-device copy {_gb(cap['memory_bandwidth_gb_s'])} "
        f"GB/s, streaming kernel {_gb(cap['kernel_bandwidth_gb_s'])} GB/s; peak "
        f"{_gb(cap['peak_gflops'])} GFLOP/s",
        "    items/s: " + ", ".join(f"{k} {v:.3g}" for k, v in sorted(cap["throughput"].items())),
        f"    memory budget {'?' if budget is None else f'{budget / 1e9:.2f} GB'}; max buffer "
        f"{max_buffer}; max storage binding "
        f"{cap['max_storage_binding_bytes'] / 2**20:.0f} MiB",
    ]
    if cap["shares_hardware_with"]:
        lines.append(
            f"    shares hardware with devices {cap['shares_hardware_with']}; measured group "
            f"speedup {_gb(cap['group_speedup'])}x"
        )
    return lines


def _calibrate(args: argparse.Namespace) -> int:
    from ..context import MultiGpuContext

    ctx = MultiGpuContext(backends=args.backends, devices_per_adapter=args.devices_per_adapter)
    from .progress import Progress

    start = time.perf_counter()
    label = f"calibrating {len(ctx.devices)} device{'' if len(ctx.devices) == 1 else 's'}"
    with Progress(None, label, enabled=not args.json):
        caps = ctx.calibrate(force=args.force)
    seconds = time.perf_counter() - start
    rows = []
    for cap, device in zip(caps, ctx.devices):
        row = dataclasses.asdict(cap)
        row.update(
            adapter=device.adapter.describe(),
            adapter_name=device.adapter.name,
            driver=" ".join(s for s in (device.adapter.driver, device.adapter.driver_info) if s),
        )
        rows.append(row)
    if args.json:
        print(json.dumps({"seconds": seconds, "devices": rows}, indent=2))
        return 0
    print(f"{len(rows)} device(s) calibrated in {seconds:.2f} s")
    for row, device in zip(rows, ctx.devices):
        print("\n".join(_capability_lines(row, host=device.adapter.is_host)))
    return 0


def _bench(args: argparse.Namespace) -> int:
    if args.family == "host":
        from . import bench_host

        sizes = bench_host.QUICK if args.quick else bench_host.FULL
        result = bench_host.run(sizes, args.rounds or (3 if args.quick else 7))
        print(json.dumps(result, indent=1) if args.json else "\n".join(bench_host.lines(result)))
        return 0
    from . import scaling

    base = scaling.QUICK if args.quick else scaling.FULL
    settings = dataclasses.replace(
        base,
        backends=args.backends,
        devices_per_adapter=args.devices_per_adapter or base.devices_per_adapter,
        rounds=args.rounds or base.rounds,
    )
    start = time.perf_counter()
    study = scaling.run_study(settings, show_progress=not args.json)
    study["seconds"] = time.perf_counter() - start
    written = scaling.write_report(study, args.out)
    if args.json:
        print(json.dumps(study, indent=1))
        return 0
    from .scaling_report import summary

    print("\n".join(summary(study)))
    print(f"\nMeasured in {study['seconds']:.1f} s. Wrote {', '.join(written['written'])}")
    if written["plots_skipped"]:
        print(f"Plots skipped: {written['plots_skipped']}")
    return 0 if all(r["correct"] for r in study["rows"]) else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amari-gpu", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"amari-gpu {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    backends = argparse.ArgumentParser(add_help=False)
    backends.add_argument(
        "--backends", type=_backends, help=f"comma list of {', '.join(BACKENDS)} (default: all)"
    )
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="machine-readable output")

    commands.add_parser("info", parents=[backends, as_json], help="list every adapter")
    commands.add_parser(
        "doctor", parents=[backends, as_json], help="check every adapter; say what to install"
    )
    cal = commands.add_parser(
        "calibrate", parents=[backends, as_json], help="measure every selected device"
    )
    cal.add_argument("--force", action="store_true", help="measure again, ignoring the cache")
    cal.add_argument("--devices-per-adapter", type=_positive, default=1, metavar="N")
    bench = commands.add_parser(
        "bench", parents=[backends, as_json], help="scaling study (results.json, report.md, PNGs)"
    )
    bench.add_argument("--quick", action="store_true", help="small sizes, 3 rounds")
    bench.add_argument(
        "--family",
        choices=("scaling", "host"),
        default="scaling",
        help="scaling: the study; host: the host device alone against CPU libraries",
    )
    bench.add_argument("--out", default="amari-gpu-bench", help="output directory")
    bench.add_argument("--rounds", type=_positive, help="timed rounds per configuration")
    bench.add_argument(
        "--devices-per-adapter",
        type=_counts,
        metavar="N,N,...",
        help="logical devices per distinct wgpu adapter (default 1,2,4)",
    )
    demo = commands.add_parser("demo", help="run and check every kernel family on every adapter")
    demo.add_argument("--items", type=_positive, default=1_000_000, help="multivectors per call")
    cluster = commands.add_parser(
        "cluster-info",
        parents=[backends, as_json],
        help="nodes of a Ray cluster, their adapters and calibrated figures",
    )
    cluster.add_argument("--address", help="Ray cluster address (default: as ray.init finds)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "info":
            return _info(args)
        if args.command == "doctor":
            return _doctor(args)
        if args.command == "calibrate":
            return _calibrate(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "cluster-info":
            from ..cluster.info import report

            return report(args.address, args.backends, args.json)
        from .demo import run

        return run(args.items)
    except AmariGpuError as e:
        print(f"amari-gpu: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
