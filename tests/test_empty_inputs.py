"""Every public kernel with zero-size inputs (0 rows, 0 columns, K = 0 for tropical products,
P = 0 for Fisher, an empty graph, empty batches), on a context with a lavapipe device and
the host CPU device: the mathematically right empty or neutral result, or an argument error
that names the argument, never an internal message (an empty graph once raised "models:
device 1: expected positive finite rates…": items of no cost on the host, which moves no
bytes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import amari_gpu as ag
import numpy as np
import pytest

Z = np.zeros


def F32(shape: tuple[int, ...]) -> np.ndarray:
    """float32 zeros: a float32 DeviceArray and its operands (operands share a dtype)."""
    return np.zeros(shape, np.float32)


# In the wrapper's element type: float64 rows (numpy or DeviceArray) and float32 alike.
ROW = (
    "fn row(a: array<amari_float, 3>) -> array<amari_float, 2> "
    "{ return array<amari_float, 2>(a[0] + a[2], a[1]); }"
)


@pytest.fixture(scope="module")
def ctx() -> Iterator[ag.MultiGpuContext]:
    made = ag.MultiGpuContext(backends=["vulkan", "host"])
    yield made
    made.close()


def _filled(shape: tuple[int, ...], value: float) -> np.ndarray:
    return np.full(shape, value, np.float32)


# name: (call, expected result or (error type, argument named)).
Call = Callable[[ag.MultiGpuContext], Any]
RESULTS: dict[str, tuple[Call, np.ndarray]] = {
    "geometric_product 0 rows": (lambda c: c.geometric_product(Z((0, 8)), Z((0, 8))), Z((0, 8))),
    "outer_product 0 rows x single": (lambda c: c.outer_product(Z((0, 8)), Z(8)), Z((0, 8))),
    "inner_product 0 rows": (lambda c: c.inner_product(Z(8), Z((0, 8))), Z((0, 8))),
    "scalar_product 0 rows": (lambda c: c.scalar_product(Z((0, 8)), Z((0, 8))), Z((0,))),
    "sandwich 0 rows": (lambda c: c.sandwich(Z(8), Z((0, 8))), Z((0, 8))),
    "reverse 0 rows": (lambda c: c.reverse(Z((0, 8))), Z((0, 8))),
    "reverse (2, 0, 8)": (lambda c: c.reverse(Z((2, 0, 8))), Z((2, 0, 8))),
    "grade_involution 0 rows": (lambda c: c.grade_involution(Z((0, 8))), Z((0, 8))),
    "grade_projection 0 rows": (lambda c: c.grade_projection(Z((0, 8)), 1), Z((0, 8))),
    "normalize 0 rows": (lambda c: c.normalize(Z((0, 8))), Z((0, 8))),
    "dual 0 rows": (lambda c: c.dual(Z((0, 8))), Z((0, 8))),
    "resident reverse 0 rows": (lambda c: c.reverse(c.asarray(Z((0, 8)))), Z((0, 8))),
    "resident scalar_product 0 rows": (
        lambda c: c.scalar_product(c.asarray(Z((0, 8))), Z((0, 8))),
        Z((0,)),
    ),
    "tropical_matmul m = 0": (lambda c: c.tropical_matmul(Z((0, 3)), Z((3, 2))), Z((0, 2))),
    "tropical_matmul K = 0 max_plus": (
        lambda c: c.tropical_matmul(Z((2, 0)), Z((0, 3))),
        _filled((2, 3), -np.inf),
    ),
    "tropical_matmul K = 0 min_plus": (
        lambda c: c.tropical_matmul(Z((2, 0)), Z((0, 3)), "min_plus"),
        _filled((2, 3), np.inf),
    ),
    "tropical_matmul n = 0": (lambda c: c.tropical_matmul(Z((2, 3)), Z((3, 0))), Z((2, 0))),
    "tropical_matmul K = n = 0": (lambda c: c.tropical_matmul(Z((2, 0)), Z((0, 0))), Z((2, 0))),
    "tropical_matmul all 0": (lambda c: c.tropical_matmul(Z((0, 0)), Z((0, 0))), Z((0, 0))),
    "tropical_matmul batch = 0": (
        lambda c: c.tropical_matmul(Z((0, 2, 3)), Z((0, 3, 2))),
        Z((0, 2, 2)),
    ),
    "tropical_matmul batched n = 0": (
        lambda c: c.tropical_matmul(Z((2, 2, 3)), Z((2, 3, 0))),
        Z((2, 2, 0)),
    ),
    "resident tropical_matmul m = 0": (
        lambda c: c.tropical_matmul(c.asarray(F32((0, 3))), F32((3, 2))),
        Z((0, 2)),
    ),
    "tropical_matvec m = 0": (lambda c: c.tropical_matvec(Z((0, 3)), Z(3)), Z((0,))),
    "tropical_matvec K = 0": (
        lambda c: c.tropical_matvec(Z((2, 0)), Z(0)),
        _filled((2,), -np.inf),
    ),
    "tropical_matvec batch = 0": (
        lambda c: c.tropical_matvec(Z((0, 2, 3)), Z((0, 3))),
        Z((0, 2)),
    ),
    "resident tropical_matvec m = 0": (
        lambda c: c.tropical_matvec(c.asarray(F32((0, 3))), F32((3,))),
        Z((0,)),
    ),
    "shortest_paths of an empty graph": (lambda c: c.shortest_paths(Z((0, 0))), Z((0, 0))),
    "fisher_categorical N = 0": (lambda c: c.fisher_categorical(probs=Z((0, 3))), Z((0, 3, 3))),
    "fisher_categorical logits N = 0": (
        lambda c: c.fisher_categorical(logits=Z((0, 3))),
        Z((0, 3, 3)),
    ),
    "fisher_gaussian N = 0": (
        lambda c: c.fisher_gaussian(Z((0, 3)), np.ones((0, 3))),
        Z((0, 6, 6)),
    ),
    "resident fisher_categorical N = 0": (
        lambda c: c.fisher_categorical(probs=c.asarray(F32((0, 3)))),
        Z((0, 3, 3)),
    ),
    "map_rows 0 rows": (lambda c: c.map_rows(ROW, Z((0, 3)), out_cols=2), Z((0, 2))),
    "resident map_rows 0 rows": (
        lambda c: c.map_rows(ROW, c.asarray(Z((0, 3))), out_cols=2),
        Z((0, 2)),
    ),
}

ERRORS: dict[str, tuple[Call, type[Exception], str]] = {
    "geometric_product of width 0": (
        lambda c: c.geometric_product(Z(0), Z(8)),
        ag.ShapeError,
        "a",
    ),
    "fisher_information N = 0": (
        lambda c: c.fisher_information(Z((0, 4))),
        ag.ShapeError,
        "scores",
    ),
    "fisher_information P = 0": (
        lambda c: c.fisher_information(Z((5, 0))),
        ag.ShapeError,
        "scores",
    ),
    "resident fisher_information N = 0": (
        lambda c: c.fisher_information(c.asarray(F32((0, 3)))),
        ag.ShapeError,
        "scores",
    ),
    "natural_gradient P = 0": (
        lambda c: c.natural_gradient(Z((5, 0)), Z(0), 0.1),
        ag.ShapeError,
        "scores",
    ),
    "natural_gradient N = 0": (
        lambda c: c.natural_gradient(Z((0, 3)), Z(3), 0.1),
        ag.ShapeError,
        "scores",
    ),
    "fisher_categorical K = 0": (
        lambda c: c.fisher_categorical(probs=Z((2, 0))),
        ag.ShapeError,
        "probs",
    ),
    "fisher_gaussian D = 0": (
        lambda c: c.fisher_gaussian(Z((2, 0)), np.ones((2, 0))),
        ag.ShapeError,
        "mean",
    ),
    "stencil 0 x 0": (lambda c: c.stencil(Z((0, 0)), 1), ag.ShapeError, "grid"),
    "stencil 0 rows": (lambda c: c.stencil(Z((0, 5)), 1), ag.ShapeError, "grid"),
    "life 0 x 0": (lambda c: c.life(Z((0, 0), np.uint8), 1), ag.ShapeError, "grid"),
    "map_rows 0 columns": (
        lambda c: c.map_rows(ROW, Z((4, 0)), out_cols=2),
        ag.ShapeError,
        "arrays[0]",
    ),
    "asarray 0 columns": (lambda c: c.asarray(Z((5, 0))), ag.ShapeError, "x"),
    "resident tropical_matmul n = 0": (
        lambda c: c.tropical_matmul(c.asarray(F32((2, 3))), F32((3, 0))),
        ag.ShapeError,
        "b",
    ),
}


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_an_empty_input_gives_the_empty_or_neutral_result(
    ctx: ag.MultiGpuContext, name: str
) -> None:
    call, want = RESULTS[name]
    got = call(ctx)
    if isinstance(got, ag.DeviceArray):
        got = got.numpy()
    assert isinstance(got, np.ndarray), name
    assert got.shape == want.shape, (name, got.shape)
    np.testing.assert_array_equal(got, want.astype(got.dtype), name)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_an_empty_input_without_a_result_is_an_error_naming_the_argument(
    ctx: ag.MultiGpuContext, name: str
) -> None:
    call, error, argument = ERRORS[name]
    with pytest.raises(error) as raised:
        call(ctx)
    assert str(raised.value).startswith(f"{argument}: expected"), str(raised.value)


def test_shortest_paths_of_an_empty_graph_writes_into_out(ctx: ag.MultiGpuContext) -> None:
    out = np.empty((0, 0), np.float64)
    assert ctx.shortest_paths(Z((0, 0)), out=out) is out
    assert ctx.shortest_paths(np.empty((0, 0), np.float32)).dtype == np.float32
    assert ctx.shortest_paths(np.empty((0, 0), np.float64)).dtype == np.float64
