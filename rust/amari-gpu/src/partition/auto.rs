//! The automatic choice: the latency plan when the model is trusted and it is the quicker,
//! the capability plan when that is quicker, and a dynamic (adaptive) run when the model's
//! figures for the devices that matter are too uncertain to plan statically.

use super::problem::Problem;
use super::{capability, latency};
use crate::plan::Strategy;

/// Relative spread of observed / predicted times above which a static split is a guess.
pub(crate) const UNCERTAINTY_LIMIT: f64 = 0.25;

/// The strategy Auto settles on, and its counts.
pub(crate) fn choose(p: &Problem) -> (Strategy, Vec<u64>) {
    let lat = latency::counts(p);
    let used: Vec<bool> = lat.iter().map(|&c| c > 0).collect();
    let doubtful = p
        .devs
        .iter()
        .zip(&used)
        .any(|(d, &u)| u && d.model.uncertainty > UNCERTAINTY_LIMIT);
    if doubtful {
        // The latency plan still says which devices are worth launching on; the queue then
        // decides how much each takes, predicted here by their speeds.
        return (Strategy::Adaptive, capability::counts(p, &used));
    }
    let cap = capability::counts(p, &vec![true; p.devs.len()]);
    if p.makespan(&cap) < p.makespan(&lat) {
        (Strategy::Capability, cap)
    } else {
        (Strategy::Latency, lat)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{
        check, chunks, dev, devs, discrete_gpu, host, software_gpu, transfer_bound, work,
    };
    use crate::partition::plan;
    use crate::plan::Strategy;
    use crate::workload::Workload;

    /// This machine's figures, roughly: a Cl(3,0) product over 2^20 items takes the host
    /// device (2 AVX2 cores) ~22 ms and lavapipe on the same cores ~109 ms.
    fn host_and_lavapipe(speedup: f64) -> [crate::model::DeviceModel; 2] {
        let mut cpu = host(1, 0, 6e9);
        let lavapipe = software_gpu(0, 1.6e9, &mut cpu, speedup);
        [lavapipe, cpu]
    }

    #[test]
    fn a_software_gpu_on_the_hosts_cores_gets_nothing() {
        // Sharing the cores gains little or loses (measured 0.9 to 1.3): every chunk on the
        // host, however big the job.
        for speedup in [0.9, 1.0, 1.3] {
            for items in [1 << 12, 1 << 20, 1 << 24] {
                let models = host_and_lavapipe(speedup);
                let w = transfer_bound(items);
                let plan = plan(&w, 1 << 14, &models, Strategy::Auto).unwrap();
                check(&plan);
                assert_eq!(
                    chunks(&plan),
                    vec![(1, plan.n_chunks)],
                    "speedup {speedup}, {items} items: {plan:?}"
                );
            }
        }
    }

    #[test]
    fn the_measured_group_speedup_decides_whether_the_software_gpu_helps() {
        // Were the two independent (a speedup near 2), lavapipe would be worth its share.
        let models = host_and_lavapipe(1.95);
        let plan = plan(&transfer_bound(1 << 22), 1 << 14, &models, Strategy::Auto).unwrap();
        check(&plan);
        let c = chunks(&plan);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(c[1].1 > c[0].1, "the host is the faster: {c:?}");
    }

    #[test]
    fn a_big_gpu_takes_a_large_compute_bound_job_and_the_host_a_proportional_share() {
        let models = [discrete_gpu(0, 0, 2e13), host(1, 1, 5e11)];
        let w = Workload {
            flops_per_item: 1e6,
            dtype: crate::dtype::Dtype::F32,
            ..work(1 << 24)
        };
        let plan = plan(&w, 1 << 14, &models, Strategy::Auto).unwrap();
        check(&plan);
        let c = chunks(&plan);
        assert_eq!(c.iter().map(|&(d, _)| d).collect::<Vec<_>>(), vec![0, 1]);
        let rate = |m: &crate::model::DeviceModel| m.items_per_s(&w);
        let share = rate(&models[1]) / (rate(&models[0]) + rate(&models[1]));
        let host_share = c[1].1 as f64 / plan.n_chunks as f64;
        assert!(
            (host_share / share - 1.0).abs() < 0.3,
            "host share {host_share} against its rate's {share}: {c:?}"
        );
    }

    #[test]
    fn a_small_job_goes_whole_to_the_device_faster_including_transfers() {
        // (GPU flops, host flops, items, device expected): a big GPU against one slow core
        // takes a small transfer-bound job whole (the host gets nothing); a job so small that
        // the GPU's launch and bus outweigh its speed stays whole on the host.
        let cases = [(2e13, 1e9, 4096, 0), (2e13, 6e9, 256, 1)];
        for (gpu_flops, host_flops, items, expected) in cases {
            let models = [discrete_gpu(0, 0, gpu_flops), host(1, 1, host_flops)];
            let w = transfer_bound(items);
            let plan = plan(&w, 4096, &models, Strategy::Auto).unwrap();
            check(&plan);
            assert_eq!(chunks(&plan), vec![(expected, 1)], "{plan:?}");
            let alone = |d: usize| models[d].seconds(&w, items, 1, 1);
            assert!(alone(expected) < alone(1 - expected), "{plan:?}");
        }
    }

    #[test]
    fn uncertain_devices_make_it_adaptive() {
        let mut models = [dev(0, 0, 1e11), dev(1, 1, 2e11), dev(2, 2, 1e11)];
        models[1].uncertainty = 0.4;
        // Device 2 is too slow to launch on, so the adaptive run leaves it out too.
        models[2].launch_latency_s = 10.0;
        let w = work(1 << 22);
        let plan = plan(&w, 1 << 12, &models, Strategy::Auto).unwrap();
        check(&plan);
        assert_eq!(
            (plan.strategy, plan.requested),
            (Strategy::Adaptive, Strategy::Auto)
        );
        let c = chunks(&plan);
        assert_eq!(c.iter().map(|&(d, _)| d).collect::<Vec<_>>(), vec![0, 1]);
        assert!(c[1].1 > c[0].1, "{c:?}");
    }

    #[test]
    fn uncertainty_on_an_unused_device_does_not_matter() {
        let mut models = [dev(0, 0, 1e11), dev(1, 1, 1e11)];
        models[1].launch_latency_s = 10.0;
        models[1].uncertainty = 0.9;
        let plan = plan(&work(1 << 22), 1 << 12, &models, Strategy::Auto).unwrap();
        check(&plan);
        assert_eq!(
            (plan.strategy, plan.requested),
            (Strategy::Latency, Strategy::Auto)
        );
        assert_eq!(chunks(&plan), vec![(0, 1024)]);
    }

    #[test]
    fn otherwise_the_quicker_static_plan() {
        let models = devs([(0, 1e12), (0, 5e11), (1, 1e11), (2, 3e10)]);
        let w = work(3 << 22);
        let auto = plan(&w, 1 << 12, &models, Strategy::Auto).unwrap();
        let lat = plan(&w, 1 << 12, &models, Strategy::Latency).unwrap();
        let cap = plan(&w, 1 << 12, &models, Strategy::Capability).unwrap();
        check(&auto);
        let best = lat.estimated_makespan_s.min(cap.estimated_makespan_s);
        assert_eq!(auto.estimated_makespan_s, best);
        assert!(matches!(
            auto.strategy,
            Strategy::Latency | Strategy::Capability
        ));
        assert_eq!(auto.requested, Strategy::Auto);
    }
}
