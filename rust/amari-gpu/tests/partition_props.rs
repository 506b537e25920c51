//! Property tests of the partitioners over random heterogeneous device sets: every plan
//! covers the problem exactly with whole-chunk runs on eligible devices, honours memory
//! budgets when they can hold the problem, never beats its lower bound, and the capability
//! and latency plans come near that bound when launches are cheap and chunks many.

use amari_gpu::partition::plan;
use amari_gpu::{DeviceModel, Error, Plan, Strategy, Workload};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
// The planner's `Strategy` keeps its name; proptest's generators go by another.
use proptest::strategy::Strategy as Gen;

/// 10^lo ..= 10^hi, uniform in the exponent, so a range spanning decades is fully explored.
fn log_uniform(lo: f64, hi: f64) -> impl Gen<Value = f64> {
    (lo.log10()..=hi.log10()).prop_map(|e| 10f64.powf(e))
}

/// One device of a random make; the caller gives it its id.
fn device() -> impl Gen<Value = DeviceModel> {
    let rates = (
        log_uniform(1e9, 1e12),
        log_uniform(1e8, 5e10),
        log_uniform(1e8, 5e10),
    );
    let budget = prop_oneof![
        Just(None),
        log_uniform(1e6, 2e10).prop_map(|b| Some(b as u64))
    ];
    let binding = prop_oneof![4 => Just(128u64 << 20), 1 => (1u64 << 16)..(128u64 << 20)];
    (
        0usize..6,
        rates,
        log_uniform(1e-5, 1e-3),
        0.0..0.5f64,
        budget,
        binding,
    )
        .prop_map(
            |(group, (flops, h2d, d2h), latency, uncertainty, budget, binding)| DeviceModel {
                device: 0,
                group,
                launch_latency_s: latency,
                h2d_bytes_per_s: h2d,
                d2h_bytes_per_s: d2h,
                flops_per_s: flops,
                correction: 1.0,
                uncertainty,
                memory_budget_bytes: budget,
                max_binding_bytes: binding,
                group_speedup: 1.0,
                group_members: 1,
            },
        )
}

/// 1..=16 devices with distinct ids, in shuffled order (the planner must not rely on it).
/// Each group gets a measured speedup between a slowdown (0.8) and independent devices.
fn devices() -> impl Gen<Value = Vec<DeviceModel>> {
    (
        prop::collection::vec(device(), 1..=16),
        prop::collection::vec(-0.2..1.0f64, 6),
    )
        .prop_map(|(mut ds, gains)| {
            let mut members = [0usize; 6];
            for d in &ds {
                members[d.group] += 1;
            }
            for (i, d) in ds.iter_mut().enumerate() {
                d.device = i;
                let k = members[d.group];
                d.group_members = k;
                d.group_speedup = if k == 1 {
                    1.0
                } else {
                    (1.0 + gains[d.group] * (k - 1) as f64).max(0.8)
                };
            }
            ds
        })
        .prop_shuffle()
}

fn workload(items: impl Gen<Value = u64>) -> impl Gen<Value = Workload> {
    (items, 4.0..256.0f64, 4.0..256.0f64, log_uniform(1.0, 1e4)).prop_map(
        |(items, bin, bout, flops)| Workload {
            kernel: "prop".into(),
            family: None,
            items,
            bytes_in_per_item: bin,
            bytes_out_per_item: bout,
            flops_per_item: flops,
            dtype: amari_gpu::Dtype::F32,
        },
    )
}

fn any_items() -> impl Gen<Value = u64> {
    prop_oneof![Just(0u64), 1u64..5_000, 1u64..=1_000_000_000]
}

fn chunk_items() -> impl Gen<Value = u64> {
    (10u32..=20).prop_map(|e| 1u64 << e)
}

/// The draws of a run when PROPTEST_RNG_SEED does not ask for others.
const FIXED_SEED: u64 = 27;

fn config() -> ProptestConfig {
    // 256 cases by default keeps the run to seconds; PROPTEST_CASES asks for a longer hunt.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(256);
    // The same cases on every run (a test that passes or fails by the draw is no check CI
    // can rely on); PROPTEST_RNG_SEED picks other draws for a hunt. Hunts found latency plans
    // up to 1.063x the exhaustive optimum (two are named below); the search is now exact.
    let seed = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(FIXED_SEED);
    // No regression files: the tests directory is shared, and failures print their input.
    ProptestConfig {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..ProptestConfig::default()
    }
}

