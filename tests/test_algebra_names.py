"""Blades by name and the row constructors of ``Algebra``: names against the independent
float64 multiplication table of ``_ga_helpers`` (a name is the product of its vectors in
the order written), kingdon's names for PGA (``e0`` the null vector), the constructors'
rows through the kernels on the host device and on lavapipe, and every error naming the
argument, what it expected and what came."""

from __future__ import annotations

import itertools

import amari_gpu as ag
import numpy as np
import pytest
from _ga_helpers import SIGNATURES, table
from amari_gpu import Algebra, InvalidArgumentError, ShapeError

PGA = Algebra(3, 0, 1)
CGA = Algebra(4, 1)


def vector_product(signature: tuple[int, int, int], vectors: list[int]) -> np.ndarray:
    """The float64 product e_v1 e_v2 ... of basis vectors (1-based), from the table."""
    t = table(*signature)
    width = 1 << t.n
    row = np.zeros(width)
    row[0] = 1.0
    for v in vectors:
        e = np.zeros(width)
        e[1 << (v - 1)] = 1.0
        out = np.zeros(width)
        np.add.at(out, t.k, t.coef * row[t.i] * e[t.j])
        row = out
    return row


@pytest.mark.parametrize("signature", SIGNATURES, ids=str)
def test_every_name_in_every_order_is_the_product_of_its_vectors(signature):
    alg = Algebra(*signature)
    assert [alg.blade_index(name) for name in alg.blade_names] == [
        (i, 1) for i in range(alg.n_blades)
    ]
    for index in range(1, alg.n_blades):
        vectors = [v + 1 for v in range(alg.dimension) if index >> v & 1]
        for order in itertools.islice(itertools.permutations(vectors), 24):
            name = "e" + "".join(map(str, order))
            want = vector_product(signature, list(order))
            got = alg.blade(name)
            assert got.dtype == np.float32 and got.shape == (alg.n_blades,)
            assert np.array_equal(got, want), name
            assert alg.blade_index(name) == (index, int(want[index]))


def test_reordered_names_carry_the_sign():
    alg = Algebra(3)
    assert alg.blade_index("e21") == (3, -1)
    assert np.array_equal(alg.blade("e21"), -alg.blade("e12"))
    assert np.array_equal(alg.blade("e312"), alg.blade("e123"))  # two swaps
    assert np.array_equal(alg.blade("e132"), -alg.blade("e123"))
    for scalar in ("1", "e"):
        assert alg.blade_index(scalar) == (0, 1)


def test_e0_is_the_null_vector_of_pga_as_kingdon_names_it():
    # kingdon's Algebra(3, 0, 1) puts the null vector first and calls it e0; here it is e4.
    assert PGA.metric == (1, 1, 1, 0)
    assert np.array_equal(PGA.blade("e0"), PGA.blade("e4"))
    # kingdon's point basis e032, e013, e021, e123 and its lines e01, e02, e03:
    for kingdon, vectors in {
        "e01": [4, 1],
        "e02": [4, 2],
        "e03": [4, 3],
        "e032": [4, 3, 2],
        "e013": [4, 1, 3],
        "e021": [4, 2, 1],
        "e0123": [4, 1, 2, 3],
    }.items():
        assert np.array_equal(PGA.blade(kingdon), vector_product((3, 0, 1), vectors)), kingdon
    assert PGA.blade_index("e01") == (9, -1)  # e4 e1 = -e14
    # Only with exactly one null vector: elsewhere e0 names nothing.
    for alg in (Algebra(3), Algebra(2, 0, 2), CGA):
        with pytest.raises(InvalidArgumentError, match=r"^name: no blade 'e0' in Cl"):
            alg.blade("e0")


