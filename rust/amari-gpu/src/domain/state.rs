//! What a band runs, as the device interface's band storage asks for it ([`Program`]): the
//! uniform and workgroups of each step on a wgpu device (`shaders/heat.wgsl`,
//! `shaders/life.wgsl`), and the same steps on the host device (`domain::host_grid`, several
//! per pass: `domain::host_blocked`). Also
//! the run's shared [`Spec`] and where a band's buffer rows are on the host board.

use std::ops::Range;
use std::sync::Arc;

use super::bands::{Band, Geometry};
use super::host_blocked::{depth, run, Pass, Rows};
use super::host_grid::{HeatCell, HeatStep, LifeStep};
use super::rule::Rule;
use super::scan::GridScan;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::kernel::FmaMode;
use crate::runner::bands::{Program, Runs, Stop};

/// Workgroup shape of `shaders/heat.wgsl` and `shaders/life.wgsl`: 64 threads along a row
/// by 4 rows, so that narrow grids fill their workgroups too (software adapters pay per
/// workgroup).
const GROUP_X: u64 = 64;
const GROUP_ROWS: u64 = 4;

/// What every band of one run shares: the rule, the grid's shape and its row layout.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The update rule.
    pub rule: Rule,
    /// Rows, halo and boundary.
    pub geometry: Geometry,
    /// Cells per row.
    pub width: usize,
    /// Bytes per row in device buffers and on the host board (a multiple of 4).
    pub row_bytes: usize,
}

impl Spec {
    /// Threads per row: one per vec4 of four cells (heat) or per packed word of four cells
    /// (Life).
    pub fn threads_per_row(&self) -> usize {
        self.width.div_ceil(4)
    }
}

/// The uniform of one step (see `shaders/heat.wgsl` and `shaders/life.wgsl`).
fn uniform(spec: &Spec, band: &Band, rows: Range<usize>, slice_rows: u32) -> [u32; 12] {
    let g = spec.geometry;
    match spec.rule {
        Rule::Heat { alpha, dtype } => {
            // `alpha` in the cells' type: one word in float32, two (memory order) in float64.
            let [lo, hi] = match dtype {
                Dtype::F64 => bytemuck::cast(alpha),
                Dtype::F16 | Dtype::F32 => [(alpha as f32).to_bits(), 0],
            };
            [
                spec.width as u32,
                g.height as u32,
                if g.periodic {
                    0
                } else {
                    band.first_row() as u32
                },
                rows.start as u32,
                rows.end as u32,
                slice_rows,
                u32::from(g.periodic),
                spec.width.div_ceil(4) as u32,
                lo,
                hi,
                0,
                0,
            ]
        }
        Rule::Life => [
            spec.width as u32,
            (spec.row_bytes / 4) as u32,
            rows.start as u32,
            rows.end as u32,
            slice_rows,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ],
    }
}

/// The steps of one band of a run.
pub struct BandProgram {
    /// The band.
    pub band: Band,
    /// The run.
    pub spec: Spec,
    /// The scan of the caller's grid that a heat pass reading its rows in place feeds
    /// ([`GridScan::see`]), when the grid is checked during the run.
    pub(crate) scan: Option<Arc<GridScan>>,
}

impl Program for BandProgram {
    fn steps(&self) -> usize {
        self.spec.geometry.halo
    }

    fn dtype(&self) -> Dtype {
        self.spec.rule.dtype()
    }

    fn dispatch(&self, k: usize, max: u64, device: usize) -> Result<([u32; 12], [u32; 3])> {
        let spec = &self.spec;
        let rows = self.band.step_rows(k, spec.geometry);
        let n = rows.len() as u64;
        let columns = spec.threads_per_row() as u64;
        // x: vec4s (or words) of a row; y: rows, sliced along z past the y limit.
        let x = columns.div_ceil(GROUP_X);
        let y = n.div_ceil(GROUP_ROWS).clamp(1, max);
        let z = n.div_ceil(y * GROUP_ROWS).max(1);
        if x > max || z > max {
            return Err(Error::invalid(
                "grid",
                format!("{n} rows of {columns} columns do not fit one dispatch on device {device}"),
            ));
        }
        let words = uniform(spec, &self.band, rows, (y * GROUP_ROWS) as u32);
        Ok((words, [x as u32, y as u32, z as u32]))
    }

