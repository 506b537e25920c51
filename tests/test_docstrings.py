"""Every public name of amari_gpu says what it is: ``help()`` and IDEs show these docstrings,
and docs/api.md is written from them.

Public means: the names in ``amari_gpu.__all__``, the public modules of the package, and the
public methods and properties of every public class, inherited ones included as long as
they are defined in amari_gpu (so the kernel methods that ``MultiGpuContext`` gets from its
family mixins are checked, and what exceptions inherit from ``Exception`` is not).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import amari_gpu
import pytest

_SPEC = importlib.util.spec_from_file_location(
    "gen_api_docs", Path(__file__).resolve().parent.parent / "scripts" / "gen-api-docs.py"
)
assert _SPEC is not None and _SPEC.loader is not None
_API_DOCS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_API_DOCS)


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public methods and properties of ``cls``, each once, from the class that defines it:
    the walk scripts/gen-api-docs.py documents."""
    for name, attr in _API_DOCS.own_members(cls):
        yield f"{cls.__name__}.{name}", attr


def _public_names() -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = [("amari_gpu", amari_gpu)]
    for info in pkgutil.iter_modules(amari_gpu.__path__):
        # __main__ runs the command line on import.
        if not info.name.startswith("_"):
            with warnings.catch_warnings():
                # The deprecated aliases of amari_gpu.tools modules (amari_gpu.cli, ...) warn
                # on import (tests/test_packaging.py checks that); their docstrings count too.
                warnings.filterwarnings(
                    "ignore", r"amari_gpu\.\w+ is deprecated", DeprecationWarning
                )
                module = importlib.import_module(f"amari_gpu.{info.name}")
            found.append((module.__name__, module))
    for name in amari_gpu.__all__:
        obj = getattr(amari_gpu, name)
        # Plain data (``__version__``, ``STRATEGIES``) cannot carry a docstring of its own.
        if inspect.isclass(obj):
            found.append((name, obj))
            found.extend(_members(obj))
        elif callable(obj):
            found.append((name, obj))
    return found


PUBLIC = _public_names()


def test_the_walk_reaches_mixin_methods_and_properties() -> None:
    names = {name for name, _ in PUBLIC}
    # A walk that silently found nothing would make every test below vacuous.
    expected = {
        "amari_gpu.context",
        "adapters",
        "MultiGpuContext",
        "MultiGpuContext.geometric_product",
        "MultiGpuContext.tropical_matmul",
        "MultiGpuContext.fisher_information",
        "MultiGpuContext.calibrate",
        "Device.capabilities",
        "Profile.events",
        "Profile.save_chrome_trace",
        "AdapterInfo.describe",
    }
    assert expected <= names, sorted(expected - names)
    assert "AmariGpuError.with_traceback" not in names


@pytest.mark.parametrize(("name", "obj"), PUBLIC, ids=[name for name, _ in PUBLIC])
def test_has_a_docstring(name: str, obj: Any) -> None:
    doc = obj.__doc__ if isinstance(obj, property) else inspect.getdoc(obj)
    assert doc is not None and doc.strip(), f"{name} has no docstring"


@pytest.mark.parametrize(
    ("name", "cls"),
    [(n, o) for n, o in PUBLIC if inspect.isclass(o)],
    ids=[n for n, o in PUBLIC if inspect.isclass(o)],
)
def test_class_docstring_is_its_own(name: str, cls: type) -> None:
    # inspect.getdoc falls back to a base class's docstring; a public class needs its own
    # (an exception documented only by "Common base class for all non-exit exceptions."
    # tells the reader nothing).
    assert cls.__doc__ and cls.__doc__.strip(), f"{name} has no docstring of its own"
    # Dataclasses without a docstring get their signature as one.
    assert not cls.__doc__.startswith(f"{cls.__name__}("), f"{name} has only its signature"
