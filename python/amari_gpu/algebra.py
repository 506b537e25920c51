"""Clifford algebras Cl(p, q, r) of up to 6 dimensions: signature, blades and grades in
bitmask order (blade ``i`` is the product of the basis vectors of the set bits of ``i``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

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


CL3 = Algebra(3)
"""Cl(3,0), the algebra of every method called with ``algebra=None``."""
