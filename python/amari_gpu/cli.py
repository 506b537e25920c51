"""Command line: ``amari-gpu info`` and ``amari-gpu demo`` (also ``python -m amari_gpu``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence

from ._adapters import adapters
from .errors import AmariGpuError


def _info(as_json: bool) -> int:
    found = adapters()
    if as_json:
        print(json.dumps([dataclasses.asdict(a) for a in found], indent=2))
        return 0 if found else 1
    if not found:
        print("No adapter found. Install a GPU driver, or: apt-get install mesa-vulkan-drivers")
        return 1
    for info in found:
        print(info.describe())
        keys = (
            "max_buffer_size",
            "max_storage_buffer_binding_size",
            "max_compute_workgroups_per_dimension",
        )
        print("    " + ", ".join(f"{k}={info.limits[k]}" for k in keys if k in info.limits))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amari-gpu", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="list every adapter wgpu reports")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    demo = commands.add_parser("demo", help="run and check a kernel on every adapter")
    demo.add_argument("--items", type=int, default=1_000_000, help="multivectors per call")
    args = parser.parse_args(argv)
    try:
        if args.command == "info":
            return _info(args.json)
        from .demo import run

        return run(args.items)
    except AmariGpuError as e:
        print(f"amari-gpu: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
