"""The cluster's plans, made by the core's partitioner (``_native.plan_models``) with each
node as one device: a node's model is what it measured (its context's calibrated items/s
per family, summed over its devices) and what the driver measured of it (bytes/s each way
through Ray's object store, an actor call's round trip). The chunk grid is the core's
(``_native.chunk_items_for``), a function of the problem only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import _native
from ..planning import Plan, Workload

if TYPE_CHECKING:
    from .._native import DeviceModelDict

UNBOUNDED_BINDING = (1 << 63) - 1
"""A node's binding limit: none (its own context cuts its rows to its devices' limits)."""


@dataclass(frozen=True)
class NodeModel:
    """What the planner knows of a node: items/s of each kernel family (the sum over its
    devices of their calibrated rates), bytes/s driver → node and node → driver, and the
    round trip of an actor call (each message's fixed cost)."""

    index: int
    throughput: dict[str, float]
    upload_bytes_per_s: float = 1.0
    download_bytes_per_s: float = 1.0
    latency_s: float = 0.0

    def device_model(self, family: str) -> DeviceModelDict:
        """The core's ``DeviceModel`` of this node for ``family``. Its rate counts items
        (workloads of the cluster cost one "flop" per item); a family the node has no
        figure for gets the mean of its figures."""
        rates = [r for r in self.throughput.values() if r > 0]
        rate = self.throughput.get(family) or (sum(rates) / len(rates) if rates else 1.0)
        return {
            "device": self.index,
            "group": self.index,
            "launch_latency_s": max(self.latency_s, 0.0),
            "h2d_bytes_per_s": max(self.upload_bytes_per_s, 1.0),
            "d2h_bytes_per_s": max(self.download_bytes_per_s, 1.0),
            "flops_per_s": max(rate, 1e-9),
            "correction": 1.0,
            "uncertainty": 0.0,
            "memory_budget_bytes": None,
            "max_binding_bytes": UNBOUNDED_BINDING,
            "group_speedup": 1.0,
            "group_members": 1,
        }


def workload(family: str, items: int, bytes_in: float, bytes_out: float) -> Workload:
    """A cluster call as the core's partitioner sees it: ``items`` items of ``family``,
    moving ``bytes_in``/``bytes_out`` bytes each through the object store, one "flop"
    each (node rates count items)."""
    return Workload(family, items, float(bytes_in), float(bytes_out), 1.0)


def chunk_rows(items: int, bytes_per_item: float, unit: int = 1) -> int:
    """Rows per chunk of the cluster's grid: the core's grid for the problem, rounded up to
    a multiple of ``unit`` (the node contexts' chunk when partials follow the whole
    problem's grid)."""
    rows = int(_native.chunk_items_for(items, bytes_per_item, bytes_per_item))
    return -(-rows // unit) * unit


def plan(work: Workload, rows: int, models: Sequence[NodeModel], strategy: str) -> Plan:
    """The core's plan of ``work`` in chunks of ``rows`` over ``models`` with ``strategy``
    (``device_id`` of its assignments is the node index)."""
    family = work.kernel
    return _native.plan_models(work, rows, [m.device_model(family) for m in models], strategy)


def placement(weights: Sequence[tuple[int, float]], rows: int) -> Plan:
    """The core's capability plan of ``rows`` rows over the nodes ``(index, weight)``, in
    proportion to their weights (measured rates; ``device_id`` the node index); a weight
    of 0 or less gets none, unless every weight is."""
    models = [NodeModel(i, {"rows": float(w)}) for i, w in weights if w > 0] or [
        NodeModel(i, {"rows": 1.0}) for i, _ in weights
    ]
    return plan(workload("rows", rows, 0.0, 0.0), 1, models, "capability")


def split(weights: Sequence[float], rows: int) -> list[int]:
    """``rows`` rows split over nodes in proportion to ``weights`` (their measured rates),
    by the core's capability partitioner (see :func:`placement`)."""
    out = [0] * len(weights)
    for a in placement(list(enumerate(weights)), rows):
        out[a.device_id] = a.items
    return out
