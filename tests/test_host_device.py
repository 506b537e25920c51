"""The host CPU as a device: listed like an adapter, opened alone or beside lavapipe and
llvmpipe, and bit-identical to lavapipe alone for every family, every strategy, several
devices per adapter and sizes that straddle chunks. A fault injected into the host device
moves its chunks to the others; no PanicException reaches Python."""

from __future__ import annotations

import subprocess
import sys

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu import STRATEGIES, Algebra, InvalidArgumentError, MultiGpuContext

PGA = Algebra(3, 0, 1)
N = 2_003
CHUNK = 128


def _rows(n: int, width: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (n, width)).astype(np.float32)


def _host(ctx: MultiGpuContext) -> int:
    (host,) = [d.id for d in ctx.devices if d.adapter.backend == "host"]
    return host


def _run_all(ctx: MultiGpuContext, strategy: str) -> dict[str, np.ndarray]:
    a, b, x = _rows(N, 16, 1), _rows(N, 16, 2), _rows(N, 16, 3)
    r = _rows(1, 16, 4)[0]
    m, w = _rows(2 * 131, 33, 5).reshape(2, 131, 33), _rows(2 * 33, 29, 6).reshape(2, 33, 29)
    scores = _rows(N, 45, 7)
    probs = np.full((N, 4), 0.25, np.float32)
    var = np.abs(_rows(N, 3, 8)) + np.float32(0.25)
    return {
        "product": ctx.geometric_product(a, b, PGA, strategy=strategy),
        "sandwich": ctx.sandwich(r, x, PGA, strategy=strategy),
        "normalize": ctx.normalize(x, PGA, strategy=strategy),
        "max_plus": ctx.tropical_matmul(m, w, "max_plus", strategy=strategy),
        "min_plus": ctx.tropical_matmul(m, w, "min_plus", strategy=strategy),
        "fisher": ctx.fisher_information(scores, strategy=strategy),
        "categorical": ctx.fisher_categorical(probs, strategy=strategy),
        "categorical_logits": ctx.fisher_categorical(
            logits=np.float32(6.0) * _rows(N, 5, 12), strategy=strategy
        ),
        "gaussian": ctx.fisher_gaussian(np.zeros_like(var), var, strategy=strategy),
    }


@pytest.fixture(scope="module")
def expected() -> dict[str, np.ndarray]:
    """Every result on lavapipe alone."""
    return _run_all(MultiGpuContext(backends=["vulkan"], chunk_items=CHUNK), "balanced")


def test_the_host_is_listed_last_as_a_cpu_adapter():
    found = ag.adapters()
    host = found[-1]
    assert (host.backend, host.device_type, host.index) == ("host", "cpu", len(found) - 1)
    assert host.driver == "amari-gpu host kernels"
    assert host.is_software and host.same_device_as is None
    assert host.limits["threads"] >= 1
    assert host.features and host.features[0] in {"avx512f", "avx2", "neon", "portable"}
    # In the default selection, last (the rule is tested in test_adapters.py).
    assert MultiGpuContext().devices[-1].adapter == host


def test_the_host_alone_opens_once_and_runs():
    ctx = MultiGpuContext(backends=["host"], devices_per_adapter=3, host_threads=1)
    assert [d.adapter.backend for d in ctx.devices] == ["host"]
    out = ctx.geometric_product(_rows(301, 16, 9), _rows(301, 16, 10), PGA)
    assert out.shape == (301, 16) and np.isfinite(out).all()
    assert ctx.stats()[0]["items_done"] == 301


def test_host_threads_must_be_positive():
    with pytest.raises(InvalidArgumentError, match="host_threads"):
        MultiGpuContext(backends=["host"], host_threads=0)


@pytest.mark.parametrize("others", [["vulkan"], ["gl"]], ids=["lavapipe", "llvmpipe"])
def test_mixed_contexts_give_lavapipe_bits(expected, others):
    ctx = MultiGpuContext(backends=[*others, "host"], devices_per_adapter=2, chunk_items=CHUNK)
    for strategy in STRATEGIES:
        got = _run_all(ctx, strategy)
        for name, want in expected.items():
            assert np.array_equal(got[name], want), f"{name}, {strategy}"
    assert ctx.stats()[_host(ctx)]["chunks_done"] > 0, "the host took no chunk"


def test_an_injected_host_fault_moves_its_chunks(expected):
    ctx = MultiGpuContext(backends=["vulkan", "host"], chunk_items=CHUNK)
    host = _host(ctx)
    ctx.inject_fault(host, 1)
    got = _run_all(ctx, "balanced")
    for name, want in expected.items():
        assert np.array_equal(got[name], want), name
    health = ctx.health()[host]
    assert not health["healthy"] and "injected" in health["reason"]


