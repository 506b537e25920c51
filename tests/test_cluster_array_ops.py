"""A ClusterArray acts like a local DeviceArray (``array_ops``' rules, one place): the local
indexing and elementwise cases of ``test_device_array_ops`` run here with their context a
RayContext over two loopback nodes (the fixtures of this module win), each computed by the
nodes holding the rows with numpy's float32 bits; a row copy lost with its node is made
again from its lineage, and arithmetic moves no operand rows through the driver."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest

# The local cases, run here on the RayContext below.
from test_device_array_ops import (  # noqa: F401
    _data,
    _same,
    test_a_row_copy_outlives_its_parent,
    test_bad_row_keys_are_refused_like_numpy_or_named,
    test_binary_ufuncs_are_numpys_on_edge_values,
    test_broadcasts_that_keep_the_device_arrays_shape,
    test_empty_arrays_and_rows_wider_than_a_pass,
    test_np_sum_and_other_gathering_functions_are_refused,
    test_numpy_2_promotion_keeps_float32_or_refuses,
    test_operators_are_numpys,
    test_out_takes_a_device_array_of_the_results_shape,
    test_row_indexing_is_numpys_first_axis,
)

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    # Twice the resource: a second RayContext runs beside the module's.
    with helpers.local_cluster([{"amari_gpu": 2}] * 2) as c:
        yield c


@pytest.fixture(scope="module")
def ctx(cluster: Any) -> Iterator[ag.RayContext]:
    with ag.RayContext(backends=["vulkan"]) as rc:
        yield rc


@pytest.fixture(scope="module")
def ctx2(ctx: ag.RayContext) -> ag.RayContext:
    """The local cases' two-device context: the two nodes."""
    return ctx


def _moved(rc: ag.RayContext) -> int:
    return sum(s["bytes_sent"] + s["bytes_received"] for s in rc.stats())


def test_arithmetic_and_rows_stay_on_the_nodes(ctx: ag.RayContext) -> None:
    a, b = _data(20_000, 8, 31), _data(20_000, 8, 32)
    x, y = ctx.asarray(a), ctx.asarray(b)
    assert isinstance(x, ag.cluster.ClusterArray)
    before = _moved(ctx)
    with np.errstate(all="ignore"):
        z = np.sqrt(x * y + 1.0) / x
        part = z[5000:15000] - y[5000:15000]
        row = z[12345]
    # Only the scalar words travel: no operand's rows (640 KiB each) cross the driver.
    assert _moved(ctx) - before < 4096
    assert isinstance(part, ag.cluster.ClusterArray) and part.shape == (10_000, 8)
    assert {node for node, _, _ in part.sharding} == {0, 1}
    with np.errstate(all="ignore"):
        want = np.sqrt(a * b + np.float32(1.0)) / a
    assert _same(part.numpy(), want[5000:15000] - b[5000:15000])
    assert _same(row.numpy(), want[12345]) and row.shape == (8,)


def test_a_row_copy_lost_with_its_node_is_made_again(cluster: Any) -> None:
    a = _data(3000, 4, 33)
    with ag.RayContext(backends=["vulkan"]) as rc:
        x = rc.asarray(a)
        part = x[1000:2600]
        x.free()
        node = part.sharding[-1][0]
        rc.inject_fault(node, after_chunks=0)
        assert _same((part + 1).numpy(), a[1000:2600] + np.float32(1))
        assert not rc.health()[node]["healthy"]
        assert _same(part.numpy(), a[1000:2600])


def test_a_local_device_array_is_refused_as_an_operand(ctx: ag.RayContext) -> None:
    a = _data(50, 3, 34)
    with ag.MultiGpuContext(backends=["vulkan"]) as local:
        x, y = ctx.asarray(a), local.asarray(a)
        for call in (lambda: x + y, lambda: y + x, lambda: np.multiply(x, y)):
            with pytest.raises(ag.InvalidArgumentError, match="of another context"):
                call()
