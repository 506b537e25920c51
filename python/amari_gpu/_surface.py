"""The registry of operations: every native entry point and every public kernel method,
written once. ``scripts/gen-surface.py`` (``make surface``) generates from it the operation
section of ``_native.pyi``, the ``_mixin.Kernels`` Protocol, the ``@overload`` blocks of the
family mixins and the signature list of docs/api.md; ``make lint`` runs it in check mode,
which also checks that ``cluster/kernels.py`` and the methods' implementations have the
registry's signatures.

Why a Python module, not a table in the bindings: what it holds is Python type text
(annotations, defaults, overload variants) that only Python tooling reads, and the
generator must run before the extension is built (``make lint`` runs it first). The Rust
``#[pyfunction]``s are still bound to it: stubtest (``make lint``) checks the generated
``_native.pyi`` against the compiled module, so a binding that differs from its entry here
fails CI. Names and limits stay in ``_native`` (``SEMIRINGS``, ``STRATEGIES``...). Nothing
imports this module at run time.

An operand has a kind: ``HOST`` (a numpy array), ``RESIDENT`` (a DeviceArray handle) or
``EITHER``; making an entry point take resident operands is a change of kinds here, then
``make surface``.
"""

from __future__ import annotations

from dataclasses import dataclass

HOST = "host"
RESIDENT = "resident"
EITHER = "either"

_DTYPES = {"float32": "np.float32", "float64": "np.float64", "uint8": "np.uint8"}


@dataclass(frozen=True)
class Operand:
    """An array argument of a native entry point: its kind, dtype and shape (``shape`` is
    documentation text), inside ``wrap`` (e.g. ``"list[{}]"``), ``None`` allowed when
    ``optional``, with ``default`` as source text."""

    name: str
    kind: str
    dtype: str
    shape: str
    wrap: str = "{}"
    optional: bool = False
    default: str | None = None

    def annotation(self) -> str:
        host = f"npt.NDArray[{_DTYPES[self.dtype]}]"
        inner = {HOST: host, RESIDENT: "DeviceArray", EITHER: f"DeviceArray | {host}"}[self.kind]
        text = self.wrap.format(inner)
        return f"{text} | None" if self.optional else text


@dataclass(frozen=True)
class Param:
    """A plain argument: name, annotation text, default as source text (None: required);
    ``keyword``: keyword-only (public methods)."""

    name: str
    type: str
    default: str | None = None
    keyword: bool = False

    def annotation(self) -> str:
        return self.type


STRATEGY = Param("strategy", "str | None", "None")


@dataclass(frozen=True)
class Native:
    """A function of ``_native``: ``ctx: Context`` first when ``context``; ``kernel``: one
    of the entry points the family methods call through ``Kernels`` (a RayContext's
    ``cluster.kernels`` has the same signature)."""

    name: str
    section: str
    params: tuple[Operand | Param, ...]
    returns: str
    doc: str
    context: bool = True
    kernel: bool = False


def _out(dtype: str, shape: str, kind: str = HOST) -> Operand:
    return Operand("out", kind, dtype, shape, optional=True, default="None")


_GA = "geometric algebra"
_RESIDENT = "resident arrays"
_TROPICAL = "tropical"
_INFO = "information geometry"
_SPLIT = "the empirical Fisher call in three steps (a cluster's driver and nodes)"
_DOMAIN = "domain decomposition"
_ROWS = "users' row kernels"

_PLAN = "Plan"
_GA_ARGS = (Param("operation", "str"), Param("signature", "tuple[int, int, int]"))
_PROGRESS = Param("progress", "Callable[[int, int], object] | None", "None")

