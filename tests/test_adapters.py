"""Adapter listing, package version, device selection and constructor argument errors.

The machine running the suite has no GPU: Mesa provides lavapipe (Vulkan) and llvmpipe (GL),
two views of the same CPU rasteriser, and the tests below rely on that.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
from pathlib import Path

import amari_gpu
import pytest
from amari_gpu import (
    AdapterInfo,
    AmariGpuError,
    Device,
    InvalidArgumentError,
    MultiGpuContext,
    NoAdapterError,
)
from amari_gpu._adapters import default_selection

BACKENDS = {"vulkan", "metal", "dx12", "gl", "host"}
DEVICE_TYPES = {"discrete_gpu", "integrated_gpu", "virtual_gpu", "cpu", "other"}
REQUIRED_LIMITS = (
    "max_storage_buffer_binding_size",
    "max_buffer_size",
    "max_compute_workgroups_per_dimension",
)
CARGO_TOML = Path(__file__).resolve().parents[1] / "Cargo.toml"


def _only(adapters: list[AdapterInfo], backend: str) -> AdapterInfo:
    found = [a for a in adapters if a.backend == backend]
    assert len(found) == 1, f"expected one {backend} adapter, got {found}"
    return found[0]


# --- the adapter list -------------------------------------------------------------------


def test_adapters_returns_adapter_info_in_index_order(all_adapters):
    assert all(isinstance(a, AdapterInfo) for a in all_adapters)
    assert [a.index for a in all_adapters] == list(range(len(all_adapters)))


def test_both_mesa_software_adapters_are_listed(all_adapters):
    vulkan = _only(all_adapters, "vulkan")
    gl = _only(all_adapters, "gl")
    for info in (vulkan, gl):
        assert info.device_type == "cpu"
        assert info.is_software
        assert info.vendor == "Mesa"
        assert "llvmpipe" in info.name
    # llvmpipe through GL is the same CPU rasteriser as lavapipe through Vulkan.
    assert vulkan.same_device_as is None
    assert gl.same_device_as == vulkan.index


def test_adapter_fields_have_the_documented_types_and_values(all_adapters):
    for info in all_adapters:
        for name in ("name", "vendor", "driver", "driver_info", "pci_bus_id"):
            assert isinstance(getattr(info, name), str), name
        for name in ("index", "vendor_id", "device_id"):
            value = getattr(info, name)
            assert isinstance(value, int) and not isinstance(value, bool), name
            assert value >= 0, name
        assert info.name
        assert info.backend in BACKENDS
        assert info.device_type in DEVICE_TYPES
        assert info.is_software == (info.device_type == "cpu")
        assert isinstance(info.limits, dict) and info.limits
        for key, value in info.limits.items():
            assert isinstance(key, str)
            assert isinstance(value, int) and not isinstance(value, bool), key
        assert isinstance(info.features, list)
        assert all(isinstance(f, str) and f for f in info.features)
        assert len(set(info.features)) == len(info.features)
        assert info.same_device_as is None or isinstance(info.same_device_as, int)


def test_required_limits_are_positive_ints(all_adapters):
    for info in all_adapters:
        # The host device has buffers but no workgroups.
        for key in REQUIRED_LIMITS[:2] if info.is_host else REQUIRED_LIMITS:
            value = info.limits[key]
            assert isinstance(value, int) and not isinstance(value, bool), key
            assert value > 0, key
        assert info.limits["max_storage_buffer_binding_size"] <= info.limits["max_buffer_size"]


def test_same_device_as_points_to_an_earlier_adapter_on_another_backend(all_adapters):
    duplicates = [a for a in all_adapters if a.same_device_as is not None]
    assert duplicates, "Mesa's GL adapter should be marked as the same device as lavapipe"
    for info in duplicates:
        original = all_adapters[info.same_device_as]
        assert 0 <= original.index < info.index
        assert original.backend != info.backend
        assert original.same_device_as is None
        assert (original.vendor_id, original.device_type) == (info.vendor_id, info.device_type)


def test_adapter_info_is_frozen(all_adapters):
    with pytest.raises(dataclasses.FrozenInstanceError):
        all_adapters[0].index = 5  # type: ignore[misc]
    assert all_adapters[0].index == 0


def test_adapters_listing_is_stable(all_adapters):
    assert amari_gpu.adapters() == all_adapters


def test_describe_names_index_backend_kind_and_duplicate(all_adapters):
    for info in all_adapters:
        line = info.describe()
        assert line.startswith(f"[{info.index}] {info.name} ({info.backend}, {info.device_type}")
        assert "\n" not in line
        if info.same_device_as is None:
            assert "same device as" not in line
        else:
            assert line.endswith(f", same device as [{info.same_device_as}])")


# --- version and public names -------------------------------------------------------------


def _cargo_workspace_version() -> str:
    text = CARGO_TOML.read_text(encoding="utf-8")
    section = re.search(r"^\[workspace\.package\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    assert section, f"no [workspace.package] in {CARGO_TOML}"
    version = re.search(r'^version\s*=\s*"([^"]+)"\s*$', section.group(1), re.M)
    assert version, f"no version in [workspace.package] of {CARGO_TOML}"
    return version.group(1)


def test_version_matches_cargo_workspace_version():
    assert isinstance(amari_gpu.__version__, str)
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", amari_gpu.__version__)
    assert amari_gpu.__version__ == _cargo_workspace_version()
    assert importlib.metadata.version("amari-gpu") == amari_gpu.__version__


def test_error_hierarchy():
    from amari_gpu import errors

    for name in (
        "AmariGpuError",
        "NoAdapterError",
        "DeviceLostError",
        "OutOfMemoryError",
        "ShapeError",
        "InvalidArgumentError",
    ):
        cls = getattr(errors, name)
        assert getattr(amari_gpu, name) is cls
        assert name in amari_gpu.__all__
        assert issubclass(cls, AmariGpuError)
    assert issubclass(AmariGpuError, Exception)
    for cls in (errors.ShapeError, errors.InvalidArgumentError):
        assert issubclass(cls, ValueError)
    for cls in (errors.NoAdapterError, errors.DeviceLostError, errors.OutOfMemoryError):
        assert not issubclass(cls, ValueError)


# --- device selection -------------------------------------------------------------------


def test_default_selection_is_every_hardware_gpu_and_the_host(all_adapters):
    # Every distinct hardware GPU adapter plus the host device; with no hardware GPU (this
    # machine: lavapipe and llvmpipe, software adapters on the host's cores), the host alone.
    expected = [
        a for a in all_adapters if a.same_device_as is None and (a.is_host or not a.is_software)
    ]
    ctx = MultiGpuContext()
    assert [d.adapter for d in ctx.devices] == expected
    assert [d.id for d in ctx.devices] == list(range(len(expected)))
    assert all(isinstance(d, Device) for d in ctx.devices)
    if all(a.is_software for a in all_adapters):
        assert [d.adapter.backend for d in ctx.devices] == ["host"]


def test_the_default_selection_says_why_for_every_adapter(all_adapters):
    chosen = {d.adapter.index for d in MultiGpuContext().devices}
    explained = default_selection()
    assert [info for info, _, _ in explained] == all_adapters
    assert {info.index for info, used, _ in explained if used} == chosen
    reasons = {info.index: why for info, _, why in explained}
    for info in all_adapters:
        if info.is_host:
            assert reasons[info.index] == "the host CPU device"
        elif info.same_device_as is not None:
            assert reasons[info.index] == f"same device as adapter {info.same_device_as}"
        elif info.is_software:
            assert reasons[info.index].startswith("software adapter on the host's cores")
        else:
            assert reasons[info.index] == "hardware GPU"


def test_the_vulkan_fixture_is_one_device_on_the_non_duplicate_adapter(default_ctx, all_adapters):
    # What the suite uses to exercise wgpu: lavapipe here, never GL's duplicate view of it.
    assert [d.adapter for d in default_ctx.devices] == [_only(all_adapters, "vulkan")]
    assert default_ctx.devices[0].adapter.same_device_as is None


def test_backends_gl_selects_the_gl_adapter_even_though_it_is_a_duplicate(all_adapters):
    gl = _only(all_adapters, "gl")
    for backends in (["gl"], "gl", ("GL",)):
        ctx = MultiGpuContext(backends=backends)
        assert [(d.id, d.adapter) for d in ctx.devices] == [(0, gl)]


def test_backends_vulkan_selects_the_vulkan_adapter(all_adapters):
    ctx = MultiGpuContext(backends=["vulkan"])
    assert [(d.id, d.adapter) for d in ctx.devices] == [(0, _only(all_adapters, "vulkan"))]


def test_adapters_by_index_gives_one_device_each(all_adapters):
    ctx = MultiGpuContext(adapters=[0, 1])
    assert [d.id for d in ctx.devices] == [0, 1]
    assert sorted(d.adapter.index for d in ctx.devices) == [0, 1]
    for d in ctx.devices:
        assert d.adapter == all_adapters[d.adapter.index]


def test_adapters_accepts_a_single_index(all_adapters):
    ctx = MultiGpuContext(adapters=1)
    assert [(d.id, d.adapter) for d in ctx.devices] == [(0, all_adapters[1])]


def test_device_types_cpu_selects_the_software_adapter(all_adapters):
    ctx = MultiGpuContext(device_types=["cpu"])
    assert ctx.devices
    assert all(d.adapter.device_type == "cpu" for d in ctx.devices)


def test_devices_per_adapter_gives_logical_devices_on_one_adapter(devices3, all_adapters):
    assert [d.id for d in devices3.devices] == [0, 1, 2]
    vulkan = _only(all_adapters, "vulkan")
    assert [d.adapter for d in devices3.devices] == [vulkan, vulkan, vulkan]


def test_devices_per_adapter_multiplies_every_selected_adapter():
    ctx = MultiGpuContext(adapters=[0, 1], devices_per_adapter=2)
    assert [d.id for d in ctx.devices] == [0, 1, 2, 3]
    indices = [d.adapter.index for d in ctx.devices]
    assert sorted(indices) == [0, 0, 1, 1]


def test_max_devices_truncates():
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=3, max_devices=2)
    assert [d.id for d in ctx.devices] == [0, 1]
    assert len({d.adapter.index for d in ctx.devices}) == 1
    ctx = MultiGpuContext(adapters=[0, 1], max_devices=1)
    assert [d.id for d in ctx.devices] == [0]
    ctx = MultiGpuContext(adapters=[0, 1], max_devices=10)
    assert [d.id for d in ctx.devices] == [0, 1]


def test_device_is_frozen_and_repr_names_devices(default_ctx):
    device = default_ctx.devices[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        device.id = 3  # type: ignore[misc]
    text = repr(default_ctx)
    assert text.startswith("MultiGpuContext([")
    assert f"0: {device.adapter.name} ({device.adapter.backend})" in text


# --- constructor errors -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"devices_per_adapter": 0}, r"^devices_per_adapter\b.*\b0\b"),
        ({"devices_per_adapter": -2}, r"^devices_per_adapter\b.*-2"),
        ({"devices_per_adapter": 1.5}, r"^devices_per_adapter\b.*1\.5"),
        ({"devices_per_adapter": True}, r"^devices_per_adapter\b.*True"),
        ({"backends": ["cuda"]}, r"^backends\b.*'cuda'"),
        ({"backends": "opencl"}, r"^backends\b.*'opencl'"),
        ({"backends": []}, r"^backends\b"),
        ({"device_types": ["gpu"]}, r"^device_types\b.*'gpu'"),
        ({"adapters": [99]}, r"^adapters\b.*\b99\b"),
        ({"adapters": [0, 0]}, r"^adapters\b.*\b0\b.*twice"),
        ({"adapters": [-1]}, r"^adapters\b.*-1"),
        ({"adapters": []}, r"^adapters\b"),
        ({"max_devices": 0}, r"^max_devices\b.*\b0\b"),
        ({"chunk_items": 0}, r"^chunk_items\b.*\b0\b"),
        ({"sync_timeout_ms": 0}, r"^sync_timeout_ms\b.*\b0\b"),
    ],
    ids=lambda v: repr(v) if isinstance(v, dict) else "",
)
def test_bad_constructor_argument_raises_invalid_argument_error(kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match) as info:
        MultiGpuContext(**kwargs)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, AmariGpuError)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"device_types": ["discrete_gpu"]},
        {"device_types": "integrated_gpu"},
        {"backends": ["metal"]},
        {"backends": ["dx12"]},
        {"backends": ["gl"], "device_types": ["discrete_gpu"]},
    ],
    ids=repr,
)
def test_selection_matching_nothing_raises_no_adapter_error(kwargs):
    with pytest.raises(NoAdapterError, match="mesa-vulkan-drivers") as info:
        MultiGpuContext(**kwargs)
    assert isinstance(info.value, AmariGpuError)
    # The message lists what is available, so the user can fix the selection.
    assert "llvmpipe" in str(info.value)
