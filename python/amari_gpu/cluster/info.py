"""``amari-gpu cluster-info``: the nodes of a Ray cluster that take part, their adapters and
the figures measured when the context opened."""

from __future__ import annotations

import json
from typing import Any

from .context import RayContext
from .nodes import DEFAULT_RESOURCE


def describe(address: str | None, backends: list[str] | None) -> list[dict[str, Any]]:
    """Opens a RayContext on the cluster at ``address`` and returns its nodes as dicts."""
    with RayContext(address, backends=backends) as rc:
        health = rc.health()
        return [
            {
                "index": n.index,
                "node_id": n.node_id,
                "address": n.address,
                "hostname": n.hostname,
                "healthy": health[n.index]["healthy"],
                "reason": health[n.index]["reason"],
                "devices": n.devices,
                "throughput_items_per_s": n.throughput,
                "upload_bytes_per_s": n.upload_bytes_per_s,
                "download_bytes_per_s": n.download_bytes_per_s,
                "latency_s": n.latency_s,
                "clock_offset_s": n.clock_offset_s,
            }
            for n in rc.nodes
        ]


def report(address: str | None, backends: list[str] | None, as_json: bool) -> int:
    """Prints the nodes (a table, or JSON); 0 when at least one node is healthy."""
    nodes = describe(address, backends)
    if as_json:
        print(json.dumps(nodes, indent=1))
    else:
        print(f"{len(nodes)} node(s) offering the resource {DEFAULT_RESOURCE!r}:")
        for n in nodes:
            state = "healthy" if n["healthy"] else f"FAILED ({n['reason']})"
            print(
                f"node {n['index']}: {n['address']} ({n['hostname']}), {state}; "
                f"object store {n['upload_bytes_per_s'] / 1e6:.0f} MB/s up, "
                f"{n['download_bytes_per_s'] / 1e6:.0f} MB/s down, "
                f"round trip {n['latency_s'] * 1e3:.2f} ms"
            )
            for d in n["devices"]:
                print(f"    device {d['id']}: {d['name']} ({d['backend']}, {d['device_type']})")
            for family, rate in sorted(n["throughput_items_per_s"].items()):
                print(f"    {family}: {rate:.4g} items/s (calibrated, all devices)")
    return 0 if any(n["healthy"] for n in nodes) else 1
