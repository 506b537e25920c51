//! Whole-chunk apportionment: splitting a number of chunks in proportion to weights, under
//! per-device caps (water-filling, then largest remainder).

/// Splits `n` chunks in proportion to `weights`, never giving device `i` more than `caps[i]`
/// (`u64::MAX` for no cap); the caps must add up to at least `n`. Shares above a cap spill
/// onto the uncapped devices in proportion to their weights. Ties in the rounding go to the
/// lower index, i.e. the lower device id.
pub(crate) fn apportion(n: u64, weights: &[f64], caps: &[u64]) -> Vec<u64> {
    let d = weights.len();
    let mut share = vec![0.0f64; d];
    let mut capped = vec![false; d];
    let mut remaining = n as f64;
    loop {
        let wsum: f64 = (0..d).filter(|&i| !capped[i]).map(|i| weights[i]).sum();
        if wsum <= 0.0 {
            break;
        }
        // A device over its cap now stays over it once others are capped (their spill only
        // raises everyone's share), so all of this round's violators can be fixed at once.
        let over: Vec<usize> = (0..d)
            .filter(|&i| !capped[i] && remaining * weights[i] / wsum > caps[i] as f64)
            .collect();
        if over.is_empty() {
            for i in (0..d).filter(|&i| !capped[i]) {
                share[i] = remaining * weights[i] / wsum;
            }
            break;
        }
        for i in over {
            capped[i] = true;
            share[i] = caps[i] as f64;
            remaining = (remaining - caps[i] as f64).max(0.0);
        }
    }
    round(n, &share, weights, caps)
}

/// Largest-remainder rounding of real shares, repaired against floating-point drift so the
/// result always adds up to exactly `n` within the caps.
fn round(n: u64, share: &[f64], weights: &[f64], caps: &[u64]) -> Vec<u64> {
    let d = share.len();
    let mut counts: Vec<u64> = (0..d)
        .map(|i| (share[i].floor().max(0.0) as u64).min(caps[i]))
        .collect();
    let mut total: u64 = counts.iter().fold(0u64, |s, &c| s.saturating_add(c));
    while total > n {
        let i = (0..d).max_by_key(|&i| counts[i]).unwrap_or(0);
        let take = (total - n).min(counts[i]);
        counts[i] -= take;
        total -= take;
    }
    if total < n {
        let frac: Vec<f64> = (0..d).map(|i| share[i] - counts[i] as f64).collect();
        let mut order: Vec<usize> = (0..d).collect();
        order.sort_by(|&a, &b| frac[b].total_cmp(&frac[a]).then(a.cmp(&b)));
        for &i in &order {
            if total == n {
                break;
            }
            if counts[i] < caps[i] && frac[i] > 0.0 {
                counts[i] += 1;
                total += 1;
            }
        }
        // Only drift or zero weights leave chunks over: heaviest devices with room take them.
        order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
        for &i in &order {
            let take = (n - total).min(caps[i] - counts[i]);
            counts[i] += take;
            total += take;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_CAP: u64 = u64::MAX;

    #[test]
    fn proportional_with_largest_remainder() {
        assert_eq!(apportion(10, &[2.0, 1.0], &[NO_CAP; 2]), vec![7, 3]);
        assert_eq!(apportion(9, &[2.0, 1.0], &[NO_CAP; 2]), vec![6, 3]);
        // Equal remainders: the lower index wins.
        assert_eq!(apportion(5, &[1.0, 1.0], &[NO_CAP; 2]), vec![3, 2]);
    }

    #[test]
    fn caps_spill_in_proportion_to_weight() {
        // Device 0 would take 50 but may take 10; devices 1 and 2 split the other 90 as 2:1.
        assert_eq!(
            apportion(100, &[5.0, 2.0, 1.0], &[10, NO_CAP, NO_CAP]),
            vec![10, 60, 30]
        );
        // Spill can cap a second device.
        assert_eq!(
            apportion(100, &[5.0, 2.0, 1.0], &[10, 50, NO_CAP]),
            vec![10, 50, 40]
        );
    }

    #[test]
    fn zero_weights_and_zero_caps() {
        assert_eq!(apportion(7, &[0.0, 1.0], &[0, NO_CAP]), vec![0, 7]);
        assert_eq!(apportion(7, &[0.0, 0.0], &[NO_CAP, NO_CAP]), vec![7, 0]);
        assert_eq!(apportion(0, &[1.0, 1.0], &[NO_CAP; 2]), vec![0, 0]);
    }

    #[test]
    fn always_sums_to_n() {
        let weights = [1e-3, 3.7, 1e2, 0.25, 17.0];
        for n in [1u64, 2, 3, 17, 1000, 3815, 976_563, 1 << 40] {
            let counts = apportion(n, &weights, &[NO_CAP, 5, NO_CAP, 1, NO_CAP]);
            assert_eq!(counts.iter().sum::<u64>(), n);
            assert!(counts[1] <= 5 && counts[3] <= 1);
        }
    }
}
