//! Hand-made devices and workloads for the partitioners' unit tests, and the plan invariants
//! every test checks.

use crate::model::DeviceModel;
use crate::plan::Plan;
use crate::workload::Workload;

/// A device with an ordinary bus and latency, and the given arithmetic rate.
pub(crate) fn dev(device: usize, group: usize, flops_per_s: f64) -> DeviceModel {
    DeviceModel {
        device,
        group,
        launch_latency_s: 1e-5,
        h2d_bytes_per_s: 1e10,
        d2h_bytes_per_s: 1e10,
        flops_per_s,
        correction: 1.0,
        uncertainty: 0.0,
        memory_budget_bytes: None,
        max_binding_bytes: 128 << 20,
        group_speedup: 1.0,
        group_members: 1,
    }
}

/// Devices 0, 1, ... of the given (group, flops per second), built by [`dev`].
pub(crate) fn devs<const N: usize>(specs: [(usize, f64); N]) -> [DeviceModel; N] {
    std::array::from_fn(|i| dev(i, specs[i].0, specs[i].1))
}

/// A discrete GPU: a PCIe bus (~12 GB/s each way), a launch that costs a submit and a
/// readback (50 us), and the given arithmetic rate.
pub(crate) fn discrete_gpu(device: usize, group: usize, flops_per_s: f64) -> DeviceModel {
    DeviceModel {
        launch_latency_s: 5e-5,
        h2d_bytes_per_s: 1.2e10,
        d2h_bytes_per_s: 1.2e10,
        max_binding_bytes: 2 << 30,
        ..dev(device, group, flops_per_s)
    }
}

/// The host device as the context models it: it reads inputs in place, inside kernels whose
/// measured rate includes that memory traffic (no transfer term), and a chunk costs a few
/// microseconds to start.
pub(crate) fn host(device: usize, group: usize, flops_per_s: f64) -> DeviceModel {
    DeviceModel {
        launch_latency_s: 3e-6,
        h2d_bytes_per_s: f64::INFINITY,
        d2h_bytes_per_s: f64::INFINITY,
        max_binding_bytes: u64::MAX,
        ..dev(device, group, flops_per_s)
    }
}

/// A software GPU adapter (lavapipe, llvmpipe) on the host's cores: the same group as the
/// host device, an expensive launch (shader dispatch through the driver's threads), copies
/// at memcpy speed, and `speedup` measured for the two of them running together.
pub(crate) fn software_gpu(
    device: usize,
    flops_per_s: f64,
    with_host: &mut DeviceModel,
    speedup: f64,
) -> DeviceModel {
    with_host.group_speedup = speedup;
    with_host.group_members = 2;
    DeviceModel {
        launch_latency_s: 3e-4,
        h2d_bytes_per_s: 5e9,
        d2h_bytes_per_s: 5e9,
        group: with_host.group,
        group_speedup: speedup,
        group_members: 2,
        ..dev(device, with_host.group, flops_per_s)
    }
}

/// A compute-heavy workload, so arithmetic rates decide the speeds.
pub(crate) fn work(items: u64) -> Workload {
    Workload {
        kernel: "test".into(),
        family: None,
        items,
        bytes_in_per_item: 32.0,
        bytes_out_per_item: 16.0,
        flops_per_item: 1e4,
        dtype: crate::dtype::Dtype::F32,
    }
}

/// Chunks per device, in device order.
pub(crate) fn chunks(plan: &Plan) -> Vec<(usize, u64)> {
    plan.assignments
        .iter()
        .map(|a| (a.device, a.chunks))
        .collect()
}

/// Panics unless the plan covers the problem exactly with contiguous whole-chunk runs.
pub(crate) fn check(plan: &Plan) {
    let mut next = 0;
    let mut chunk = 0;
    for a in &plan.assignments {
        assert!(a.items > 0 && a.chunks > 0, "{plan:?}");
        assert_eq!((a.start, a.first_chunk), (next, chunk), "{plan:?}");
        assert_eq!(a.start, a.first_chunk * plan.chunk_items);
        assert_eq!(
            a.stop,
            ((a.first_chunk + a.chunks) * plan.chunk_items).min(plan.items)
        );
        assert_eq!(a.items, a.stop - a.start);
        next = a.stop;
        chunk += a.chunks;
    }
    assert_eq!((next, chunk), (plan.items, plan.n_chunks), "{plan:?}");
    assert!(plan
        .assignments
        .windows(2)
        .all(|w| w[0].device < w[1].device));
    assert!(plan.estimated_makespan_s >= plan.lower_bound_s * (1.0 - 1e-9));
    assert!(plan.efficiency > 0.0 && plan.efficiency <= 1.0);
}

/// A workload that moves many bytes per flop (a Cl(3,0) product: 64 bytes in, 32 out,
/// ~128 flops per item).
pub(crate) fn transfer_bound(items: u64) -> Workload {
    Workload {
        kernel: "test-transfer".into(),
        family: None,
        items,
        bytes_in_per_item: 64.0,
        bytes_out_per_item: 32.0,
        flops_per_item: 128.0,
        dtype: crate::dtype::Dtype::F32,
    }
}
