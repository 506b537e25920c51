"""Writing a scaling study: results.json, report.md (Markdown tables) and PNG plots
(speedup, efficiency, imbalance, crossover) when matplotlib is installed."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import textwrap
from pathlib import Path
from typing import Any

from .._adapters import AdapterInfo
from .bench_host import cpu_model

PLOTS = ("speedup.png", "efficiency.png", "imbalance.png", "crossover.png")


def _version(package: str) -> str:
    try:
        return f"{package} {importlib.metadata.version(package)}"
    except importlib.metadata.PackageNotFoundError:
        return ""


def host_info() -> dict[str, Any]:
    """The machine the CPU baselines ran on (and which drives the GPUs)."""
    return {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "libraries": {name: _version(name) for name in ("numpy", "clifford", "matplotlib")},
    }


_BACKENDS = {"vulkan": "Vulkan", "metal": "Metal", "dx12": "DX12", "gl": "GL", "host": "host"}
_KINDS = {
    "discrete_gpu": "GPU",
    "integrated_gpu": "integrated GPU",
    "virtual_gpu": "virtual GPU",
    "cpu": "CPU",
    "other": "other",
}


def device_label(adapter: AdapterInfo) -> str:
    """How the study names a device: its backend, its name as the driver reports it (up to
    the driver's own parenthesis) and its kind as the adapter reports it (``device_type``,
    never guessed from the vendor): ``"Vulkan (llvmpipe, CPU)"`` for Mesa's lavapipe,
    ``"host (AMD EPYC 7B13, CPU)"`` for the host device, ``"Vulkan (NVIDIA GeForce RTX
    4090, GPU)"`` for a discrete GPU."""
    backend = _BACKENDS.get(adapter.backend, adapter.backend)
    name = adapter.name.split(" (", 1)[0].strip() or adapter.name
    kind = _KINDS.get(adapter.device_type, adapter.device_type)
    return f"{backend} ({name}, {kind})"


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e3:.2f}"


def _x(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.2f}x"


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _study_rows(study: dict[str, Any], family: str) -> list[dict[str, Any]]:
    sizes = [r["size"] for r in study["rows"] if r["family"] == family]
    return [r for r in study["rows"] if r["family"] == family and r["size"] == max(sizes)]


def _families(study: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(r["family"] for r in study["rows"]))


_AXIS = {
    "geometric_algebra": "multivectors N",
    "tropical": "n (n x n matrices)",
    "information_geometry": "samples N",
    "grids": "n (n x n grid)",
}


def _ran_on(study: dict[str, Any]) -> str:
    """Adapter names and backends of every device set, for plot titles."""
    seen = {d["label"] for s in study["device_sets"] for d in s["devices"]}
    return ", ".join(sorted(seen))


def _devices(row: dict[str, Any]) -> str:
    """Devices that got work, of the set's devices; CPU for a baseline library."""
    if row["n_devices"] is None:
        return "CPU"
    return f"{row.get('devices_used') or '?'} of {row['n_devices']}"


