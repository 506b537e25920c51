"""Static checks of the public API's result types: mypy (``make lint``) checks this file; it
is never run. A DeviceArray operand gives a DeviceArray, unless a numpy ``out=`` receives
the gathered result. Each method is typed through its shape's Protocol (``_shapes``): a
method read from a context is bound to it, and every shape's overloads are checked here
through at least one method."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import numpy.typing as npt
from amari_gpu import _shapes
from amari_gpu.cluster import RayContext
from typing_extensions import assert_type

F32 = npt.NDArray[np.float32]
# Geometric algebra keeps float32 and float64 (numpy's promotion).
FLOAT = npt.NDArray[np.float32 | np.float64]


def results(ctx: ag.MultiGpuContext, x: F32, d: ag.DeviceArray) -> None:
    """Each call's declared result type."""
    assert_type(ctx.geometric_product(x, x), FLOAT)
    assert_type(ctx.geometric_product(d, x), ag.DeviceArray)
    assert_type(ctx.geometric_product(x, d), ag.DeviceArray)
    assert_type(ctx.geometric_product(d, d, out=d), ag.DeviceArray)
    assert_type(ctx.geometric_product(d, d, out=x), FLOAT)
    assert_type(ctx.sandwich(x, d), ag.DeviceArray)
    assert_type(ctx.scalar_product(d, d, out=x), FLOAT)
    assert_type(ctx.reverse(x), FLOAT)
    assert_type(ctx.reverse(d), ag.DeviceArray)
    assert_type(ctx.reverse(d, out=d), ag.DeviceArray)
    assert_type(ctx.reverse(d, out=x), FLOAT)
    assert_type(ctx.normalize(d), ag.DeviceArray)
    assert_type(ctx.grade_projection(d, 2, out=x), FLOAT)
    assert_type(ctx.dual(x), FLOAT)


def information_results(ctx: ag.MultiGpuContext, x: F32, d: ag.DeviceArray) -> None:
    """The information-geometry maps: a DeviceArray operand gives a DeviceArray, numpy ones
    float32 or float64 (the maps keep float64); the Fisher matrix is always a float64 numpy
    array."""
    assert_type(ctx.fisher_categorical(x), FLOAT)
    assert_type(ctx.fisher_categorical(d), ag.DeviceArray)
    assert_type(ctx.fisher_categorical(logits=d), ag.DeviceArray)
    assert_type(ctx.fisher_categorical(d, out=x), FLOAT)
    assert_type(ctx.fisher_gaussian(x, x), FLOAT)
    assert_type(ctx.fisher_gaussian(x, d), ag.DeviceArray)
    assert_type(ctx.fisher_gaussian(d, x, out=d), ag.DeviceArray)
    assert_type(ctx.fisher_gaussian(d, d, out=x), FLOAT)
    assert_type(ctx.fisher_information(d), npt.NDArray[np.float64])


def tropical_results(ctx: ag.MultiGpuContext, x: F32, d: ag.DeviceArray) -> None:
    """The tropical products: a DeviceArray ``a`` gives a DeviceArray; ``tropical_matvec``
    takes no DeviceArray ``out``; shortest paths are always numpy."""
    assert_type(ctx.tropical_matmul(x, x), FLOAT)
    assert_type(ctx.tropical_matmul(d, x), ag.DeviceArray)
    assert_type(ctx.tropical_matmul(d, x, "min_plus", out=d), ag.DeviceArray)
    assert_type(ctx.tropical_matmul(d, x, out=x), FLOAT)
    assert_type(ctx.tropical_matmul(a=d, b=x, semiring="max_plus"), ag.DeviceArray)
    assert_type(ctx.tropical_matvec(x, x), FLOAT)
    assert_type(ctx.tropical_matvec(d, x), ag.DeviceArray)
    assert_type(ctx.tropical_matvec(x, x, out=x), FLOAT)
    assert_type(ctx.shortest_paths(x), FLOAT)


def keyword_results(ctx: ag.MultiGpuContext, x: F32, d: ag.DeviceArray) -> None:
    """Operands passed by name, as the methods name them."""
    assert_type(ctx.geometric_product(a=x, b=d), ag.DeviceArray)
    assert_type(ctx.sandwich(r=x, x=x), FLOAT)
    assert_type(ctx.sandwich(r=d, x=x, out=d), ag.DeviceArray)
    assert_type(ctx.grade_projection(x=d, k=[1, 2]), ag.DeviceArray)
    assert_type(ctx.fisher_gaussian(mean=x, var=d), ag.DeviceArray)
    assert_type(ctx.fisher_categorical(probs=x), FLOAT)


def bound_shapes(ctx: ag.MultiGpuContext, ray: RayContext) -> None:
    """A method read from a context (or a RayContext, which shares the mixins) is its
    shape's Protocol, the binding a type checker gives the descriptor."""
    assert_type(ctx.geometric_product, _shapes.GaBinary)
    assert_type(ctx.inner_product, _shapes.GaBinary)
    assert_type(ctx.sandwich, _shapes.GaSandwich)
    assert_type(ctx.reverse, _shapes.GaUnary)
    assert_type(ctx.grade_projection, _shapes.GaGrades)
    assert_type(ctx.tropical_matmul, _shapes.TropicalProduct)
    assert_type(ctx.tropical_matvec, _shapes.TropicalMatvec)
    assert_type(ctx.fisher_categorical, _shapes.FisherCategorical)
    assert_type(ctx.fisher_gaussian, _shapes.FisherGaussian)
    assert_type(ray.geometric_product, _shapes.GaBinary)
    assert_type(ray.fisher_gaussian, _shapes.FisherGaussian)
