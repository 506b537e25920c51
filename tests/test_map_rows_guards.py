"""``ctx.map_rows`` never silently wrong and never fatal to the process: Mesa's loop cap is
detected, a kernel stays on one driver, private memory and the user's own resources are
refused before any device sees them, compiled kernels are bounded per device, and the
error of a context left with only the host device says so truthfully.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest
from amari_gpu import (
    STRATEGIES,
    DeviceLostError,
    KernelCompileError,
    MultiGpuContext,
)

RNG = np.random.default_rng(2718)

# One loop of params.n iterations: returns how many ran.
COUNT = """
fn row(a: array<f32, 1>) -> array<f32, 1> {
    var s = a[0];
    for (var k = 0u; k < u32(params.n); k++) {
        s += 1.0;
    }
    return array<f32, 1>(s);
}
"""

# Two loops of params.n iterations each: the cap counts them together.
TWO_LOOPS = """
fn row(a: array<f32, 1>) -> array<f32, 1> {
    var s = a[0];
    for (var k = 0u; k < u32(params.n); k++) {
        s += 1.0;
    }
    for (var k = 0u; k < u32(params.n); k++) {
        s += 1.0;
    }
    return array<f32, 1>(s);
}
"""

GOOD = """
fn row(a: array<f32, 1>) -> array<f32, 1> {
    return array<f32, 1>(2.0 * a[0]);
}
"""


def _gallivm(ctx: MultiGpuContext) -> bool:
    """Whether the context's map_rows devices run on Mesa's gallivm (llvmpipe, lavapipe)."""
    return "llvmpipe" in ctx.devices[0].adapter.name.lower()


@pytest.fixture(scope="module", params=["vulkan", "gl"])
def mesa(request: pytest.FixtureRequest) -> Iterator[MultiGpuContext]:
    """One device of lavapipe (Vulkan) or llvmpipe (GL), with chunks of 64 rows."""
    ctx = MultiGpuContext(backends=[request.param], chunk_items=64)
    yield ctx
    ctx.close()


def _all_healthy(ctx: MultiGpuContext) -> None:
    assert all(h["healthy"] for h in ctx.health().values()), ctx.health()


def test_a_loop_past_the_driver_cap_raises_and_one_under_it_runs(mesa: MultiGpuContext) -> None:
    ones = np.zeros((300, 1), np.float32)
    # 60,000 iterations per row: under the cap (with the wrapper's own few), exact.
    got = mesa.map_rows(COUNT, ones, out_cols=1, params={"n": 60_000})
    assert np.array_equal(got, np.full((300, 1), 60_000, np.float32))
    if _gallivm(mesa):
        for source in (COUNT, TWO_LOOPS):
            n = 100_000 if source is COUNT else 40_000
            with pytest.raises(KernelCompileError, match=r"65,535 iterations") as raised:
                mesa.map_rows(source, ones, out_cols=1, params={"n": n})
            message = str(raised.value)
            assert f"device {mesa.devices[0].id}" in message
            assert "rows 0..64" in message or "rows " in message
            assert "split a long loop" in message
        _all_healthy(mesa)
    else:
        got = mesa.map_rows(TWO_LOOPS, ones, out_cols=1, params={"n": 40_000})
        assert np.array_equal(got, np.full((300, 1), 80_000, np.float32))
    # The device still runs the next call.
    assert np.array_equal(mesa.map_rows(GOOD, ones + 1, out_cols=1), np.full((300, 1), 2.0))


PER_ROW = """
fn row(a: array<f32, 1>) -> array<f32, 1> {
    var s = 0.0;
    for (var k = 0u; k < u32(a[0]); k++) {
        s += 1.0;
    }
    return array<f32, 1>(s);
}
"""


def test_resident_rows_past_the_driver_cap_raise_too() -> None:
    # DeviceArray operands: each shard's pieces have their check words read back before
    # the result is kept, so a row of 100,000 iterations among rows of 10 refuses the call.
    with MultiGpuContext(backends=["vulkan"], devices_per_adapter=2) as ctx:
        counts = np.full((1000, 1), 10, np.float32)
        got = ctx.map_rows(PER_ROW, ctx.asarray(counts, strategy="balanced"), out_cols=1)
        assert np.array_equal(got.numpy(), counts)
        counts[700] = 100_000
        with pytest.raises(KernelCompileError, match=r"65,535 iterations") as raised:
            ctx.map_rows(PER_ROW, ctx.asarray(counts, strategy="balanced"), out_cols=1)
        assert "split a long loop" in str(raised.value)
        _all_healthy(ctx)
        again = ctx.map_rows(GOOD, ctx.asarray(np.ones((1000, 1), np.float32)), out_cols=1)
        assert np.array_equal(again.numpy(), np.full((1000, 1), 2.0))


def test_only_some_rows_past_the_cap_still_refuse_the_call(mesa: MultiGpuContext) -> None:
    # Row i loops a[i] times: one row of 200,000 among rows of 10.
    loops = """
    fn row(a: array<f32, 1>) -> array<f32, 1> {
        var s = 0.0;
        for (var k = 0u; k < u32(a[0]); k++) {
            s += 1.0;
        }
        return array<f32, 1>(s);
    }
    """
    counts = np.full((500, 1), 10, np.float32)
    assert np.array_equal(mesa.map_rows(loops, counts, out_cols=1), counts)
    counts[437] = 200_000
    if _gallivm(mesa):
        with pytest.raises(KernelCompileError, match=r"some of rows 384\.\.448"):
            mesa.map_rows(loops, counts, out_cols=1)
        _all_healthy(mesa)
    else:
        assert np.array_equal(mesa.map_rows(loops, counts, out_cols=1), counts)


def test_one_driver_gives_the_same_bits_for_every_strategy() -> None:
    # length, dot and exp round differently on lavapipe and on llvmpipe through GL.
    source = """
    fn row(a: array<f32, 4>) -> array<f32, 3> {
        let v = vec4<f32>(a[0], a[1], a[2], a[3]);
        return array<f32, 3>(length(v), dot(v, v.wzyx), exp(a[0] * 0.37));
    }
    """
    x = RNG.standard_normal((200_000, 4)).astype(np.float32)
    with MultiGpuContext(backends=["vulkan", "gl"], devices_per_adapter=2) as ctx:
        backends = {d.id: d.adapter.backend for d in ctx.devices}
        assert sorted(set(backends.values())) == ["gl", "vulkan"]
        first = ctx.devices[0]
        results = []
        for strategy in STRATEGIES:
            results.append(ctx.map_rows(source, x, out_cols=3, strategy=strategy))
            plan = ctx.last_plan
            assert plan is not None
            used = {w.device_id for w in plan.assignments if w.items}
            assert used, strategy
            assert {backends[d] for d in used} == {first.adapter.backend}, (strategy, used)
        for strategy, got in zip(STRATEGIES, results, strict=True):
            assert np.array_equal(got, results[0]), strategy
    with MultiGpuContext(backends=[first.adapter.backend]) as alone:
        assert np.array_equal(alone.map_rows(source, x, out_cols=3), results[0])


# Each declares something map_rows does not bind or allow; (regex of the message).
REFUSED = [
    ("@group(0) @binding(99) var<storage, read> extra: array<f32>;", "@group/@binding"),
    ("@group(1) @binding(0) var<storage, read> extra: array<f32>;", "@group/@binding"),
    ("@group(0) @binding(9) var<uniform> extra: vec4<f32>;", "@group/@binding"),
    ("@group(0) @binding(9) var extra: texture_2d<f32>;", "@group/@binding"),
    ("@group(0) @binding(9) var extra: sampler;", "@group/@binding"),
    ("@group(0) @binding(9) var<storage, read_write> extra: atomic<u32>;", "@group/@binding"),
    ("var<workgroup> extra: atomic<u32>;", "var<workgroup>"),
    ("var<workgroup> extra: array<f32, 64>;", "var<workgroup>"),
    ("override extra: f32;", "override extra"),
    ("@compute @workgroup_size(1) fn extra() {}", "entry point"),
]


@pytest.mark.parametrize(
    ("declaration", "why"), REFUSED, ids=[r[1] + str(i) for i, r in enumerate(REFUSED)]
)
def test_the_users_own_resources_are_refused_and_no_device_suffers(
    declaration: str, why: str
) -> None:
    source = "// a kernel\n" + declaration + "\n" + GOOD
    x = np.ones((100, 1), np.float32)
    with MultiGpuContext(backends=["vulkan"], devices_per_adapter=2) as ctx:
        with pytest.raises(KernelCompileError, match=r"line 2, column \d+ of source") as raised:
            ctx.map_rows(source, x, out_cols=1)
        assert why in str(raised.value)
        _all_healthy(ctx)
        # A built-in kernel and a good map_rows run, without reset_health().
        a = RNG.standard_normal((64, 8)).astype(np.float32)
        assert ctx.geometric_product(a, a).shape == (64, 8)
        assert np.array_equal(ctx.map_rows(GOOD, x, out_cols=1), 2 * x)


def test_private_memory_past_the_bound_is_refused_with_its_place() -> None:
    x = np.ones((10, 1), np.float32)
    local = """
