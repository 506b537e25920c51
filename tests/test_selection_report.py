"""A context says what it chose and why, once and plainly: ``repr``/``str`` name its devices,
every adapter left out (and every backend named without adapter) with the core's reason, and
the options that could not apply; the same summary is one INFO line at open."""

from __future__ import annotations

import logging
import sys

import amari_gpu as ag
from amari_gpu._adapters import default_selection
from amari_gpu.context import LeftOut

HOST_NOTE = "devices_per_adapter=2 does not apply to the host device"


def test_repr_names_every_adapter_left_out_with_the_selections_reason() -> None:
    # The README's profiler example: on a machine without a hardware GPU it opens the host
    # device alone, and the context must say why.
    with ag.MultiGpuContext(devices_per_adapter=2) as ctx:
        opened = {d.adapter.index for d in ctx.devices}
        why = {info.index: reason for info, used, reason in default_selection() if not used}
        assert {entry.adapter: entry.reason for entry in ctx.left_out} == why
        assert set(why).isdisjoint(opened)
        text = repr(ctx)
        assert text.startswith("MultiGpuContext([")
        for d in ctx.devices:
            assert f"{d.id}: {d.adapter.name} ({d.adapter.backend})" in text
        for entry in ctx.left_out:
            assert f"[{entry.adapter}] {entry.name} ({entry.backend}): {entry.reason}" in text
        # The host device is in every default selection: devices_per_adapter=2 cannot apply
        # to it, and the context says so.
        assert len(ctx.selection_notes) == 1
        assert ctx.selection_notes[0].startswith(HOST_NOTE)
        assert f"note: {ctx.selection_notes[0]}" in text
        if not any(d.adapter.backend != "host" for d in ctx.devices):
            assert ctx.selection_notes[0].endswith("so the context has 1 device")
        # print(ctx): one line per device and per adapter left out.
        lines = str(ctx).splitlines()
        count = len(ctx.devices)
        assert lines[0] == f"MultiGpuContext with {count} device{'' if count == 1 else 's'}:"
        for d in ctx.devices:
            assert f"  device {d.id}: {d.adapter.describe()}" in lines
        if ctx.left_out:
            assert "left out:" in lines
        for entry in ctx.left_out:
            assert f"  {entry.describe()}" in lines
        assert lines[-1] == f"note: {ctx.selection_notes[0]}"


def test_nothing_left_out_and_nothing_to_note_reads_as_before() -> None:
    every = [a.index for a in ag.adapters()]
    with ag.MultiGpuContext(adapters=every) as ctx:
        assert ctx.left_out == [] and ctx.selection_notes == []
        names = ", ".join(f"{d.id}: {d.adapter.name} ({d.adapter.backend})" for d in ctx.devices)
        assert repr(ctx) == f"MultiGpuContext([{names}])"


def test_a_named_backend_without_adapter_is_reported_with_the_reason() -> None:
    with ag.MultiGpuContext(backends=["host", "metal", "dx12"]) as ctx:
        missing = [entry for entry in ctx.left_out if entry.adapter is None]
        present = {a.backend for a in ag.adapters()}
        assert [m.backend for m in missing] == [b for b in ("metal", "dx12") if b not in present]
        for entry in missing:
            assert entry.name == "" and entry.reason.startswith("no adapter")
            assert f"backend {entry.backend}: {entry.reason}" in repr(ctx)
        if sys.platform.startswith("linux"):
            assert missing == [
                LeftOut(None, "", "metal", "no adapter: Metal exists only on macOS and iOS"),
                LeftOut(None, "", "dx12", "no adapter: DX12 exists only on Windows"),
            ]
    if sys.platform.startswith("linux"):
        # Asked for alone, the error says why too.
        try:
            ag.MultiGpuContext(backends=["metal"])
        except ag.NoAdapterError as e:
            assert "Metal exists only on macOS and iOS" in str(e)
        else:
            raise AssertionError("a context on metal opened on Linux")


def test_devices_cut_by_max_devices_are_noted() -> None:
    with ag.MultiGpuContext(backends=["vulkan"], devices_per_adapter=3, max_devices=2) as ctx:
        assert len(ctx.devices) == 2
        assert ctx.selection_notes == ["max_devices=2 opened 2 of the 3 devices the selection has"]


def test_opening_logs_one_info_line_with_the_same_summary(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="amari_gpu"):
        ctx = ag.MultiGpuContext(devices_per_adapter=2)
    try:
        lines = [
            r.getMessage()
            for r in caplog.records
            if r.name == "amari_gpu.selection" and r.levelno == logging.INFO
        ]
        assert len(lines) == 1, lines
        line = lines[0]
        assert line.startswith(f"opening {len(ctx.devices)} device")
        for entry in ctx.left_out:
            assert entry.describe() in line
        assert f"; note: {ctx.selection_notes[0]}" in line
    finally:
        ctx.close()
