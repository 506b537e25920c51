"""``amari_gpu.Algebra``: signatures, blade names and grades, equality, bad arguments; and the
float64 reference of ``_ga_helpers`` against hand-computed products (no GPU involved)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _ga_helpers import dual, product, reverse_signs, table
from amari_gpu import Algebra, InvalidArgumentError


def test_blade_names_and_grades_are_in_bitmask_order():
    cl3 = Algebra(3)
    assert cl3.n_blades == 8
    assert cl3.blade_names == ("1", "e1", "e2", "e12", "e3", "e13", "e23", "e123")
    assert cl3.grades == (0, 1, 1, 2, 1, 2, 2, 3)
    pga = Algebra(3, 0, 1)
    assert pga.n_blades == 16
    assert pga.blade_names[8:] == ("e4", "e14", "e24", "e124", "e34", "e134", "e234", "e1234")
    assert pga.grades[15] == 4
    cl6 = Algebra(6)
    assert cl6.n_blades == 64 and cl6.blade_names[63] == "e123456"
    for i, name in enumerate(cl6.blade_names):
        assert cl6.grades[i] == bin(i).count("1") == (0 if i == 0 else len(name) - 1)


@pytest.mark.parametrize(
    ("args", "signature", "metric", "degenerate"),
    [
        ((3,), (3, 0, 0), (1, 1, 1), False),
        ((1, 3), (1, 3, 0), (1, -1, -1, -1), False),
        ((3, 0, 1), (3, 0, 1), (1, 1, 1, 0), True),
        ((4, 1), (4, 1, 0), (1, 1, 1, 1, -1), False),
        ((0, 0, 2), (0, 0, 2), (0, 0), True),
    ],
)
def test_signature_attributes(args, signature, metric, degenerate):
    alg = Algebra(*args)
    assert alg.signature == signature == (alg.p, alg.q, alg.r)
    assert alg.metric == metric
    assert alg.dimension == len(metric)
    assert alg.is_degenerate is degenerate
    assert repr(alg) == "Algebra(p={}, q={}, r={})".format(*signature)
    assert str(alg) == "Cl({},{},{})".format(*signature)


def test_equality_and_hash_follow_the_signature():
    assert Algebra(3) == Algebra(3, 0, 0) == Algebra(np.int64(3), q=0)
    assert Algebra(3) != Algebra(3, 0, 1) and Algebra(1, 3) != Algebra(3, 1)
    assert len({Algebra(3), Algebra(3, 0, 0), Algebra(3, 0, 1)}) == 2
    assert type(Algebra(np.int32(2)).p) is int
    with pytest.raises(AttributeError):
        Algebra(3).p = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    ("args", "argument", "got"),
    [
        ((-1,), "p", "-1"),
        ((3, -2), "q", "-2"),
        ((3, 0, -1), "r", "-1"),
        ((3.0,), "p", "3.0"),
        ((True,), "p", "True"),
        ((3, "1"), "q", "'1'"),
        ((3, 0, None), "r", "None"),
    ],
)
def test_bad_counts_raise_naming_the_argument(args, argument, got):
    with pytest.raises(InvalidArgumentError, match=rf"^{argument}: .*>= 0.*{re.escape(got)}"):
        Algebra(*args)


@pytest.mark.parametrize("args", [(0,), (0, 0, 0), (7,), (3, 3, 1), (4, 2, 2)])
def test_dimensions_outside_one_to_six_are_refused(args):
    with pytest.raises(InvalidArgumentError, match=r"^p \+ q \+ r: expected between 1 and 6"):
        Algebra(*args)
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError too
        Algebra(*args)


# --- the test reference itself ------------------------------------------------------------


def _e(sig, name: str, coefficient: float = 1.0) -> np.ndarray:
    row = np.zeros(1 << sum(sig))
    row[Algebra(*sig).blade_names.index(name)] = coefficient
    return row


@pytest.mark.parametrize(
    ("sig", "kind", "left", "right", "want", "coefficient"),
    [
        ((3, 0, 0), "geometric", "e1", "e2", "e12", 1.0),
        ((3, 0, 0), "geometric", "e2", "e1", "e12", -1.0),
        ((3, 0, 0), "geometric", "e123", "e123", "1", -1.0),
        ((1, 3, 0), "geometric", "e2", "e2", "1", -1.0),
        ((1, 3, 0), "geometric", "e12", "e12", "1", 1.0),  # a timelike plane squares to +1
        ((3, 0, 1), "geometric", "e4", "e4", "1", 0.0),
        ((3, 0, 1), "geometric", "e14", "e4", "e1", 0.0),
        ((3, 0, 1), "geometric", "e4", "e1", "e14", -1.0),
        ((4, 1, 0), "geometric", "e5", "e5", "1", -1.0),
        ((3, 0, 0), "outer", "e1", "e12", "e12", 0.0),
        ((3, 0, 0), "outer", "e3", "e12", "e123", 1.0),
        ((3, 0, 0), "inner", "e1", "e12", "e2", 1.0),
        ((3, 0, 0), "inner", "e2", "e12", "e1", -1.0),
        ((3, 0, 0), "inner", "e12", "e1", "1", 0.0),  # left contraction: higher into lower is 0
        ((3, 0, 0), "inner", "e12", "e123", "e3", -1.0),
    ],
)
def test_reference_products_of_basis_blades(sig, kind, left, right, want, coefficient):
    out, _ = product(kind, sig, _e(sig, left), _e(sig, right))
    np.testing.assert_array_equal(out[0], _e(sig, want, coefficient))


def test_reference_dual_conventions():
    cl3 = (3, 0, 0)
    np.testing.assert_array_equal(dual(cl3, _e(cl3, "e1"))[0], _e(cl3, "e23", -1.0))
    np.testing.assert_array_equal(dual(cl3, _e(cl3, "e123"))[0], _e(cl3, "1"))
    pga = (3, 0, 1)
    np.testing.assert_array_equal(dual(pga, _e(pga, "e1"))[0], _e(pga, "e234"))
    np.testing.assert_array_equal(dual(pga, _e(pga, "1"))[0], _e(pga, "e1234"))
    np.testing.assert_array_equal(dual(pga, _e(pga, "e2"))[0], _e(pga, "e134", -1.0))


def test_reference_table_sizes_and_reverse():
    assert len(table(3).k) == 64 and len(table(3, 0, 1).k) == 256 - 64
    np.testing.assert_array_equal(reverse_signs((3, 0, 0)), [1, 1, 1, -1, 1, -1, -1, -1])