NATIVE: tuple[Native, ...] = (
    Native(
        "ga_apply",
        _GA,
        (
            *_GA_ARGS,
            Operand("operands", HOST, "float32", "(N, 2ⁿ) or (1, 2ⁿ) each", wrap="list[{}]"),
            Param("grades", "int", "0"),
            STRATEGY,
            _out("float32", "(N, output words)"),
        ),
        f"tuple[npt.NDArray[np.float32], {_PLAN}]",
        "One geometric-algebra operation over rows; the result and the plan followed.",
        kernel=True,
    ),
    Native(
        "resident_ga_apply",
        _GA,
        (
            *_GA_ARGS,
            Operand("operands", EITHER, "float32", "(N, 2ⁿ) or (1, 2ⁿ) each", wrap="list[{}]"),
            Param("grades", "int", "0"),
            _out("float32", "(N, output words)", RESIDENT),
        ),
        "DeviceArray | None",
        "``ga_apply`` where the resident operand's rows live; None when written into out.",
    ),
    Native(
        "resident_upload",
        _RESIDENT,
        (Operand("x", HOST, "float32", "(N, W)"), STRATEGY),
        "DeviceArray",
        "Uploads the rows of x into shards over the context's devices.",
    ),
    Native(
        "resident_gather",
        _RESIDENT,
        (Operand("x", RESIDENT, "float32", "(N, W)"), _out("float32", "(N, W)")),
        "npt.NDArray[np.float32]",
        "The rows of x, gathered from their devices.",
    ),
    Native(
        "resident_tropical_matmul",
        _TROPICAL,
        (
            Operand("a", RESIDENT, "float32", "(batch * m, k)"),
            Operand("b", HOST, "float32", "(batch, k, n)"),
            Param("semiring", "str"),
            _out("float32", "(batch * m, n)", RESIDENT),
        ),
        "DeviceArray | None",
        "``tropical_matmul`` where a's rows live; None when written into out.",
    ),
    Native(
        "resident_tropical_matvec",
        _TROPICAL,
        (
            Operand("a", RESIDENT, "float32", "(batch * m, k)"),
            Operand("x", HOST, "float32", "(batch, k)"),
            Param("semiring", "str"),
        ),
        "DeviceArray",
        "``tropical_matvec`` where a's rows live.",
    ),
    Native(
        "resident_tropical_row_stats",
        _TROPICAL,
        (Operand("a", RESIDENT, "float32", "(N, k)"),),
        "DeviceArray",
        "Per row of a: the first NaN column (-1 if none) and the largest finite magnitude.",
    ),
    Native(
        "tropical_matmul",
        _TROPICAL,
        (
            Operand("a", HOST, "float32", "(batch, m, k)"),
            Operand("b", HOST, "float32", "(batch, k, n)"),
            Param("semiring", "str"),
            STRATEGY,
            _out("float32", "(batch, m, n)"),
        ),
        f"tuple[npt.NDArray[np.float32], {_PLAN}]",
        "Batched tropical matrix products in semiring.",
        kernel=True,
    ),
    Native(
        "tropical_matvec",
        _TROPICAL,
        (
            Operand("a", HOST, "float32", "(batch, m, k)"),
            Operand("x", HOST, "float32", "(batch, k)"),
            Param("semiring", "str"),
            STRATEGY,
            _out("float32", "(batch, m)"),
        ),
        f"tuple[npt.NDArray[np.float32], {_PLAN}]",
        "Batched tropical matrix-vector products in semiring.",
        kernel=True,
    ),
    Native(
        "shortest_paths",
        _TROPICAL,
        (Operand("w", HOST, "float32", "(n, n)"), STRATEGY, _out("float32", "(n, n)")),
        f"tuple[npt.NDArray[np.float32], {_PLAN}]",
        "All-pairs shortest path lengths (blocked Floyd-Warshall in min-plus).",
        kernel=True,
    ),
    Native(
        "fisher_information",
        _INFO,
        (
            Operand("scores", HOST, "float32", "(N, P)"),
            Operand("weights", HOST, "float32", "(N,)", optional=True, default="None"),
            STRATEGY,
            _out("float64", "(P, P)"),
        ),
        f"tuple[npt.NDArray[np.float64], {_PLAN}]",
        "The empirical Fisher matrix of per-sample scores, summed in float64.",
        kernel=True,
    ),
    Native(
        "resident_fisher_information",
        _INFO,
        (
            Operand("scores", RESIDENT, "float32", "(N, P)"),
            Operand("weights", HOST, "float32", "(N,)", optional=True, default="None"),
            _out("float64", "(P, P)"),
        ),
        "npt.NDArray[np.float64]",
        "``fisher_information`` where the scores' rows live.",
    ),
    Native(
        "resident_fisher_categorical",
        _INFO,
        (
            Operand("values", RESIDENT, "float32", "(N, K)"),
            Param("logits", "bool"),
            _out("float32", "(N, K, K)", RESIDENT),
        ),
        "DeviceArray | None",
        "``fisher_categorical`` where the values' rows live; None when written into out.",
    ),
    Native(
        "resident_fisher_gaussian",
        _INFO,
        (
            Operand("mean", EITHER, "float32", "(N, D)"),
            Operand("var", EITHER, "float32", "(N, D)"),
            _out("float32", "(N, 2D, 2D)", RESIDENT),
        ),
        "DeviceArray | None",
        "``fisher_gaussian`` where the resident operand's rows live; None when written into out.",
    ),
    Native(
        "fisher_categorical",
        _INFO,
        (
            Operand("values", HOST, "float32", "(N, K)"),
            Param("logits", "bool"),
            STRATEGY,
            _out("float32", "(N, K, K)"),
        ),
        f"tuple[npt.NDArray[np.float32], {_PLAN}]",
        "Fisher information of N categorical distributions (probabilities or logits).",
        kernel=True,
    ),
    Native(
        "fisher_gaussian",
        _INFO,
        (
            Operand("mean", HOST, "float32", "(N, D)"),
            Operand("var", HOST, "float32", "(N, D)"),
            STRATEGY,
            _out("float32", "(N, 2D, 2D)"),
        ),
        f"tuple[npt.NDArray[np.float32], {_PLAN}]",
        "Fisher information of N diagonal Gaussians.",
        kernel=True,
    ),
    Native(
        "fisher_prepare",
        _SPLIT,
        (
            Operand("scores", HOST, "float32", "(N, P)"),
            Operand("weights", HOST, "float32", "(N,)", optional=True, default="None"),
        ),
        "FisherPreparedDict",
        "The driver's checks and exact scaling of a Fisher call, and its chunk grid.",
        context=False,
    ),
    Native(
        "fisher_partials",
        _SPLIT,
        (
            Operand("scores", HOST, "float32", "(N, P)"),
            Operand("weights", HOST, "float32", "(N,)"),
            Param("chunk_items", "int"),
            STRATEGY,
        ),
        f"tuple[npt.NDArray[np.float32], {_PLAN}]",
        "The float32 partial matrices of the chunks of prepared scores.",
    ),
    Native(
        "fisher_finish",
        _SPLIT,
        (
            Operand("partials", HOST, "float32", "(chunks * P, P)"),
            Param("p", "int"),
            Param("total", "float"),
            Param("column_exponents", "list[int]"),
            Param("weight_exponent", "int"),
        ),
        "npt.NDArray[np.float64]",
        "The partials summed in chunk order in float64, and unscaled.",
        context=False,
    ),
    Native(
        "stencil",
        _DOMAIN,
        (
            Operand("grid", HOST, "float32", "(H, W)"),
            Param("alpha", "float"),
            Param("boundary", "str"),
            Param("options", "RunOptions"),
            _PROGRESS,
            _out("float32", "(H, W)"),
        ),
        "tuple[npt.NDArray[np.float32], DomainReportDict]",
        "Steps of the 5-point diffusion stencil, the grid split in bands over the devices.",
        kernel=True,
    ),
    Native(
        "life",
        _DOMAIN,
        (
            Operand("grid", HOST, "uint8", "(H, W)"),
            Param("options", "RunOptions"),
            _PROGRESS,
            _out("uint8", "(H, W)"),
        ),
        "tuple[npt.NDArray[np.uint8], DomainReportDict]",
        "Generations of Conway's game of life, the grid split in bands over the devices.",
        kernel=True,
    ),
    Native(
        "map_rows",
        _ROWS,
        (
            Param("spec", "RowsSpec"),
            Operand("arrays", HOST, "float32", "(N, W) each", wrap="list[tuple[{}, bool]]"),
            STRATEGY,
            _out("float32", "(N, out_cols)"),
        ),
        f"tuple[npt.NDArray[np.float32], {_PLAN}]",
        "A user's row kernel over the rows of arrays (each flagged whether bound whole).",
    ),
    Native(
        "resident_map_rows",
        _ROWS,
        (
            Param("spec", "RowsSpec"),
            Operand("operands", EITHER, "float32", "(N, W) each", wrap="list[tuple[{}, bool]]"),
            _out("float32", "(N, out_cols)", RESIDENT),
        ),
        "DeviceArray | None",
        "``map_rows`` where the resident operands' rows live; None when written into out.",
    ),
)


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
class Method:
    """A public kernel method of ``MultiGpuContext``, defined in ``module``'s mixin. Every
    method also takes keyword-only ``strategy`` and ``out``. ``result``: the host result's
    type; ``resident_result``: a resident operand gives a DeviceArray (overloads say which);
    ``resident_out``: a DeviceArray ``out`` is then taken."""

    name: str
    module: str
    args: tuple[Arg, ...]
    result: str
    doc: str
    resident_result: bool = True
    resident_out: bool = True
    keywords: tuple[Arg, ...] = ()