    fn work(&self, k: usize) -> u64 {
        (self.band.step_rows(k, self.spec.geometry).len() * self.spec.width) as u64
    }

    fn depth(&self) -> usize {
        depth(self.spec.row_bytes)
    }

    fn run(
        &self,
        steps: Range<usize>,
        [src, other]: [&mut [u32]; 2],
        into: Option<(Range<usize>, &mut [u32])>,
        fma: FmaMode,
        stop: &Stop<'_>,
        first: Option<&Runs<'_>>,
    ) -> bool {
        let spec = &self.spec;
        let g = spec.geometry;
        let rows = |k: usize| self.band.step_rows(k, g);
        let last = rows(steps.end - 1);
        if let Some((wanted, _)) = &into {
            let inside = last.start <= wanted.start && wanted.end <= last.end;
            if steps.is_empty() || !inside {
                return false;
            }
        }
        let pass = Pass {
            steps,
            rows: &rows,
            stop,
        };
        match spec.rule {
            Rule::Heat { alpha, dtype } => match dtype {
                Dtype::F64 => {
                    let into = match into {
                        Some((wanted, place)) => match bytemuck::try_cast_slice_mut(place) {
                            Ok(cells) => Some((wanted, cells)),
                            Err(_) => return false,
                        },
                        None => None,
                    };
                    let lent = lent_rows::<f64>(first, src, spec.row_bytes);
                    let read = |r: usize| lent.as_ref().map_or(&[][..], |l| self.seen(l, r));
                    let first: Option<&Rows<'_, f64>> = lent.is_some().then_some(&read);
                    on_f64_cells([src, other], |cells| {
                        self.heat(alpha, &pass, cells, into, first, fma);
                    })
                }
                Dtype::F16 | Dtype::F32 => {
                    let lent = lent_rows::<f32>(first, src, spec.row_bytes);
                    let read = |r: usize| lent.as_ref().map_or(&[][..], |l| self.seen(l, r));
                    let first: Option<&Rows<'_, f32>> = lent.is_some().then_some(&read);
                    let cells = [src, other].map(bytemuck::cast_slice_mut::<u32, f32>);
                    let into = into.map(|(r, place)| (r, bytemuck::cast_slice_mut(place)));
                    self.heat(alpha as f32, &pass, cells, into, first, fma);
                }
            },
            Rule::Life => {
                let step = LifeStep {
                    width: spec.width,
                    rows: rows(pass.steps.start),
                };
                let lent = lent_rows::<u32>(first, src, spec.row_bytes);
                let read = |r: usize| lent.as_ref().map_or(&[][..], |l| l.row(r));
                let first: Option<&Rows<'_, u32>> = lent.is_some().then_some(&read);
                run(&step, &pass, src, other, into, first);
            }
        }
        true
    }
}

/// A new layout's rows a pass reads where they are (see [`Program::run`]): runs of whole
/// rows of cells of `T`, from their first buffer row, in buffer row order.
struct Lent<'a, T> {
    runs: Vec<(usize, &'a [T])>,
    row_cells: usize,
}

impl<'a, T: bytemuck::Pod> Lent<'a, T> {
    /// Buffer row `r`'s cells: from the last run starting at or before it.
    fn row(&self, r: usize) -> &'a [T] {
        let (at, cells) = self
            .runs
            .iter()
            .rev()
            .find(|(at, _)| *at <= r)
            .copied()
            .unwrap_or((r, &[]));
        let i = (r - at) * self.row_cells;
        &cells[i..i + self.row_cells]
    }
}

