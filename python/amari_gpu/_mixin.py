"""What every kernel-family mixin of ``MultiGpuContext`` may rely on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _native
from .planning import Plan

if TYPE_CHECKING:
    from .domain import DomainReport


class KernelHost:
    """The context state a family's methods use: the native context and the last plan.

    ``_kernels`` holds the kernel entry points a method calls with ``_native`` as first
    argument: the native module for a ``MultiGpuContext``; a ``RayContext`` puts its
    cluster dispatch there, so both run the same method definitions."""

    _native: Any
    _kernels: Any = _native
    last_plan: Plan | None
    last_run: DomainReport | None

    def _record(self, plan: _native.PlanDict) -> None:
        # A kernel call runs no grid: last_run says so rather than keep an older call's.
        self.last_plan = Plan.from_dict(plan)
        self.last_run = None