_F32 = "npt.NDArray[np.float32]"
_F64 = "npt.NDArray[np.float64]"
_ALGEBRA = Arg("algebra", "Algebra | None", "None")
_SEMIRING = Arg("semiring", "str", '"max_plus"')


def _binary(name: str, left: str, right: str, doc: str) -> Method:
    args = (Arg(left, resident=True), Arg(right, resident=True), _ALGEBRA)
    return Method(name, "ga", args, _F32, doc)


def _unary(name: str, doc: str, *extra: Arg) -> Method:
    return Method(name, "ga_unary", (Arg("x", resident=True), *extra, _ALGEBRA), _F32, doc)


METHODS: tuple[Method, ...] = (
    _binary("geometric_product", "a", "b", "Geometric product ``a b`` row by row."),
    _binary("outer_product", "a", "b", "Outer (wedge) product ``a ∧ b``."),
    _binary("inner_product", "a", "b", "Inner product as the left contraction ``a ⌋ b``."),
    _binary("scalar_product", "a", "b", "Scalar product ``⟨a b⟩₀``."),
    _binary("sandwich", "r", "x", "``r x r̃``: the rotor (or versor) r applied to x."),
    _unary("reverse", "Reverse ``x̃``."),
    _unary("grade_involution", "Grade involution ``x̂``."),
    _unary("grade_projection", "``⟨x⟩_k``: the grade-k part(s) of x.", Arg("k")),
    _unary("normalize", "``x / sqrt(abs(⟨x x̃⟩₀))`` row by row."),
    _unary("dual", "Dual of x (the right complement in degenerate algebras)."),
    Method(
        "tropical_matmul",
        "tropical",
        (Arg("a", resident=True), Arg("b"), _SEMIRING),
        _F32,
        "Tropical matrix product ``a ⊗ b``, batched or not.",
    ),
    Method(
        "tropical_matvec",
        "tropical",
        (Arg("a", resident=True), Arg("x"), _SEMIRING),
        _F32,
        "Tropical matrix-vector product ``a ⊗ x``, batched or not.",
        resident_out=False,
    ),
    Method(
        "shortest_paths",
        "tropical",
        (Arg("w"),),
        _F32,
        "All-pairs shortest path lengths of a weighted digraph.",
        resident_result=False,
    ),
    Method(
        "fisher_information",
        "information",
        (Arg("scores", resident=True), Arg("weights", default="None")),
        _F64,
        "Empirical Fisher matrix of per-sample scores (float64).",
        resident_result=False,
    ),
    Method(
        "fisher_categorical",
        "information",
        (
            Arg("probs", default="None", resident=True, one_of=True),
            Arg("logits", default="None", resident=True, one_of=True),
        ),
        _F32,
        "Fisher information of N categorical distributions (probs or logits).",
    ),
    Method(
        "fisher_gaussian",
        "information",
        (Arg("mean", resident=True), Arg("var", resident=True)),
        _F32,
        "Fisher information of N diagonal Gaussians.",
    ),
    Method(
        "natural_gradient",
        "information",
        (Arg("scores", resident=True), Arg("grad"), Arg("damping", "float")),
        _F64,
        "Solution x of (F + damping I) x = grad, F the Fisher matrix of scores.",
        resident_result=False,
        keywords=(Arg("weights", default="None"),),
    ),
)
