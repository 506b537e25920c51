"""GPUs in Ray's own terms: a node actor created with ``num_gpus`` opens the wgpu adapters of
the GPUs Ray assigned it (``ray.get_gpu_ids()``), matched by PCI bus id.

Ray's GPU ids are the driver's device indices (what ``CUDA_VISIBLE_DEVICES`` holds for the
actor; for ROCm, ``ROCR_VISIBLE_DEVICES``): the driver numbers its GPUs in PCI bus order
(``nvidia-smi``'s order), so id ``k`` is the ``k``-th GPU of the vendor by PCI bus id. wgpu
reports a PCI bus id on Vulkan only (``VkPhysicalDevicePCIBusInfoPropertiesEXT``, in the form
``0000:01:00.0``); where no adapter reports one (GL, Metal, DX12), or the ids are not indices
(GPU UUIDs), the GPUs cannot be matched and the node opens the adapters ``backends`` selects,
saying so in its description (``gpus``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NVIDIA = 0x10DE
"""PCI vendor id of NVIDIA: Ray's ``num_gpus`` are CUDA GPUs by default."""

AMD = 0x1002
"""PCI vendor id of AMD (Ray's ``num_gpus`` on ROCm nodes)."""


@dataclass(frozen=True)
class GpuMatch:
    """The adapters a node opens for the GPUs Ray assigned it: ``adapters`` (indices of
    ``amari_gpu.adapters()``, the host device last when ``backends`` names it), or None when
    they cannot be matched, and ``how``: how they were matched, or why not."""

    adapters: list[int] | None
    how: str


def _bus(adapter: Any) -> str:
    return str(getattr(adapter, "pci_bus_id", "") or "").strip().lower()


def match_gpu_ids(
    gpu_ids: Sequence[Any], adapters: Sequence[Any], backends: Sequence[str] | None
) -> GpuMatch:
    """The adapters of Ray's ``gpu_ids`` among ``adapters`` (objects with the attributes of
    :class:`amari_gpu.AdapterInfo`: ``index``, ``backend``, ``vendor_id``, ``pci_bus_id``),
    on ``backends`` (None: any)."""
    if not gpu_ids:
        return GpuMatch(None, "Ray assigned no GPU to the node's actor")
    wanted = None if backends is None else set(backends)
    physical = [a for a in adapters if a.backend != "host" and _bus(a)]
    vendor = next((v for v in (NVIDIA, AMD) if any(a.vendor_id == v for a in physical)), None)
    if vendor is None:
        return GpuMatch(
            None,
            f"Ray assigned GPUs {list(gpu_ids)}, but no adapter reports a PCI bus id of an "
            "NVIDIA or AMD GPU (wgpu reports one on Vulkan only): the node opens the "
            "adapters backends= selects",
        )
    order = sorted({_bus(a) for a in physical if a.vendor_id == vendor})
    chosen: list[int] = []
    for gpu in gpu_ids:
        try:
            k = int(str(gpu))
        except ValueError:
            return GpuMatch(
                None,
                f"Ray's GPU id {gpu!r} is not a device index (a GPU UUID?): the node opens the "
                "adapters backends= selects",
            )
        if not 0 <= k < len(order):
            return GpuMatch(
                None,
                f"Ray's GPU id {k} has no adapter: {len(order)} GPU(s) of vendor "
                f"{vendor:#06x} report a PCI bus id ({order}); the node opens the adapters "
                "backends= selects",
            )
        chosen.extend(
            a.index
            for a in physical
            if _bus(a) == order[k] and (wanted is None or a.backend in wanted)
        )
    if wanted is not None and "host" in wanted:
        chosen.extend(a.index for a in adapters if a.backend == "host")
    if not chosen:
        return GpuMatch(
            None,
            f"Ray's GPUs {list(gpu_ids)} have no adapter on backends {sorted(wanted or [])}: "
            "the node opens the adapters backends= selects",
        )
    buses = ", ".join(order[int(str(g))] for g in gpu_ids)
    return GpuMatch(chosen, f"Ray GPUs {list(gpu_ids)} matched by PCI bus id ({buses})")