fn row(a: array<f32, 1>) -> array<f32, 1> {
    var t: array<f32, 5000>;
    t[u32(a[0])] = a[0];
    return array<f32, 1>(t[0]);
}
"""
    module_scope = "var<private> t: array<f32, 5000>;\n" + GOOD
    # Under the bound runs (a small one: Mesa's compile time grows steeply with the size of
    # a dynamically indexed private array, about a minute at 1,000 floats on lavapipe).
    fits = local.replace("5000", "64")
    with MultiGpuContext(backends=["vulkan"]) as ctx:
        with pytest.raises(KernelCompileError, match=r"line 3, column 5 of source: `var t`"):
            ctx.map_rows(local, x, out_cols=1)
        with pytest.raises(KernelCompileError, match=r"line 1, column \d+ of source: `var t`"):
            ctx.map_rows(module_scope, x, out_cols=1)
        wide = "fn row(a: array<f32, 5000>) -> array<f32, 1> { return array<f32, 1>(a[9]); }"
        with pytest.raises(KernelCompileError, match=r"copies of the rows"):
            ctx.map_rows(wide, np.ones((10, 5000), np.float32), out_cols=1)
        assert ctx.map_rows(fits, x, out_cols=1).shape == (10, 1)
        _all_healthy(ctx)


def test_a_huge_private_array_is_refused_before_any_device_sees_it() -> None:
    # On a CPU adapter each invocation's private array is a stack array per lane and
    # thread: 400 MB of them grew the process to the machine's memory. In a child whose
    # address space is capped at 8 GiB, so that a regression fails the test, not the run.
    script = textwrap.dedent(
        """
        import resource
        import numpy as np
        from amari_gpu import KernelCompileError, MultiGpuContext

        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
        source = '''
        fn row(a: array<f32, 1>) -> array<f32, 1> {
            var t: array<f32, 100000000>;
            t[u32(a[0])] = a[0];
            return array<f32, 1>(t[0]);
        }
        '''
        with MultiGpuContext(backends=["vulkan"]) as ctx:
            try:
                ctx.map_rows(source, np.ones((64, 1), np.float32), out_cols=1)
            except KernelCompileError as e:
                print("REFUSED", e)
            print("HEALTHY", all(h["healthy"] for h in ctx.health().values()))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        "REFUSED WGSL error at line 3, column 5 of source: `var t` takes 400000000 bytes"
        in done.stdout
    )
    assert "HEALTHY True" in done.stdout


