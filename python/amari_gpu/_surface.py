"""The registry of operations: every native entry point and every public kernel method,
written once. ``scripts/gen-surface.py`` (``make surface``) generates from it the operation
section of ``_native.pyi``, the ``_mixin.Kernels`` Protocol, the typed call of each method
shape (``_shapes.py``, one Protocol per shape, and the ``@shaped[...]`` line above each
method), the bindings modules ``rust/amari-gpu-py/src/lib.rs`` declares and registers, the
family mixins ``MultiGpuContext`` derives from (``context.py``, from ``FAMILIES``) and the
signature list of docs/api.md; ``make lint`` runs it in check mode, which also checks that
``cluster/kernels.py``, the methods' implementations and each bindings module's
``register`` agree with the registry.

Why a Python module, not a table in the bindings: what it holds is Python type text
(annotations, defaults, overload variants) that only Python tooling reads, and the
generator must run before the extension is built (``make lint`` runs it first). The Rust
``#[pyfunction]``s are still bound to it: stubtest (``make lint``) checks the generated
``_native.pyi`` against the compiled module, so a binding that differs from its entry here
fails CI. Names and limits stay in ``_native`` (``SEMIRINGS``, ``STRATEGIES``...). Nothing
imports this module at run time.

The native entry points are written as the signatures they have, in stub syntax, with each
array operand's kind, dtype and shape: ``host[f32, "(N, P)"]`` (a numpy array),
``resident[f32, "(N, P)"]`` (a DeviceArray handle) or ``either[...]`` (one or the other);
``@kernel`` marks the entry points the family methods call through ``Kernels`` (which a
RayContext's ``cluster.kernels`` implements with the same signatures). A ``# --- section
[module] ---`` line starts a section whose entry points the bindings module
``rust/amari-gpu-py/src/<module>.rs`` adds to ``_native`` in its ``register``. Making an entry
point take resident operands is an edit of kinds here, then ``make surface``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

HOST = "host"
RESIDENT = "resident"
EITHER = "either"

# "float": float32 or float64 arrays, for the entry points of families that keep float64.
_DTYPES = {
    "f32": "np.float32",
    "f64": "np.float64",
    "u8": "np.uint8",
    "float": "np.float32 | np.float64",
}

NATIVE_SIGNATURES = """
# --- geometric algebra [ga] ---
@kernel
def ga_apply(
    ctx, operation: str, signature: tuple[int, int, int],
    operands: list[either[float, "(N, 2ⁿ) or (1, 2ⁿ) each"]], grades: int | tuple[int, ...] = 0,
    strategy: str | None = None, out: either[float, "(N, output words)"] | None = None,
) -> tuple[either[float], Plan | None]:
    "One geometric-algebra operation over rows; the result and the plan (None if resident)."

# --- resident arrays [resident] ---
def resident_upload(
    ctx, x: host[f32, "(N, W) words"], strategy: str | None = None, dtype: str = "float32"
) -> resident[f32]:
    "Uploads the rows of x (words of dtype values) into shards over the devices running dtype."

def resident_gather(ctx, x: resident[f32, "(N, W)"], out: host[f32, "(N, W)"] | None = None
) -> host[f32]:
    "The rows of x, gathered from their devices."

def resident_rows(
    ctx, x: resident[f32, "(N, W)"], start: int, stop: int, cols: int | None = None
) -> resident[f32]:
    "Rows start..stop of x as a new DeviceArray on the devices holding them (cols: re-rowed)."

# --- elementwise arithmetic on DeviceArrays [elementwise] ---
def elementwise(
    ctx, op: str, a: resident[f32, "(N, W)"],
    b: either[f32, "(N, W), (1, W) or (1, 1)"] | None = None, swap: bool = False,
    out: resident[f32, "(N, W)"] | None = None,
) -> resident[f32]:
    "The ufunc op (numpy's name) on the rows of a and b (swap: b on the left), where a lives."

# --- tropical [tropical] ---
@kernel
def tropical_matmul(
    ctx, a: either[float, "(batch, m, k)"], b: host[float, "(batch, k, n)"], semiring: str,
    strategy: str | None = None, out: either[float, "(batch, m, n)"] | None = None,
    a_shape: tuple[int, ...] | None = None,
) -> tuple[either[float], Plan | None]:
    "Batched tropical matrix products in semiring; a_shape: the caller's shape of a."

