"""Type stubs of the native extension (thin bindings of the Rust core)."""

from collections.abc import Callable
from typing import Protocol, TypedDict, final, type_check_only

import numpy as np
import numpy.typing as npt

from amari_gpu._adapters import AdapterInfo
from amari_gpu.context import Device, LeftOut
from amari_gpu.domain import DomainReport
from amari_gpu.planning import Capabilities, Plan

__all__ = [
    "BACKENDS",
    "BOUNDARIES",
    "DEVICE_TYPES",
    "SEMIRINGS",
    "STRATEGIES",
    "Balancer",
    "Context",
    "DeviceArray",
    "Profile",
    "__version__",
    "adapters",
    "backend_unavailable_reason",
    "call_thread_jobs",
    "check_workload",
    "copy_rows",
    "default_selection",
    "family_of",
    "pooled_output",
    "pooled_output_bytes",
    "profile_start",
    "profile_stop",
    "reset_log_levels",
]

__version__: str
STRATEGIES: tuple[str, ...]
SEMIRINGS: tuple[str, ...]
BOUNDARIES: tuple[str, ...]
BACKENDS: tuple[str, ...]
DEVICE_TYPES: tuple[str, ...]

# The records that cross the boundary, each described once. Plans, capabilities, adapter
# descriptions, devices, what a selection left out and grid reports are built by the
# bindings as the package's frozen dataclasses (``Plan``, ``Capabilities``, ``AdapterInfo``,
# ``Device``, ``LeftOut``, ``DomainReport``); the others are plain dicts, described here as
# TypedDicts for type checkers only (``type_check_only``).

@type_check_only
class SelectionDict(TypedDict):
    left_out: list[LeftOut]
    notes: list[str]
    summary: str

@type_check_only
class HealthDict(TypedDict):
    healthy: bool
    reason: str | None

@type_check_only
class StatsDict(TypedDict):
    device_id: int
    bytes_moved: int
    bytes_up: int
    bytes_down: int
    items_done: int
    chunks_done: int
    failed_chunks: int
    busy_s: float
    memory_in_use_bytes: int
    resident_bytes: int
    user_pipelines: int
    healthy: bool
    reason: str | None

@type_check_only
class EventDict(TypedDict):
    device: int | None
    kind: str
    chunk: int | None
    call: int
    start_s: float
    duration_s: float
    bytes: int
    items: int
    clock: str

@type_check_only
class KernelCallDict(TypedDict):
    call: int
    kernel: str
    items: int
    flops_per_item: float
    bytes_per_item: float
    strategy: str
    lower_bound_s: float
    estimated_makespan_s: float

@type_check_only
class CallPlanDict(TypedDict):
    strategy: str
    lower_bound_s: float
    estimated_makespan_s: float

@type_check_only
class CallDict(TypedDict):
    name: str
    method: str
    args: str
    start_s: float
    end_s: float
    device_s: float
    kernel_calls: list[KernelCallDict]
    plan: CallPlanDict

@type_check_only
class DeviceSummaryDict(TypedDict):
    busy_s: float
    utilization: float
    kernel_s: float
    transfer_s: float
    wait_s: float
    items: int
    items_per_s: float
    bytes: int
    bytes_per_s: float
    chunks: int
    retries: int

@type_check_only
class SummaryDict(TypedDict):
    calls: int
    kernel_calls: int
    makespan_s: float
    predicted_lower_bound_s: float
    efficiency: float
    imbalance: float
    overhead_fraction: float
    bottleneck: str
    figures: dict[str, float]
    devices: dict[int, DeviceSummaryDict]

@type_check_only
class UserCallDict(TypedDict):
    method: str
    args: str
    start_s: float
    end_s: float | None
    kernel_calls: list[int]

@type_check_only
class TraceProcessDict(TypedDict):
    pid: int
    label: str
    events: list[EventDict]
    kernel_calls: list[KernelCallDict]
    calls: list[UserCallDict]
    names: dict[int, str]

@type_check_only
class DeviceModelDict(TypedDict):
    device: int
    group: int
    launch_latency_s: float
    h2d_bytes_per_s: float
    d2h_bytes_per_s: float
    flops_per_s: float
    correction: float
    uncertainty: float
    memory_budget_bytes: int | None
    max_binding_bytes: int
    group_speedup: float
    group_members: int

@type_check_only
class DeviceRoundDict(TypedDict):
    device: int
    rows: int
    bands: int
    work: int
    upload_s: float
    compute_s: float
    readback_s: float

