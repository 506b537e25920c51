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
    use super::super::fixtures::{check, chunks, dev, work};
    use crate::partition::plan;
    use crate::plan::Strategy;

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
        let models = [
            dev(0, 0, 1e12),
            dev(1, 0, 5e11),
            dev(2, 1, 1e11),
            dev(3, 2, 3e10),
        ];
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
