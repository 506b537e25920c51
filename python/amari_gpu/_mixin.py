"""What every kernel-family mixin of ``MultiGpuContext`` may rely on."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from . import _native
from .planning import Plan

if TYPE_CHECKING:
    from .domain import DomainReport

F32 = npt.NDArray[np.float32]


class Kernels(Protocol):
    """The kernel entry points the family methods call (each with the context's ``_native``
    first): the native module's functions, or a RayContext's cluster versions of them."""

    def ga_apply(
        self,
        ctx: Any,
        operation: str,
        signature: tuple[int, int, int],
        operands: list[F32 | _native.DeviceArray],
        grades: int = 0,
        strategy: str | None = None,
        out: F32 | _native.DeviceArray | None = None,
    ) -> tuple[Any, _native.PlanDict | None]: ...
    def tropical_matmul(
        self,
        ctx: Any,
        a: F32 | _native.DeviceArray,
        b: F32,
        semiring: str,
        strategy: str | None = None,
        out: F32 | _native.DeviceArray | None = None,
        a_shape: tuple[int, ...] | None = None,
    ) -> tuple[Any, _native.PlanDict | None]: ...
    def tropical_matvec(
        self,
        ctx: Any,
        a: F32 | _native.DeviceArray,
        x: F32,
        semiring: str,
        strategy: str | None = None,
        out: F32 | _native.DeviceArray | None = None,
        a_shape: tuple[int, ...] | None = None,
    ) -> tuple[Any, _native.PlanDict | None]: ...
    def shortest_paths(
        self, ctx: Any, w: F32, strategy: str | None = None, out: F32 | None = None
    ) -> tuple[F32, _native.PlanDict]: ...
    def fisher_information(
        self,
        ctx: Any,
        scores: F32 | _native.DeviceArray,
        weights: F32 | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float64] | None = None,
    ) -> tuple[npt.NDArray[np.float64], _native.PlanDict | None]: ...
    def fisher_categorical(
        self,
        ctx: Any,
        values: F32 | _native.DeviceArray,
        logits: bool,
        strategy: str | None = None,
        out: F32 | _native.DeviceArray | None = None,
    ) -> tuple[Any, _native.PlanDict | None]: ...
    def fisher_gaussian(
        self,
        ctx: Any,
        mean: F32 | _native.DeviceArray,
        var: F32 | _native.DeviceArray,
        strategy: str | None = None,
        out: F32 | _native.DeviceArray | None = None,
    ) -> tuple[Any, _native.PlanDict | None]: ...
    def stencil(
        self,
        ctx: Any,
        grid: F32,
        alpha: float,
        boundary: str,
        options: _native.RunOptions,
        progress: Callable[[int, int], object] | None = None,
        out: F32 | None = None,
    ) -> tuple[F32, _native.DomainReportDict]: ...
    def life(
        self,
        ctx: Any,
        grid: npt.NDArray[np.uint8],
        options: _native.RunOptions,
        progress: Callable[[int, int], object] | None = None,
        out: npt.NDArray[np.uint8] | None = None,
    ) -> tuple[npt.NDArray[np.uint8], _native.DomainReportDict]: ...


class KernelHost:
    """The context state a family's methods use: the native context and the last plan.

    ``_kernels`` holds the kernel entry points a method calls with ``_native`` as first
    argument: the native module for a ``MultiGpuContext``; a ``RayContext`` puts its
    cluster dispatch there, so both run the same method definitions."""

    _native: Any
    _kernels: Kernels = _native
    last_plan: Plan | None
    last_run: DomainReport | None

    def _record(self, plan: _native.PlanDict | None) -> None:
        # A call that ran where resident rows live followed no plan: last_plan is left as
        # it was.
        if plan is None:
            return
        # A kernel call runs no grid: last_run says so rather than keep an older call's.
        self.last_plan = Plan.from_dict(plan)
        self.last_run = None
