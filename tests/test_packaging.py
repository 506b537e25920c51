"""Package metadata as the package index shows it: licence expression (PEP 639) with the
licence files, authors, project URLs, classifiers for the OS and Python versions the abi3
wheel serves, and every import the type stubs make available at install time."""

from __future__ import annotations

import ast
import importlib
import json
import pathlib
import re
import sys

import pytest
from _process import python

ROOT = pathlib.Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the dev environment is 3.11+
    tomllib = pytest.importorskip("tomli")


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_licence_is_an_spdx_expression_with_its_files(project):
    assert project["license"] == "MIT OR Apache-2.0"
    for name in project["license-files"]:
        assert (ROOT / name).is_file()
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]


def test_authors_urls_and_classifiers(project):
    assert project["authors"] and all(a["name"] for a in project["authors"])
    assert {"Repository", "Documentation", "Issues"} <= set(project["urls"])
    classifiers = set(project["classifiers"])
    assert {"Operating System :: POSIX :: Linux", "Typing :: Typed"} <= classifiers
    assert any(c.startswith("Development Status ::") for c in classifiers)
    low = project["requires-python"].removeprefix(">=")
    assert f"Programming Language :: Python :: {low}" in classifiers


def test_stub_imports_are_standard_library_or_declared(project):
    names = (d.split(">")[0].split("=")[0].split("[")[0] for d in project["dependencies"])
    declared = {n.strip() for n in names}
    stubs = ROOT / "python" / "amari_gpu" / "_native.pyi"
    modules = set()
    for node in ast.walk(ast.parse(stubs.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            modules.update(a.name.split(".")[0] for a in node.names)
    # The package's own records (Plan, AdapterInfo...) are what the bindings build: the
    # stub may name them; anything else must be the standard library or a dependency.
    declared.add("amari_gpu")
    undeclared = {m for m in modules if m not in sys.stdlib_module_names and m not in declared}
    assert not undeclared, f"stubs import {undeclared}: declare them or use the standard library"


def test_console_script_is_the_tools_command_line(project):
    from amari_gpu.tools import cli

    target = project["scripts"]["amari-gpu"]
    assert target == "amari_gpu.tools.cli:main"
    module, _, name = target.partition(":")
    assert getattr(importlib.import_module(module), name) is cli.main


def test_importing_the_package_loads_no_tooling():
    # The package root is the API: the command line, benchmarks and study load only when
    # asked for.
    done = python(
        "-c",
        "import json, sys, amari_gpu; print(json.dumps(sorted(sys.modules)))",
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert "amari_gpu" in loaded and "amari_gpu._native" in loaded
    tooling = {m for m in loaded if m.startswith("amari_gpu.tools")}
    tooling |= loaded & {"amari_gpu.cli", "amari_gpu.scaling", "amari_gpu.demo"}
    assert not tooling


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ("amari_gpu.cli", "amari_gpu.tools.cli", ["main"]),
        (
            "amari_gpu.scaling",
            "amari_gpu.tools.scaling",
            ["FULL", "QUICK", "Settings", "run_study", "write_report"],
        ),
        ("amari_gpu.demo", "amari_gpu.tools.demo", ["run"]),
    ],
)
def test_former_tool_paths_warn_and_still_work(monkeypatch, old, new, names):
    # A fresh import, whatever imported the alias earlier in this session.
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=re.escape(f"use {new}")) as caught:
        # As an import statement does (importlib.import_module would add a frame of its own).
        __import__(old)
    alias = sys.modules[old]
    # The warning blames the importing line, not the import machinery.
    assert [w.filename for w in caught] == [__file__]
    moved = importlib.import_module(new)
    assert alias.__all__ == names
    for name in names:
        assert getattr(alias, name) is getattr(moved, name), name


def test_former_cli_path_runs_the_command_line(monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "amari_gpu.cli", raising=False)
    with pytest.warns(DeprecationWarning, match="amari_gpu.tools.cli"):
        from amari_gpu.cli import main
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("amari-gpu ")
