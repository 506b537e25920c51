"""Clifford algebras Cl(p, q, r) of up to 6 dimensions: signature, blades and grades in
bitmask order (blade ``i`` is the product of the basis vectors of the set bits of ``i``),
blades by name and the constructors of the rows the kernels take (see :mod:`._blades`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _blades
from .errors import InvalidArgumentError

MAX_DIMENSION = 6
"""Largest p + q + r: 64 blades."""


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidArgumentError(f"{name}: expected an integer >= 0, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Algebra:
    """The Clifford algebra Cl(p, q, r), 1 <= p + q + r <= 6.

    Its basis vectors e1..en (n = p + q + r) square to +1 (the first ``p``), -1 (the next
    ``q``) and 0 (the last ``r``): ``Algebra(3)`` is Euclidean 3-space, ``Algebra(1, 3)``
    spacetime, ``Algebra(3, 0, 1)`` projective geometric algebra (e4 squares to 0) and
    ``Algebra(4, 1)`` conformal geometric algebra. Multivectors are float32 rows of
    ``n_blades`` = 2ⁿ coefficients in bitmask blade order (see ``blade_names``).

    Blades by name: ``blade("e12")`` (or ``blades["e12"]``) is the one-hot row of e12;
    a name lists each basis vector once, in any order, the order giving the sign
    (``blade("e21")`` is -e12); ``"1"`` and ``"e"`` name the scalar; with r = 1, ``e0``
    names the null vector e_n as in kingdon and the PGA literature (``e0`` is e4 in
    Cl(3,0,1), ``e01`` is -e14). ``multivector``, ``vector``, ``scalar`` and
    ``pseudoscalar`` build rows (batches when given arrays); ``component`` reads them back.
    """

    p: int
    q: int = 0
    r: int = 0

    def __post_init__(self) -> None:
        for name in ("p", "q", "r"):
            object.__setattr__(self, name, _count(name, getattr(self, name)))
        if not 1 <= self.p + self.q + self.r <= MAX_DIMENSION:
            raise InvalidArgumentError(
                f"p + q + r: expected between 1 and {MAX_DIMENSION} basis vectors, "
                f"got p={self.p}, q={self.q}, r={self.r}"
            )

    def __str__(self) -> str:
        return f"Cl({self.p},{self.q},{self.r})"

    @property
    def dimension(self) -> int:
        """Number of basis vectors, n = p + q + r."""
        return self.p + self.q + self.r

    @property
    def signature(self) -> tuple[int, int, int]:
        """``(p, q, r)``."""
        return (self.p, self.q, self.r)

    @property
    def metric(self) -> tuple[int, ...]:
        """What e1..en square to: +1, -1 or 0 each."""
        return (1,) * self.p + (-1,) * self.q + (0,) * self.r

    @property
    def is_degenerate(self) -> bool:
        """Whether some basis vector squares to 0 (r > 0)."""
        return self.r > 0

    @property
    def n_blades(self) -> int:
        """Number of blades, 2ⁿ: the width of a multivector row."""
        return 1 << self.dimension

    @property
    def blade_names(self) -> tuple[str, ...]:
        """Blade names in bitmask order: "1", "e1", "e2", "e12", "e3", ..."""
        return tuple(
            "e" + "".join(str(v + 1) for v in range(self.dimension) if i >> v & 1) if i else "1"
            for i in range(self.n_blades)
        )

    @property
    def grades(self) -> tuple[int, ...]:
        """Grade of each blade, in bitmask order."""
        return tuple(bin(i).count("1") for i in range(self.n_blades))

    # --- blades by name (the rules are in _blades) ---

    def blade_index(self, name: str) -> tuple[int, int]:
        """``(index, sign)`` of the blade ``name``: its column in bitmask order and +1 or -1
        (the parity of the order its basis vectors are named in): ``(3, -1)`` for ``"e21"``
        in Cl(3,0). Raises InvalidArgumentError for a name that is not a blade of this
        algebra (saying which names are) or that repeats a basis vector (``"e11"``)."""
        return _blades.parse(self, "name", name)

    def blade(self, name: str) -> npt.NDArray[np.float32]:
        """The blade ``name`` as a new float32 row of ``n_blades`` coefficients: 1 (or -1 for
        a reordered name such as ``"e21"``) in its column, 0 elsewhere."""
        return _blades.one_hot(self, "name", name)

    @property
    def blades(self) -> _blades.BladeMap:
        """The blades by name, a read-only mapping: keys are ``blade_names`` (in bitmask
        order), ``blades["e12"]`` is ``blade("e12")`` and takes every name ``blade`` takes
        (``blades["e21"]`` is -e12); ``in`` and ``get`` answer False and None for a name
        that is not a blade."""
        return _blades.BladeMap(self)

    def multivector(
        self, components: Mapping[str, Any] | None = None, /, **named: Any
    ) -> npt.NDArray[np.float32]:
        """A row (or a batch of rows) from coefficients by blade name: ``multivector(e1=1.0,
        e12=0.5)``, or a mapping for names that are not identifiers (``multivector({"1":
        2.0, "e21": 1.0})``). Each coefficient is a number or an array; their shapes
        broadcast to S and the result is a new float32 array (*S, n_blades) (blades not
        named are 0; a reordered name's coefficient goes in with its sign). Two names of
        one blade (``e12`` and ``e21``) are refused."""
        return _blades.from_names(self, components, named)

    def vector(self, coords: Any) -> npt.NDArray[np.float32]:
        """Grade-1 rows: ``coords`` (..., n) are the coefficients of e1..en (with r = 1 the
        last is e0's); returns a new float32 array (..., n_blades)."""
        return _blades.from_vector(self, coords)

    def scalar(self, s: Any = 1.0) -> npt.NDArray[np.float32]:
        """Scalar rows: ``s`` (a number or an array of shape S) gives (*S, n_blades)."""
        return _blades.from_names(self, {"1": s}, {}, "s")

    def pseudoscalar(self, s: Any = 1.0) -> npt.NDArray[np.float32]:
        """``s`` times the pseudoscalar e1...en: (*S, n_blades) for ``s`` of shape S."""
        return _blades.from_names(self, {self.blade_names[-1]: s}, {}, "s")

    def component(self, rows: Any, name: Any) -> np.ndarray[Any, Any]:
        """The coefficient of blade ``name`` in ``rows`` (..., n_blades): a new array (...),
        with a reordered name's sign (``component(x, "e21")`` is ``-x[..., 3]`` in Cl(3,0)).
        ``name`` may be a sequence of names: then (..., len(name)). float64 rows give
        float64, others float32. A DeviceArray is refused: gather it with
        ``numpy.asarray`` first."""
        return _blades.component(self, rows, name)


CL3 = Algebra(3)
"""Cl(3,0), the algebra of every method called with ``algebra=None``."""
