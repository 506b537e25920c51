//! The float64 Fisher call in three steps (prepare, partials on a given grid, finish), as a
//! cluster runs it: the partials of any cut of the whole problem's grid into runs, summed in
//! chunk order, give the one-context call's bits.

mod common;

use amari_gpu::dtype::f64_words;
use amari_gpu::fisher::{finish_f64, fisher_information_f64, ones_f64, partials_f64, prepare_f64};
use common::contexts;

#[test]
fn float64_partials_of_runs_of_the_grid_give_the_whole_calls_bits() {
    let (n, p) = (40_000, 7);
    let scores: Vec<f64> = amari_gpu::sample::uniform_f32(n * p, 64)
        .iter()
        .map(|&v| f64::from(v) * std::f64::consts::PI)
        .collect();
    let ones = ones_f64(n).unwrap();
    let mut checked = 0;
    for (name, ctx) in contexts(None) {
        if !ctx.devices().iter().any(|d| d.runs(amari_gpu::Dtype::F64)) {
            continue;
        }
        let want = fisher_information_f64(&ctx, &scores, p, None, None).unwrap();
        let prepared = prepare_f64(&scores, p, None).unwrap();
        let grid = prepared.chunk_items;
        assert!(
            n > 2 * grid,
            "{name}: the grid has several chunks ({grid} rows each)"
        );
        // Two runs, cut at a chunk boundary, as two nodes would compute them.
        let cut = 2 * grid;
        let mut partials = Vec::new();
        for (lo, hi) in [(0, cut), (cut, n)] {
            let ran = partials_f64(
                &ctx,
                &scores[lo * p..hi * p],
                p,
                &ones[lo..hi],
                Some(grid),
                None,
            )
            .unwrap();
            partials.extend_from_slice(&ran.partials);
        }
        let got = finish_f64(p, prepared.total, &partials).unwrap();
        assert_eq!(
            f64_words(&got),
            f64_words(&want.matrix),
            "{name}: the split call's bits"
        );
        checked += 1;
    }
    assert!(
        checked > 0,
        "no context with a float64 device (lavapipe has one)"
    );
}
