//! Whole heat and Life calls on the host device, alone and beside lavapipe, each made
//! twice so that the second runs in the buffers the first handed back: the board, the
//! host bands' buffers and the blocked passes' rings are not zeroed before use (under test
//! they hold a NaN pattern instead), and every result is lavapipe's, bit for bit — a word
//! read before it was written would show.

use super::{heat, life, Boundary, Options};
use crate::context::MultiGpuContext;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Grid shapes around every edge: one row, one column, widths around the vec4 padding and
/// not multiples of anything, steps that are not multiples of the halo or of a pass.
const SHAPES: [(usize, usize, u64, usize); 7] = [
    (1, 1, 3, 2),
    (1, 9, 5, 5),
    (7, 1, 4, 3),
    (5, 6, 7, 16),
    (37, 29, 21, 16),
    (64, 40, 33, 9),
    (130, 67, 17, 17),
];

/// Beside lavapipe (the host rounding `fma` as lavapipe does) the host's rows, all of the
/// grid or a share of it, are lavapipe's bits; alone (rounding `fma` fused) its calls agree
/// with each other bit for bit and with lavapipe to rounding, with no NaN.
#[test]
fn host_calls_in_reused_buffers_give_lavapipes_bits() {
    let lavapipe = MultiGpuContext::on(&["vulkan"]);
    let host = MultiGpuContext::on(&["host"]);
    let both = MultiGpuContext::on(&["vulkan", "host"]);
    for (h, w, steps, halo) in SHAPES {
        let grid: Vec<f32> = (0..h * w)
            .map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.3)
            .collect();
        let cells: Vec<u8> = (0..h * w).map(|i| u8::from((i * 7) % 5 < 2)).collect();
        for split in [None, Some(vec![0, h]), Some(vec![h / 2, h - h / 2])] {
            let opts = Options {
                steps,
                halo,
                rebalance: split.is_none(),
                split,
            };
            let alone = Options {
                split: None,
                ..opts.clone()
            };
            let what = format!("{h}x{w} {steps} steps halo {halo} split {:?}", opts.split);
            for boundary in [Boundary::Dirichlet, Boundary::Periodic] {
                let run = |ctx: &MultiGpuContext, opts: &Options| {
                    let (out, _) = heat(ctx, &grid, h, w, 0.2, boundary, opts).expect("heat runs");
                    out
                };
                let want = run(&lavapipe, &alone);
                for _ in 0..2 {
                    assert_eq!(
                        bits(&run(&both, &opts)),
                        bits(&want),
                        "heat {what} {boundary:?}"
                    );
                }
                let first = run(&host, &alone);
                assert_eq!(
                    bits(&run(&host, &alone)),
                    bits(&first),
                    "heat {what} {boundary:?}"
                );
                for (a, b) in first.iter().zip(&want) {
                    assert!(
                        (a - b).abs() <= 1e-5,
                        "heat {what} {boundary:?}: {a} vs {b}"
                    );
                }
            }
            let run = |ctx: &MultiGpuContext, opts: &Options| {
                life(ctx, &cells, h, w, opts).expect("life runs").0
            };
            let want = run(&lavapipe, &alone);
            for (ctx, opts) in [
                (&both, &opts),
                (&host, &alone),
                (&both, &opts),
                (&host, &alone),
            ] {
                assert_eq!(run(ctx, opts), want, "life {what}");
            }
        }
    }
}