/// `first`'s runs as rows of cells of `T` for a pass to read in place; where one is not
/// aligned for `T` (or not whole cells), every run is copied into `src` instead (a band
/// buffer of 32-bit words, rows of `row_bytes`) and the pass reads `src` as usual (None).
fn lent_rows<'a, T: bytemuck::Pod>(
    first: Option<&Runs<'a>>,
    src: &mut [u32],
    row_bytes: usize,
) -> Option<Lent<'a, T>> {
    let first = first?;
    let runs: Option<Vec<(usize, &'a [T])>> = first
        .iter()
        .map(|&(at, bytes)| bytemuck::try_cast_slice(bytes).ok().map(|c| (at, c)))
        .collect();
    if let Some(runs) = runs {
        return Some(Lent {
            runs,
            row_cells: row_bytes / size_of::<T>(),
        });
    }
    let words: &mut [u8] = bytemuck::cast_slice_mut(src);
    for &(at, bytes) in first {
        words[at * row_bytes..at * row_bytes + bytes.len()].copy_from_slice(bytes);
    }
    None
}

impl BandProgram {
    /// Buffer row `r` of the caller's grid as a pass reads it; if the run checks the grid's
    /// cells as it reads them, row `r - 2` is scanned first. That row the pass's first step
    /// read in its last turn, so it is in the core's cache: row `r` itself would be a read
    /// from memory that nothing overlaps, where the step that reads it next overlaps its
    /// misses with the other steps' work (scanning each row on its first read cost about
    /// twice as much). The band's last two rows are left to [`GridScan::finish`].
    #[inline]
    fn seen<'r, T: HeatCell>(&self, lent: &Lent<'r, T>, r: usize) -> &'r [T] {
        if let (Some(scan), Some(back)) = (&self.scan, r.checked_sub(2)) {
            scan.see(lent.row(back));
        }
        lent.row(r)
    }

    /// Heat steps `pass` on cells of `T`, from `src` (or the rows `first` reads, when
    /// given) into `other` and back as the steps alternate (the last step's rows `into`
    /// there, when given).
    fn heat<T: HeatCell>(
        &self,
        alpha: T,
        pass: &Pass<'_>,
        [src, other]: [&mut [T]; 2],
        into: Option<(Range<usize>, &mut [T])>,
        first: Option<&Rows<'_, T>>,
        fma: FmaMode,
    ) {
        let g = self.spec.geometry;
        let step = HeatStep {
            width: self.spec.width,
            height: g.height,
            // As the shader's uniform: the frame test needs it on Dirichlet grids only.
            row0: if g.periodic { 0 } else { self.band.first_row() },
            rows: (pass.rows)(pass.steps.start),
            periodic: g.periodic,
            alpha,
            fma,
        };
        run(&step, pass, src, other, into, first);
    }
}

/// Runs `step` on two host band buffers' words as float64 cells: in place when both are
/// 8-byte aligned (as the allocator's buffers are), else on copies stored back after (the
/// same bits, a copy slower).
fn on_f64_cells(words: [&mut [u32]; 2], step: impl FnOnce([&mut [f64]; 2])) {
    let aligned = |w: &[u32]| (w.as_ptr() as usize).is_multiple_of(8) && w.len().is_multiple_of(2);
    let [a, b] = words;
    if aligned(a) && aligned(b) {
        // Both checked just above: the casts cannot fail.
        return step([bytemuck::cast_slice_mut(a), bytemuck::cast_slice_mut(b)]);
    }
    let read = |w: &[u32]| -> Vec<f64> {
        w.chunks_exact(2)
            .map(|p| f64::from_bits(u64::from(p[0]) | (u64::from(p[1]) << 32)))
            .collect()
    };
    let (mut x, mut y) = (read(a), read(b));
    step([&mut x, &mut y]);
    for (w, cells) in [(a, x), (b, y)] {
        for (p, v) in w.chunks_exact_mut(2).zip(cells) {
            let bits = v.to_bits();
            p[0] = bits as u32;
            p[1] = (bits >> 32) as u32;
        }
    }
}