@type_check_only
class RoundDict(TypedDict):
    steps: int
    wall_s: float
    assemble_s: float
    compute_s: float
    exchange_s: float
    devices: list[DeviceRoundDict]

@type_check_only
class LayoutDict(TypedDict):
    at_step: int
    split: list[tuple[int, int]]
    bands: int
    seconds: float

# What the package passes in.

@type_check_only
class ContextOptions(TypedDict):
    backends: list[str] | None
    device_types: list[str] | None
    adapters: list[int] | None
    max_devices: int | None
    devices_per_adapter: int
    chunk_items: int | None
    sync_timeout_ms: int | None
    strategy: str
    gpu_timestamps: bool | None
    host_threads: int | None

@type_check_only
class RunOptions(TypedDict):
    steps: int
    halo: int
    rebalance: bool
    split: list[int] | None

@type_check_only
class RowsSpec(TypedDict):
    source: str
    out_cols: int
    params: list[tuple[str, float]]
    dtype: str

@type_check_only
class WorkloadFields(Protocol):
    @property
    def kernel(self) -> str: ...
    @property
    def items(self) -> int: ...
    @property
    def bytes_in_per_item(self) -> float: ...
    @property
    def bytes_out_per_item(self) -> float: ...
    @property
    def flops_per_item(self) -> float: ...

def adapters() -> list[AdapterInfo]: ...
def default_selection() -> list[tuple[bool, str]]: ...
def backend_unavailable_reason(backend: str) -> str: ...
def check_workload(workload: WorkloadFields) -> None: ...
def family_of(kernel: str) -> str | None: ...
def call_thread_jobs() -> int: ...
def pooled_output(shape: tuple[int, ...]) -> npt.NDArray[np.float32]: ...
def pooled_output_bytes() -> int: ...
def copy_rows(dst: npt.NDArray[np.uint8], src: npt.NDArray[np.uint8]) -> None: ...

@final
class Context:
    def __new__(cls, options: ContextOptions) -> Context: ...
    @property
    def strategy(self) -> str: ...
    def set_strategy(self, name: str) -> None: ...
    def devices(self) -> list[Device]: ...
    def selection(self) -> SelectionDict: ...
    def calibrate(self, force: bool = False) -> list[Capabilities]: ...
    def capabilities(self, device_id: int) -> Capabilities: ...
    def distribute_workload(
        self, workload: WorkloadFields, strategy: str | None = None
    ) -> Plan: ...
    def health(self) -> dict[int, HealthDict]: ...
    def stats(self) -> list[StatsDict]: ...
    def inject_fault(self, device_id: int, after_chunks: int, hold: bool = False) -> None: ...
    def inject_grid_rate(self, device_id: int, cells_per_s: float | None) -> None: ...
    def reset_health(self, device_id: int | None = None) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...

@final
class Profile:
    def events(self) -> list[EventDict]: ...
    def calls(self) -> list[CallDict]: ...
    def kernel_calls(self) -> list[KernelCallDict]: ...
    def begin_call(self, method: str, args: str) -> int | None: ...
    def end_call(self, index: int) -> None: ...
    def summary(self) -> SummaryDict: ...
    def chrome_trace(self) -> str: ...
    def device_names(self) -> dict[int, str]: ...

def profile_start(ctx: Context) -> Profile: ...
def reset_log_levels() -> None: ...
def profile_stop(ctx: Context) -> None: ...

@type_check_only
class DeviceLimitsDict(TypedDict):
    device: int
    stream_bytes_per_s: float
    fma_flops_per_s: float
    add_ops_per_s: float
    max_ops_per_s: float
    measured_with: str
    clock: str

@type_check_only
class FisherPreparedDict(TypedDict):
    scores: npt.NDArray[np.float32] | None
    weights: npt.NDArray[np.float32 | np.float64] | None
    n: int
    p: int
    chunk_items: int
    total: float
    column_exponents: list[int]
    weight_exponent: int

@final
class Balancer:
    def __init__(self) -> None: ...
    def observe(self, owner: int, cells: int, seconds: float, overhead_s: float) -> None: ...
    def round_done(self) -> None: ...
    def relaid(self) -> None: ...
    def propose(
        self,
        split: list[tuple[int, int]],
        round_s: float,
        remaining_rounds: int,
        latency_s: float,
        row_s: float,
        halo: int,
    ) -> list[tuple[int, int]] | None: ...

