"""``normalize`` of rows holding NaN or ±inf, in every algebra and on every device kind
(lavapipe, llvmpipe, the host CPU device, and all of them in one context), against a
float64 numpy reference and bit for bit across kinds.

The rule (docs/api.md): any NaN in a row makes the whole row NaN; otherwise each infinite
entry becomes NaN and each finite one 0 with its sign (x / |x| with |x| = inf). Both cover
every blade, null ones of a degenerate algebra included. Every NaN is the quiet NaN
0x7fc00000, whatever the inputs' payloads and signs."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from _ga_helpers import assert_normalized
from amari_gpu import Algebra, MultiGpuContext
from hypothesis import given, settings
from hypothesis import strategies as st

QUIET_NAN = 0x7FC00000
# Every signature class: Euclidean, mixed, degenerate (null blades), and algebras of 2
# blades (the generated kernel reads rows as scalars below 4 blades, as vec4 above).
SIGNATURES = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (3, 0, 0), (1, 3, 0), (2, 0, 1)]
SIGNATURES += [(3, 0, 1), (4, 1, 0), (6, 0, 0)]
IDS = [f"Cl{p}{q}{r}" for p, q, r in SIGNATURES]
KINDS = {"lavapipe": ["vulkan"], "llvmpipe": ["gl"], "host": ["host"]}


@pytest.fixture(scope="module")
def contexts() -> Iterator[dict[str, MultiGpuContext]]:
    """One context per device kind, and one with every kind (rows split over all three)."""
    made = {kind: MultiGpuContext(backends=backends) for kind, backends in KINDS.items()}
    made["mixed"] = MultiGpuContext(
        backends=["vulkan", "gl", "host"], devices_per_adapter=2, chunk_items=4
    )
    yield made
    for ctx in made.values():
        ctx.close()


def reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the float32 results of the rows holding NaN or inf, the mask of those rows)."""
    nan_row = np.isnan(x).any(axis=1)
    special = nan_row | np.isinf(x).any(axis=1)
    with np.errstate(invalid="ignore"):
        want = np.where(np.isfinite(x), np.copysign(np.float32(0), x), np.float32(np.nan))
    want[nan_row] = np.nan
    return want[special], special


def check(got: np.ndarray, sig: tuple[int, int, int], x: np.ndarray) -> None:
    want, special = reference(x)
    bits, want_bits = got[special].view(np.uint32), want.view(np.uint32)
    # Bit for bit: the signed zeros and the one quiet NaN.
    want_bits = np.where(np.isnan(want), np.uint32(QUIET_NAN), want_bits)
    np.testing.assert_array_equal(bits, want_bits, f"rows with NaN or inf in Cl{sig}")
    assert_normalized(got[~special], sig, x[~special].astype(np.float64))


def special_rows(blades: int, seed: int) -> np.ndarray:
    """For every blade k: NaN (both signs, another payload) at k among zeros and among
    random values, ±inf at k among zeros and among random values, +inf and -inf together,
    inf beside NaN; and some finite rows."""
    rng = np.random.default_rng(seed)
    rows = []
    other_nan = np.uint32(0xFFC01234).view(np.float32)
    for k in range(blades):
        for value in (np.float32(np.nan), other_nan, np.float32(np.inf), np.float32(-np.inf)):
            for base in (np.zeros(blades, np.float32), rng.standard_normal(blades, np.float32)):
                row = base.copy()
                row[k] = value
                rows.append(row)
        row = rng.standard_normal(blades, np.float32)
        row[k], row[(k + 1) % blades] = np.inf, -np.inf
        rows.append(row)
        row = np.zeros(blades, np.float32)
        row[k], row[(k + 1) % blades] = np.inf, np.nan
        rows.append(row)
    rows.extend(rng.standard_normal((8, blades), np.float32))
    return np.stack(rows)


@pytest.mark.parametrize("sig", SIGNATURES, ids=IDS)
def test_nan_and_inf_rows_follow_the_rule_on_every_device_kind(
    contexts: dict[str, MultiGpuContext], sig: tuple[int, int, int]
) -> None:
    algebra = Algebra(*sig)
    x = special_rows(algebra.n_blades, seed=sum(sig))
    results = {kind: ctx.normalize(x, algebra) for kind, ctx in contexts.items()}
    for kind, got in results.items():
        check(got, sig, x)
        # Finite rows too, bit for bit, where the devices round fma alike: a context of the
        # host alone follows hardware GPUs' fused fma instead, beside Mesa's drivers theirs
        # (rust/amari-gpu/tests/host_ga.rs compares the host with each device directly).
        if kind != "host":
            np.testing.assert_array_equal(
                got.view(np.uint32),
                results["lavapipe"].view(np.uint32),
                f"{kind} vs lavapipe in Cl{sig}",
            )


def test_a_nan_among_zeros_is_not_dropped(contexts: dict[str, MultiGpuContext]) -> None:
    # The reported case: max() dropped the NaN, the row read as zero and was kept.
    x = np.zeros((2, 8), np.float32)
    x[0, 3] = np.nan
    x[1, [0, 3]] = [1.0, np.nan]
    for kind, ctx in contexts.items():
        got = ctx.normalize(x)
        assert (got.view(np.uint32) == QUIET_NAN).all(), (kind, got)


def test_nan_in_a_null_blade_spreads_over_its_row(contexts: dict[str, MultiGpuContext]) -> None:
    # In Cl(3,0,1) the blades with e4 do not enter the norm: a NaN there once stayed alone.
    x = np.ones((2, 16), np.float32)
    x[0, 8] = np.nan
    x[1, 15] = np.inf
    for kind, ctx in contexts.items():
        got = ctx.normalize(x, Algebra(3, 0, 1))
        assert (got[0].view(np.uint32) == QUIET_NAN).all(), (kind, got[0])
        assert got[1, 15].view(np.uint32) == QUIET_NAN, (kind, got[1])
        assert (got[1, :15].view(np.uint32) == 0).all(), (kind, got[1])


_FLOATS = st.one_of(
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0]),
)


@settings(max_examples=40, deadline=None)
@given(
    sig=st.sampled_from(SIGNATURES),
    data=st.data(),
)
def test_normalize_of_any_rows_matches_the_reference_on_every_kind(
    contexts: dict[str, MultiGpuContext], sig: tuple[int, int, int], data: st.DataObject
) -> None:
    algebra = Algebra(*sig)
    n = data.draw(st.integers(1, 6), label="rows")
    values = data.draw(
        st.lists(_FLOATS, min_size=n * algebra.n_blades, max_size=n * algebra.n_blades),
        label="values",
    )
    x = np.array(values, dtype=np.float32).reshape(n, algebra.n_blades)
    want, special = reference(x)
    want_bits = np.where(np.isnan(want), np.uint32(QUIET_NAN), want.view(np.uint32))
    lavapipe = contexts["lavapipe"].normalize(x, algebra)
    for kind, ctx in contexts.items():
        got = ctx.normalize(x, algebra)
        np.testing.assert_array_equal(got[special].view(np.uint32), want_bits, kind)
        if kind != "host":  # fma rounded alike (see above): every row bit for bit
            np.testing.assert_array_equal(got.view(np.uint32), lavapipe.view(np.uint32), kind)
