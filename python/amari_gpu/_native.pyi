"""Type stubs of the native extension (thin bindings of the Rust core)."""

from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import final

__all__ = ["Context", "__version__", "adapters", "geometric_product"]

__version__: str

def adapters() -> list[dict[str, Any]]: ...

@final
class Context:
    def __new__(
        cls,
        backends: list[str] | None = None,
        device_types: list[str] | None = None,
        adapters: list[int] | None = None,
        max_devices: int | None = None,
        devices_per_adapter: int = 1,
        chunk_items: int | None = None,
        sync_timeout_ms: int | None = None,
        strategy: str = "auto",
    ) -> Context: ...
    def devices(self) -> list[dict[str, Any]]: ...
    def calibrate(self, force: bool = False) -> list[dict[str, Any]]: ...
    def capabilities(self, device_id: int) -> dict[str, Any]: ...
    def distribute_workload(
        self,
        kernel: str,
        items: int,
        bytes_in_per_item: float,
        bytes_out_per_item: float,
        flops_per_item: float,
        strategy: str | None = None,
    ) -> dict[str, Any]: ...
    def health(self) -> dict[int, dict[str, Any]]: ...
    def stats(self) -> list[dict[str, Any]]: ...
    def inject_fault(self, device_id: int, after_chunks: int) -> None: ...
    def reset_health(self, device_id: int | None = None) -> None: ...

def geometric_product(
    ctx: Context,
    a: npt.NDArray[np.float32],
    b: npt.NDArray[np.float32],
    strategy: str | None = None,
) -> tuple[npt.NDArray[np.float32], dict[str, Any]]: ...