fn model_of(models: &[DeviceModel], device: usize) -> &DeviceModel {
    models
        .iter()
        .find(|m| m.device == device)
        .expect("plan names a known device")
}

/// Whole chunks a device's budget holds (None when unlimited).
fn chunk_cap(w: &Workload, chunk_items: u64, m: &DeviceModel) -> Option<u64> {
    let chunk_bytes = (w.bytes_in_per_item + w.bytes_out_per_item) * chunk_items as f64;
    m.memory_budget_bytes
        .map(|b| (b as f64 / chunk_bytes).floor() as u64)
}

/// The invariants every plan of every strategy keeps.
fn check_plan(
    w: &Workload,
    chunk_items: u64,
    models: &[DeviceModel],
    requested: Strategy,
    p: &Plan,
) {
    assert_eq!(
        (p.items, p.chunk_items, p.requested),
        (w.items, chunk_items, requested)
    );
    assert_eq!(p.n_chunks, w.items.div_ceil(chunk_items));
    assert_ne!(p.strategy, Strategy::Auto);
    if requested != Strategy::Auto {
        assert_eq!(p.strategy, requested);
    }
    let (mut next, mut chunk, mut makespan) = (0u64, 0u64, 0.0f64);
    for a in &p.assignments {
        assert!(a.chunks > 0 && a.items > 0);
        assert_eq!(
            (a.start, a.first_chunk, a.items),
            (next, chunk, a.stop - a.start)
        );
        assert_eq!(a.start, a.first_chunk * chunk_items);
        assert_eq!(
            a.stop,
            ((a.first_chunk + a.chunks) * chunk_items).min(w.items)
        );
        let m = model_of(models, a.device);
        assert!(
            m.accepts_chunk(w, chunk_items),
            "device {} cannot bind a chunk",
            a.device
        );
        let sharing = p
            .assignments
            .iter()
            .filter(|b| model_of(models, b.device).group == m.group)
            .count();
        assert_eq!(
            a.estimated_seconds,
            m.seconds(w, a.items, a.chunks, sharing)
        );
        makespan = makespan.max(a.estimated_seconds);
        (next, chunk) = (a.stop, chunk + a.chunks);
    }
    assert_eq!(
        (next, chunk),
        (w.items, p.n_chunks),
        "plan does not cover the problem"
    );
    assert!(p.assignments.windows(2).all(|x| x[0].device < x[1].device));
    assert_eq!(p.estimated_makespan_s, makespan);
    assert!(p.estimated_makespan_s >= p.lower_bound_s * (1.0 - 1e-9));
    assert!(
        p.efficiency > 0.0 && p.efficiency <= 1.0,
        "efficiency {}",
        p.efficiency
    );
}

/// Checks specific to what a strategy promises.
fn check_strategy(w: &Workload, chunk_items: u64, models: &[DeviceModel], p: &Plan) {
    let eligible: Vec<&DeviceModel> = models
        .iter()
        .filter(|m| m.accepts_chunk(w, chunk_items))
        .collect();
    let chunks_of = |d: usize| {
        p.assignments
            .iter()
            .find(|a| a.device == d)
            .map_or(0, |a| a.chunks)
    };
    match p.strategy {
        Strategy::Balanced => {
            let counts: Vec<u64> = eligible.iter().map(|m| chunks_of(m.device)).collect();
            if let (Some(lo), Some(hi)) = (counts.iter().min(), counts.iter().max()) {
                assert!(hi - lo <= 1, "unbalanced {counts:?}");
            }
        }
        Strategy::Memory => {
            let caps: Vec<Option<u64>> = eligible
                .iter()
                .map(|m| chunk_cap(w, chunk_items, m))
                .collect();
            let fits = caps
                .iter()
                .try_fold(0u64, |s, c| c.map(|c| s.saturating_add(c)));
            if fits.is_none_or(|total| total >= p.n_chunks) {
                let bytes = w.bytes_in_per_item + w.bytes_out_per_item;
                for a in &p.assignments {
                    let budget = model_of(models, a.device).memory_budget_bytes;
                    assert!(
                        budget.is_none_or(|b| a.items as f64 * bytes <= b as f64),
                        "{a:?} over {budget:?}"
                    );
                }
            }
        }
        Strategy::Latency => {
            // Minimising the makespan: never worse than the proportional or equal split.
            for other in [Strategy::Capability, Strategy::Balanced] {
                let q = plan(w, chunk_items, models, other).expect("plannable");
                assert!(
                    p.estimated_makespan_s <= q.estimated_makespan_s * (1.0 + 1e-9),
                    "latency {} worse than {other} {}",
                    p.estimated_makespan_s,
                    q.estimated_makespan_s
                );
            }
        }
        _ => {}
    }
}

