"""The cluster planner: the cluster's chunk grid (a function of the problem only) and which
node takes which chunks, each node being one device to it, with the capabilities it
measured (its context's aggregate items/s per kernel family, and the driver↔node transfer
rate through Ray's object store)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TARGET_CHUNKS = 16
"""Cluster chunks a large problem is cut into: enough to balance a few nodes and to keep
two in flight on each, few enough that Ray's per-call cost (about a millisecond) stays
small beside a chunk's work."""

MIN_CHUNK_ROWS = 256
"""Fewest rows in a cluster chunk (a smaller problem is one chunk, run by one node)."""

MIN_CHUNK_BYTES = 4 << 20
"""Fewest bytes a cluster chunk moves: a Ray actor call costs about a millisecond and
reaching a node through the object store runs at a few hundred MB/s, so a chunk under a
few MiB would be mostly overhead (measured by ``benches/cluster.py``)."""


@dataclass(frozen=True)
class NodeModel:
    """What the planner knows of a node: items/s of each kernel family (the sum over its
    devices of their calibrated rates) and bytes/s between the driver and the node."""

    index: int
    throughput: dict[str, float]
    transfer_bytes_per_s: float

    def seconds(self, family: str, items: int, bytes_per_item: float) -> float:
        """The model's time for ``items`` items of ``family`` on this node."""
        rates = [r for r in self.throughput.values() if r > 0]
        rate = self.throughput.get(family) or (sum(rates) / len(rates) if rates else 1.0)
        transfer = items * bytes_per_item / max(self.transfer_bytes_per_s, 1.0)
        return items / max(rate, 1e-9) + transfer


def chunk_rows(
    items: int, unit: int = 1, min_rows: int = MIN_CHUNK_ROWS, bytes_per_item: float = 0.0
) -> int:
    """Rows per cluster chunk for ``items`` rows moving ``bytes_per_item`` each: a multiple
    of ``unit`` (the node contexts' chunk size when partials must follow the whole
    problem's grid), a power of two times it, about ``TARGET_CHUNKS`` chunks of at least
    ``MIN_CHUNK_BYTES``; it depends on the problem only."""
    by_bytes = int(MIN_CHUNK_BYTES / bytes_per_item) if bytes_per_item > 0 else 0
    per = max(-(-items // TARGET_CHUNKS), min_rows, by_bytes, 1)
    units = -(-per // unit)
    return unit * (1 << (units - 1).bit_length())


def ranges(items: int, rows: int) -> list[tuple[int, int]]:
    """The grid's chunks ``[(start, stop), ...]`` in order."""
    return [(s, min(s + rows, items)) for s in range(0, items, rows)] or [(0, 0)]


def apportion(weights: Sequence[float], chunks: int) -> list[int]:
    """``chunks`` split in proportion to ``weights`` (largest remainders), summing exactly."""
    total = sum(weights)
    if total <= 0:
        weights, total = [1.0] * len(weights), float(len(weights))
    shares = [w / total * chunks for w in weights]
    counts = [int(s) for s in shares]
    order = sorted(range(len(shares)), key=lambda i: counts[i] - shares[i])
    for i in order[: chunks - sum(counts)]:
        counts[i] += 1
    return counts


@dataclass(frozen=True)
class ClusterPlan:
    """Chunks per node, in the grid's order (node ``nodes[i]`` takes ``runs[i]``)."""

    strategy: str
    requested: str
    grid: list[tuple[int, int]]
    nodes: list[int]
    runs: list[list[int]]
    estimates: list[float]

    def as_dict(self, items: int) -> dict[str, Any]:
        """The plan in the keys of ``Plan.from_dict`` (``device_id`` is the node index)."""
        assignments = []
        for node, run, seconds in zip(self.nodes, self.runs, self.estimates):
            if not run:
                continue
            start, stop = self.grid[run[0]][0], self.grid[run[-1]][1]
            assignments.append(
                {
                    "device_id": node,
                    "start": start,
                    "stop": stop,
                    "items": stop - start,
                    "chunks": len(run),
                    "estimated_seconds": seconds,
                    "first_chunk": run[0],
                }
            )
        makespan = max(self.estimates, default=0.0)
        bound = self._bound
        plan: dict[str, Any] = {
            "strategy": self.strategy,
            "requested_strategy": self.requested,
            "items": items,
            "chunk_items": self.grid[0][1] - self.grid[0][0],
            "n_chunks": len(self.grid) if items else 0,
            "assignments": assignments,
            "estimated_makespan_s": makespan,
            "lower_bound_s": bound,
            "efficiency": bound / makespan if makespan > 0 else 1.0,
        }
        return plan

    @property
    def _bound(self) -> float:
        # The work spread perfectly over the nodes the plan uses, by their modelled rates.
        busy = [
            (e, sum(self.grid[c][1] - self.grid[c][0] for c in r))
            for e, r in zip(self.estimates, self.runs)
        ]
        rates = [items / e for e, items in busy if e > 0 and items > 0]
        total = sum(items for _, items in busy)
        return total / sum(rates) if rates else 0.0


def plan(
    family: str,
    items: int,
    rows: int,
    bytes_per_item: float,
    models: Sequence[NodeModel],
    strategy: str,
) -> ClusterPlan:
    """Splits the grid of ``items`` items in chunks of ``rows`` over ``models``:
    "balanced" gives every node the same number of chunks, "adaptive" notes a
    capability split but lets nodes take chunks from one queue as they finish, the others
    split in proportion to each node's modelled rate ("auto" chooses "capability")."""
    grid = ranges(items, rows)
    n = len(grid)
    chosen = "capability" if strategy in ("auto", "memory", "latency") else strategy
    if chosen == "balanced":
        counts = apportion([1.0] * len(models), n)
    else:
        rates = [rows / m.seconds(family, rows, bytes_per_item) for m in models]
        counts = apportion(rates, n)
    runs: list[list[int]] = []
    first = 0
    for c in counts:
        runs.append(list(range(first, first + c)))
        first += c
    estimates = [
        sum(m.seconds(family, grid[c][1] - grid[c][0], bytes_per_item) for c in run)
        for m, run in zip(models, runs)
    ]
    return ClusterPlan(
        strategy=chosen,
        requested=strategy,
        grid=grid,
        nodes=[m.index for m in models],
        runs=runs,
        estimates=estimates,
    )
