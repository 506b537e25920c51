"""The command line: `info` lists the adapters (also as JSON) and `demo`, the README's main
job, runs and checks every kernel family on every adapter."""

from __future__ import annotations

import json

import amari_gpu as ag
from amari_gpu.cli import main


def test_info_json_lists_every_adapter(capsys):
    assert main(["info", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [a["index"] for a in listed] == [a.index for a in ag.adapters()]
    assert {"name", "backend", "device_type", "driver", "limits", "features"} <= set(listed[0])


def test_info_text_names_backends(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert all(a.backend in out for a in ag.adapters())


def test_demo_checks_every_adapter_and_passes(capsys):
    assert main(["demo", "--items", "20000"]) == 0
    out = capsys.readouterr().out
    assert "WRONG" not in out
    assert out.count("OK") == 2 * len(ag.adapters()) + 2
