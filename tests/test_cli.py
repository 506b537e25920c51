"""The command line: `info` lists the adapters and the host device (also as JSON) with the
default selection and its reasons, `doctor` smoke-tests each adapter and the host device alone
and says what to install, `calibrate` prints measured capabilities (the host's included),
`bench` runs the scaling study, and `demo`, the README's main job, runs and checks every kernel
family on every device. Also the progress bar the long commands draw on stderr."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import sys

import amari_gpu as ag
import pytest
from _process import python
from amari_gpu._system import Check
from amari_gpu.tools import scaling
from amari_gpu.tools.cli import main
from amari_gpu.tools.doctor import MESA_GL, MESA_VULKAN, fixes
from amari_gpu.tools.progress import Progress


def test_info_json_lists_every_adapter(capsys):
    assert main(["info", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["amari_gpu_version"] == ag.__version__
    listed = report["adapters"]
    assert [a["index"] for a in listed] == [a.index for a in ag.adapters()]
    for entry in listed:
        assert entry["backend"] in ("vulkan", "metal", "dx12", "gl", "host")
        assert entry["device_type"] in (
            "discrete_gpu",
            "integrated_gpu",
            "virtual_gpu",
            "cpu",
            "other",
        )
        assert entry["driver"] or entry["driver_info"]  # GL reports its version in driver_info
        assert entry["limits"]["max_storage_buffer_binding_size"] > 0
        if entry["backend"] == "host":  # threads, no workgroups
            assert entry["limits"]["threads"] > 0
        else:
            assert entry["limits"]["max_compute_workgroups_per_dimension"] > 0
        assert isinstance(entry["features"], list)
    # Which adapters the default selection uses, and why, as the context opens them.
    used = [a["index"] for a in listed if a["default_selection"]["used"]]
    assert used == [d.adapter.index for d in ag.MultiGpuContext().devices]
    assert all(a["default_selection"]["reason"] for a in listed)
    host = listed[-1]
    assert host["backend"] == "host"
    assert host["default_selection"] == {"used": True, "reason": "the host CPU device"}


def test_info_text_shows_the_host_and_the_selection(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    host = ag.adapters()[-1]
    assert host.describe() in out
    assert f"{host.limits['threads']} hardware threads; SIMD {host.features[0]}" in out
    assert "default selection: used (the host CPU device)" in out
    if all(a.is_software for a in ag.adapters()):
        assert "default selection: left out (software adapter on the host's cores" in out


def test_info_backends_filter(capsys):
    backend = ag.adapters()[0].backend
    assert main(["info", "--json", "--backends", backend]) == 0
    listed = json.loads(capsys.readouterr().out)["adapters"]
    assert listed and {a["backend"] for a in listed} == {backend}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["info", "--backends", "cuda"], "vulkan, metal, dx12, gl"),
        (["bench", "--rounds", "0"], "expected a positive integer, got '0'"),
        (["bench", "--devices-per-adapter", "1,x"], "expected positive integers"),
        (["calibrate", "--devices-per-adapter", "-1"], "expected a positive integer"),
    ],
)
def test_bad_arguments_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_info_text_names_backends(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert all(a.backend in out for a in ag.adapters())


def test_python_dash_m_runs_the_cli():
    done = python("-m", "amari_gpu", "info", "--json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["adapters"]
    assert [a["name"] for a in listed] == [a.name for a in ag.adapters()]


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"amari-gpu {ag.__version__}"


def test_plain_import_without_a_runtime_dir_prints_no_mesa_noise(tmp_path):
    # Not only the CLI: a user's own script that imports the package and opens a context on
    # every adapter (Vulkan and GL) prints nothing on stderr, and the dir goes at exit.
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(tmp_path)
    code = (
        "import os, numpy as np, amari_gpu as ag\n"
        "ctx = ag.MultiGpuContext(backends=[a.backend for a in ag.adapters()])\n"
        "ctx.geometric_product(np.ones((64, 8), np.float32), np.ones((64, 8), np.float32))\n"
        "print(os.environ['XDG_RUNTIME_DIR'])\n"
    )
    done = python("-c", code, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.strip().startswith(str(tmp_path))
    assert list(tmp_path.iterdir()) == [], "the private runtime dir was left behind"


def test_a_valid_runtime_dir_is_left_alone(tmp_path):
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path))
    done = python("-c", "import os, amari_gpu\nprint(os.environ['XDG_RUNTIME_DIR'])", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path)


def test_doctor_says_how_to_set_the_runtime_dir(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(tmp_path)
    done = python("-m", "amari_gpu", "doctor", env=env)
    assert done.returncode == 0, done.stderr
    assert "export XDG_RUNTIME_DIR=$(mktemp -d)" in done.stdout


def test_doctor_honours_the_vulkan_loader_override(tmp_path):
    # VK_DRIVER_FILES (or the older VK_ICD_FILENAMES) replaces the loader's search: doctor
    # reports the manifests it names, and says so when they do not exist.
    manifest = tmp_path / "only.json"
    manifest.write_text("{}")
    missing = tmp_path / "missing.json"
    for name in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("VK_")}
        env[name] = os.pathsep.join([str(manifest), str(missing)])
        code = (
            "import json\n"
            "from amari_gpu._system import linux_checks\n"
            "print(json.dumps([c.__dict__ for c in linux_checks()]))"
        )
        done = python("-c", code, env=env)
        assert done.returncode == 0, done.stderr
        checks = {c["name"]: c for c in json.loads(done.stdout)}
        icds = checks["Vulkan drivers (ICD manifests)"]
        assert icds["ok"] is True
        assert icds["detail"].startswith(f"{name}=")
        assert "only.json" in icds["detail"] and f"missing: {missing}" in icds["detail"]
        env[name] = str(missing)
        done = python("-c", code, env=env)
        icds = {c["name"]: c for c in json.loads(done.stdout)}["Vulkan drivers (ICD manifests)"]
        assert icds["ok"] is False and "no existing file" in icds["detail"]


def test_without_a_runtime_dir_the_cli_gives_itself_a_private_one(tmp_path):
    # Mesa's loaders print "XDG_RUNTIME_DIR is invalid or not set" without one; the
    # commands set a private directory (and remove it at exit), doctor after reporting.
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(tmp_path)
    for argv in (["info"], ["doctor", "--json"]):
        done = python("-m", "amari_gpu", *argv, env=env)
        assert done.returncode == 0, done.stderr
        assert "XDG_RUNTIME_DIR" not in done.stderr, done.stderr
        assert list(tmp_path.iterdir()) == [], "the private runtime dir was left behind"
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["XDG_RUNTIME_DIR"]["detail"].startswith("not set or missing")


def test_doctor_smoke_tests_every_adapter_and_the_host(capsys):
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    found = ag.adapters()
    assert report["ok"] and report["usable"] == len(found)
    assert [r["index"] for r in report["adapters"]] == [a.index for a in found]
    for r in report["adapters"]:
        assert r["ok"] and r["error"] is None
        kernels = [k["kernel"] for k in r["kernels"]]
        assert kernels == [
            "calibrate",
            "geometric_product",
            "tropical_matmul",
            "fisher_information",
        ]
        assert all(k["ok"] and k["s"] > 0 for k in r["kernels"])
    host = report["adapters"][-1]
    assert host["backend"] == "host"
    assert host["simd"] == found[-1].features[0] and host["threads"] == found[-1].limits["threads"]
    selection = report["default_selection"]
    assert [d["index"] for d in selection if d["used"]] == [
        d.adapter.index for d in ag.MultiGpuContext().devices
    ]
    if sys.platform.startswith("linux") and "vulkan" in {a.backend for a in ag.adapters()}:
        names = {c["name"]: c for c in report["checks"]}
        assert names["Vulkan loader"]["ok"] and names["Vulkan drivers (ICD manifests)"]["ok"]


def test_doctor_text_reports_each_adapter_and_the_host(capsys):
    assert main(["doctor"]) == 0
    captured = capsys.readouterr()
    found = ag.adapters()
    assert f"Result: {len(found)} of {len(found)} devices usable.\n" in captured.out
    assert "(usable)" not in captured.out
    for a in found:
        assert f"ok    {a.describe()}" in captured.out
    host = found[-1]
    simd_line = f"host device: SIMD {host.features[0]}, {host.limits['threads']} threads"
    assert simd_line in captured.out
    assert f"used      [{host.index}] the host CPU device" in captured.out
    assert "max rel. error" in captured.out and "FAIL" not in captured.out
    assert "doctor" in captured.err  # progress went to stderr, not into the report


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux install hints")
def test_doctor_says_what_to_install_when_nothing_is_there():
    checks = [
        Check("Vulkan loader", False, "libvulkan.so.1 not found"),
        Check("Vulkan drivers (ICD manifests)", False, "none"),
        Check("EGL library", False, "libEGL.so.1 not found"),
        Check("EGL vendors (GLVND)", False, "none"),
        Check("Mesa DRI drivers (GL)", False, "none"),
    ]
    hints = "\n".join(fixes(checks, [], []))
    assert "No adapter" in hints
    assert MESA_VULKAN in hints and MESA_GL in hints
    assert "apt-get install mesa-vulkan-drivers libvulkan1" in MESA_VULKAN
    assert "libegl1 libegl-mesa0 libgl1-mesa-dri" in MESA_GL


def test_doctor_on_a_backend_of_another_platform_says_so(tmp_path):
    # Metal exists only on Apple systems, DX12 only on Windows: on Linux, doctor says that,
    # and none of the Mesa hints (the XDG_RUNTIME_DIR one included) that concern Vulkan/GL.
    if sys.platform == "darwin":
        backend, words = "dx12", "DX12 exists only on Windows"
    else:
        backend, words = "metal", "Metal exists only on macOS and iOS"
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(tmp_path)
    done = python("-m", "amari_gpu", "doctor", "--backends", backend, env=env)
    assert done.returncode == 1, done.stderr
    assert f"none  backend {backend}: no adapter: {words}" in done.stdout
    assert f"  - Backend {backend}: no adapter: {words}." in done.stdout
    assert "Result: no device to test on the backends named." in done.stdout
    hints = done.stdout.split("To fix:")[1]
    assert "XDG_RUNTIME_DIR" not in hints and "Vulkan" not in hints


def test_calibrate_says_which_figures_do_not_apply_to_the_host(capsys):
    assert main(["calibrate", "--backends", "vulkan,host"]) == 0
    out = capsys.readouterr().out
    host, gpu = out.split("device 1:")[1], out.split("device 1:")[0]
    assert "GPU timestamp cost n/a (host device)" in host
    assert "max buffer n/a (host device)" in host
    assert "n/a (host device)" not in gpu
    assert "max buffer " in gpu and " GB; max storage binding" in gpu


def test_calibrate_json_has_measured_figures(capsys):
    assert main(["calibrate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    default = ag.MultiGpuContext()
    assert [d["adapter"] for d in out["devices"]] == [d.adapter.describe() for d in default.devices]
    for d in out["devices"]:
        for key in ("transfer_gb_s", "launch_latency_s", "kernel_bandwidth_gb_s", "peak_gflops"):
            assert isinstance(d[key], float) and d[key] > 0, key
        assert {"geometric_algebra", "tropical", "information_geometry"} <= set(d["throughput"])
        assert all(v > 0 for v in d["throughput"].values())
    assert out["seconds"] >= 0


def test_calibrate_text_per_logical_device_and_the_host(capsys):
    # Two logical devices on lavapipe and the host device, which shares their cores.
    assert main(["calibrate", "--backends", "vulkan,host", "--devices-per-adapter", "2"]) == 0
    out = capsys.readouterr().out
    assert "device 0:" in out and "device 1:" in out
    host = ag.adapters()[-1]
    assert f"device 2: {host.describe()}" in out
    # Every family's rate, by name: the GA family among them.
    assert re.search(r"items/s: (\w+ [\d.e+-]+, )*geometric_algebra [\d.e+-]+", out), out
    assert (
        "shares hardware with devices [1, 2]" in out
        and "shares hardware with devices [0, 1]" in out
    )


def test_bench_writes_the_study(capsys, monkeypatch, tmp_path):
    # The quick settings take a minute or so; the CLI wiring is the same with a tiny one.
    tiny = dataclasses.replace(scaling.QUICK, sizes={"tropical": (32,)}, rounds=1)
    monkeypatch.setattr(scaling, "QUICK", tiny)
    assert (
        main(["bench", "--quick", "--json", "--out", str(tmp_path), "--devices-per-adapter", "1"])
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert printed["rows"] == saved["rows"]
    assert {r["family"] for r in saved["rows"]} == {"tropical"}
    assert all(r["correct"] for r in saved["rows"])
    assert (tmp_path / "report.md").read_text().startswith("# amari_gpu scaling study")


def test_demo_checks_every_device_and_the_default_selection(capsys):
    assert main(["demo", "--items", "20000"]) == 0
    out = capsys.readouterr().out
    assert "WRONG" not in out
    found = ag.adapters()
    host = found[-1]
    # Per device alone (the host included), all together and the default selection: the
    # product, tropical + Fisher, heat + Life grids (or a line saying a host-only context
    # has none yet).
    assert out.count("OK") >= 2 * len(found) + 4
    grid_lines = out.count("heat 512x384") + out.count("heat and Life not run")
    assert grid_lines == len(found) + 2
    assert f"  {host.describe()}" in out
    assert "used: the host CPU device" in out
    default = ag.MultiGpuContext()
    names = ", ".join(f"{d.id}: {d.adapter.name} ({d.adapter.backend})" for d in default.devices)
    assert f"Default selection ({len(default.devices)} devices: {names}):" in out
    # The plans name every device they gave chunks to, the host's included.
    assert "(host)" in out.split("Everything together")[1]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_plain_lines_when_not_a_terminal():
    stream = io.StringIO()
    with Progress(8, "work", stream=stream) as bar:
        for _ in range(8):
            bar.advance()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "work (8 steps) ..."
    assert lines[1:4] == ["work: 25% (2/8)", "work: 50% (4/8)", "work: 75% (6/8)"]
    assert lines[4].startswith("work: done in ")
    assert "\r" not in stream.getvalue()


def test_progress_animates_on_a_terminal_and_is_silent_when_disabled():
    tty = _Terminal()
    with Progress(4, "work", stream=tty) as bar:
        bar.advance(4, note="last")
    assert "\r" in tty.getvalue() and "[" + "#" * 28 + "] 4/4" in tty.getvalue()
    quiet = _Terminal()
    with Progress(4, "work", stream=quiet, enabled=False) as bar:
        bar.advance(4)
    with Progress(None, "spin", stream=quiet, enabled=False):
        pass
    assert quiet.getvalue() == ""