/// A device whose launch costs `ratio` of its one-chunk compute and transfer time.
fn cheap_launches(mut m: DeviceModel, w: &Workload, chunk_items: u64, ratio: f64) -> DeviceModel {
    m.launch_latency_s = ratio * chunk_items as f64 * m.seconds_per_item(w);
    m.max_binding_bytes = 1 << 30;
    m.memory_budget_bytes = None;
    m
}

/// Many chunks, cheap launches: 1..=16 devices in 1..=16 groups, each launch costing at most
/// 5% of a chunk's work, and at least 64 chunks per group (`per_device`: per device). With
/// `same_hardware` the members of a group are copies of one device, as logical devices of
/// one adapter are. Returns the largest launch ratio drawn with the case.
fn cheap_launch_case(
    same_hardware: bool,
    per_device: bool,
) -> impl Gen<Value = (Vec<DeviceModel>, Workload, u64, f64)> {
    let devs = prop::collection::vec((device(), 0.0..0.05f64, 0usize..16), 1..=16);
    let extra = prop_oneof![0u64..4, 0u64..4096];
    (
        devs,
        1usize..=16,
        workload(Just(0)),
        10u32..=19,
        extra,
        any::<prop::sample::Index>(),
    )
        .prop_map(move |(devs, n_groups, mut w, log_chunk, extra, partial)| {
            let chunk_items = 1u64 << log_chunk;
            let mut models: Vec<DeviceModel> = Vec::new();
            let mut ratio_max = 0.0f64;
            for (i, (m, ratio, group)) in devs.into_iter().enumerate() {
                let group = group % n_groups;
                let twin = models
                    .iter()
                    .find(|o| o.group == group)
                    .filter(|_| same_hardware);
                let mut m = match twin {
                    Some(o) => o.clone(),
                    None => {
                        ratio_max = ratio_max.max(ratio);
                        cheap_launches(m, &w, chunk_items, ratio)
                    }
                };
                (m.device, m.group) = (i, group);
                models.push(m);
            }
            let mut groups: Vec<usize> = models.iter().map(|m| m.group).collect();
            groups.sort_unstable();
            groups.dedup();
            let units = if per_device {
                models.len()
            } else {
                groups.len()
            } as u64;
            let n_chunks = 64 * units + extra;
            w.items = n_chunks * chunk_items - partial.index(chunk_items as usize) as u64;
            (models, w, chunk_items, ratio_max)
        })
}

/// What whole chunks and launches cost at most against the lower bound, which has neither:
/// launches add up to `ratio` to every device's time, and rounding to whole chunks about
/// one chunk in 64. This is 0.95 or better while launches cost under 3.6% of a chunk; at
/// the full 5% the worst cases land near 0.945.
fn efficiency_floor(ratio: f64) -> f64 {
    (1.0 - 1.0 / 64.0) / (1.0 + ratio)
}

