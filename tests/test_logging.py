"""Logging: the Rust core's events reach Python's ``logging`` under the ``amari_gpu``
logger (through pyo3-log): adapter selection and calibration at INFO, device failures at
WARNING; nothing is printed when the application has not configured logging."""

from __future__ import annotations

import logging
import os
import textwrap

import amari_gpu as ag
import numpy as np
import pytest

from tests._process import python


@pytest.fixture
def info(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    # A level set through logging reaches the bridge's cache by itself.
    caplog.set_level(logging.INFO, logger="amari_gpu")
    return caplog


def _ours(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    records = [r for r in caplog.records if r.name.split(".")[0] == "amari_gpu"]
    assert all(r.name.startswith("amari_gpu.") for r in records)
    return records


def test_selection_and_calibration_are_logged_at_info(info, tmp_path, monkeypatch):
    monkeypatch.setenv("AMARI_GPU_CACHE_DIR", str(tmp_path))
    ctx = ag.MultiGpuContext(adapters=[0], devices_per_adapter=2)
    name = ctx.devices[0].adapter.name
    ctx.calibrate()
    records = _ours(info)
    messages = [r.getMessage() for r in records]
    selection = [r for r in records if r.getMessage().startswith("opening 2 devices")]
    assert selection and selection[0].levelno == logging.INFO
    assert name in selection[0].getMessage()
    assert selection[0].name == "amari_gpu.selection"
    assert "calibrating 2 devices…" in messages
    measured = [r for r in records if r.getMessage().startswith("calibrated device 0 (")]
    assert measured and measured[0].levelno == logging.INFO
    assert measured[0].name == "amari_gpu.calibration.context"
    assert name in measured[0].getMessage() and measured[0].getMessage().endswith(" s")
    # The second logical device shares the adapter's measurement.
    assert any(m.startswith("device 1 (") and "shared" in m for m in messages)
    assert any(m.startswith("calibration done in ") for m in messages)

    # A later context on the same adapter finds the figures in the cache.
    info.clear()
    ag.MultiGpuContext(adapters=[0]).calibrate()
    assert any("loaded from the cache" in r.getMessage() for r in _ours(info))


def test_a_device_failure_is_a_warning_naming_the_reason_and_the_requeued_chunks(caplog):
    ctx = ag.MultiGpuContext(
        backends=["vulkan"], devices_per_adapter=2, chunk_items=1024, strategy="balanced"
    )
    ctx.calibrate()
    caplog.set_level(logging.WARNING, logger="amari_gpu")
    ctx.inject_fault(1, after_chunks=2)
    a = np.ones((20_000, 8), np.float32)
    ctx.geometric_product(a, a)
    failures = [r for r in _ours(caplog) if "failed" in r.getMessage()]
    assert len(failures) == 1
    record = failures[0]
    assert record.levelno == logging.WARNING and record.name == "amari_gpu.worker"
    assert record.getMessage().startswith("device 1 (")
    assert "injected fault" in record.getMessage() and "re-queued" in record.getMessage()


def test_nothing_is_printed_unless_the_application_configures_logging(tmp_path):
    script = textwrap.dedent(
        """
        import numpy as np
        import amari_gpu as ag

        ctx = ag.MultiGpuContext(
            backends=["vulkan"], devices_per_adapter=2, chunk_items=1024, strategy="balanced"
        )
        ctx.inject_fault(1, after_chunks=1)
        a = np.ones((20_000, 8), np.float32)
        ctx.geometric_product(a, a)
        assert not ctx.health()[1]["healthy"]
        print("ok")
        """
    )
    quiet = python("-c", script, env={**os.environ, "AMARI_GPU_CACHE_DIR": str(tmp_path)})
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip() == "ok"
    assert quiet.stderr == ""

    # With logging configured, the same run says what happened.
    shown = python(
        "-c",
        "import logging; logging.basicConfig(level=logging.INFO)\n" + script,
        env={**os.environ, "AMARI_GPU_CACHE_DIR": str(tmp_path)},
    )
    assert shown.returncode == 0, shown.stderr
    assert "WARNING:amari_gpu.worker:device 1 (" in shown.stderr
    assert "INFO:amari_gpu.selection:opening 2 devices" in shown.stderr


def test_logging_configured_after_the_first_call_shows_the_next_records(tmp_path):
    # A fresh process, so that no level is configured or cached before the first call: the
    # first context logs its selection while nothing is configured (the bridge then caches
    # WARNING for that logger); logging is configured afterwards, as in a notebook, and the
    # next context's records must show without any call to reset_log_levels().
    script = textwrap.dedent(
        """
        import logging, sys
        import amari_gpu as ag

        ag.MultiGpuContext(backends=["vulkan"])
        print("-- basicConfig", file=sys.stderr, flush=True)
        logging.basicConfig(level=logging.INFO)
        ag.MultiGpuContext(backends=["vulkan"])
        print("-- debug level", file=sys.stderr, flush=True)
        logging.getLogger("amari_gpu").setLevel(logging.DEBUG)
        logging.getLogger("amari_gpu").setLevel(logging.WARNING)
        ag.MultiGpuContext(backends=["vulkan"])
        print("-- disable", file=sys.stderr, flush=True)
        logging.getLogger("amari_gpu").setLevel(logging.NOTSET)
        logging.disable(logging.INFO)
        ag.MultiGpuContext(backends=["vulkan"])
        print("-- enable", file=sys.stderr, flush=True)
        logging.disable(logging.NOTSET)
        ag.MultiGpuContext(backends=["vulkan"])
        """
    )
    run = python("-c", script, env={**os.environ, "AMARI_GPU_CACHE_DIR": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    parts = run.stderr.split("-- ")
    assert [p.split("\n")[0] for p in parts] == [
        "",
        "basicConfig",
        "debug level",
        "disable",
        "enable",
    ], run.stderr
    opening = "INFO:amari_gpu.selection:opening 1 device on"
    # Nothing configured: nothing printed.
    assert parts[0] == "", run.stderr
    # Configured after the first call: shown.
    assert opening in parts[1], run.stderr
    # Raised to WARNING, then disabled, the INFO line goes; lowered again, it comes back.
    assert opening not in parts[2] and opening not in parts[3], run.stderr
    assert opening in parts[4], run.stderr