@kernel
def tropical_matvec(
    ctx, a: either[float, "(batch, m, k)"], x: host[float, "(batch, k)"], semiring: str,
    strategy: str | None = None, out: either[float, "(batch, m)"] | None = None,
    a_shape: tuple[int, ...] | None = None,
) -> tuple[either[float], Plan | None]:
    "Batched tropical matrix-vector products in semiring; a_shape: the caller's shape of a."

@kernel
def shortest_paths(
    ctx, w: host[float, "(n, n)"], strategy: str | None = None,
    out: host[float, "(n, n)"] | None = None,
) -> tuple[host[float], Plan]:
    "All-pairs shortest path lengths (blocked Floyd-Warshall in min-plus)."

# --- information geometry [fisher] ---
@kernel
def fisher_information(
    ctx, scores: either[float, "(N, P)"], weights: host[float, "(N,)"] | None = None,
    strategy: str | None = None, out: host[f64, "(P, P)"] | None = None,
    scores_shape: tuple[int, ...] | None = None,
) -> tuple[host[f64], Plan | None]:
    "The Fisher matrix of scores (weights of their dtype), float64; scores_shape: theirs."

@kernel
def fisher_categorical(
    ctx, values: either[float, "(N, K)"], logits: bool, strategy: str | None = None,
    out: either[float, "(N, K, K)"] | None = None, values_shape: tuple[int, ...] | None = None,
) -> tuple[either[float], Plan | None]:
    "N categorical Fisher matrices, in the values' dtype; values_shape: the caller's shape."

@kernel
def fisher_gaussian(
    ctx, mean: either[float, "(N, D)"], var: either[float, "(N, D)"],
    strategy: str | None = None, out: either[float, "(N, 2D, 2D)"] | None = None,
    mean_shape: tuple[int, ...] | None = None, var_shape: tuple[int, ...] | None = None,
) -> tuple[either[float], Plan | None]:
    "Fisher information of N diagonal Gaussians, in the rows' dtype; *_shape: the caller's."

# --- the empirical Fisher call in three steps (a cluster's nodes) [fisher_split] ---
def fisher_prepare(
    scores: host[float, "(N, P)"], weights: host[float, "(N,)"] | None = None
) -> FisherPreparedDict:
    "The driver's checks and exact scaling of a Fisher call (one dtype), and its chunk grid."

def fisher_partials(
    ctx, scores: host[float, "(N, P)"], weights: host[float, "(N,)"], chunk_items: int,
    strategy: str | None = None,
) -> tuple[host[float], Plan]:
    "The partial matrices (in the scores' dtype) of the chunks of prepared scores."

def fisher_finish(
    partials: host[float, "(chunks, words)"], p: int, total: float, column_exponents: list[int],
    weight_exponent: int,
) -> host[f64]:
    "The partials (float32 or float64) summed in chunk order in float64, and unscaled."

# --- check-only entries (a cluster's driver checks a call before splitting it) [checks] ---
def check_ga_apply(
    operation: str, signature: tuple[int, int, int],
    operands: list[either[float, "(N, 2ⁿ) or (1, 2ⁿ) each"]], grades: int | tuple[int, ...] = 0,
    shapes: list[tuple[int, ...]] | None = None,
) -> None:
    "The checks of ga_apply, in the caller's shapes of the operands, without a context or a run."

def check_tropical_matmul(
    a: host[float, "(batch, m, k)"], b: host[float, "(batch, k, n)"], semiring: str
) -> None:
    "The checks of tropical_matmul on host operands (one dtype), without a context or a run."

def check_tropical_matvec(
    a: host[float, "(batch, m, k)"], x: host[float, "(batch, k)"], semiring: str
) -> None:
    "The checks of tropical_matvec on host operands (one dtype), without a context or a run."

def check_fisher_categorical(values: host[float, "(N, K)"], logits: bool) -> None:
    "The checks of fisher_categorical on host values, without a context or a run."

def check_fisher_gaussian(mean: host[float, "(N, D)"], var: host[float, "(N, D)"]) -> None:
    "The checks of fisher_gaussian on host rows (one dtype), without a context or a run."

def check_map_rows(
    spec: RowsSpec, arrays: list[tuple[host[float, "(N, W) each"], tuple[int, ...]]]
) -> int:
    "The checks of map_rows (shapes, the kernel by naga) on host arrays in spec's dtype: the items."

def check_stencil(grid: host[float, "(H, W)"], alpha: float, boundary: str, steps: int) -> int:
    "The checks of stencil without a context: the power of two the core scales the grid by."

def check_life(grid: host[u8, "(H, W)"]) -> None:
    "The checks of life (shape, cells 0 or 1) without a context."

