"""The scaling study behind ``amari-gpu bench``: every kernel family on every device set with
every split strategy, next to the CPU libraries a user would otherwise reach for.

For each family and problem size it measures, interleaving the configurations round by
round (a noisy machine then slows them alike): each adapter alone, all adapters together,
and 1/2/4 logical devices per wgpu adapter beside the host device, with each strategy at the
largest size (``auto`` at the smaller ones and on one device, where every strategy gives the
same split; grids are cut into bands by their own rule), plus the CPU baselines. Rows carry
medians with min/max and quartiles, the speedup over the best single-device set of the same
run, efficiency (speedup per device), and the imbalance and bottleneck of profiled calls
(``Profile.summary()``). Every result is checked against a CPU reference before it is timed.
Everything is measured in the run that reports it; ``write_report`` writes results.json,
report.md and PNG plots.

    from amari_gpu.tools import scaling
    study = scaling.run_study(scaling.QUICK)
    scaling.write_report(study, "amari-gpu-bench")
"""

from __future__ import annotations

import dataclasses
import datetime
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import __version__
from .._adapters import adapters
from ..context import MultiGpuContext
from ..errors import NoAdapterError
from ..planning import STRATEGIES
from .bench_families import (
    CLIFFORD_MAX_ITEMS,
    Baseline,
    Family,
    clifford_available,
    families,
)
from .progress import Progress
from .scaling_report import device_label, host_info, write_report

__all__ = ["FULL", "QUICK", "Settings", "run_study", "write_report"]


@dataclass(frozen=True)
class Settings:
    """What the study measures. ``sizes`` maps a family to its problem sizes (rows for
    geometric algebra and Fisher, n of an n x n product for tropical); the strategy sweep
    runs at each family's largest size."""

    sizes: Mapping[str, Sequence[int]]
    rounds: int = 5
    profile_rounds: int = 1
    devices_per_adapter: Sequence[int] = (1, 2, 4)
    strategies: Sequence[str] = STRATEGIES
    backends: Sequence[str] | None = None
    label: str = "custom"
    baselines: bool = True
    baseline_max_size: Mapping[str, int] = field(
        default_factory=lambda: {"clifford": CLIFFORD_MAX_ITEMS}
    )
    """Largest problem size each baseline library is measured at (a library not named:
    every size). clifford makes one Python object per multivector, which is slow."""


QUICK = Settings(
    sizes={
        "geometric_algebra": (10_000, 100_000, 1_000_000),
        "tropical": (64, 256, 384),
        "information_geometry": (4_096, 16_384, 32_768),
        "grids": (256, 1024),
    },
    rounds=3,
    label="quick",
    baseline_max_size={"clifford": 10_000},
)
FULL = Settings(
    sizes={
        "geometric_algebra": (10_000, 100_000, 1_000_000, 4_000_000),
        "tropical": (64, 256, 512, 1024),
        "information_geometry": (4_096, 65_536, 262_144, 1_048_576),
        "grids": (256, 1024, 4096),
    },
    rounds=9,
    profile_rounds=3,
    label="full",
)


@dataclass
class _DeviceSet:
    label: str
    kind: str
    ctx: MultiGpuContext

    def devices(self) -> list[dict[str, Any]]:
        return [
            {
                "id": d.id,
                "adapter_index": d.adapter.index,
                "adapter": d.adapter.name,
                "backend": d.adapter.backend,
                "device_type": d.adapter.device_type,
                "label": device_label(d.adapter),
                "driver": " ".join(s for s in (d.adapter.driver, d.adapter.driver_info) if s),
            }
            for d in self.ctx.devices
        ]


@dataclass
class _Config:
    label: str
    family: Family
    device_set: _DeviceSet | None = None
    strategy: str | None = None
    baseline: Baseline | None = None
    prepared: Any = None
    samples: list[float] = field(default_factory=list)
    profiles: list[dict[str, Any]] = field(default_factory=list)
    error: float = float("nan")
    plan: str | None = None
    devices_used: int | None = None

    def call(self, inputs: tuple[Any, ...]) -> Any:
        if self.baseline is not None:
            return self.baseline.run(self.prepared)
        assert self.device_set is not None
        return self.family.gpu(self.device_set.ctx, inputs, self.strategy)


