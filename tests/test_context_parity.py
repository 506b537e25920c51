"""One context type over a backend: ``MultiGpuContext`` and ``RayContext`` have the same
public surface (every method and property, with the same parameters), written once on their
common base, and refuse the same bad input, the same closed context, with the same errors
(the cluster's on a real Ray cluster of this machine: one loopback node offering the
resource twice)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu._context_base import HEALTH_KEYS, STATS_KEYS, Context
from amari_gpu.cluster.array import ClusterArrayMixin
from amari_gpu.cluster.context import RayContext

BACKENDS = ["vulkan"]

TRANSPORT_ONLY = {"nodes": RayContext}
"""The one public name of one context only: ``RayContext.nodes``, its ``devices`` under the
name the cluster's docs use (both contexts have ``devices``)."""

OWN = {
    ag.MultiGpuContext: {"__init__", "from_ray"},
    RayContext: {"__init__", "nodes"},
}
"""What each context class defines itself: its constructor, and what belongs to where its
work runs. Everything else is the base's (or a family's), so a method added once is on
both."""


def _surface(cls: type) -> dict[str, Any]:
    """Every public method and property of ``cls`` (and ``with``, ``repr``, ``str``): a
    method as its parameters (name, kind, default), a property as whether it is settable."""
    out: dict[str, Any] = {}
    for name in dir(cls):
        if name.startswith("_") and name not in ("__enter__", "__exit__", "__repr__", "__str__"):
            continue
        value = inspect.getattr_static(cls, name)
        if isinstance(value, property):
            out[name] = ("property", value.fset is not None)
        elif callable(value):
            params = inspect.signature(value).parameters.values()
            out[name] = ("method", [(p.name, p.kind, p.default) for p in params])
        else:
            out[name] = ("attribute", type(value).__name__)
    return out


def test_both_contexts_have_the_same_surface() -> None:
    local, ray = _surface(ag.MultiGpuContext), _surface(RayContext)
    for name, cls in TRANSPORT_ONLY.items():
        assert name in _surface(cls)
        local.pop(name, None)
        ray.pop(name, None)
    assert sorted(set(local) ^ set(ray)) == []
    differ = {name: (local[name], ray[name]) for name in local if local[name] != ray[name]}
    assert differ == {}
    # The surface is a kernel context's: not an empty match.
    for name in ("geometric_product", "stencil", "map_rows", "asarray", "inject_fault"):
        assert local[name][0] == "method"
    assert local["strategy"] == ("property", True)


def test_each_context_class_is_thin_over_the_base() -> None:
    for cls, own in OWN.items():
        assert issubclass(cls, Context)
        defined = {
            name
            for name, value in vars(cls).items()
            if callable(value) or isinstance(value, property)
        }
        assert defined - {"_kernels"} == own, cls.__name__
    # Beside the base, each adds only how its arrays are made.
    assert {n for n in vars(ClusterArrayMixin) if not n.startswith("_")} == {
        "asarray",
        "from_ray",
    }


@pytest.fixture(scope="module")
def contexts() -> Iterator[tuple[ag.MultiGpuContext, RayContext]]:
    # Twice the resource: a second RayContext opens beside this one.
    with (
        helpers.local_cluster([{"amari_gpu": 2}]),
        ag.MultiGpuContext(backends=BACKENDS) as local,
        RayContext(backends=BACKENDS) as rc,
    ):
        yield local, rc


