"""Type stubs of the native extension (thin bindings of the Rust core)."""

from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import final

__all__ = ["Context", "__version__", "adapters"]

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
    ) -> Context: ...
    def devices(self) -> list[dict[str, Any]]: ...
    def geometric_product(
        self, a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]: ...
