"""Package metadata as the package index shows it: licence expression (PEP 639) with the
licence files, authors, project URLs, classifiers for the OS and Python versions the abi3
wheel serves, and every import the type stubs make available at install time."""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

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
    undeclared = {m for m in modules if m not in sys.stdlib_module_names and m not in declared}
    assert not undeclared, f"stubs import {undeclared}: declare them or use the standard library"