def check_split(
    split: list[int], devices: int, healthy: list[int], height: int
) -> list[tuple[int, int]]:
    "A grid run's split checked as its first layout takes it: rows per healthy device."

# --- domain decomposition [domain] ---
@kernel
def stencil(
    ctx, grid: host[float, "(H, W)"], alpha: float, boundary: str, options: RunOptions,
    progress: Callable[[int, int], object] | None = None,
    out: host[float, "(H, W)"] | None = None,
) -> tuple[host[float], DomainReport]:
    "Steps of the 5-point diffusion stencil, the grid split in bands over the devices."

@kernel
def life(
    ctx, grid: host[u8, "(H, W)"], options: RunOptions,
    progress: Callable[[int, int], object] | None = None, out: host[u8, "(H, W)"] | None = None,
) -> tuple[host[u8], DomainReport]:
    "Generations of Conway's game of life, the grid split in bands over the devices."

# --- roofline limits (amari-gpu bench --roofline) [roofline] ---
def device_limits(ctx) -> list[DeviceLimitsDict]:
    "Each device's measured stream bandwidth and FMA, add and max-plus issue rates."

# --- the core's planner and profile writers, no context (a cluster's driver) [planning_fns] ---
def plan_models(
    workload: WorkloadFields, chunk_items: int, models: list[DeviceModelDict], strategy: str
) -> Plan:
    "The core partitioner's plan of workload, in chunks of chunk_items, over device models."

def chunk_items_for(items: int, bytes_per_item: float, widest_bytes_per_item: float) -> int:
    "Items per chunk of the core's chunk grid for a problem (a function of the problem only)."

def profile_summary(
    events: list[EventDict], kernel_calls: list[KernelCallDict], calls: list[UserCallDict]
) -> SummaryDict:
    "The core's summary of a timeline recorded elsewhere (one clock, devices by id)."

def chrome_trace_of(processes: list[TraceProcessDict]) -> str:
    "One Chrome trace (JSON) of several processes' timelines on one clock, each its own pid."

# --- users' row kernels [rows] ---
@kernel
def map_rows(
    ctx, spec: RowsSpec, arrays: list[tuple[either[float, "(N, W) each"], tuple[int, ...]]],
    strategy: str | None = None, out: either[float, "(N, out_cols)"] | None = None,
) -> tuple[either[float], Plan | None]:
    "A user's row kernel over the rows of arrays (each with the caller's shape)."
"""


@dataclass(frozen=True)
class Operand:
    """An array inside a parameter's annotation: its kind, dtype (numpy's name) and shape."""

    kind: str
    dtype: str
    shape: str


@dataclass(frozen=True)
class Param:
    """A parameter of a native entry point: its annotation as the stub writes it, its
    default as source text (None: required) and the arrays it holds."""

    name: str
    type: str
    default: str | None
    operands: tuple[Operand, ...]

    def annotation(self) -> str:
        return self.type


@dataclass(frozen=True)
class Native:
    """A function of ``_native``: ``ctx: Context`` first when ``context``; ``kernel``: one
    of the entry points the family methods call through ``Kernels``; ``bindings``: the
    bindings module that registers it."""

    name: str
    section: str
    bindings: str
    params: tuple[Param, ...]
    returns: str
    doc: str
    context: bool
    kernel: bool


class _Arrays(ast.NodeTransformer):
    """Replaces ``host[f32, shape]`` and its kin with the annotation the stub writes,
    collecting the operands."""

    def __init__(self) -> None:
        self.found: list[Operand] = []

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        kind = node.value.id if isinstance(node.value, ast.Name) else ""
        if kind not in (HOST, RESIDENT, EITHER):
            return self.generic_visit(node)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        dtype = ast.unparse(parts[0])
        shape = ast.literal_eval(parts[1]) if len(parts) > 1 else ""
        self.found.append(Operand(kind, dtype, shape))
        host = f"npt.NDArray[{_DTYPES[dtype]}]"
        text = {HOST: host, RESIDENT: "DeviceArray", EITHER: f"DeviceArray | {host}"}[kind]
        return ast.Name(id=text)


def _annotation(node: ast.expr) -> tuple[str, tuple[Operand, ...]]:
    arrays = _Arrays()
    text = ast.unparse(arrays.visit(node))
    return text, tuple(arrays.found)


def _natives(text: str) -> tuple[Native, ...]:
    """The entry points of ``text`` (stub syntax; a ``# --- section [module] ---`` line
    starts a section)."""
    sections = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("# --- "):
            found = re.fullmatch(r"# --- (.+) \[(\w+)\] ---", line)
            assert found is not None, f"section line {number}: {line!r} names no bindings module"
            sections[number] = found.group(1), found.group(2)
    out = []
    for node in ast.parse(text).body:
        assert isinstance(node, ast.FunctionDef) and node.returns is not None
        section, bindings = sections[max(n for n in sections if n < node.lineno)]
        args = node.args.args
        context = args[0].arg == "ctx" and args[0].annotation is None
        defaults = [None] * (len(args) - len(node.args.defaults)) + list(node.args.defaults)
        params = []
        for arg, default in list(zip(args, defaults))[1 if context else 0 :]:
            assert arg.annotation is not None, f"{node.name}: {arg.arg} has no annotation"
            annotation, operands = _annotation(arg.annotation)
            value = None if default is None else ast.unparse(default)
            params.append(Param(arg.arg, annotation, value, operands))
        doc = ast.get_docstring(node) or ""
        kernel = any(ast.unparse(d) == "kernel" for d in node.decorator_list)
        returns = _annotation(node.returns)[0]
        out.append(
            Native(node.name, section, bindings, tuple(params), returns, doc, context, kernel)
        )
    return tuple(out)


NATIVE = _natives(NATIVE_SIGNATURES)
"""Every native entry point, in the stub's order."""


