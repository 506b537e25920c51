"""The scaling study on a tiny configuration: every family on every device set, strategies
swept at the largest size, CPU baselines, ratios derived from the measured medians, and the
files it writes (results.json, report.md, PNGs, or a note when matplotlib is missing)."""

from __future__ import annotations

import datetime
import importlib.util
import json
import math
import sys

import amari_gpu as ag
import pytest
from amari_gpu.tools import scaling
from amari_gpu.tools.scaling_report import device_label
from amari_gpu.tools.scaling_report import summary as scaling_summary

SIZES = {
    "geometric_algebra": (256, 4096),
    "tropical": (16, 64),
    "information_geometry": (512, 4096),
    "grids": (32, 96),
}
STRATEGIES = ("balanced", "adaptive", "auto")
TINY = scaling.Settings(
    sizes=SIZES,
    rounds=2,
    devices_per_adapter=(1, 2),
    strategies=STRATEGIES,
    label="test",
    baseline_max_size={"clifford": 256},
)
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    data = scaling.run_study(TINY)
    out = tmp_path_factory.mktemp("bench")
    written = scaling.write_report(data, out)
    return data, out, written


def test_results_json_names_what_every_row_ran_on(study):
    _, out, _ = study
    saved = json.loads((out / "results.json").read_text())
    assert saved["amari_gpu_version"] == ag.__version__
    assert datetime.datetime.fromisoformat(saved["date"]).tzinfo is not None
    assert saved["host"]["cpu"] and saved["host"]["logical_cpus"] >= 1
    assert saved["adapters"] == [a.describe() for a in ag.adapters()]
    labels = {device_label(a) for a in ag.adapters()}
    for row in saved["rows"]:
        assert row["amari_gpu_version"] == ag.__version__ and row["date"] == saved["date"]
        assert row["adapter"] and row["backend"] and row["host_cpu"] == saved["host"]["cpu"]
        assert len(row["samples_s"]) == TINY.rounds
        assert row["min_s"] <= row["q1_s"] <= row["median_s"] <= row["q3_s"] <= row["max_s"]
        assert row["min_s"] > 0 and row["correct"], row["config"]
        if row["kind"] == "gpu":
            assert set(row["adapter"].split(" + ")) <= labels
            assert row["driver"] and row["n_devices"] == len(row["devices"])
            assert row["imbalance"] >= 0 and row["bottleneck"]
            # The plan column is this call's own split, and agrees with the device count.
            assert 1 <= row["devices_used"] <= row["n_devices"]
            if row["family"] == "grids":
                assert row["plan"].startswith("bands on ")
            elif row["strategy"] != "auto":  # auto names the strategy it chose
                assert row["plan"].startswith(f"{row['strategy']} on ")
            assert row["plan"].endswith(f" on {row['devices_used']} of {row['n_devices']}")
            assert row["imbalance_low"] <= row["imbalance"] <= row["imbalance_high"]
        else:
            assert row["backend"] == "cpu" and row["driver"].startswith(row["library"])


def test_every_device_set_strategy_and_baseline_is_measured(study):
    data, _, _ = study
    found = ag.adapters()  # the host device too
    sets = {s["label"] for s in data["device_sets"]}
    assert {f"[{a.index}] {device_label(a)} alone" for a in found} <= sets
    assert any(label.startswith("x2 per adapter") for label in sets)
    assert (f"all {len(found)} adapters" in sets) == (len(found) > 1)
    for family, sizes in SIZES.items():
        rows = [r for r in data["rows"] if r["family"] == family and r["size"] == max(sizes)]
        multi = {r["device_set"] for r in rows if r["kind"] == "gpu" and r["n_devices"] > 1}
        assert multi
        # Grids are cut into bands by their own rule: no strategy to sweep.
        swept = set(STRATEGIES) if family != "grids" else {None}
        for device_set in multi:
            got = {r["strategy"] for r in rows if r["device_set"] == device_set}
            assert got == swept
        libraries = {r["library"] for r in rows if r["kind"] == "cpu"}
        assert "numpy" in libraries
        if family == "geometric_algebra":  # clifford is measured up to its own limit only
            assert "clifford" not in libraries
        # Smaller sizes run "auto" only.
        small = [r for r in data["rows"] if r["family"] == family and r["size"] == min(sizes)]
        want = {"auto"} if family != "grids" else {None}
        assert {r["strategy"] for r in small if r["kind"] == "gpu"} == want
        if family == "geometric_algebra":
            has_clifford = importlib.util.find_spec("clifford") is not None
            assert any(r["library"] == "clifford" for r in small) == has_clifford