@pytest.mark.parametrize(
    ("alg", "name", "pattern"),
    [
        (Algebra(3), "e4", r"^name: no blade 'e4' in Cl\(3,0,0\): its basis vectors are "
         r"e1, e2, e3; a blade names each at most once, in any order: 1, e1, e2, e12, e3, "
         r"e13, e23, e123$"),
        (Algebra(6), "e7", r"^name: no blade 'e7' in Cl\(6,0,0\): .* e1, e2, e12, e3, "
         r"e13, e23, e123, \.\.\. \(64 in all\)$"),
        (PGA, "e5", r"its basis vectors are e1, e2, e3, e4 \(e0 is e4, the null vector\)"),
        (Algebra(3), "x12", r"^name: 'x12' is not a blade name of Cl\(3,0,0\): expected "
         r"'1' or 'e' followed by basis-vector digits"),
        (Algebra(3), "E12", r"^name: 'E12' is not a blade name"),
        (Algebra(3), "", r"^name: '' is not a blade name"),
        (Algebra(3), "e1 2", r"^name: 'e1 2' is not a blade name"),
        (Algebra(3), "e¹", r"^name: 'e¹' is not a blade name"),
        (Algebra(3), "e11", r"^name: 'e11' names e1 twice: a blade names each basis vector "
         r"once \(a repeated vector is a product, e1 e1 = 1 here"),
        (Algebra(1, 3), "e232", r"^name: 'e232' names e2 twice.*e2 e2 = -1 here"),
        (PGA, "e04", r"^name: 'e04' names e4 twice \(e0 is e4 in this algebra\).*e4 e4 = 0"),
        (Algebra(3), 12, r"^name: expected a blade name such as 'e12', got int 12$"),
        (Algebra(3), None, r"^name: expected a blade name such as 'e12', got NoneType None$"),
    ],
    ids=["past-n", "long-list", "pga", "prefix", "upper", "empty", "space", "superscript",
         "repeat", "repeat-minus", "e0-and-e4", "int", "none"],
)  # fmt: skip
def test_a_name_that_is_not_a_blade_says_which_names_are(alg, name, pattern):
    for call in (alg.blade, alg.blade_index):
        with pytest.raises(InvalidArgumentError, match=pattern):
            call(name)


def test_blades_is_a_read_only_mapping_of_every_name():
    alg = Algebra(3)
    blades = alg.blades
    assert list(blades) == list(alg.blade_names) and len(blades) == 8
    for i, (name, row) in enumerate(blades.items()):
        want = np.zeros(8, dtype=np.float32)
        want[i] = 1.0
        assert np.array_equal(row, want) and row.dtype == np.float32, name
    assert np.array_equal(blades["e21"], -alg.blade("e12"))
    assert "e21" in blades and "e" in blades and "e4" not in blades and 3 not in blades
    assert blades.get("e4") is None
    with pytest.raises(KeyError, match=r"name|blades: no blade 'e4' in Cl\(3,0,0\)"):
        blades["e4"]
    # Each lookup is a new row: changing one changes nothing else.
    row = blades["e1"]
    row[:] = 7.0
    assert np.array_equal(blades["e1"], alg.blade("e1")) and alg.blade("e1")[1] == 1.0
    with pytest.raises(TypeError):
        blades["e1"] = row  # type: ignore[index]
    assert "Cl(3,0,0)" in repr(blades) and "e123" in repr(blades)


def test_multivector_from_names():
    alg = Algebra(3)
    row = alg.multivector(e1=1.0, e12=0.5)
    assert row.dtype == np.float32 and row.shape == (8,)
    assert np.array_equal(row, [0, 1, 0, 0.5, 0, 0, 0, 0])
    # A mapping for the names that are not identifiers; reordered names give their sign.
    row = alg.multivector({"1": 2.0, "e21": 1.5}, e3=-1)
    assert np.array_equal(row, [2, 0, 0, -1.5, -1, 0, 0, 0])
    assert np.array_equal(alg.multivector(e=3.0), alg.scalar(3.0))
    assert np.array_equal(alg.multivector(), np.zeros(8, dtype=np.float32))


