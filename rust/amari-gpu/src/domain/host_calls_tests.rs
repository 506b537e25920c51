//! Whole heat and Life calls on the host device, alone and beside lavapipe, each made
//! twice so that the second runs in the buffers the first handed back: the board, the
//! host bands' buffers and the blocked passes' rings are not zeroed before use (under test
//! they hold a NaN pattern instead), and every result is lavapipe's, bit for bit — a word
//! read before it was written would show.

use super::host_grid::HeatCell;
use super::{heat, heat_into, life, Boundary, Dest, Options};
use crate::context::MultiGpuContext;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Beside lavapipe (the host rounding `fma` as lavapipe does) the host's rows, all of the
/// grid or a share of it, are lavapipe's bits; alone (rounding `fma` fused) its calls agree
/// with each other bit for bit and with lavapipe to rounding, with no NaN.
#[test]
fn host_calls_in_reused_buffers_give_lavapipes_bits() {
    let lavapipe = MultiGpuContext::on(&["vulkan"]);
    let host = MultiGpuContext::on(&["host"]);
    let both = MultiGpuContext::on(&["vulkan", "host"]);
    // Grid shapes around every edge: one row, one column, widths around the vec4 padding
    // and not multiples of anything, and one without padding (its board is the result);
    // steps that are not multiples of the halo or of a pass.
    let shapes = [(1, 1), (1, 9), (7, 1), (5, 6), (37, 29), (130, 67), (9, 8)];
    let runs = [(5u64, 3), (21, 16), (33, 9)];
    for ((h, w), (steps, halo)) in shapes.into_iter().flat_map(|s| runs.map(|r| (s, r))) {
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
                    // Into an array of NaN, the caller's or a new one: every cell written,
                    // the same bits.
                    for new in [false, true] {
                        let mut into = vec![f32::NAN; h * w];
                        let dest = if new {
                            Dest::New(&mut into)
                        } else {
                            Dest::Callers(&mut into)
                        };
                        heat_into(&both, &grid, (h, w), (0.2, boundary), &opts, dest)
                            .expect("heat runs into out");
                        assert_eq!(
                            bits(&into),
                            bits(&want),
                            "heat into out {what} {boundary:?}, new {new}"
                        );
                    }
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

/// A grid whose width is a multiple of 4 comes back in the board itself (not copied, so
/// not kept), float32 and float64 alike, with the bits of the same grid stepped on
/// lavapipe; a padded one is copied out of the board, which is kept.
#[test]
fn an_unpadded_board_is_the_result() {
    let host = MultiGpuContext::on(&["host", "vulkan"]);
    let lavapipe = MultiGpuContext::on(&["vulkan"]);
    let (h, w) = (24, 40);
    let grid: Vec<f32> = (0..h * w)
        .map(|i| ((i * 37) % 101) as f32 / 101.0)
        .collect();
    let wide: Vec<f64> = grid.iter().map(|&v| f64::from(v)).collect();
    let opts = |split| Options {
        steps: 7,
        halo: 3,
        rebalance: false,
        split,
    };
    let (want, _) = heat(&lavapipe, &grid, h, w, 0.2, Boundary::Periodic, &opts(None)).unwrap();
    let (want_wide, _) =
        heat(&lavapipe, &wide, h, w, 0.2, Boundary::Periodic, &opts(None)).unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let bits_wide = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for split in [vec![h, 0], vec![10, 14]] {
        for _ in 0..2 {
            let o = opts(Some(split.clone()));
            let (got, _) = heat(&host, &grid, h, w, 0.2, Boundary::Periodic, &o).unwrap();
            assert_eq!(bits(&got), bits(&want), "split {split:?}");
            assert_eq!(got.capacity(), h * w);
            let (got, _) = heat(&host, &wide, h, w, 0.2, Boundary::Periodic, &o).unwrap();
            assert_eq!(
                bits_wide(&got),
                bits_wide(&want_wide),
                "float64 split {split:?}"
            );
            assert_eq!(got.capacity(), h * w);
            assert!(host.spare.kept().is_empty(), "the boards were handed over");
        }
    }
    let (h, w) = (20, 41);
    let padded = &wide[..h * w];
    let o = opts(Some(vec![h, 0]));
    let (got, _) = heat(&host, padded, h, w, 0.2, Boundary::Periodic, &o).unwrap();
    let (want, _) = heat(
        &lavapipe,
        padded,
        h,
        w,
        0.2,
        Boundary::Periodic,
        &opts(None),
    )
    .unwrap();
    assert_eq!(bits_wide(&got), bits_wide(&want));
    assert_eq!(
        host.spare.kept().len(),
        1,
        "the padded board was copied and kept"
    );
}

/// Into an array, the caller's or a new one: a run of no steps is the grid; a grid near the
/// float32 limit (scaled for its run; into a new array, found so as the run read it and run
/// again scaled) and a padded one are [`heat`]'s bits; an array of another size is refused
/// before any work, and the array is left as it was.
#[test]
fn heat_into_an_array_is_heats_bits_or_a_clear_error() {
    let ctx = MultiGpuContext::on(&["host", "vulkan"]);
    let (h, w) = (12, 16);
    let grid: Vec<f32> = (0..h * w)
        .map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.3)
        .collect();
    let huge: Vec<f32> = grid.iter().map(|v| v * 3e38).collect();
    let opts = |steps| Options {
        steps,
        halo: 4,
        rebalance: false,
        split: Some(vec![5, 7]),
    };
    for (grid, w, steps) in [(&grid, w, 0), (&huge, w, 9), (&grid, 15, 9), (&grid, w, 9)] {
        let cells = &grid[..h * w];
        let (want, _) = heat(&ctx, cells, h, w, 0.2, Boundary::Dirichlet, &opts(steps)).unwrap();
        for new in [false, true] {
            let mut into = vec![f32::NAN; h * w];
            let o = opts(steps);
            let dest = if new {
                Dest::New(&mut into)
            } else {
                Dest::Callers(&mut into)
            };
            heat_into(&ctx, cells, (h, w), (0.2, Boundary::Dirichlet), &o, dest).unwrap();
            assert_eq!(
                bits(&into),
                bits(&want),
                "{h}x{w}, {steps} steps, new {new}"
            );
        }
    }
    for new in [false, true] {
        let mut short = vec![7.0f32; h * w - 1];
        let o = opts(3);
        let dest = if new {
            Dest::New(&mut short)
        } else {
            Dest::Callers(&mut short)
        };
        let error = heat_into(&ctx, &grid, (h, w), (0.2, Boundary::Periodic), &o, dest)
            .expect_err("a short out is refused");
        assert!(error.to_string().contains("out"), "{error}");
        assert!(
            short.iter().all(|&v| v == 7.0),
            "the array is left as it was"
        );
    }
}

/// A grid holding a cell that is not finite is refused with the same error whether it is
/// checked before the run (the caller's array, left as it was) or as the run reads it (a
/// new array): wherever the cell is, in a row the host device's first pass reads in place
/// or one only lavapipe's band holds (scanned after the run), on the host alone or beside
/// lavapipe, in one round or several.
#[test]
fn a_grid_that_is_not_finite_is_refused_however_it_is_checked() {
    let (h, w) = (24, 16);
    let grid: Vec<f32> = (0..h * w)
        .map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.3)
        .collect();
    for (backends, split) in [
        (&["host"][..], None),
        (&["vulkan", "host"][..], Some(vec![10, 14])),
    ] {
        let ctx = MultiGpuContext::on(backends);
        for (at, bad) in [(3 * w + 5, f32::NAN), (20 * w + 1, f32::NEG_INFINITY)] {
            for halo in [8, 3] {
                let mut cells = grid.clone();
                cells[at] = bad;
                let o = Options {
                    steps: 8,
                    halo,
                    rebalance: false,
                    split: split.clone(),
                };
                let want = format!(
                    "found {} at ({}, {})",
                    if bad.is_nan() {
                        "nan".into()
                    } else {
                        bad.to_string()
                    },
                    at / w,
                    at % w
                );
                for new in [false, true] {
                    let mut into = vec![7.0f32; h * w];
                    let dest = if new {
                        Dest::New(&mut into)
                    } else {
                        Dest::Callers(&mut into)
                    };
                    let error =
                        heat_into(&ctx, &cells, (h, w), (0.2, Boundary::Periodic), &o, dest)
                            .expect_err("a grid that is not finite is refused");
                    let what = format!("{backends:?} halo {halo} new {new}");
                    assert!(error.to_string().contains(&want), "{what}: {error}");
                    if !new {
                        assert!(
                            into.iter().all(|&v| v == 7.0),
                            "{what}: the array is left as it was"
                        );
                    }
                }
            }
        }
    }
}