/// The smallest makespan the cost model allows, by exhaustion over the sets of devices with
/// work (up to 2^8), with the planner's layout: runs in ascending device id, the last device
/// with work holding the grid's short last chunk, the busy members of a group sharing its
/// hardware. With the set fixed, the sharing and the holder of the short chunk are fixed and
/// each device's time grows with its count, so the least feasible makespan is found by
/// bisection on the chunks each device finishes under it (exact to rounding).
fn optimum(w: &Workload, chunk_items: u64, models: &[DeviceModel]) -> f64 {
    let n = w.items.div_ceil(chunk_items);
    let d = models.len();
    assert!(d <= 8, "exhaustion is for up to 8 devices");
    let mut best = f64::INFINITY;
    for set in 1u32..(1 << d) {
        let members: Vec<usize> = (0..d).filter(|&i| set & (1 << i) != 0).collect();
        let eligible = members
            .iter()
            .all(|&i| models[i].accepts_chunk(w, chunk_items));
        if !eligible || members.len() as u64 > n {
            continue;
        }
        let deficit = n * chunk_items - w.items;
        let last = *members.iter().max_by_key(|&&i| models[i].device).unwrap();
        let time_at = |i: usize, c: u64| {
            let m = &models[i];
            let sharing = members
                .iter()
                .filter(|&&j| models[j].group == m.group)
                .count();
            let short = if i == last { deficit } else { 0 };
            m.seconds(w, c * chunk_items - short, c, sharing)
        };
        let fits = |i: usize, t: f64| {
            // The most chunks (1..=n) member i finishes within t; 0 when not even one.
            if time_at(i, 1) > t {
                return 0;
            }
            let (mut lo, mut hi) = (1u64, n);
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                if time_at(i, mid) <= t {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            lo
        };
        let feasible = |t: f64| {
            let caps: Vec<u64> = members.iter().map(|&i| fits(i, t)).collect();
            caps.iter().all(|&c| c > 0) && caps.iter().sum::<u64>() >= n
        };
        let mut hi = members.iter().map(|&i| time_at(i, n)).fold(0.0, f64::max);
        let mut lo = 0.0;
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            if feasible(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        best = best.min(hi);
    }
    best
}

/// A device whose bus is fast enough not to count (its transfers folded into its rate),
/// with the given group, launch seconds, rate, and the group's (measured speedup with all
/// its members busy, members).
fn on_a_free_bus(
    device: usize,
    group: usize,
    latency: f64,
    flops_per_s: f64,
    (group_speedup, group_members): (f64, usize),
) -> DeviceModel {
    DeviceModel {
        device,
        group,
        launch_latency_s: latency,
        h2d_bytes_per_s: f64::INFINITY,
        d2h_bytes_per_s: f64::INFINITY,
        flops_per_s,
        correction: 1.0,
        uncertainty: 0.0,
        memory_budget_bytes: None,
        max_binding_bytes: 128 << 20,
        group_speedup,
        group_members,
    }
}

/// Logical devices as a context of 4 Vulkan + 4 GL logical devices on Mesa's software
/// adapters calibrates them (2 cores): one group of 8 (lavapipe and llvmpipe run on the same
/// CPU) with a measured speedup of 1.53 for all 8 together; lavapipe is the quicker alone.
/// Seconds per item and launch costs as measured, with the transfers folded into the rate.
fn lavapipe_and_llvmpipe() -> Vec<DeviceModel> {
    let flops_per_item = 128.0;
    (0..8)
        .map(|device| {
            let (spi, latency) = if device < 4 {
                (6.641e-8, 8.2843e-5)
            } else {
                (1.1211e-7, 6.2383e-5)
            };
            on_a_free_bus(device, 0, latency, flops_per_item / spi, (1.533, 8))
        })
        .collect()
}

/// Up to 8 devices in up to 3 groups, members of a group alike or not, a measured speedup
/// anywhere from a slowdown to independent devices, launches from negligible to a good part
/// of a chunk, and from one chunk to a few hundred; certain models (so auto plans statically).
fn small_case() -> impl Gen<Value = (Vec<DeviceModel>, Workload, u64)> {
    let devs = prop::collection::vec((device(), 0usize..3, any::<bool>()), 1..=8);
    (
        devs,
        prop::collection::vec(-0.2..1.0f64, 3),
        workload(1u64..=300 << 12),
    )
        .prop_map(|(devs, gains, w)| {
            let mut models: Vec<DeviceModel> = Vec::new();
            for (i, (mut m, group, twin)) in devs.into_iter().enumerate() {
                if let Some(o) = models.iter().find(|o| o.group == group).filter(|_| twin) {
                    m = o.clone();
                }
                (m.device, m.group, m.uncertainty) = (i, group, 0.0);
                m.max_binding_bytes = 128 << 20;
                models.push(m);
            }
            let members: Vec<usize> = (0..3)
                .map(|g| models.iter().filter(|m| m.group == g).count())
                .collect();
            for m in &mut models {
                let k = members[m.group];
                m.group_members = k;
                m.group_speedup = if k == 1 {
                    1.0
                } else {
                    (1.0 + gains[m.group] * (k - 1) as f64).max(0.8)
                };
            }
            (models, w, 1 << 12)
        })
}

#[test]
fn partition_latency_and_auto_plans_of_lavapipe_and_llvmpipe_are_near_the_optimum() {
    // 10M items of a Cl(3,0) product in 39 chunks of 2^18: the plans were 1.12x (then
    // 1.42x with later figures) their bound; they must be within 2% of the model's optimum.
    let models = lavapipe_and_llvmpipe();
    let w = Workload {
        kernel: "geometric_product".into(),
        family: None,
        items: 10_000_000,
        bytes_in_per_item: 64.0,
        bytes_out_per_item: 32.0,
        flops_per_item: 128.0,
        dtype: amari_gpu::Dtype::F32,
    };
    let (best, plans) = near_the_optimum(&w, 1 << 18, &models, 1.02);
    for p in plans {
        // The bound is what the model allows: the optimum is close above it.
        assert!(
            p.lower_bound_s <= best && best <= p.lower_bound_s * 1.1,
            "{p:?}"
        );
    }
}

/// The latency and auto plans, checked, and each no more than `within` times the exhaustive
/// optimum (returned with them).
fn near_the_optimum(
    w: &Workload,
    chunk_items: u64,
    models: &[DeviceModel],
    within: f64,
) -> (f64, Vec<Plan>) {
    let best = optimum(w, chunk_items, models);
    let plans = [Strategy::Latency, Strategy::Auto].map(|strategy| {
        let p = plan(w, chunk_items, models, strategy).unwrap();
        check_plan(w, chunk_items, models, strategy, &p);
        assert!(
            p.estimated_makespan_s <= best * within,
            "{strategy}: {} against the optimum {best}: {p:?}",
            p.estimated_makespan_s
        );
        p
    });
    (best, plans.into())
}

/// The latency and auto plans of `items` items of one flop in chunks of 2^12 over devices
/// of (group, launch seconds, seconds per item alone, the group's measured speedup with all
/// its members busy, its members) are the exhaustive optimum, to rounding.
fn assert_optimal(items: u64, specs: &[(usize, f64, f64, f64, usize)]) {
    let models: Vec<DeviceModel> = specs
        .iter()
        .enumerate()
        .map(|(i, &(group, latency, spi, speedup, members))| {
            on_a_free_bus(i, group, latency, 1.0 / spi, (speedup, members))
        })
        .collect();
    let w = Workload {
        kernel: "drawn".into(),
        family: None,
        items,
        bytes_in_per_item: 16.0,
        bytes_out_per_item: 16.0,
        flops_per_item: 1.0,
        dtype: amari_gpu::Dtype::F32,
    };
    near_the_optimum(&w, 1 << 12, &models, 1.0 + 1e-9);
}

#[test]
fn partition_latency_runs_a_slow_device_of_another_group_for_the_short_chunk_alone() {
    // 4 chunks, the last of 2575 items. Best: 3 chunks on device 0 alone in its group and
    // the short one on device 2, too slow for a full chunk. The old search counted every
    // chunk full, so it never ran device 2's group, and revisiting one group at a time
    // could not both drop device 1 and add device 2: it planned all 4 on device 0, 1.063x.
    let quick = (1, 3.359e-5, 3.741e-7, 1.109, 3);
    let slow = (0, 7.194e-4, 1.800e-6, 0.975, 2);
    assert_optimal(14_863, &[quick, quick, slow, slow, quick]);
}

#[test]
fn partition_latency_ends_on_a_quick_member_of_a_shared_group() {
    // 9 chunks, the last of 2874 items. Best: 1 chunk on device 0, 2 on 1, 3 on 3 and 3 on
    // 6 (holding the short one), two of group 0 sharing it. The old search ended on device
    // 7 (a lone member of group 1 with a cheap launch) with 4 chunks on device 1: 1.032x.
    let g0 = (0, 1.027e-4, 2.964e-7, 1.370, 3);
    let g0_slow = (0, 9.325e-4, 1.222e-6, 1.370, 3);
    let g1 = (1, 3.399e-5, 1.219e-6, 0.800, 3);
    let g1_quick_launch = (1, 1.147e-5, 1.189e-6, 0.800, 3);
    let g2 = (2, 2.242e-4, 4.288e-7, 1.236, 2);
    assert_optimal(35_642, &[g1, g0, g1, g2, g2, g0_slow, g0, g1_quick_launch]);
}

/// Auto is adaptive only for uncertain models, and otherwise the quicker static plan.
fn check_auto(w: &Workload, chunk_items: u64, models: &[DeviceModel], p: &Plan) {
    let latency = plan(w, chunk_items, models, Strategy::Latency).unwrap();
    let uncertain = latency
        .assignments
        .iter()
        .any(|a| model_of(models, a.device).uncertainty > 0.25);
    assert_eq!(p.strategy == Strategy::Adaptive, uncertain, "{p:?}");
    if uncertain {
        let devices = |q: &Plan| q.assignments.iter().map(|a| a.device).collect::<Vec<_>>();
        assert!(devices(p).iter().all(|d| devices(&latency).contains(d)));
    } else {
        let capability = plan(w, chunk_items, models, Strategy::Capability).unwrap();
        let best = latency
            .estimated_makespan_s
            .min(capability.estimated_makespan_s);
        assert_eq!(p.estimated_makespan_s, best);
    }
}

/// Named for the module so `cargo test partition` selects these tests.
mod partition {
    use super::*;

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn latency_plans_come_near_the_bound((models, w, chunk_items, ratio) in cheap_launch_case(false, false)) {
            let p = plan(&w, chunk_items, &models, Strategy::Latency).unwrap();
            check_plan(&w, chunk_items, &models, Strategy::Latency, &p);
            prop_assert!(p.efficiency >= efficiency_floor(ratio), "{} < {}: {p:?}", p.efficiency, efficiency_floor(ratio));
            if ratio <= 0.035 {
                prop_assert!(p.efficiency >= 0.95);
            }
        }

        /// Capability runs every member of a group at once, so it needs its 64 chunks per
        /// device, and group members that are the same hardware (with unequal members a group
        /// runs at their mean speed, not its fastest member's, which the bound assumes).
        #[test]
        fn capability_plans_come_near_the_bound((models, w, chunk_items, ratio) in cheap_launch_case(true, true)) {
            let p = plan(&w, chunk_items, &models, Strategy::Capability).unwrap();
            check_plan(&w, chunk_items, &models, Strategy::Capability, &p);
            prop_assert!(p.efficiency >= efficiency_floor(ratio), "{} < {}: {p:?}", p.efficiency, efficiency_floor(ratio));
            if ratio <= 0.035 {
                prop_assert!(p.efficiency >= 0.95);
            }
        }

        #[test]
        fn latency_and_auto_plans_are_near_the_optimum((models, w, chunk_items) in small_case()) {
            let best = optimum(&w, chunk_items, &models);
            for strategy in [Strategy::Latency, Strategy::Auto] {
                let p = plan(&w, chunk_items, &models, strategy).unwrap();
                check_plan(&w, chunk_items, &models, strategy, &p);
                prop_assert!(
                    p.estimated_makespan_s <= best * 1.02,
                    "{strategy}: {} against the optimum {best}: {p:?}",
                    p.estimated_makespan_s
                );
                prop_assert!(p.lower_bound_s <= best * (1.0 + 1e-9), "bound above the optimum: {p:?}");
            }
        }

        #[test]
        fn every_strategy_keeps_the_invariants(
            models in devices(),
            w in workload(any_items()),
            chunk_items in chunk_items(),
        ) {
            for strategy in Strategy::ALL {
                match plan(&w, chunk_items, &models, strategy) {
                    Ok(p) => {
                        check_plan(&w, chunk_items, &models, strategy, &p);
                        check_strategy(&w, chunk_items, &models, &p);
                        if strategy == Strategy::Auto {
                            check_auto(&w, chunk_items, &models, &p);
                        }
                    }
                    Err(Error::InvalidArgument { argument, .. }) => {
                        prop_assert_eq!(argument, "chunk_items");
                        prop_assert!(w.items > 0 && models.iter().all(|m| !m.accepts_chunk(&w, chunk_items)));
                    }
                    Err(e) => panic!("unexpected error {e}"),
                }
            }
        }
    }
}
