"""What every kernel-family mixin of ``MultiGpuContext`` may rely on."""

from __future__ import annotations

from typing import Any

from . import _native
from .planning import Plan


class KernelHost:
    """The context state a family's methods use: the native context and the last plan."""

    _native: Any
    last_plan: Plan | None

    def _record(self, plan: _native.PlanDict) -> None:
        self.last_plan = Plan.from_dict(plan)