/// A run into an array lays the host device's bands out from the caller's grid without
/// writing their rows: the first pass reads them there (nothing written into the bands
/// before it), alone and beside lavapipe, periodic and Dirichlet, in one round or several
/// (whose later rounds upload ghost rows as before), float32 and float64; every result is
/// the bits of the run laid out by copies (`heat`'s, whose board is built first).
#[test]
fn a_run_into_an_array_reads_its_first_rows_where_the_grid_has_them() {
    // A width no other test steps, whose bands' writes count; rows of whole vec4s (a padded
    // grid is laid out from a board of padded rows, by copies).
    let (h, w): (usize, usize) = (40, 52);
    let grid: Vec<f32> = (0..h * w)
        .map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.3)
        .collect();
    let grid64: Vec<f64> = grid.iter().map(|&v| f64::from(v) * 1.25).collect();
    for (backends, split) in [
        (&["host"][..], None),
        (&["vulkan", "host"][..], Some(vec![17, 23])),
    ] {
        let ctx = MultiGpuContext::on(backends);
        for (boundary, steps, halo) in [
            (Boundary::Periodic, 6, 6),
            (Boundary::Dirichlet, 5, 5),
            (Boundary::Periodic, 13, 4),
        ] {
            let o = Options {
                steps,
                halo,
                rebalance: false,
                split: split.clone(),
            };
            let what = format!("{backends:?} {boundary:?} {steps} steps, halo {halo}");
            // One round: nothing written into the bands; several: only later rounds'
            // ghost rows (two runs of `halo` rows per band and round at most).
            let rounds = steps.div_ceil(halo as u64) as usize;
            let ghosts = (rounds - 1) * 2 * halo * w;
            let run = (&ctx, (h, w), boundary, &o, what.as_str());
            let wrote = written_into(run, &grid);
            assert!(wrote <= ghosts * 4, "{what}: {wrote} bytes written");
            let wrote = written_into(run, &grid64);
            assert!(
                wrote <= ghosts * 8,
                "{what}, float64: {wrote} bytes written"
            );
        }
    }
    crate::runner::WATCHED.store(0, std::sync::atomic::Ordering::SeqCst);
}