def _device_sets(settings: Settings) -> list[_DeviceSet]:
    backends = None if settings.backends is None else list(settings.backends)
    # The host device included: it runs every family, grids too.
    found = [a for a in adapters() if backends is None or a.backend in backends]
    if not found:
        raise NoAdapterError("No adapter to benchmark (see `amari-gpu doctor` for what to install)")
    sets = [
        _DeviceSet(
            f"[{a.index}] {device_label(a)} alone",
            "adapter alone",
            MultiGpuContext(adapters=[a.index]),
        )
        for a in found
    ]
    if len(found) > 1:
        every = MultiGpuContext(adapters=[a.index for a in found])
        sets.append(_DeviceSet(f"all {len(found)} adapters", "all adapters", every))
    # k logical devices on each distinct wgpu adapter (hardware ones, else the software ones),
    # beside the host device (one device whatever devices_per_adapter).
    # With --backends, every adapter on them, duplicates included (as backends= selects).
    distinct = [a for a in found if a.same_device_as is None or backends is not None]
    wgpu = [a for a in distinct if not a.is_host]
    hardware = [a.index for a in wgpu if not a.is_software]
    chosen = (hardware or [a.index for a in wgpu]) + [a.index for a in distinct if a.is_host]
    for k in settings.devices_per_adapter:
        ctx = MultiGpuContext(adapters=chosen, devices_per_adapter=k)
        sets.append(_DeviceSet(f"x{k} per adapter ({len(ctx.devices)} dev)", f"x{k}", ctx))
    return sets


def _configs(
    family: Family, size: int, study_size: bool, sets: list[_DeviceSet], settings: Settings
) -> list[_Config]:
    out = []
    for s in sets:
        sweep = study_size and len(s.ctx.devices) > 1
        if not family.strategies:  # grids are cut into bands by their own rule
            out.append(_Config(f"{s.label}, bands", family, s, None))
            continue
        for strategy in settings.strategies if sweep else ("auto",):
            out.append(_Config(f"{s.label}, {strategy}", family, s, strategy))
    for b in family.baselines if settings.baselines else ():
        limit = settings.baseline_max_size.get(b.library)
        if limit is None or size <= limit:
            out.append(_Config(b.name, family, baseline=b))
    return out


def _timed(config: _Config, inputs: tuple[Any, ...]) -> float:
    start = time.perf_counter()
    config.call(inputs)
    return time.perf_counter() - start


def _warm(config: _Config, inputs: tuple[Any, ...], want: Any) -> None:
    """First call (compiles pipelines, calibrates, JIT-compiles clifford), checked against
    the reference ``want`` so that no wrong result is ever timed unnoticed."""
    if config.baseline is not None:
        config.prepared = config.baseline.prepare(inputs)
        result = config.baseline.to_array(config.call(inputs))
    else:
        assert config.device_set is not None
        ctx = config.device_set.ctx
        # Cleared first so that a call which records neither cannot leave another call's.
        ctx.last_plan, ctx.last_run = None, None
        result = config.call(inputs)
        config.plan, config.devices_used = _what_ran(config.family, ctx)
    config.error = config.family.error(want, result)


def _what_ran(family: Family, ctx: MultiGpuContext) -> tuple[str, int]:
    """The split the call followed and how many devices got work: a strategy that puts
    everything on one device of a set measures that device, not the set."""
    if not family.strategies:
        run = ctx.last_run
        assert run is not None, "a grid call records its bands in ctx.last_run"
        used = {d["device"] for d in run.rounds[0]["devices"] if d["rows"] > 0}
        return f"bands on {len(used)} of {len(ctx.devices)}", len(used)
    plan = ctx.last_plan
    assert plan is not None, "a kernel call records its plan in ctx.last_plan"
    used = {a.device_id for a in plan if a.items > 0}
    return f"{plan.strategy} on {len(used)} of {len(ctx.devices)}", len(used)


def _profile(config: _Config, inputs: tuple[Any, ...]) -> None:
    assert config.device_set is not None
    with config.device_set.ctx.profile() as prof:
        config.call(inputs)
    s = prof.summary()
    config.profiles.append(
        {k: s[k] for k in ("imbalance", "efficiency", "overhead_fraction", "bottleneck")}
    )