def test_multivector_batches_broadcast_and_leave_inputs_alone():
    alg = Algebra(3)
    x = np.arange(4.0)
    y = np.arange(12.0).reshape(3, 4)
    x_before, y_before = x.copy(), y.copy()
    rows = alg.multivector(e123=1.0, e1=x, e23=y)
    assert rows.shape == (3, 4, 8) and rows.dtype == np.float32
    assert np.array_equal(rows[..., 7], np.ones((3, 4)))
    assert np.array_equal(rows[..., 1], np.broadcast_to(x, (3, 4)))
    assert np.array_equal(rows[..., 6], y)
    assert np.array_equal(x, x_before) and np.array_equal(y, y_before)
    # float64 coefficients are rounded to float32 once, then signed.
    third = np.array([1 / 3])
    assert alg.multivector(e21=third)[0, 3] == -np.float32(1 / 3)


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"e12": 1.0, "e21": 2.0}, InvalidArgumentError,
         r"^e21: blade e12 is named twice \('e12' and 'e21'\); give each blade one coefficient$"),
        ({"e4": 1.0}, InvalidArgumentError, r"^e4: no blade 'e4' in Cl\(3,0,0\)"),
        ({"e11": 1.0}, InvalidArgumentError, r"^e11: 'e11' names e1 twice"),
        ({"e1": np.ones(3), "e2": np.ones(4)}, ShapeError,
         r"^components: expected coefficient shapes that broadcast together, got e1 \(3,\), "
         r"e2 \(4,\)$"),
        ({"e1": np.ones(2, dtype=complex)}, TypeError,
         r"^e1: expected an array of real numbers .*got dtype complex128$"),
        ({"e1": "x"}, TypeError, r"^e1: expected an array of real numbers"),
    ],
    ids=["twice", "unknown", "repeat", "broadcast", "complex", "str"],
)  # fmt: skip
def test_multivector_errors(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        Algebra(3).multivector(**kwargs)


def test_multivector_mapping_errors_name_the_mapping():
    with pytest.raises(InvalidArgumentError, match=r"^components: no blade 'e7' in Cl\(3,0,0\)"):
        Algebra(3).multivector({"e7": 1.0})
    with pytest.raises(InvalidArgumentError, match=r"^components: expected a blade name .*int 3"):
        Algebra(3).multivector({3: 1.0})  # type: ignore[dict-item]


def test_multivector_refuses_what_is_not_a_mapping():
    with pytest.raises(InvalidArgumentError, match=r"^components: expected a mapping .*got list"):
        Algebra(3).multivector([("e1", 1.0)])  # type: ignore[arg-type]


def test_vector_scalar_pseudoscalar():
    alg = PGA
    v = alg.vector([1.0, 2.0, 3.0, 4.0])
    assert v.shape == (16,) and v.dtype == np.float32
    assert np.array_equal(v, alg.multivector(e1=1, e2=2, e3=3, e0=4))
    batch = alg.vector(np.arange(24.0).reshape(2, 3, 4))
    assert batch.shape == (2, 3, 16)
    assert np.array_equal(
        alg.component(batch, ["e1", "e2", "e3", "e4"]), np.arange(24.0).reshape(2, 3, 4)
    )
    assert np.array_equal(alg.scalar(), alg.blade("1"))
    assert np.array_equal(alg.scalar([1.0, 2.0])[:, 0], [1, 2])
    assert np.array_equal(alg.pseudoscalar(), alg.blade("e1234"))
    assert np.array_equal(
        alg.pseudoscalar(np.full((2, 2), -2.0)), np.full((2, 2, 1), -2.0) * alg.blade("e1234")
    )
    with pytest.raises(
        ShapeError,
        match=r"^coords: expected shape \(\.\.\., 4\) \(a coefficient "
        r"for each of e1\.\.e4 of Cl\(3,0,1\)\), got \(3,\)$",
    ):
        alg.vector([1.0, 2.0, 3.0])
    with pytest.raises(ShapeError, match=r"^coords: expected shape \(\.\.\., 4\).*got \(\)$"):
        alg.vector(1.0)
    with pytest.raises(TypeError, match=r"^s: expected an array of real numbers"):
        alg.scalar("one")
    with pytest.raises(TypeError, match=r"^s: expected an array of real numbers"):
        alg.pseudoscalar(1j)
    with pytest.raises(ShapeError, match=r"^coords: expected shape"):
        Algebra(3).vector(np.ones((5, 4)))


def test_component_reads_back_by_name():
    alg = Algebra(3)
    rows = np.arange(16, dtype=np.float32).reshape(2, 8)
    before = rows.copy()
    e12 = alg.component(rows, "e12")
    assert e12.dtype == np.float32 and np.array_equal(e12, [3, 11])
    assert np.array_equal(alg.component(rows, "e21"), [-3, -11])
    both = alg.component(rows, ["e1", "e32", "1"])
    assert both.shape == (2, 3) and np.array_equal(both, [[1, -6, 0], [9, -14, 8]])
    assert alg.component(rows[0], "e123") == 7
    e12[:] = 0  # a new array, not a view of the rows
    assert np.array_equal(rows, before)
    assert alg.component(rows.astype(np.float64), "e3").dtype == np.float64
    assert alg.component(rows.astype(np.int64), "e3").dtype == np.float32
    with pytest.raises(
        ShapeError,
        match=r"^rows: expected shape \(\.\.\., 8\) \(multivectors of "
        r"Cl\(3,0,0\)\), got \(2, 16\)$",
    ):
        alg.component(np.zeros((2, 16)), "e1")
    with pytest.raises(InvalidArgumentError, match=r"^name: no blade 'e5'"):
        alg.component(rows, ["e1", "e5"])
    with pytest.raises(InvalidArgumentError, match=r"^name: expected a blade name or a list"):
        alg.component(rows, 3)


def test_device_arrays_are_refused_not_gathered(host):
    alg = Algebra(3)
    rows = host.asarray(np.zeros((4, 8), dtype=np.float32))
    with pytest.raises(
        TypeError,
        match=r"^rows: expected numbers or a numpy array, got a "
        r"DeviceArray \(gather it with numpy.asarray first\)$",
    ):
        alg.component(rows, "e1")
    with pytest.raises(TypeError, match=r"^e1: expected numbers or a numpy array"):
        alg.multivector(e1=host.asarray(np.zeros((4, 1), dtype=np.float32)))


@pytest.fixture(scope="module", params=["host", "vulkan"])
def any_ctx(request):
    ctx = ag.MultiGpuContext(backends=[request.param])
    yield ctx
    ctx.close()


def test_named_rows_go_through_the_kernels(any_ctx):
    # e1 e2 = e12 and e2 e1 = -e12 exactly; a rotor built by name turns e1 into e2.
    alg = Algebra(3)
    e1, e2 = alg.blade("e1"), alg.blade("e2")
    assert np.array_equal(any_ctx.geometric_product(e1, e2, alg), alg.blade("e12"))
    assert np.array_equal(any_ctx.geometric_product(e2, e1, alg), alg.blade("e21"))
    half = np.float32(np.sqrt(0.5))
    rotor = alg.multivector(e=half, e21=half)  # exp(-pi/4 e12): a quarter turn e1 -> e2
    turned = any_ctx.sandwich(rotor, alg.vector(np.eye(3)), alg)
    np.testing.assert_allclose(
        alg.component(turned, ["e1", "e2", "e3"]), [[0, 1, 0], [-1, 0, 0], [0, 0, 1]], atol=1e-6
    )
    # PGA rows built with kingdon's names: the ideal line e01 squares to 0.
    e01 = PGA.blade("e01")
    assert np.array_equal(any_ctx.geometric_product(e01, e01, PGA), np.zeros(16))