@dataclass(frozen=True)
class Arg:
    """An argument of a public method. ``resident``: an operand that may be a DeviceArray
    (the call then runs where its rows live); ``one_of``: one of a group of which exactly
    one is given."""

    name: str
    type: str = "Any"
    default: str | None = None
    resident: bool = False
    one_of: bool = False


@dataclass(frozen=True)
class Shape:
    """What methods share but their name: the arguments, the host result's type and how
    resident operands type the result. Every method also takes keyword-only ``strategy``
    and ``out``. ``resident_result``: a resident operand gives a DeviceArray, so the shape
    is a Protocol of ``_shapes.py`` whose overloaded ``__call__`` says which operands and
    ``out`` give which result; ``resident_out``: a DeviceArray ``out`` is then taken."""

    name: str
    args: tuple[Arg, ...]
    result: str
    resident_result: bool = True
    resident_out: bool = True
    keywords: tuple[Arg, ...] = ()


@dataclass(frozen=True)
class Method:
    """A public kernel method of ``MultiGpuContext``, defined in ``module``'s mixin."""

    name: str
    module: str
    shape: Shape
    doc: str


@dataclass(frozen=True)
class Family:
    """A mixin of ``MultiGpuContext``: class ``mixin`` of module ``module``. Its methods
    are the ``METHODS`` of that module (or of modules its mixin derives from). ``cluster``:
    a base of ``Context`` (``_context_base.py``), so ``RayContext`` has it too (its
    methods' ``@kernel`` entries are in ``cluster/kernels.py``)."""

    module: str
    mixin: str
    cluster: bool = False


_F32 = "npt.NDArray[np.float32]"
_F64 = "npt.NDArray[np.float64]"
_ALGEBRA = Arg("algebra", "Algebra | None", "None")
_SEMIRING = Arg("semiring", "str", '"max_plus"')