def _steps(configs: list[_Config], settings: Settings) -> int:
    gpu = sum(c.baseline is None for c in configs)
    return len(configs) * (1 + settings.rounds) + gpu * settings.profile_rounds


def _measure(
    configs: list[_Config], inputs: tuple[Any, ...], settings: Settings, bar: Progress
) -> None:
    name = configs[0].family.name
    bar.advance(0, note=f"{name}: reference")
    want = configs[0].family.reference(inputs)  # once per size: a float64 reference is slow
    for c in configs:
        bar.advance(0, note=f"{name}: warm-up {c.label}")
        _warm(c, inputs, want)
        bar.advance()
    for r in range(settings.rounds):
        shift = r % len(configs)  # rotate the order too, so no config always runs first
        for c in configs[shift:] + configs[:shift]:
            bar.advance(0, note=f"{name}: round {r + 1}/{settings.rounds} {c.label}")
            c.samples.append(_timed(c, inputs))
            bar.advance()
    for _ in range(settings.profile_rounds):
        for c in configs:
            if c.baseline is None:
                bar.advance(0, note=f"{name}: profiling {c.label}")
                _profile(c, inputs)
                bar.advance()


def _row(c: _Config, size: int, meta: dict[str, Any]) -> dict[str, Any]:
    s = np.asarray(c.samples)
    median = float(np.median(s))
    q1, q3 = (float(v) for v in np.percentile(s, [25, 75]))
    row: dict[str, Any] = {
        "family": c.family.name,
        "kernel": c.family.kernel,
        "size": size,
        "problem": c.family.describe(size),
        "config": c.label,
        "amari_gpu_version": __version__,
        "date": meta["date"],
        "host_cpu": meta["host"]["cpu"],
        "median_s": median,
        "min_s": float(s.min()),
        "max_s": float(s.max()),
        "q1_s": q1,
        "q3_s": q3,
        "samples_s": [float(v) for v in s],
        # JSON has no infinity: a wrong exact result (error inf) is null and not correct.
        "max_error": c.error if np.isfinite(c.error) else None,
        "correct": bool(c.error <= c.family.tolerance),
    }
    if c.baseline is not None:
        row.update(
            kind="cpu",
            library=c.baseline.library,
            device_set=None,
            strategy=None,
            plan=None,
            n_devices=None,
            devices=[],
            adapter=f"host CPU: {meta['host']['cpu']}",
            backend="cpu",
            driver=meta["host"]["libraries"].get(c.baseline.library, ""),
        )
        return row
    assert c.device_set is not None
    devices = c.device_set.devices()
    imbalances = [p["imbalance"] for p in c.profiles if p["imbalance"] is not None]
    row.update(
        kind="gpu",
        library="amari_gpu",
        device_set=c.device_set.label,
        device_set_kind=c.device_set.kind,
        strategy=c.strategy,
        plan=c.plan,
        n_devices=len(devices),
        devices_used=c.devices_used,
        devices=devices,
        adapter=" + ".join(dict.fromkeys(d["label"] for d in devices)),
        backend=" + ".join(dict.fromkeys(d["backend"] for d in devices)),
        driver=" + ".join(dict.fromkeys(d["driver"] for d in devices)),
        imbalance=statistics.median(imbalances) if imbalances else None,
        imbalance_low=min(imbalances) if imbalances else None,
        imbalance_high=max(imbalances) if imbalances else None,
        bottleneck=c.profiles[-1]["bottleneck"] if c.profiles else None,
        profile_efficiency=(
            statistics.median(p["efficiency"] for p in c.profiles) if c.profiles else None
        ),
    )
    return row