/// A heat run of `grid` laid out by copies (`heat`) and into an array (`heat_into`),
/// counting the bytes written into host bands of its rows: the bits agree and the first
/// wrote rows; the bytes the second wrote.
fn written_into<T: HeatCell>(
    (ctx, (h, w), boundary, o, what): (&MultiGpuContext, (usize, usize), Boundary, &Options, &str),
    grid: &[T],
) -> usize {
    use crate::runner::{WATCHED, WRITTEN};
    use std::sync::atomic::Ordering::SeqCst;
    // Rows of whole vec4s: `w` cells of `T`.
    WATCHED.store(w * size_of::<T>(), SeqCst);
    WRITTEN.store(0, SeqCst);
    let alpha = T::from_f64(0.2);
    let (want, _) = heat(ctx, grid, h, w, alpha, boundary, o).unwrap();
    assert!(
        WRITTEN.swap(0, SeqCst) > 0,
        "{what}: a run from a board copies its layout in"
    );
    let mut into = vec![T::from_f64(f64::NAN); h * w];
    heat_into(
        ctx,
        grid,
        (h, w),
        (alpha, boundary),
        o,
        Dest::Callers(&mut into),
    )
    .unwrap();
    let wrote = WRITTEN.swap(0, SeqCst);
    let bytes = |v: &[T]| bytemuck::cast_slice::<T, u8>(v).to_vec();
    assert_eq!(
        bytes(&into),
        bytes(&want),
        "{what}, {} bytes a cell",
        size_of::<T>()
    );
    wrote
}

/// A run that checks its grid as it reads it scans every row in the host device's first
/// pass when the host holds them all (in one round or a round a step), and leaves for after
/// the run exactly the rows no host pass scanned: lavapipe's beyond the host band's ghost
/// rows, and the band's last two rows (a pass scans the row two above each it reads). The
/// result is the bits of the run laid out by copies.
#[test]
fn a_host_pass_scans_the_rows_it_reads_and_leaves_the_rest_for_after() {
    let (h, w): (usize, usize) = (48, 32);
    let grid: Vec<f32> = (0..h * w)
        .map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.3)
        .collect();
    let grid64: Vec<f64> = grid.iter().map(|&v| f64::from(v) * 1.25).collect();
    for (backends, split, halo, steps, unseen) in [
        (&["host"][..], None, 16, 16, vec![]),
        (&["host"][..], None, 1, 3, vec![]),
        // Host rows 20..48 with 4 ghost rows each side (16..20, and 0..4 wrapped: the
        // band's last two, 2 and 3, are left).
        (
            &["vulkan", "host"][..],
            Some(vec![20, 28]),
            4,
            8,
            (2..16).collect(),
        ),
    ] {
        let ctx = MultiGpuContext::on(backends);
        let o = Options {
            steps,
            halo,
            rebalance: false,
            split,
        };
        let what = format!("{backends:?} halo {halo}, {steps} steps");
        assert_eq!(scanned_run(&ctx, &grid, (h, w), &o), unseen, "{what}");
        assert_eq!(
            scanned_run(&ctx, &grid64, (h, w), &o),
            unseen,
            "{what}, float64"
        );
    }
}

/// The rows of `grid` a periodic heat run into a new array left unscanned by its host
/// passes, its result checked against the bits of the run laid out by copies.
fn scanned_run<T: HeatCell>(
    ctx: &MultiGpuContext,
    grid: &[T],
    (h, w): (usize, usize),
    o: &Options,
) -> Vec<usize> {
    use super::scan::GridScan;
    use super::{heat_rule, run_lent};
    use std::sync::Arc;
    let alpha = T::from_f64(0.2);
    let (want, _) = heat(ctx, grid, h, w, alpha, Boundary::Periodic, o).unwrap();
    let spec = heat_rule::<T>((h, w), (alpha, Boundary::Periodic), o).unwrap();
    let scan = Arc::new(GridScan::new(grid, w));
    let mut out = vec![T::from_f64(f64::NAN); h * w];
    run_lent(ctx, grid, &spec, o, &mut out, Some(&scan)).unwrap();
    let bytes = |v: &[T]| bytemuck::cast_slice::<T, u8>(v).to_vec();
    assert_eq!(bytes(&out), bytes(&want));
    scan.unseen()
}