# Geometric algebra and tropical algebra keep float32 and float64 (numpy's promotion,
# ``dtype=`` overriding).
_FLOAT = "npt.NDArray[np.float32 | np.float64]"
_DTYPE = Arg("dtype", "npt.DTypeLike | None", "None")
GA_BINARY = Shape(
    "GaBinary",
    (Arg("a", resident=True), Arg("b", resident=True), _ALGEBRA),
    _FLOAT,
    keywords=(_DTYPE,),
)
GA_SANDWICH = Shape(
    "GaSandwich",
    (Arg("r", resident=True), Arg("x", resident=True), _ALGEBRA),
    _FLOAT,
    keywords=(_DTYPE, Arg("blades", "Sequence[int] | None", "None")),
)
GA_UNARY = Shape("GaUnary", (Arg("x", resident=True), _ALGEBRA), _FLOAT, keywords=(_DTYPE,))
GA_GRADES = Shape(
    "GaGrades", (Arg("x", resident=True), Arg("k"), _ALGEBRA), _FLOAT, keywords=(_DTYPE,)
)
# Tropical algebra keeps float32 and float64 too (DeviceArray operands in their dtype).
TROPICAL_PRODUCT = Shape(
    "TropicalProduct",
    (Arg("a", resident=True), Arg("b"), _SEMIRING),
    _FLOAT,
    keywords=(_DTYPE,),
)
TROPICAL_MATVEC = Shape(
    "TropicalMatvec",
    (Arg("a", resident=True), Arg("x"), _SEMIRING),
    _FLOAT,
    resident_out=False,
    keywords=(_DTYPE,),
)
PATHS = Shape("Paths", (Arg("w"),), _FLOAT, resident_result=False, keywords=(_DTYPE,))
FISHER_MATRIX = Shape(
    "FisherMatrix",
    (Arg("scores", resident=True), Arg("weights", default="None")),
    _F64,
    resident_result=False,
    keywords=(_DTYPE,),
)
FISHER_CATEGORICAL = Shape(
    "FisherCategorical",
    (
        Arg("probs", default="None", resident=True, one_of=True),
        Arg("logits", default="None", resident=True, one_of=True),
    ),
    _FLOAT,
    keywords=(_DTYPE,),
)
FISHER_GAUSSIAN = Shape(
    "FisherGaussian",
    (Arg("mean", resident=True), Arg("var", resident=True)),
    _FLOAT,
    keywords=(_DTYPE,),
)
NATURAL_GRADIENT = Shape(
    "NaturalGradient",
    (Arg("scores", resident=True), Arg("grad"), Arg("damping", "float")),
    _F64,
    resident_result=False,
    keywords=(Arg("weights", default="None"), Arg("fisher", default="None"), _DTYPE),
)

METHODS: tuple[Method, ...] = (
    Method("geometric_product", "ga", GA_BINARY, "Geometric product ``a b`` row by row."),
    Method("outer_product", "ga", GA_BINARY, "Outer (wedge) product ``a ∧ b``."),
    Method("inner_product", "ga", GA_BINARY, "Inner product as the left contraction ``a ⌋ b``."),
    Method("scalar_product", "ga", GA_BINARY, "Scalar product ``⟨a b⟩₀``."),
    Method("sandwich", "ga", GA_SANDWICH, "``r x r̃``: the rotor (or versor) r applied to x."),
    Method("reverse", "ga_unary", GA_UNARY, "Reverse ``x̃``."),
    Method("grade_involution", "ga_unary", GA_UNARY, "Grade involution ``x̂``."),
    Method("grade_projection", "ga_unary", GA_GRADES, "``⟨x⟩_k``: the grade-k part(s) of x."),
    Method("normalize", "ga_unary", GA_UNARY, "``x / sqrt(abs(⟨x x̃⟩₀))`` row by row."),
    Method(
        "dual", "ga_unary", GA_UNARY, "Dual of x (the right complement in degenerate algebras)."
    ),
    Method(
        "tropical_matmul",
        "tropical",
        TROPICAL_PRODUCT,
        "Tropical matrix product ``a ⊗ b``, batched or not.",
    ),
    Method(
        "tropical_matvec",
        "tropical",
        TROPICAL_MATVEC,
        "Tropical matrix-vector product ``a ⊗ x``, batched or not.",
    ),
    Method(
        "shortest_paths",
        "tropical",
        PATHS,
        "All-pairs shortest path lengths of a weighted digraph.",
    ),
    Method(
        "fisher_information",
        "information",
        FISHER_MATRIX,
        "Empirical Fisher matrix of per-sample scores (float64).",
    ),
    Method(
        "fisher_categorical",
        "information",
        FISHER_CATEGORICAL,
        "Fisher information of N categorical distributions (probs or logits).",
    ),
    Method(
        "fisher_gaussian",
        "information",
        FISHER_GAUSSIAN,
        "Fisher information of N diagonal Gaussians.",
    ),
    Method(
        "natural_gradient",
        "information",
        NATURAL_GRADIENT,
        "Solution x of (F + damping I) x = grad, F the Fisher matrix of scores (or fisher=).",
    ),
)
"""What every kernel-family mixin of ``MultiGpuContext`` may rely on."""

FAMILIES: tuple[Family, ...] = (
    Family("ga", "GeometricAlgebraMixin", cluster=True),
    Family("tropical", "TropicalMixin", cluster=True),
    Family("information", "InformationGeometryMixin", cluster=True),
    Family("domain", "DomainMixin", cluster=True),
    Family("rows", "RowsMixin", cluster=True),
    Family("array", "ResidentMixin"),
)
"""The bases of ``MultiGpuContext``, in its method resolution order; those marked
``cluster`` are bases of ``Context``, which both contexts derive from, in the same order."""