def _ratios(rows: list[dict[str, Any]]) -> None:
    """Speedup over the best single-device run and over the fastest numpy baseline, within
    one family and size (so within one run, on the same inputs). A run whose plan gave work
    to one device counts as a single-device run whatever set it came from, so no strategy
    that used one device is reported as a gain over single devices. Efficiency is speedup
    per device that got work. ``*_low``/``*_high`` span the quartiles of the samples."""
    single = [r["median_s"] for r in rows if r.get("devices_used") == 1]
    numpy = [r["median_s"] for r in rows if r["library"] == "numpy"]
    best_single = min(single) if single else None
    best_numpy = min(numpy) if numpy else None
    for r in rows:
        used = r.get("devices_used")
        for key, seconds in (("", r["median_s"]), ("_low", r["q3_s"]), ("_high", r["q1_s"])):
            speedup = None if best_single is None else best_single / seconds
            r[f"speedup_vs_best_single{key}"] = speedup
            r[f"efficiency{key}"] = None if speedup is None or not used else speedup / used
        r["vs_numpy"] = None if best_numpy is None else best_numpy / r["median_s"]


def _crossover(rows: list[dict[str, Any]]) -> dict[str, Any]:
    gpu = min((r for r in rows if r["kind"] == "gpu"), key=lambda r: r["median_s"])
    auto_all = [r for r in rows if r["kind"] == "gpu" and r["device_set_kind"] == "x1"]
    numpy = [r for r in rows if r["library"] == "numpy"]
    best_numpy = min(numpy, key=lambda r: r["median_s"]) if numpy else None
    clifford = [r for r in rows if r["library"] == "clifford"]
    ratio = None if best_numpy is None else best_numpy["median_s"] / gpu["median_s"]
    return {
        "family": gpu["family"],
        "size": gpu["size"],
        "problem": gpu["problem"],
        "best_gpu": gpu["config"],
        "best_gpu_s": gpu["median_s"],
        "best_gpu_adapter": gpu["adapter"],
        "default_auto_s": auto_all[0]["median_s"] if auto_all else None,
        "numpy": None if best_numpy is None else best_numpy["config"],
        "numpy_s": None if best_numpy is None else best_numpy["median_s"],
        "clifford_s": clifford[0]["median_s"] if clifford else None,
        "gpu_speedup_vs_numpy": ratio,
        "winner": None if ratio is None else ("amari_gpu" if ratio > 1 else "numpy"),
    }


def run_study(settings: Settings = QUICK, *, show_progress: bool = False) -> dict[str, Any]:
    """Measures everything ``settings`` names; returns the study as JSON-ready data."""
    meta: dict[str, Any] = {
        "amari_gpu_version": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": host_info(),
        "settings": dataclasses.asdict(settings),
    }
    sets = _device_sets(settings)
    meta["adapters"] = [a.describe() for a in adapters()]
    meta["device_sets"] = [{"label": s.label, "devices": s.devices()} for s in sets]
    notes = [
        "Configurations are interleaved round by round (order rotated each round); medians "
        f"of {settings.rounds} rounds after one checked warm-up call each.",
        "With one device every strategy gives the same split, so single-device sets run "
        "'auto' only; the strategy sweep runs at each family's largest size.",
        "Speedups are over the best single-device run at the same size in this run (a "
        "strategy whose plan gave work to one device counts as one); efficiency = speedup / "
        "devices that got work; error bars span the quartiles of the rounds. Imbalance (max "
        "busy / mean busy - 1) and bottleneck come from profiled calls (Profile.summary()).",
    ]
    if settings.baselines and not clifford_available():
        notes.append("clifford is not installed: its column is skipped (pip install clifford).")
    elif settings.baselines and "clifford" in settings.baseline_max_size:
        notes.append(
            "clifford (one MultiVector product per row) is measured up to "
            f"N = {settings.baseline_max_size['clifford']:,} only: one call at 100,000 "
            "takes seconds."
        )
    all_families = families()
    chosen = [all_families[name] for name in settings.sizes]
    plan = [
        (f, size, _configs(f, size, size == max(settings.sizes[f.name]), sets, settings))
        for f in chosen
        for size in sorted(settings.sizes[f.name])
    ]
    rows: list[dict[str, Any]] = []
    crossover: list[dict[str, Any]] = []
    total = sum(_steps(configs, settings) for _, _, configs in plan)
    with Progress(total, "bench", enabled=show_progress) as bar:
        for family, size, configs in plan:
            inputs = family.inputs(size)
            _measure(configs, inputs, settings, bar)
            group = [_row(c, size, meta) for c in configs]
            _ratios(group)
            crossover.append(_crossover(group))
            rows.extend(group)
    return {**meta, "notes": notes, "rows": rows, "crossover": crossover}