def markdown(study: dict[str, Any], plots: str) -> str:
    """The study as Markdown tables."""
    host = study["host"]
    lines = [
        "# amari_gpu scaling study",
        "",
        f"amari_gpu {study['amari_gpu_version']}, {study['date']}, settings "
        f"`{study['settings']['label']}` ({study['settings']['rounds']} rounds). Host: "
        f"{host['cpu']}, {host['logical_cpus']} logical CPUs, {host['platform']}, Python "
        f"{host['python']}, {', '.join(v for v in host['libraries'].values() if v)}.",
        "",
        "Every figure below was measured in this run on these adapters:",
        "",
        *[f"- {a}" for a in study["adapters"]],
        "",
        "Device sets:",
        "",
    ]
    for s in study["device_sets"]:
        devices = ", ".join(f"{d['id']}: {d['label']}" for d in s["devices"])
        lines.append(f"- **{s['label']}**: {devices}")
    lines += ["", *[f"> {n}" for n in study["notes"]], ""]
    for family in _families(study):
        rows = _study_rows(study, family)
        lines += [
            f"## {family}: {rows[0]['problem']}",
            "",
            "| configuration | devices | plan | median ms | min-max ms | IQR ms | "
            "vs best single | efficiency | imbalance | bottleneck | vs numpy | check |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |",
        ]
        for r in rows:
            check = "ok" if r["correct"] else f"WRONG (error {r['max_error']})"
            lines.append(
                f"| {r['config']} | {_devices(r)} | {r['plan'] or '—'} | "
                f"{_ms(r['median_s'])} | {_ms(r['min_s'])}-{_ms(r['max_s'])} | "
                f"{_ms(r['q1_s'])}-{_ms(r['q3_s'])} | {_x(r['speedup_vs_best_single'])} | "
                f"{_f(r['efficiency'])} | {_f(r.get('imbalance'))} | "
                f"{r.get('bottleneck') or '—'} | {_x(r['vs_numpy'])} | {check} |"
            )
        lines.append("")
    lines += [
        "## Crossover: where amari_gpu wins over numpy",
        "",
        "Best amari_gpu configuration (any device set) at each size against the fastest numpy "
        "baseline (medians; 'amari_gpu / numpy' above 1 means amari_gpu is faster).",
        "",
        "| family | problem | numpy ms | clifford ms | x1 per adapter, auto ms | best ms "
        "| best configuration | amari_gpu / numpy | faster |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for c in study["crossover"]:
        lines.append(
            f"| {c['family']} | {c['problem']} | {_ms(c['numpy_s'])} | {_ms(c['clifford_s'])} | "
            f"{_ms(c['default_auto_s'])} | {_ms(c['best_gpu_s'])} | {c['best_gpu']} | "
            f"{_x(c['gpu_speedup_vs_numpy'])} | {c['winner'] or '—'} |"
        )
    lines += ["", "## Plots", "", plots, ""]
    return "\n".join(lines)


def _bars(study: dict[str, Any], key: str, title: str, path: Path, reference: float | None) -> None:
    import matplotlib.pyplot as plt

    families = _families(study)
    # Each panel's height leaves room for its tick labels, written at 60 degrees (about
    # 0.06 in a character upright at 7 pt): device sets are named after their adapters, and
    # a long adapter name ("Intel(R) Xeon(R) Processor") left no room in a fixed height.
    longest = max((len(r["config"]) for r in study["rows"] if r["kind"] == "gpu"), default=0)
    panel = 2.6 + 0.06 * longest
    fig, axes = plt.subplots(
        len(families), 1, figsize=(11, panel * len(families) + 0.8), squeeze=False
    )
    for ax, family in zip(axes[:, 0], families):
        rows = [r for r in _study_rows(study, family) if r["kind"] == "gpu"]
        values = [r.get(key) or 0.0 for r in rows]
        low = [r.get(f"{key}_low") for r in rows]
        high = [r.get(f"{key}_high") for r in rows]
        spread = None
        if all(v is not None for v in low + high):
            spread = [
                [max(v - float(lo or 0.0), 0.0) for v, lo in zip(values, low)],
                [max(float(hi or 0.0) - v, 0.0) for v, hi in zip(values, high)],
            ]
        ax.bar(range(len(rows)), values, color="#1f77b4", yerr=spread, capsize=2)
        ax.set_xticks(range(len(rows)), [r["config"] for r in rows], rotation=60, ha="right")
        ax.tick_params(axis="x", labelsize=7)
        if reference is not None:
            ax.axhline(reference, color="#d62728", linewidth=1)
        ax.set_ylabel(key.replace("_", " "))
        ax.set_title(f"{rows[0]['problem']}", fontsize=9)
    on = textwrap.fill(f"on {_ran_on(study)}", 140)
    fig.suptitle(
        f"{title}\namari_gpu {study['amari_gpu_version']}, {study['date']}, {on}", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _crossover_plot(study: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    families = _families(study)
    fig, axes = plt.subplots(1, len(families), figsize=(5 * len(families), 4), squeeze=False)
    for ax, family in zip(axes[0], families):
        points = [c for c in study["crossover"] if c["family"] == family]
        sizes = [c["size"] for c in points]
        ax.loglog(sizes, [c["best_gpu_s"] * 1e3 for c in points], "o-", label="best device set")
        if all(c["numpy_s"] is not None for c in points):
            ax.loglog(sizes, [c["numpy_s"] * 1e3 for c in points], "s-", label="numpy")
        cliff = [(c["size"], c["clifford_s"]) for c in points if c["clifford_s"] is not None]
        if cliff:
            ax.loglog(*zip(*[(n, s * 1e3) for n, s in cliff]), "^-", label="clifford")
        ax.set_xlabel(_AXIS.get(family, "problem size"))
        ax.set_ylabel("median ms")
        ax.set_title(family, fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(f"amari_gpu vs CPU libraries by problem size, on {_ran_on(study)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot(study: dict[str, Any], out: Path) -> str | None:
    """Writes the PNGs; returns why they were skipped, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError as e:
        return f"matplotlib is not installed ({e}); pip install '.[plot]' (in a clone)"
    _bars(
        study, "speedup_vs_best_single", "Speedup over the best single device", out / PLOTS[0], 1.0
    )
    _bars(study, "efficiency", "Efficiency (speedup / devices with work)", out / PLOTS[1], 1.0)
    _bars(study, "imbalance", "Imbalance (max busy / mean busy - 1), min-max", out / PLOTS[2], None)
    _crossover_plot(study, out / PLOTS[3])
    return None


def write_report(study: dict[str, Any], out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Writes results.json, report.md and the plots into ``out_dir`` (created if needed).
    Returns the paths written and ``plots_skipped`` (the reason, or None)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    skipped = _plot(study, out)
    study["plots"] = [] if skipped else list(PLOTS)
    study["plots_skipped"] = skipped
    plots = (
        f"Skipped: {skipped}."
        if skipped
        else "\n".join(f"![{name[:-4]}]({name})" for name in PLOTS)
    )
    (out / "results.json").write_text(json.dumps(study, indent=1) + "\n", encoding="utf-8")
    (out / "report.md").write_text(markdown(study, plots), encoding="utf-8")
    written = [out / "results.json", out / "report.md", *[out / p for p in study["plots"]]]
    return {"written": [str(p) for p in written], "plots_skipped": skipped}


def summary(study: dict[str, Any]) -> list[str]:
    """A few lines for the terminal: the sweep at each family's largest size (ratios) and the
    crossover against numpy."""
    lines = [
        f"amari_gpu {study['amari_gpu_version']} scaling study, {study['date']}, on:",
        *[f"  {a}" for a in study["adapters"]],
    ]
    for family in _families(study):
        rows = _study_rows(study, family)
        lines += [
            "",
            f"{rows[0]['problem']}:",
            f"  {'configuration':<34} {'median ms':>10} {'vs single':>10} {'effic.':>7} "
            f"{'imbal.':>7}  check",
        ]
        for r in rows:
            lines.append(
                f"  {r['config'][:34]:<34} {_ms(r['median_s']):>10} "
                f"{_x(r['speedup_vs_best_single']):>10} {_f(r['efficiency']):>7} "
                f"{_f(r.get('imbalance')):>7}  {'ok' if r['correct'] else 'WRONG'}"
            )
    lines += ["", "Crossover (best device set vs fastest numpy, medians):"]
    for c in study["crossover"]:
        lines.append(
            f"  {c['problem']:<52} amari_gpu {_ms(c['best_gpu_s']):>9} ms  numpy "
            f"{_ms(c['numpy_s']):>9} ms  -> {c['winner'] or '—'} ({_x(c['gpu_speedup_vs_numpy'])})"
        )
    return lines
