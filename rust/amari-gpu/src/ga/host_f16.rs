//! The host geometric-algebra kernels in float16 storage: each tile of rows widened to
//! float32 (`host::f16`: F16C, or the scalar conversion at the portable level), computed by
//! the float32 kernel (same chains, same `fma` mode, so the same float32 bits as lavapipe's
//! float16 kernel computes) and rounded once to float16, as the WGSL kernel rounds at its
//! store.

use std::ops::Range;

use super::codegen::Broadcast;
use super::host::GaKernel;
use crate::dtype::Dtype;

/// Items per float16 tile: its float32 copies stay in the per-core caches.
const F16_TILE: usize = 2048;

thread_local! {
    /// Each thread's float32 copies of its float16 tiles (operands and result), reused
    /// from tile to tile so that they are neither allocated nor zeroed per tile.
    static F16_SCRATCH: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

impl GaKernel {
    /// Whether [`GaKernel::run_f16`] over `items` items splits: into tiles, or a tile's
    /// float32 run into its pieces of `grain` items.
    pub(super) fn f16_splits(&self, items: usize, grain: usize) -> bool {
        items > F16_TILE.min(grain)
    }

    /// `HostImpl::run` in float16 storage: tiles of [`F16_TILE`] items, in parallel, each
    /// widened to float32, computed by the float32 kernel (same chains, same `fma` mode) and
    /// rounded once to float16, as the WGSL kernel rounds at its store.
    pub(super) fn run_f16(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        use crate::host::f16::{narrow, widen};
        use rayon::prelude::*;
        let f32_kernel = self.clone().in_dtype(Dtype::F32);
        let level = crate::host::simd::dispatched();
        let map = self.broadcast.is_map(self.op);
        // Rows' values (the named blades of a sandwich on blades).
        let (w, ow) = (self.op.input_words(1, &self.algebra), self.output_words());
        // Whole operands are widened once (a sandwich's map is float32 already); batches
        // tile by tile.
        let whole: Vec<Option<Vec<f32>>> = (0..inputs.len())
            .map(|slot| {
                if map && slot == 0 {
                    return Some(inputs[0].to_vec());
                }
                matches!(
                    (slot, self.broadcast),
                    (0, Broadcast::Left) | (1, Broadcast::Right)
                )
                .then(|| {
                    let mut row = vec![0.0f32; w];
                    widen(level, &inputs[slot][..w / 2], &mut row);
                    row
                })
            })
            .collect();
        output
            .par_chunks_mut(F16_TILE * ow / 2)
            .enumerate()
            .for_each(|(tile, out)| {
                let first = range.start + tile * F16_TILE;
                let n = 2 * out.len() / ow;
                // The thread's scratch, taken out (not borrowed): a tile that rayon runs on
                // this thread while the float32 kernel below waits finds it empty and
                // allocates its own, never a second borrow.
                let mut scratch = F16_SCRATCH.with(std::cell::Cell::take);
                let need = (inputs.len() * w + ow) * n;
                if scratch.len() < need {
                    scratch.resize(need, 0.0);
                }
                let (wide, result) = scratch.split_at_mut(inputs.len() * n * w);
                let mut tiles = wide.chunks_mut(n * w);
                let operands: Vec<&[f32]> = inputs
                    .iter()
                    .zip(&whole)
                    .filter_map(|(words, whole)| match whole {
                        Some(row) => Some(row.as_slice()),
                        None => {
                            let rows = tiles.next()?;
                            widen(level, &words[first * w / 2..(first + n) * w / 2], rows);
                            Some(&*rows)
                        }
                    })
                    .collect();
                let result = &mut result[..n * ow];
                f32_kernel.run_in::<f32>(&operands, 0..n, result);
                narrow(level, result, out);
                drop(operands);
                F16_SCRATCH.with(|s| s.set(scratch));
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ga::{Algebra, Operation};
    use crate::host::f16::{has_f16c, narrow};
    use crate::host::simd::{force_level, Level};
    use crate::kernel::{FmaMode, HostImpl};

    #[test]
    fn the_portable_level_gives_the_bits_of_the_detected_one() {
        let algebra = Algebra::new(3, 0, 0).expect("Cl(3,0)");
        let kernel = GaKernel::new(algebra, Operation::Geometric, Broadcast::None, FmaMode::Fused)
            .in_dtype(Dtype::F16);
        // More items than one tile, an odd count; values past float16's range and in its
        // subnormals once multiplied.
        let n = 5001;
        let operand = |seed| {
            let mut values = crate::sample::uniform_f32(8 * n, seed);
            for (i, v) in values.iter_mut().enumerate() {
                *v *= [1.0, 300.0, 1.0 / 4096.0][i / 8 % 3];
            }
            let mut words = vec![0.0f32; 4 * n];
            narrow(Level::Portable, &values, &mut words);
            words
        };
        let (a, b) = (operand(1), operand(2));
        let mut detected = vec![0.0f32; 4 * n];
        kernel.run(&[&a, &b], 0..n, &mut detected);
        force_level(Some(Level::Portable));
        let mut portable = vec![0.0f32; 4 * n];
        kernel.run(&[&a, &b], 0..n, &mut portable);
        force_level(None);
        assert!(!has_f16c(Level::Portable), "the portable level converts without F16C");
        let bits = |w: &[f32]| w.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&portable), bits(&detected));
        let halves: &[u16] = bytemuck::cast_slice(&detected);
        assert!(halves.iter().any(|&h| h & 0x7fff == 0x7c00), "an infinity");
        assert!(halves.iter().any(|&h| h & 0x7c00 == 0 && h & 0x3ff != 0), "a subnormal");
    }
}
