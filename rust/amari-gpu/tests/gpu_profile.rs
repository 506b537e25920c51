//! The profiler on real devices: kernel events cover every item once, GPU timestamps are
//! used where the adapter has them and host timing where not, and the summary agrees with
//! the events.

use amari_gpu::ga::geometric_product_cl3;
use amari_gpu::profile::{summarize, Clock, Kind};
use amari_gpu::{ContextOptions, MultiGpuContext, Strategy};

fn run_profiled(
    options: ContextOptions,
    n: usize,
) -> (
    MultiGpuContext,
    Vec<amari_gpu::profile::Event>,
    Vec<amari_gpu::profile::CallRecord>,
) {
    let _ = env_logger::builder().is_test(true).try_init();
    let ctx = MultiGpuContext::new(options).expect("context opens");
    let a = vec![0.25f32; 8 * n];
    let mut out = vec![0.0f32; 8 * n];
    ctx.calibrate(false).unwrap();
    let profiler = ctx.start_profile().unwrap();
    assert!(
        ctx.start_profile().is_err(),
        "a second profile must be refused"
    );
    geometric_product_cl3(&ctx, &a, &a, &mut out, Some(Strategy::Balanced)).unwrap();
    let stopped = ctx.stop_profile().expect("profile was active");
    assert!(std::sync::Arc::ptr_eq(&profiler, &stopped));
    (ctx, profiler.events(), profiler.calls())
}

fn check_cover(events: &[amari_gpu::profile::Event], n: usize, chunk_items: usize) {
    let mut seen = vec![false; n.div_ceil(chunk_items)];
    let mut items = 0;
    for e in events.iter().filter(|e| e.kind == Kind::Kernel) {
        let c = e.chunk.expect("kernel events belong to a chunk") as usize;
        assert!(!seen[c], "chunk {c} has two kernel events");
        seen[c] = true;
        items += e.items as usize;
        assert!(e.duration_s >= 0.0 && e.start_s >= 0.0);
    }
    assert!(seen.iter().all(|&s| s));
    assert_eq!(items, n);
}

#[test]
fn kernel_events_cover_every_item_once_with_gpu_timestamps_where_available() {
    let n = 30_001;
    let options = ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        devices_per_adapter: 3,
        chunk_items: Some(2048),
        gpu_timestamps: Some(true),
        ..Default::default()
    };
    let (ctx, events, calls) = run_profiled(options, n);
    check_cover(&events, n, 2048);
    assert_eq!(calls.len(), 1);
    assert_eq!(events.iter().filter(|e| e.kind == Kind::Plan).count(), 1);
    let has_timestamps = ctx.devices()[0].timestamp_period_ns.is_some();
    let kernel_clocks: Vec<Clock> = events
        .iter()
        .filter(|e| e.kind == Kind::Kernel)
        .map(|e| e.clock)
        .collect();
    let want = if has_timestamps {
        Clock::Gpu
    } else {
        Clock::Host
    };
    assert!(kernel_clocks.iter().all(|&c| c == want));
    let devices: std::collections::BTreeSet<usize> =
        events.iter().filter_map(|e| e.device).collect();
    assert_eq!(devices.len(), 3, "every device did work");
    let summary = summarize(&events, &calls, &[]);
    assert_eq!(
        summary.devices.iter().map(|d| d.items).sum::<u64>(),
        n as u64
    );
    assert_eq!(
        summary.devices.iter().map(|d| d.chunks).sum::<u64>(),
        (n as u64).div_ceil(2048)
    );
    assert!(summary.makespan_s > 0.0 && summary.predicted_lower_bound_s > 0.0);
    assert!([
        "transfer-bound",
        "compute-bound",
        "imbalance",
        "launch-overhead"
    ]
    .contains(&summary.bottleneck));
}

#[test]
fn without_timestamps_kernels_are_timed_on_the_host() {
    let n = 10_000;
    let options = ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        gpu_timestamps: Some(false),
        chunk_items: Some(4096),
        ..Default::default()
    };
    let (ctx, events, _) = run_profiled(options, n);
    assert!(ctx.devices()[0].timestamp_period_ns.is_none());
    check_cover(&events, n, 4096);
    assert!(events
        .iter()
        .filter(|e| e.kind == Kind::Kernel)
        .all(|e| e.clock == Clock::Host));
}

#[test]
fn retries_show_up_after_an_injected_fault() {
    let ctx = MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        devices_per_adapter: 2,
        chunk_items: Some(1024),
        ..Default::default()
    })
    .unwrap();
    let n = 20_000;
    let a = vec![0.5f32; 8 * n];
    let mut out = vec![0.0f32; 8 * n];
    ctx.inject_fault(1, 2).unwrap();
    let profiler = ctx.start_profile().unwrap();
    geometric_product_cl3(&ctx, &a, &a, &mut out, Some(Strategy::Balanced)).unwrap();
    ctx.stop_profile();
    let events = profiler.events();
    check_cover(&events, n, 1024);
    let retries: Vec<_> = events.iter().filter(|e| e.kind == Kind::Retry).collect();
    assert!(!retries.is_empty());
    assert!(
        retries.iter().all(|e| e.device == Some(0)),
        "device 0 re-ran device 1's chunks"
    );
}

#[test]
fn chrome_trace_has_complete_events_and_named_tracks() {
    let (ctx, events, _) = run_profiled(
        ContextOptions {
            backends: Some(vec!["vulkan".into()]),
            devices_per_adapter: 2,
            chunk_items: Some(4096),
            ..Default::default()
        },
        20_000,
    );
    let names = |d: usize| ctx.devices()[d].adapter.name.clone();
    let trace = amari_gpu::profile::chrome_trace(&events, &[], &[], &names);
    let list = trace["traceEvents"].as_array().unwrap();
    let complete: Vec<_> = list.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(complete.len(), events.len());
    assert!(complete
        .iter()
        .all(|e| e["dur"].as_f64().unwrap() >= 0.0 && e["ts"].is_number()));
    let thread_names: Vec<&str> = list
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(thread_names.iter().any(|n| n.starts_with("device 0 queue")));
    assert!(thread_names
        .iter()
        .any(|n| n.starts_with("device 1 worker")));
    // Named by kind (Perfetto groups by name); the chunk is an argument.
    assert!(complete
        .iter()
        .all(
            |e| !e["name"].as_str().unwrap().contains(' ') && e["args"]["chunk"].is_number()
                || e["name"] == "plan"
        ));
}
