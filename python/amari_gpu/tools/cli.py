"""Command line ``amari-gpu`` (also ``python -m amari_gpu``).

What ``--help`` prints is plain text, kept in ``_DESCRIPTION`` and ``_COMMANDS`` (the one
line the command list shows, and the paragraph atop the command's own ``--help``); this
docstring is for readers of the code, so its markup never reaches a terminal.
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
_DESCRIPTION = (
    "Use every GPU in the machine, of any vendor, and the host CPU for geometric-algebra, "
    "tropical and information-geometry batch work. These commands show what is there, "
    "check it, measure it and run it."
)
_EPILOG = "Run 'amari-gpu COMMAND --help' for what a command does and its options."
_COMMANDS: dict[str, tuple[str, str]] = {
    "info": (
        "list every adapter and the host CPU device",
        "Every adapter wgpu reports, then the host CPU device: backend, type, driver, limits "
        "and features (for the host: threads and SIMD level), and which of them the default "
        "selection uses and why.",
    ),
    "doctor": (
        "check every adapter; say what to install",
        "Is anything usable? Smoke-tests each adapter and the host device alone, and for what "
        "is missing or broken prints the exact command that installs or fixes it. Exit status "
        "0 when at least one device works.",
    ),
    "calibrate": (
        "measure every selected device",
        "Measures (or, without --force, shows the cached) capabilities of every selected "
        "device: launch latency, transfer and memory bandwidth, throughput per kernel "
        "family, memory budget. Without --backends: the default selection, the host device "
        "included.",
    ),
    "bench": (
        "scaling study, the host device against CPU libraries, or small-call latency",
        "--family scaling (the default): device sets x strategies x kernel families against "
        "numpy, written to --out as results.json, report.md and PNGs. --family host: the "
        "host device alone against kingdon, numba, scipy and numpy, printed (the same rows as "
        "benches/host.py). --family latency: a tiny call of every family per device kind, "
        "where its time goes, beside kingdon and numpy (the same rows as benches/latency.py). "
        "--roofline: every kernel on every device beside that device's measured limits "
        "(stream bandwidth, FMA, add and max-plus issue rates) and the fraction reached (the "
        "same rows as benches/roofline.py).",
    ),
    "demo": (
        "run and check every kernel family on every device",
        "Lists every adapter and the host CPU device, runs every kernel family (geometric "
        "product, tropical product, Fisher matrix, heat and Life grids) on each device, checks "
        "each result, then does the same on the default selection.",
    ),
    "cluster-info": (
        "nodes of a Ray cluster, their adapters and calibrated figures",
        "The nodes of a Ray cluster that offer the amari_gpu resource, their adapters and "
        "calibrated figures. Needs Ray: pip install '.[ray]' in a clone.",
    ),
}
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
        "    rate per dtype: "
        + ", ".join(
            ["float32 1x"] + [f"{k} {v:.3g}x" for k, v in sorted(cap["dtype_rates"].items())]
        ),
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
    if args.roofline:
        from . import bench_roofline

        rounds = args.rounds or (3 if args.quick else 5)
        result = bench_roofline.run(rounds, args.quick, args.backends)
        lines = bench_roofline.lines(result)
        print(json.dumps(result, indent=1) if args.json else "\n".join(lines))
        return 0
    if args.family == "latency":
        from . import bench_latency

        result = bench_latency.run(args.rounds or (100 if args.quick else 300), args.backends)
        print(json.dumps(result, indent=1) if args.json else "\n".join(bench_latency.lines(result)))
        return 0
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


def _command(
    commands: Any, name: str, parents: Sequence[argparse.ArgumentParser] = ()
) -> argparse.ArgumentParser:
    """The subparser ``name``, with its line in the command list and its own description."""
    summary, description = _COMMANDS[name]
    return commands.add_parser(  # type: ignore[no-any-return]
        name, parents=list(parents), help=summary, description=description
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="amari-gpu", description=_DESCRIPTION, epilog=_EPILOG)
    parser.add_argument("--version", action="version", version=f"amari-gpu {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    backends = argparse.ArgumentParser(add_help=False)
    backends.add_argument(
        "--backends", type=_backends, help=f"comma list of {', '.join(BACKENDS)} (default: all)"
    )
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="machine-readable output")

    _command(commands, "info", [backends, as_json])
    _command(commands, "doctor", [backends, as_json])
    cal = _command(commands, "calibrate", [backends, as_json])
    cal.add_argument("--force", action="store_true", help="measure again, ignoring the cache")
    cal.add_argument(
        "--devices-per-adapter",
        type=_positive,
        default=1,
        metavar="N",
        help="logical devices per adapter (default 1)",
    )
    bench = _command(commands, "bench", [backends, as_json])
    bench.add_argument("--quick", action="store_true", help="small sizes, 3 rounds")
    bench.add_argument(
        "--family",
        choices=("scaling", "host", "latency"),
        default="scaling",
        help="scaling: the study; host: the host device alone against CPU libraries; "
        "latency: a tiny call of every family per device kind, its breakdown, kingdon/numpy",
    )
    bench.add_argument(
        "--roofline",
        action="store_true",
        help="every kernel on every device (one per adapter) against that device's measured "
        "bandwidth and FMA/add/max-plus limits (--family is then ignored)",
    )
    bench.add_argument("--out", default="amari-gpu-bench", help="output directory")
    bench.add_argument("--rounds", type=_positive, help="timed rounds per configuration")
    bench.add_argument(
        "--devices-per-adapter",
        type=_counts,
        metavar="N,N,...",
        help="logical devices per distinct wgpu adapter (default 1,2,4)",
    )
    demo = _command(commands, "demo")
    demo.add_argument("--items", type=_positive, default=1_000_000, help="multivectors per call")
    cluster = _command(commands, "cluster-info", [backends, as_json])
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