def test_the_compiled_kernels_of_a_device_are_bounded() -> None:
    x = np.ones((8, 1), np.float32)
    with MultiGpuContext(backends=["vulkan"]) as ctx:
        assert ctx.stats()[0]["user_pipelines"] == 0
        for k in range(70):
            source = GOOD.replace("2.0 * a[0]", f"{k}.0 + a[0]")
            assert np.array_equal(ctx.map_rows(source, x, out_cols=1), x + k)
            assert ctx.stats()[0]["user_pipelines"] == min(k + 1, 64)
        # The first kernel, dropped since, compiles again.
        assert np.array_equal(
            ctx.map_rows(GOOD.replace("2.0 * a[0]", "0.0 + a[0]"), x, out_cols=1), x
        )
        assert ctx.stats()[0]["user_pipelines"] == 64


def test_with_only_the_host_device_left_the_error_says_so() -> None:
    x = np.ones((1000, 1), np.float32)
    with MultiGpuContext(backends=["vulkan", "host"], chunk_items=64) as ctx:
        gpu = next(d.id for d in ctx.devices if d.adapter.backend == "vulkan")
        host = next(d.id for d in ctx.devices if d.adapter.backend == "host")
        ctx.inject_fault(gpu, after_chunks=2)
        with pytest.raises(DeviceLostError) as raised:
            ctx.map_rows(GOOD, x, out_cols=1)
        message = str(raised.value)
        assert "healthy again" not in message
        assert f"device {gpu}: " in message
        assert f"device {host} is the host device, which cannot run WGSL" in message
        # The next call, with the wgpu device known unhealthy, says the same.
        with pytest.raises(DeviceLostError) as raised:
            ctx.map_rows(GOOD, x, out_cols=1)
        message = str(raised.value)
        assert f"device {gpu} (" in message and "is unhealthy: " in message
        assert f"device {host} is the host device, which cannot run WGSL" in message
        assert "reset_health()" in message
