"""The profiler timeline as Python sees it: events, a summary with the likely bottleneck,
Chrome-trace export (Perfetto, chrome://tracing) and a Gantt chart per device."""

from __future__ import annotations

import json
import os
from typing import Any

from . import _native

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

    ``prof.events`` lists every step as a dict with ``device`` (None for planning),
    ``kind`` (one of "plan", "upload", "kernel", "readback", "wait", "retry", and
    "exchange" for the halo rows domain decomposition passes through the host), ``chunk``,
    ``call``, ``start_s`` and ``duration_s`` (seconds since the profile started), ``bytes``,
    ``items`` and ``clock`` ("gpu" when a kernel was timed with GPU timestamp queries,
    aligned to the host clock; "host" otherwise).
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
        """Every recorded call: kernel, items, the cost model's ``flops_per_item`` and
        ``bytes_per_item`` (per-item inputs and outputs), strategy, the plan's bound and
        estimate."""
        return self._native.calls()

    def summary(self) -> _native.SummaryDict:
        """``makespan_s``, ``predicted_lower_bound_s`` (the lower bound the calibrated model
        predicted for the plans: a prediction, which a run can beat), ``efficiency``
        (predicted bound / makespan: above 1 when the run beat the model),
        ``imbalance`` (max busy / mean busy - 1), ``overhead_fraction`` (busy time outside
        kernels: transfers and synchronisation), ``bottleneck`` ("transfer-bound",
        "compute-bound", "imbalance" or "launch-overhead") with the ``figures`` behind it,
        and ``devices``: per device busy_s, utilization, items_per_s, bytes_per_s."""
        return self._native.summary()

    def save_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Writes the Trace Event Format JSON (built by the Rust core): per device a track
        for its queue (kernels), one for its worker (uploads, waits, readbacks) and one for
        re-runs of a failed device's chunks, plus a host track (planning, exchange). Slices
        on every track nest or are disjoint, as Perfetto requires; events are named by
        kind, with chunk, call, bytes, items and clock under ``args``."""
        text = self._native.chrome_trace()
        json.loads(text)  # refuse to write anything but valid JSON
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def plot(self, path: str | os.PathLike[str] | None = None) -> Any:
        """A Gantt chart per device (needs matplotlib: ``pip install '.[plot]'``).
        Returns the figure; saves a PNG when given a path."""
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
        names = self._native.device_names()
        devices = sorted({e["device"] for e in events if e["device"] is not None})
        # Host-wide steps (planning, halo exchange) get a row of their own, at the top.
        rows: list[int | None] = (
            [*devices, None]
            if any(e["device"] is None and e["duration_s"] > 0 for e in events)
            else list(devices)
        )
        fig, ax = plt.subplots(figsize=(10, 1.0 + 0.8 * max(len(rows), 1)))
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
        ax.set_yticks(range(len(rows)), [_row_label(d, names) for d in rows])
        ax.set_xlabel("ms since the profile started")
        ax.set_title("amari_gpu timeline (kernels above, host steps below each device)")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig

    def __str__(self) -> str:
        s = self.summary()
        lines = [
            f"calls {s['calls']}  makespan {s['makespan_s'] * 1e3:.2f} ms  "
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


def _row_label(device: int | None, names: dict[int, str]) -> str:
    """A Gantt row's label: "0: llvmpipe (vulkan)", or "host"."""
    if device is None:
        return "host"
    return f"{device}: {names.get(device, '?')}"


class _Recording:
    """The context manager behind ``ctx.profile()``."""

    def __init__(self, context_native: Any) -> None:
        self._context = context_native
        self._profile: Profile | None = None

    def __enter__(self) -> Profile:
        self._profile = Profile(_native.profile_start(self._context))
        return self._profile

    def __exit__(self, *exc: object) -> None:
        _native.profile_stop(self._context)
