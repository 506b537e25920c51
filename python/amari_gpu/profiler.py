"""The profiler timeline as Python sees it: the user's calls and the kernel calls they
made, events, a summary with the likely bottleneck, Chrome-trace export (Perfetto,
chrome://tracing) and a Gantt chart per device with the calls labelled."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from . import _native

if TYPE_CHECKING:
    from ._mixin import KernelHost, Kernels

TIMES = "\N{MULTIPLICATION SIGN}"
"""What joins the sizes of a shape in a call's name: ``shortest_paths(1000×1000)``."""  # noqa: RUF001
KINDS = ("plan", "upload", "kernel", "readback", "wait", "retry", "exchange")
_COLORS = {
    "plan": "#7f7f7f",
    "upload": "#1f77b4",
    "kernel": "#2ca02c",
    "readback": "#ff7f0e",
    "wait": "#d3d3d3",
    "retry": "#d62728",
    "exchange": "#9467bd",
}


class Profile:
    """What a context's calls did while ``with ctx.profile() as prof:`` was active.

    ``prof.calls`` lists the user's calls (one per method called: one ``shortest_paths``
    call is one entry, whatever number of kernel calls it made), ``prof.kernel_calls``
    the kernel calls the engine made for them. ``prof.events`` lists every step as a dict
    with ``device`` (None for planning), ``kind`` (one of "plan", "upload", "kernel",
    "readback", "wait", "retry", and "exchange" for the halo rows domain decomposition
    passes through the host), ``chunk``, ``call`` (the kernel call's index), ``start_s``
    and ``duration_s`` (seconds since the profile started), ``bytes``, ``items`` and
    ``clock`` ("gpu" when a kernel was timed with GPU timestamp queries, aligned to the
    host clock; "host" otherwise).
    """

    def __init__(self, native: _native.Profile) -> None:
        # The records are the native layer's dicts, as its stub describes them (one
        # TypedDict each); each call builds new ones, so they are the caller's to keep.
        self._native = native

    @property
    def events(self) -> list[_native.EventDict]:
        """Every recorded step, ordered by start time."""
        return self._native.events()

    @property
    def calls(self) -> list[_native.CallDict]:
        """Every user call, in the order they began: ``name`` (the method and its
        arguments' shapes, as the trace and the plot name the call), ``method``, ``args``
        (the arguments' shapes; "DeviceArray" before a resident operand's), ``start_s``
        and ``end_s`` (spanning every step of its kernel calls), ``device_s`` (kernel
        seconds on the devices, summed over them), ``kernel_calls`` (the kernel calls it
        made, as in :attr:`kernel_calls`) and ``plan`` (its kernel calls' strategies,
        summed lower bound and estimate)."""
        return self._native.calls()

    @property
    def kernel_calls(self) -> list[_native.KernelCallDict]:
        """Every kernel call the engine made (``call`` is its index, as in events):
        kernel, items, the cost model's ``flops_per_item`` and ``bytes_per_item`` (per-item
        inputs and outputs), strategy, the plan's bound and estimate. A call the engine makes
        outside a user call (a DeviceArray's upload or gather, a check that reads rows on
        the devices) is listed here and belongs to no user call."""
        return self._native.kernel_calls()

    def summary(self) -> _native.SummaryDict:
        """``calls`` (user calls), ``kernel_calls`` (the kernel calls made), ``makespan_s``,
        ``predicted_lower_bound_s`` (the lower bound the calibrated model predicted for
        the plans: a prediction, which a run can beat), ``efficiency``
        (predicted bound / makespan: above 1 when the run beat the model),
        ``imbalance`` (max busy / mean busy - 1), ``overhead_fraction`` (busy time outside
        kernels: transfers and synchronisation), ``bottleneck`` ("transfer-bound",
        "compute-bound", "imbalance" or "launch-overhead") with the ``figures`` behind it,
        and ``devices``: per device busy_s, utilization, items_per_s, bytes_per_s."""
        return self._native.summary()

    def save_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Writes the Trace Event Format JSON (built by the Rust core): first a "calls"
        track with one slice per user call, named as called (the method and its arguments'
        shapes), and nested under it a slice per kernel call it made; then a host track (planning,
        exchange) and per device a track for its queue (kernels), one for its worker
        (uploads, waits, readbacks) and one for re-runs of a failed device's chunks.
        Slices on every track nest or are disjoint, as Perfetto requires; steps are named
        by kind, with chunk, call, bytes, items and clock under ``args``."""
        text = self._native.chrome_trace()
        json.loads(text)  # refuse to write anything but valid JSON
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def plot(self, path: str | os.PathLike[str] | None = None) -> Any:
        """A Gantt chart per device (needs matplotlib: ``pip install '.[plot]'``), under a
        "calls" row with a bar per user call labelled with its name. Returns the figure;
        saves a PNG when given a path."""
        try:
            import matplotlib

            if path is not None:
                matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(
                "Profile.plot needs matplotlib: pip install '.[plot]' (in a clone)"
            ) from e
        events = self.events
        calls = self.calls
        names = self._native.device_names()
        devices = sorted({e["device"] for e in events if e["device"] is not None})
        # Host-wide steps (planning, halo exchange) get a row of their own, at the top.
        rows: list[int | None] = (
            [*devices, None]
            if any(e["device"] is None and e["duration_s"] > 0 for e in events)
            else list(devices)
        )
        # The user calls, labelled, in a row above everything else.
        calls_row = len(rows)
        fig, ax = plt.subplots(figsize=(10, 1.0 + 0.8 * (len(rows) + bool(calls))))
        _plot_calls(ax, calls, calls_row)
        for row, device in enumerate(rows):
            for kind in ("wait", "upload", "kernel", "readback", "retry", "plan", "exchange"):
                bars = [
                    (e["start_s"] * 1e3, max(e["duration_s"] * 1e3, 1e-6))
                    for e in events
                    if e["device"] == device and e["kind"] == kind
                ]
                if not bars:
                    continue
                # Kernels on the upper half of the row (device queue), host steps below.
                y = row + (0.05 if kind == "kernel" else -0.45)
                ax.broken_barh(bars, (y, 0.4), color=_COLORS[kind], label=kind)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0))
        labels = [_row_label(d, names) for d in rows] + (["calls"] if calls else [])
        ax.set_yticks(range(len(labels)), labels)
        ax.set_xlabel("ms since the profile started")
        ax.set_title("amari_gpu timeline (kernels above, host steps below each device)")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig

    def __str__(self) -> str:
        s = self.summary()
        lines = [
            f"calls {s['calls']} (kernel calls {s['kernel_calls']})  "
            f"makespan {s['makespan_s'] * 1e3:.2f} ms  "
            f"model's lower bound {s['predicted_lower_bound_s'] * 1e3:.2f} ms  "
            f"efficiency {s['efficiency']:.2f}",
            f"imbalance {s['imbalance']:.2f}  overhead {s['overhead_fraction']:.0%}  "
            f"bottleneck: {s['bottleneck']}",
            f"{'device':>6} {'busy ms':>9} {'util':>6} {'items/s':>12} {'MB/s':>9} {'chunks':>7}",
        ]
        for device, d in sorted(s["devices"].items()):
            lines.append(
                f"{device:>6} {d['busy_s'] * 1e3:>9.2f} {d['utilization']:>6.0%} "
                f"{d['items_per_s']:>12.4g} {d['bytes_per_s'] / 1e6:>9.1f} {d['chunks']:>7}"
            )
        return "\n".join(lines)


def _plot_calls(ax: Any, calls: list[_native.CallDict], row: int) -> None:
    """A bar per user call on ``row``, its name written on it (alternately above and below
    the middle, so neighbours' names overlap less)."""
    for i, call in enumerate(calls):
        start = call["start_s"] * 1e3
        width = max((call["end_s"] - call["start_s"]) * 1e3, 1e-6)
        # Outlined, so calls that follow one another without a gap stay apart.
        ax.broken_barh(
            [(start, width)],
            (row - 0.4, 0.8),
            facecolor="#c6dbef",
            edgecolor="#4a6fa5",
            linewidth=0.8,
            label="call",
        )
        ax.text(
            start + width / 2,
            row + (0.15 if i % 2 == 0 else -0.15),
            call["name"],
            ha="center",
            va="center",
            fontsize=8,
            clip_on=True,
        )


def _row_label(device: int | None, names: dict[int, str]) -> str:
    """A Gantt row's label: "0: llvmpipe (vulkan)", or "host"."""
    if device is None:
        return "host"
    return f"{device}: {names.get(device, '?')}"


class CallRecorder(Protocol):
    """What records user calls: a native profile, or a cluster's."""

    def begin_call(self, method: str, args: str) -> int | None: ...
    def end_call(self, index: int) -> None: ...


def _shape_of(value: Any) -> str | None:
    """An argument's shape as a call's name shows it, its sizes joined by a multiplication
    sign ("DeviceArray" before a resident operand's rows and width); None for what has no
    shape (strings, numbers, options)."""
    if isinstance(value, np.ndarray):
        return TIMES.join(map(str, value.shape)) if value.ndim else "scalar"
    if isinstance(value, _native.DeviceArray):
        return f"DeviceArray {value.rows}{TIMES}{value.cols}"
    return None


def describe_call(entry: str, args: tuple[Any, ...]) -> tuple[str, str]:
    """The method and argument summary of a call of kernel entry point ``entry`` with
    ``args`` (after the context): ``ga_apply`` is named after the GA method it runs (its
    first argument), every other entry point after itself."""
    method = args[0] if entry == "ga_apply" and args and isinstance(args[0], str) else entry
    shapes: list[str] = []
    for value in args:
        for item in value if isinstance(value, list) else [value]:
            shape = _shape_of(item)
            if shape is not None:
                shapes.append(shape)
    return method, ", ".join(shapes)


class CallsOf:
    """A context's kernel entry points while a profile records: every call through them,
    the one way a method reaches the engine, is one user call of ``recorder``. Installed on
    the context for the profile's lifetime only, so calls made while nothing records pay
    nothing for it."""

    def __init__(self, kernels: Kernels, recorder: CallRecorder) -> None:
        self._kernels = kernels
        self._recorder = recorder

    def __getattr__(self, entry: str) -> Callable[..., Any]:
        run = getattr(self._kernels, entry)
        recorder = self._recorder

        def call(ctx: Any, *args: Any, **kwargs: Any) -> Any:
            index = recorder.begin_call(*describe_call(entry, args))
            try:
                return run(ctx, *args, **kwargs)
            finally:
                if index is not None:
                    recorder.end_call(index)

        return call

    @staticmethod
    def install(host: KernelHost, recorder: CallRecorder) -> None:
        """Routes ``host``'s kernel calls through a recorder of user calls."""
        host._kernels = cast("Kernels", CallsOf(type(host)._kernels, recorder))

    @staticmethod
    def remove(host: KernelHost) -> None:
        """Gives ``host`` its own kernel entry points back."""
        host.__dict__.pop("_kernels", None)


class _Recording:
    """The context manager behind ``ctx.profile()``."""

    def __init__(self, host: KernelHost) -> None:
        self._host = host
        self._profile: Profile | None = None

    def __enter__(self) -> Profile:
        native = _native.profile_start(self._host._native)
        self._profile = Profile(native)
        CallsOf.install(self._host, native)
        return self._profile

    def __exit__(self, *exc: object) -> None:
        CallsOf.remove(self._host)
        _native.profile_stop(self._host._native)