def _error(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[type[BaseException], str]:
    with pytest.raises(ag.AmariGpuError) as e:
        call(*args, **kwargs)
    return type(e.value), str(e.value)


BAD: dict[str, Callable[[Any], Any]] = {
    "inject_fault device_id": lambda c: c.inject_fault(7),
    "inject_fault device_id type": lambda c: c.inject_fault("0"),
    "inject_fault after_chunks": lambda c: c.inject_fault(0, after_chunks=-1),
    "inject_grid_rate device_id": lambda c: c.inject_grid_rate(7, 1.0),
    "inject_grid_rate rate": lambda c: c.inject_grid_rate(0, float("nan")),
    "reset_health device_id": lambda c: c.reset_health(True),
    "distribute_workload workload": lambda c: c.distribute_workload("w"),
    "distribute_workload strategy": lambda c: c.distribute_workload(
        ag.Workload("geometric_product", 10, 64.0, 32.0, 1.0), strategy="fastest"
    ),
    "strategy=": lambda c: setattr(c, "strategy", "fastest"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_gets_the_same_error_on_both(contexts: Any, case: str) -> None:
    local, rc = contexts
    # One device per context here, so the same index is out of range on both.
    assert len(local.devices) == len(rc.devices) == 1
    got = _error(BAD[case], rc)
    assert got == _error(BAD[case], local)
    assert got[0] is ag.InvalidArgumentError
    assert rc.strategy == local.strategy == "auto"


def test_what_one_context_cannot_do_is_refused_saying_why(contexts: Any) -> None:
    local, rc = contexts
    assert _error(local.inject_fault, 0, fault="kill") == (
        ag.InvalidArgumentError,
        "fault: expected one of ['device_error', 'hang'] (the faults a MultiGpuContext can "
        "make), got 'kill'",
    )
    kind, message = _error(local.from_ray, [])
    assert kind is ag.AmariGpuError and message.startswith("from_ray: a MultiGpuContext's")
    kind, message = _error(rc.calibrate)
    assert kind is ag.AmariGpuError and message.startswith("calibrate: a RayContext's nodes")
    kind, message = _error(rc.reset_health)
    assert kind is ag.AmariGpuError and "cannot take a node back" in message
    # asarray keeps dtypes on both (a RayContext's once refused all but float32), and
    # refuses the same ones with the same error.
    x = np.arange(8, dtype=np.float64).reshape(4, 2)
    for dtype in (None, np.float64, np.float32, np.float16):
        got, want = rc.asarray(x, dtype=dtype), local.asarray(x, dtype=dtype)
        assert got.dtype == want.dtype and got.numpy().tobytes() == want.numpy().tobytes()
    for bad in ({"dtype": np.int32}, {"dtype": "complex64"}):
        with pytest.raises(TypeError) as e:
            rc.asarray(x, **bad)
        with pytest.raises(TypeError) as e_local:
            local.asarray(x, **bad)
        assert str(e.value) == str(e_local.value)


def test_health_stats_and_repr_have_one_shape(contexts: Any) -> None:
    local, rc = contexts
    for ctx in (local, rc):
        health = ctx.health()
        assert list(health) == [0]
        assert set(HEALTH_KEYS) <= set(health[0]) and health[0]["healthy"] is True
        stats = ctx.stats()
        assert [s["device_id"] for s in stats] == [0]
        assert set(STATS_KEYS) <= set(stats[0]), sorted(set(STATS_KEYS) - set(stats[0]))
        assert stats[0]["bytes_moved"] == stats[0]["bytes_up"] + stats[0]["bytes_down"]
        name = type(ctx).__name__
        assert repr(ctx).startswith(f"{name}([0: ")
        unit = "node" if ctx is rc else "device"
        assert str(ctx).splitlines()[0] == f"{name} with 1 {unit}:"
        assert str(ctx).splitlines()[1].startswith(f"  {unit} 0: ")
    for device in rc.nodes[0].devices:
        assert f"{device['name']} ({device['backend']})" in str(rc).splitlines()[1]


_ONES = np.ones((2, 8), np.float32)

CALLS: dict[str, Callable[[Any], Any]] = {
    "geometric_product": lambda c: c.geometric_product(_ONES, _ONES),
    "calibrate": lambda c: c.calibrate(),
    "distribute_workload": lambda c: c.distribute_workload(
        ag.Workload("geometric_product", 10, 64.0, 32.0, 1.0)
    ),
    "health": lambda c: c.health(),
    "stats": lambda c: c.stats(),
    "inject_fault": lambda c: c.inject_fault(0),
    "inject_grid_rate": lambda c: c.inject_grid_rate(0, 1.0),
    "reset_health": lambda c: c.reset_health(),
    "profile": lambda c: c.profile(),
    "strategy=": lambda c: setattr(c, "strategy", "balanced"),
}


def test_every_call_on_a_closed_context_raises_the_same(contexts: Any) -> None:
    with RayContext(backends=BACKENDS) as rc:
        pass
    with ag.MultiGpuContext(backends=BACKENDS) as local:
        pass
    for ctx in (rc, local):
        assert ctx.closed
        assert repr(ctx) == str(ctx) == f"{type(ctx).__name__}(closed)"
        ctx.close()
        for name, call in CALLS.items():
            assert _error(call, ctx) == (ag.AmariGpuError, "the context is closed"), name
        assert ctx.strategy == "auto"