def test_the_host_alone_takes_the_softmax_of_logits():
    """The softmax is taken once on the host in float64 for every context, so a host-only
    context runs the logits path too, and within float32 rounding of float64."""
    logits = np.float32(8.0) * _rows(257, 7, 11)
    got = MultiGpuContext(backends=["host"]).fisher_categorical(logits=logits)
    x = logits.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    want = np.einsum("ni,ij->nij", p, np.eye(7)) - p[:, :, None] * p[:, None, :]
    assert got.shape == (257, 7, 7)
    assert np.abs(got - want).max() <= 1e-6


def test_bench_host_family_reports_every_row(capsys, monkeypatch):
    """``amari-gpu bench --family host``: every row with both figures (or why not), the
    bandwidth and the default context. Tiny sizes: the wiring is what is checked."""
    import json

    from amari_gpu.tools import bench_host
    from amari_gpu.tools.cli import main

    tiny = bench_host.Sizes(4096, 1000, 48, 40, 512, 16, 32)
    monkeypatch.setattr(bench_host, "QUICK", tiny)
    assert main(["bench", "--family", "host", "--quick", "--rounds", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["simd"] in {"avx512f", "avx2", "neon", "portable"} and result["threads"] >= 1
    works = [r["work"] for r in result["rows"]]
    assert [w.split()[0] for w in works] == [
        *["Cl(3,0)"] * 5,
        *["PGA"] * 2,
        "max-plus",
        *["shortest"] * 3,
        *["Fisher"] * 3,
        *["heat"] * 2,
    ]
    assert "out=" in works[1]
    assert "float64" in works[2]
    assert "float16 on the host device" in works[3] and "float16 on llvmpipe" in works[4]
    assert "blades=" in works[5] and "dense" in works[6]
    assert all("float64" in w for w in works[9:11]) and "float64" in works[13]
    for row in result["rows"]:
        if row["note"].startswith("not available yet"):
            assert row["ours_s"] is None
            continue
        assert row["ours_s"] > 0, row
        # Either the peer was measured (and agreed), or the row says it is not installed.
        assert (row["peer_s"] or 0) > 0 or "not installed" in row["note"], row
        assert "disagree" not in row["note"], row
    assert result["bandwidth"]["calibrated_gb_s"] > 0 and result["bandwidth"]["out_gb_s"] > 0
    # The max-plus row's share of the add/max issue rate measured in the same run.
    mp = result["max_plus"]
    assert mp["limit_pairs_per_s"] > 0 and mp["share"] > 0
    assert mp["limit_measured_with"] == f"{result['simd']} x {result['threads']} threads"
    # The default context is compared with single devices that are other choices, never with
    # a context of the very devices it opened (on a machine without a GPU: the host alone).
    default = result["default_context"]
    default_devices = {d.adapter.describe() for d in ag.MultiGpuContext().devices}
    assert set(default["default_devices"]) == default_devices
    singles = [a for a in ag.adapters() if {a.describe()} != default_devices]
    if singles:
        assert default["best_single"] in default["medians_s"]
        assert default["best_single"] in {f"{a.name} ({a.backend})" for a in singles}
        assert default["ratio"] > 0
    else:
        assert default["best_single"] is None and default["ratio"] is None
    # Which BLAS numpy ran, and the OpenBLAS variables that would pin its kernel.
    assert set(result["blas"]["env"]) == {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"}
    assert result["blas"]["name"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator, /proc faults")
def test_bench_host_frees_an_array_first_so_peers_reuse_their_per_call_arrays():
    """``benches/host.py`` frees one 16 MiB array before its rows (``_reuse_freed_arrays``),
    so that a peer allocating two 4 MiB arrays per call (numba's stencil) reuses freed
    memory whatever rows ran before it (freed together, the two lie at the top of glibc's
    heap past its default trim threshold, which returns them to the OS). Checked in fresh
    processes by the page faults of the third of three such calls, without and with it:
    the mechanism the bench relies on."""
    script = (
        "import resource, sys\n"
        "import numpy as np\n"
        "from amari_gpu.tools import bench_host\n"
        "if sys.argv[1] == '1':\n"
        "    bench_host._reuse_freed_arrays()\n"
        "faults = []\n"
        "for _ in range(3):\n"
        "    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "    a = np.empty((1024, 1024), dtype=np.float32)\n"
        "    b = np.empty_like(a)\n"
        "    a.fill(1.0)\n"
        "    b.fill(1.0)\n"
        "    del a, b\n"
        "    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
        "print(faults[-1])\n"
    )
    faults = {}
    for warm in ("0", "1"):
        out = subprocess.run(
            [sys.executable, "-c", script, warm], check=True, capture_output=True, text=True
        )
        faults[warm] = int(out.stdout.split()[-1])
    # 8 MiB in pages of 4 KiB is 2,048 pages (fewer where the OS backs it with huge pages).
    assert faults["1"] < 16 and faults["0"] > faults["1"], faults