@final
class DeviceArray:
    @property
    def rows(self) -> int: ...
    @property
    def cols(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def placement(self) -> Plan | None: ...
    @property
    def live(self) -> bool: ...
    def sharding(self, argument: str) -> list[tuple[int, int, int]]: ...
    def lineage_host_bytes(self) -> int: ...
    def free(self) -> None: ...

# generated by scripts/gen-surface.py from amari_gpu/_surface.py: operations (make surface)

# --- geometric algebra ---
__all__ += ["ga_apply"]

def ga_apply(
    ctx: Context,
    operation: str,
    signature: tuple[int, int, int],
    operands: list[DeviceArray | npt.NDArray[np.float32 | np.float64]],
    grades: int | tuple[int, ...] = 0,
    strategy: str | None = None,
    out: DeviceArray | npt.NDArray[np.float32 | np.float64] | None = None,
) -> tuple[DeviceArray | npt.NDArray[np.float32 | np.float64], Plan | None]: ...

# --- resident arrays ---
__all__ += ["resident_gather", "resident_rows", "resident_upload"]

def resident_upload(
    ctx: Context, x: npt.NDArray[np.float32], strategy: str | None = None, dtype: str = "float32"
) -> DeviceArray: ...
def resident_gather(
    ctx: Context, x: DeviceArray, out: npt.NDArray[np.float32] | None = None
) -> npt.NDArray[np.float32]: ...
def resident_rows(
    ctx: Context, x: DeviceArray, start: int, stop: int, cols: int | None = None
) -> DeviceArray: ...

# --- elementwise arithmetic on DeviceArrays ---
__all__ += ["elementwise"]

def elementwise(
    ctx: Context,
    op: str,
    a: DeviceArray,
    b: DeviceArray | npt.NDArray[np.float32] | None = None,
    swap: bool = False,
    out: DeviceArray | None = None,
) -> DeviceArray: ...

# --- tropical ---
__all__ += ["shortest_paths", "tropical_matmul", "tropical_matvec"]

def tropical_matmul(
    ctx: Context,
    a: DeviceArray | npt.NDArray[np.float32 | np.float64],
    b: npt.NDArray[np.float32 | np.float64],
    semiring: str,
    strategy: str | None = None,
    out: DeviceArray | npt.NDArray[np.float32 | np.float64] | None = None,
    a_shape: tuple[int, ...] | None = None,
) -> tuple[DeviceArray | npt.NDArray[np.float32 | np.float64], Plan | None]: ...
def tropical_matvec(
    ctx: Context,
    a: DeviceArray | npt.NDArray[np.float32 | np.float64],
    x: npt.NDArray[np.float32 | np.float64],
    semiring: str,
    strategy: str | None = None,
    out: DeviceArray | npt.NDArray[np.float32 | np.float64] | None = None,
    a_shape: tuple[int, ...] | None = None,
) -> tuple[DeviceArray | npt.NDArray[np.float32 | np.float64], Plan | None]: ...
def shortest_paths(
    ctx: Context,
    w: npt.NDArray[np.float32 | np.float64],
    strategy: str | None = None,
    out: npt.NDArray[np.float32 | np.float64] | None = None,
) -> tuple[npt.NDArray[np.float32 | np.float64], Plan]: ...

# --- information geometry ---
__all__ += ["fisher_categorical", "fisher_gaussian", "fisher_information"]

def fisher_information(
    ctx: Context,
    scores: DeviceArray | npt.NDArray[np.float32 | np.float64],
    weights: npt.NDArray[np.float32 | np.float64] | None = None,
    strategy: str | None = None,
    out: npt.NDArray[np.float64] | None = None,
    scores_shape: tuple[int, ...] | None = None,
) -> tuple[npt.NDArray[np.float64], Plan | None]: ...
def fisher_categorical(
    ctx: Context,
    values: DeviceArray | npt.NDArray[np.float32 | np.float64],
    logits: bool,
    strategy: str | None = None,
    out: DeviceArray | npt.NDArray[np.float32 | np.float64] | None = None,
    values_shape: tuple[int, ...] | None = None,
) -> tuple[DeviceArray | npt.NDArray[np.float32 | np.float64], Plan | None]: ...
def fisher_gaussian(
    ctx: Context,
    mean: DeviceArray | npt.NDArray[np.float32 | np.float64],
    var: DeviceArray | npt.NDArray[np.float32 | np.float64],
    strategy: str | None = None,
    out: DeviceArray | npt.NDArray[np.float32 | np.float64] | None = None,
    mean_shape: tuple[int, ...] | None = None,
    var_shape: tuple[int, ...] | None = None,
) -> tuple[DeviceArray | npt.NDArray[np.float32 | np.float64], Plan | None]: ...

# --- the empirical Fisher call in three steps (a cluster's nodes) ---
__all__ += ["fisher_finish", "fisher_partials", "fisher_prepare"]

def fisher_prepare(
    scores: npt.NDArray[np.float32 | np.float64],
    weights: npt.NDArray[np.float32 | np.float64] | None = None,
) -> FisherPreparedDict: ...
def fisher_partials(
    ctx: Context,
    scores: npt.NDArray[np.float32 | np.float64],
    weights: npt.NDArray[np.float32 | np.float64],
    chunk_items: int,
    strategy: str | None = None,
) -> tuple[npt.NDArray[np.float32 | np.float64], Plan]: ...
def fisher_finish(
    partials: npt.NDArray[np.float32 | np.float64],
    p: int,
    total: float,
    column_exponents: list[int],
    weight_exponent: int,
) -> npt.NDArray[np.float64]: ...

# --- check-only entries (a cluster's driver checks a call before splitting it) ---
__all__ += [
    "check_fisher_categorical",
    "check_fisher_gaussian",
    "check_ga_apply",
    "check_life",
    "check_map_rows",
    "check_split",
    "check_stencil",
    "check_tropical_matmul",
    "check_tropical_matvec",
]

def check_ga_apply(
    operation: str,
    signature: tuple[int, int, int],
    operands: list[DeviceArray | npt.NDArray[np.float32 | np.float64]],
    grades: int | tuple[int, ...] = 0,
    shapes: list[tuple[int, ...]] | None = None,
) -> None: ...
def check_tropical_matmul(
    a: npt.NDArray[np.float32 | np.float64], b: npt.NDArray[np.float32 | np.float64], semiring: str
) -> None: ...
def check_tropical_matvec(
    a: npt.NDArray[np.float32 | np.float64], x: npt.NDArray[np.float32 | np.float64], semiring: str
) -> None: ...
def check_fisher_categorical(
    values: npt.NDArray[np.float32 | np.float64], logits: bool
) -> None: ...
def check_fisher_gaussian(
    mean: npt.NDArray[np.float32 | np.float64], var: npt.NDArray[np.float32 | np.float64]
) -> None: ...
def check_map_rows(
    spec: RowsSpec, arrays: list[tuple[npt.NDArray[np.float32 | np.float64], tuple[int, ...]]]
) -> int: ...
def check_stencil(
    grid: npt.NDArray[np.float32 | np.float64], alpha: float, boundary: str, steps: int
) -> int: ...
def check_life(grid: npt.NDArray[np.uint8]) -> None: ...
def check_split(
    split: list[int], devices: int, healthy: list[int], height: int
) -> list[tuple[int, int]]: ...

# --- domain decomposition ---
__all__ += ["life", "stencil"]

def stencil(
    ctx: Context,
    grid: npt.NDArray[np.float32 | np.float64],
    alpha: float,
    boundary: str,
    options: RunOptions,
    progress: Callable[[int, int], object] | None = None,
    out: npt.NDArray[np.float32 | np.float64] | None = None,
) -> tuple[npt.NDArray[np.float32 | np.float64], DomainReport]: ...
def life(
    ctx: Context,
    grid: npt.NDArray[np.uint8],
    options: RunOptions,
    progress: Callable[[int, int], object] | None = None,
    out: npt.NDArray[np.uint8] | None = None,
) -> tuple[npt.NDArray[np.uint8], DomainReport]: ...

# --- roofline limits (amari-gpu bench --roofline) ---
__all__ += ["device_limits"]

def device_limits(ctx: Context) -> list[DeviceLimitsDict]: ...

# --- the core's planner and profile writers, no context (a cluster's driver) ---
__all__ += ["chrome_trace_of", "chunk_items_for", "plan_models", "profile_summary"]

def plan_models(
    workload: WorkloadFields, chunk_items: int, models: list[DeviceModelDict], strategy: str
) -> Plan: ...
def chunk_items_for(items: int, bytes_per_item: float, widest_bytes_per_item: float) -> int: ...
def profile_summary(
    events: list[EventDict], kernel_calls: list[KernelCallDict], calls: list[UserCallDict]
) -> SummaryDict: ...
def chrome_trace_of(processes: list[TraceProcessDict]) -> str: ...

# --- users' row kernels ---
__all__ += ["map_rows"]

def map_rows(
    ctx: Context,
    spec: RowsSpec,
    arrays: list[tuple[DeviceArray | npt.NDArray[np.float32 | np.float64], tuple[int, ...]]],
    strategy: str | None = None,
    out: DeviceArray | npt.NDArray[np.float32 | np.float64] | None = None,
) -> tuple[DeviceArray | npt.NDArray[np.float32 | np.float64], Plan | None]: ...