/// Buffer rows `rows` of `band` as runs on `board`: (first buffer row, board bytes of the
/// run's consecutive rows), ghost rows of a periodic grid wrapping.
pub fn board_runs<'b>(
    band: &Band,
    rows: Range<usize>,
    spec: &Spec,
    board: &'b [u8],
) -> Vec<(usize, &'b [u8])> {
    let rb = spec.row_bytes;
    band.board_runs(rows, spec.geometry)
        .into_iter()
        .map(|(run, first)| (run.start, &board[first * rb..(first + run.len()) * rb]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{board_runs, lent_rows, on_f64_cells, BandProgram, Spec};

    /// Runs of rows a pass reads in place: each buffer row from its run, when every run is
    /// aligned for the cells; else every run copied into the band buffer at its rows, and
    /// nothing read in place.
    #[test]
    fn lent_runs_are_read_in_place_or_copied_into_the_band_when_misaligned() {
        let values: Vec<f64> = (0..12).map(|i| f64::from(i) * 1.5 - 4.0).collect();
        let bytes: &[u8] = bytemuck::cast_slice(&values);
        // Rows of two cells (16 bytes): buffer rows 0-1 from cells 8-11, rows 2-5 from 0-7.
        let runs = [(0, &bytes[64..96]), (2, &bytes[..64])];
        let mut src = vec![0u32; 24];
        let lent = lent_rows::<f64>(Some(&runs), &mut src, 16).expect("aligned runs");
        let rows: Vec<f64> = (0..6).flat_map(|r| lent.row(r).to_vec()).collect();
        let want: Vec<f64> = values[8..].iter().chain(&values[..8]).copied().collect();
        assert_eq!(rows, want);
        assert!(src.iter().all(|&w| w == 0), "nothing copied");
        // The same bytes 4 bytes off an 8-byte boundary: copied into the buffer.
        let mut shifted = vec![0u8; bytes.len() + 12];
        let off = (12 - shifted.as_ptr() as usize % 8) % 8;
        shifted[off..off + bytes.len()].copy_from_slice(bytes);
        let moved = &shifted[off..off + bytes.len()];
        assert_eq!((moved.as_ptr() as usize) % 8, 4);
        let runs = [(0, &moved[64..96]), (2, &moved[..64])];
        assert!(lent_rows::<f64>(Some(&runs), &mut src, 16).is_none());
        let copied: Vec<u8> = bytemuck::cast_slice(&src).to_vec();
        assert_eq!(copied, bytemuck::cast_slice::<f64, u8>(&want));
    }

    /// Float64 cells of band buffers whose words are not 8-byte aligned are stepped on
    /// copies and stored back: the step sees the same values, and its writes land in the
    /// words bit for bit, as in place on aligned words.
    #[test]
    fn unaligned_band_words_are_stepped_on_copies_with_the_same_bits() {
        let values = [1.5f64, -0.0, f64::MIN_POSITIVE / 4.0, 3.0e300, -7.25];
        let words: Vec<u32> = values
            .iter()
            .flat_map(|v| [v.to_bits() as u32, (v.to_bits() >> 32) as u32])
            .collect();
        let step = |[a, b]: [&mut [f64]; 2]| {
            assert_eq!(a, &values[..]);
            for (o, x) in b.iter_mut().zip(a.iter()) {
                *o = x * 2.0 + 1.0;
            }
            a[0] = f64::NAN;
        };
        let mut stepped = Vec::new();
        for shift in [0, 1] {
            // `shift` words of offset make one of the two start 4 bytes off 8.
            let mut x = vec![0u32; words.len() + 2];
            let mut y = vec![0u32; words.len() + 2];
            let aligned = |v: &[u32]| (v.as_ptr() as usize).is_multiple_of(8);
            let at = |v: &[u32], want: bool| usize::from(aligned(v) != want);
            let (ax, ay) = (at(&x, shift == 0), at(&y, true));
            x[ax..ax + words.len()].copy_from_slice(&words);
            let (xs, ys) = (&mut x[ax..ax + words.len()], &mut y[ay..ay + words.len()]);
            assert_eq!(aligned(xs), shift == 0);
            on_f64_cells([xs, ys], step);
            stepped.push((xs.to_vec(), ys.to_vec()));
        }
        assert_eq!(stepped[0], stepped[1]);
        assert!(
            f64::from_bits(u64::from(stepped[1].0[0]) | u64::from(stepped[1].0[1]) << 32).is_nan()
        );
    }
    use crate::context::MultiGpuContext;
    use crate::domain::{Band, Geometry, Rule};
    use crate::error::Error;
    use crate::runner::bands::{BandRound, Bands, RowMove};
    use crate::runner::bands_on;

    /// The same band on a wgpu device and on the host device, filled from the board and then
    /// copied into a new layout on its device, steps to the same bytes and the same work;
    /// old bands of the other kind are refused as a copy's source.
    #[test]
    fn bands_of_either_kind_hold_copy_and_step_the_same_bits() {
        let ctx = MultiGpuContext::on(&["vulkan", "host"]);
        let g = Geometry {
            height: 12,
            halo: 2,
            periodic: true,
        };
        let width = 7;
        let spec = Spec {
            rule: Rule::Heat {
                alpha: 0.2,
                dtype: crate::dtype::Dtype::F32,
            },
            geometry: g,
            width,
            row_bytes: width.div_ceil(4) * 16,
        };
        let cells: Vec<f32> = (0..g.height * spec.row_bytes / 4)
            .map(|i| ((i * 37) % 101) as f32 / 101.0)
            .collect();
        let board: Vec<u8> = bytemuck::cast_slice(&cells).to_vec();
        let band = Band::new(0, 3..9, g);
        let kernel = spec.rule.kernel();
        let make = |dev| -> Box<dyn Bands + '_> {
            let mut bands = bands_on(dev, &kernel).expect("band storage");
            let program = BandProgram {
                band: band.clone(),
                spec,
                scan: None,
            };
            bands
                .push(band.buffer_rows(), spec.row_bytes, Box::new(program))
                .expect("band allocated");
            bands
        };
        let wanted = vec![vec![band.owned_rows()]];
        let mut results = Vec::new();
        for dev in ctx.devices() {
            let mut first = make(dev);
            for (at, bytes) in board_runs(&band, 0..band.buffer_rows(), &spec, &board) {
                first.write(0, 0, at, bytes);
            }
            let mut next = make(dev);
            let moved = RowMove {
                band: 0,
                from_band: 0,
                from_row: 0,
                to_row: 0,
                rows: band.buffer_rows(),
            };
            next.copy_from(&*first, moved, 0).expect("same kind");
            next.submit();
            let ran = next
                .round(&BandRound {
                    current: 0,
                    steps: 2,
                    uploads: vec![Vec::new()],
                    wanted: &wanted,
                    stamped: false,
                    timeout: None,
                    interrupt: None,
                })
                .expect("round runs");
            // The same round with the rows written into a place of the caller's (the
            // host's straight from its buffer): the same bytes, no rows returned; places
            // that do not match the wanted ranges are refused, the places untouched.
            let mut place = vec![0u8; band.len() * spec.row_bytes];
            let mut into = [&mut place[..]];
            let again = BandRound {
                current: 0,
                steps: 0,
                uploads: vec![Vec::new()],
                wanted: &wanted,
                stamped: false,
                timeout: None,
                interrupt: None,
            };
            let placed = next.round_into(&again, &mut into).expect("rows placed");
            assert!(placed.rows.is_empty());
            assert_eq!(placed.bytes_down, ran.bytes_down);
            assert_eq!(ran.rows, [place.clone()], "device {}", dev.id);
            let mut short = vec![9u8; spec.row_bytes];
            match next.round_into(&again, &mut [&mut short[..]]) {
                Err(Error::Internal(_)) => assert_eq!(short, vec![9u8; spec.row_bytes]),
                other => panic!("expected Internal, got {:?}", other.map(|_| ())),
            }
            results.push((ran.rows, ran.work, ran.bytes_down));
        }
        assert_eq!(results.len(), 2);
        assert_eq!(results[0], results[1]);
        let rb = spec.row_bytes;
        let before = &board[3 * rb..9 * rb];
        assert_eq!(results[0].0.len(), 1, "one wanted range, one entry");
        assert_eq!(results[0].0[0].len(), before.len());
        assert_ne!(results[0].0[0], before, "the steps changed the rows");
        let gpu = make(&ctx.devices()[0]);
        let moved = RowMove {
            band: 0,
            from_band: 0,
            from_row: 0,
            to_row: 0,
            rows: 1,
        };
        let mut host_new = make(&ctx.devices()[1]);
        match host_new.copy_from(&*gpu, moved, 0) {
            Err(Error::Internal(message)) => assert!(
                message.contains("device 1's old and new bands are of different kinds"),
                "{message}"
            ),
            other => panic!("expected Internal, got {:?}", other.map(|_| ())),
        }
    }
}
