"""Type stubs of the native extension (thin bindings of the Rust core)."""

from typing import Any, final

import numpy as np
import numpy.typing as npt

__all__ = ["Context", "Profile", "__version__", "adapters", "profile_start", "profile_stop"]

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
        gpu_timestamps: bool | None = None,
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

@final
class Profile:
    def events(self) -> list[dict[str, Any]]: ...
    def calls(self) -> list[dict[str, Any]]: ...
    def summary(self) -> dict[str, Any]: ...
    def chrome_trace(self) -> str: ...

def profile_start(ctx: Context) -> Profile: ...
def profile_stop(ctx: Context) -> None: ...

# --- geometric algebra ---
__all__ += ["ga_apply"]

def ga_apply(
    ctx: Context,
    operation: str,
    signature: tuple[int, int, int],
    operands: list[npt.NDArray[np.float32]],
    grades: int = 0,
    strategy: str | None = None,
) -> tuple[npt.NDArray[np.float32], dict[str, Any]]: ...

# --- tropical ---
__all__ += ["shortest_paths", "tropical_matmul", "tropical_matvec"]

def tropical_matmul(
    ctx: Context,
    a: npt.NDArray[np.float32],
    b: npt.NDArray[np.float32],
    semiring: str,
    strategy: str | None = None,
) -> tuple[npt.NDArray[np.float32], dict[str, Any]]: ...
def tropical_matvec(
    ctx: Context,
    a: npt.NDArray[np.float32],
    x: npt.NDArray[np.float32],
    semiring: str,
    strategy: str | None = None,
) -> tuple[npt.NDArray[np.float32], dict[str, Any]]: ...
def shortest_paths(
    ctx: Context,
    w: npt.NDArray[np.float32],
    strategy: str | None = None,
) -> tuple[npt.NDArray[np.float32], dict[str, Any]]: ...

# --- information geometry ---
__all__ += ["fisher_categorical", "fisher_gaussian", "fisher_information"]

def fisher_information(
    ctx: Context,
    scores: npt.NDArray[np.float32],
    weights: npt.NDArray[np.float32] | None = None,
    strategy: str | None = None,
) -> tuple[npt.NDArray[np.float64], dict[str, Any]]: ...
def fisher_categorical(
    ctx: Context,
    probs: npt.NDArray[np.float32] | None = None,
    logits: npt.NDArray[np.float32] | None = None,
    strategy: str | None = None,
) -> tuple[npt.NDArray[np.float32], dict[str, Any]]: ...
def fisher_gaussian(
    ctx: Context,
    mean: npt.NDArray[np.float32],
    var: npt.NDArray[np.float32],
    strategy: str | None = None,
) -> tuple[npt.NDArray[np.float32], dict[str, Any]]: ...

# --- domain decomposition ---
__all__ += ["life", "stencil"]

def stencil(
    ctx: Context,
    grid: npt.NDArray[np.float32],
    steps: int,
    alpha: float,
    boundary: str,
    halo: int,
    rebalance: bool = True,
    split: list[int] | None = None,
) -> tuple[npt.NDArray[np.float32], dict[str, Any]]: ...
def life(
    ctx: Context,
    grid: npt.NDArray[np.uint8],
    steps: int,
    halo: int,
    rebalance: bool = True,
    split: list[int] | None = None,
) -> tuple[npt.NDArray[np.uint8], dict[str, Any]]: ...