def test_ratios_follow_from_the_medians(study):
    data, _, _ = study
    for family, sizes in SIZES.items():
        for size in sizes:
            rows = [r for r in data["rows"] if r["family"] == family and r["size"] == size]
            # Single-device runs: one-device sets, and any plan that gave one device work.
            single = [r for r in rows if r.get("devices_used") == 1]
            assert {r["device_set"] for r in rows if r["n_devices"] == 1} <= {
                r["device_set"] for r in single
            }
            best = min(r["median_s"] for r in single)
            numpy = min(r["median_s"] for r in rows if r["library"] == "numpy")
            assert max(r["speedup_vs_best_single"] for r in single) == 1.0
            for r in rows:
                assert math.isclose(r["speedup_vs_best_single"], best / r["median_s"])
                assert math.isclose(r["vs_numpy"], numpy / r["median_s"])
                low, high = r["speedup_vs_best_single_low"], r["speedup_vs_best_single_high"]
                assert low <= r["speedup_vs_best_single"] <= high
                if r["kind"] == "gpu":
                    assert math.isclose(
                        r["efficiency"], r["speedup_vs_best_single"] / r["devices_used"]
                    )
            cross = [c for c in data["crossover"] if c["family"] == family and c["size"] == size]
            assert len(cross) == 1
            gpu = min((r for r in rows if r["kind"] == "gpu"), key=lambda r: r["median_s"])
            assert cross[0]["best_gpu"] == gpu["config"]
            assert math.isclose(cross[0]["gpu_speedup_vs_numpy"], numpy / gpu["median_s"])
            assert cross[0]["winner"] == ("amari_gpu" if numpy > gpu["median_s"] else "numpy")


def test_report_and_plots_are_written(study):
    _, out, written = study
    report = (out / "report.md").read_text()
    assert report.startswith("# amari_gpu scaling study")
    for family in SIZES:
        assert f"## {family}:" in report
    assert "## Crossover" in report and report.count("| geometric_algebra |") == 2
    assert all(a.describe() in report for a in ag.adapters())
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib" in written["plots_skipped"]
    else:
        assert written["plots_skipped"] is None
        for name in ("speedup.png", "efficiency.png", "imbalance.png", "crossover.png"):
            assert (out / name).read_bytes()[:8] == PNG, name
            assert f"]({name})" in report


def test_without_matplotlib_json_and_markdown_still_written(study, monkeypatch, tmp_path):
    data, _, _ = study
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    written = scaling.write_report(dict(data), tmp_path)
    assert "pip install '.[plot]' (in a clone)" in written["plots_skipped"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "results.json"]
    assert "Skipped: matplotlib is not installed" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "results.json").read_text())["plots"] == []


def _adapter(**fields) -> ag.AdapterInfo:
    base = ag.adapters()[0]
    return ag.AdapterInfo.from_dict({**base.__dict__, **fields})


def test_devices_are_labelled_by_backend_name_and_reported_kind():
    # The kind comes from the adapter's device_type, never from a vendor table: the same
    # vendor's name is labelled by what the driver reports.
    lavapipe = _adapter(
        name="llvmpipe (LLVM 15.0.6, 256 bits)", backend="vulkan", device_type="cpu"
    )
    assert device_label(lavapipe) == "Vulkan (llvmpipe, CPU)"
    gl = _adapter(name="llvmpipe (LLVM 15.0.6, 256 bits)", backend="gl", device_type="cpu")
    assert device_label(gl) == "GL (llvmpipe, CPU)"
    gpu = _adapter(name="NVIDIA GeForce RTX 4090", backend="vulkan", device_type="discrete_gpu")
    assert device_label(gpu) == "Vulkan (NVIDIA GeForce RTX 4090, GPU)"
    igpu = _adapter(name="Intel(R) UHD Graphics 630", backend="dx12", device_type="integrated_gpu")
    assert device_label(igpu) == "DX12 (Intel(R) UHD Graphics 630, integrated GPU)"
    host = next(a for a in ag.adapters() if a.is_host)
    assert device_label(host) == f"host ({host.name.split(' (', 1)[0]}, CPU)"


def test_the_study_includes_the_host_and_calls_no_cpu_device_a_gpu(study):
    data, out, _ = study
    host = next(a for a in ag.adapters() if a.is_host)
    sets = {s["label"]: s for s in data["device_sets"]}
    assert f"[{host.index}] {device_label(host)} alone" in sets
    # The sets of k devices per adapter hold the host device beside the wgpu ones.
    for s in data["device_sets"]:
        if s["label"].startswith("x"):
            assert any(d["backend"] == "host" for d in s["devices"]), s
    host_rows = [r for r in data["rows"] if r["adapter"] == device_label(host)]
    assert {r["family"] for r in host_rows} == set(SIZES)
    for a in ag.adapters():
        if a.device_type == "cpu":
            assert device_label(a).endswith(", CPU)")
    if not any(a.device_type.endswith("_gpu") for a in ag.adapters()):
        report = (out / "report.md").read_text()
        assert "GPU" not in report
        assert "GPU" not in "\n".join(scaling_summary(data))
