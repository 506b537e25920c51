//! The host half of the empirical-Fisher reduction: every chunk's partials summed in chunk
//! order in float64, then unpacked from tiles into a symmetric P x P matrix.

use rayon::prelude::*;

use super::syrk::SyrkShape;
use crate::alloc;
use crate::error::Result;

/// Sums `blocks` of `words` words each, in order, in float64.
fn sum_blocks(partials: &[f32], words: usize) -> Result<Vec<f64>> {
    let mut total = alloc::zeroed("partial sums", words)?;
    for block in partials.chunks_exact(words.max(1)) {
        for (t, &v) in total.iter_mut().zip(block) {
            *t += f64::from(v);
        }
    }
    Ok(total)
}

/// Partial words below which [`reduce_tiled`] sums on the calling thread.
const SERIAL_WORDS: usize = 1 << 16;

/// Sum over chunks (in chunk order, float64) of the tiled kernel's partials, as a row-major
/// P x P matrix: the upper triangle as computed, mirrored below the diagonal (so the result
/// is exactly symmetric). Every tile's words are summed over the blocks in order on their
/// own (in parallel: no word's sum depends on another's), straight from the partials.
pub fn reduce_tiled(shape: &SyrkShape, partials: &[f32]) -> Result<Vec<f64>> {
    let (p, edge) = (shape.p, shape.tile);
    let tile_words = edge * edge;
    let block = shape.pairs * tile_words;
    let mut tiles = alloc::zeroed("partial sums", block)?;
    let sum_tile = |(pair, total): (usize, &mut [f64])| {
        let at = pair * tile_words;
        for partial in partials.chunks_exact(block.max(1)) {
            for (t, &v) in total.iter_mut().zip(&partial[at..at + tile_words]) {
                *t += f64::from(v);
            }
        }
    };
    // A small reduction is summed here: handing it to rayon's pool from this (non-pool)
    // thread costs a wake-up and a wait longer than its additions. Same sums either way.
    if partials.len() <= SERIAL_WORDS {
        tiles.chunks_mut(tile_words).enumerate().for_each(sum_tile);
    } else {
        tiles.par_chunks_mut(tile_words).enumerate().for_each(sum_tile);
    }
    let mut matrix = alloc::zeroed(
        "fisher matrix",
        alloc::product("fisher matrix", &[p, p], 8)?,
    )?;
    let mut pair = 0;
    for ti in 0..shape.tiles {
        for tj in ti..shape.tiles {
            let tile = &tiles[pair * tile_words..(pair + 1) * tile_words];
            for r in 0..edge.min(p.saturating_sub(ti * edge)) {
                let i = ti * edge + r;
                for c in 0..edge.min(p - tj * edge) {
                    let j = tj * edge + c;
                    if i <= j {
                        matrix[i * p + j] = tile[r * edge + c];
                        matrix[j * p + i] = tile[r * edge + c];
                    }
                }
            }
            pair += 1;
        }
    }
    Ok(matrix)
}

/// The same for the naive kernel's full width x width partials.
pub fn reduce_naive(shape: &SyrkShape, partials: &[f32]) -> Result<Vec<f64>> {
    let (p, width) = (shape.p, shape.width);
    let total = sum_blocks(partials, width * width)?;
    let mut matrix = alloc::zeroed(
        "fisher matrix",
        alloc::product("fisher matrix", &[p, p], 8)?,
    )?;
    for i in 0..p {
        for j in i..p {
            matrix[i * p + j] = total[i * width + j];
            matrix[j * p + i] = total[i * width + j];
        }
    }
    Ok(matrix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fisher::{BLOCK, TILE};

    #[test]
    fn block_partials_land_in_their_rows_and_columns() {
        // P = 9 in 8 x 8 blocks: pairs (0,0), (0,1), (1,1); entry (i, j) holds 100 i + j in
        // the first slice and zeros elsewhere.
        let shape = SyrkShape::new(9);
        assert_eq!((shape.tile, shape.pairs), (BLOCK, 3));
        let mut partials = vec![0.0f32; shape.partial_words()];
        for (pair, (bi, bj)) in [(0, 0), (0, 1), (1, 1)].into_iter().enumerate() {
            for r in 0..BLOCK {
                for c in 0..BLOCK {
                    let (i, j) = (bi * BLOCK + r, bj * BLOCK + c);
                    partials[pair * BLOCK * BLOCK + r * BLOCK + c] = (100 * i + j) as f32;
                }
            }
        }
        let m = reduce_tiled(&shape, &partials).unwrap();
        for i in 0..9 {
            for j in 0..9 {
                let want = (100 * i.min(j) + i.max(j)) as f64;
                assert_eq!(m[i * 9 + j], want, "entry ({i}, {j})");
            }
        }
    }

    #[test]
    fn tiled_reduction_mirrors_the_upper_triangle_in_chunk_order() {
        // P = 65: two tiles, three pairs; two chunks of partials, every word 1 then 2.
        let shape = SyrkShape::new(65);
        assert_eq!(shape.tile, TILE);
        let words = shape.partial_words();
        let mut partials = vec![1.0f32; 2 * words];
        partials[words..].iter_mut().for_each(|v| *v = 2.0);
        let m = reduce_tiled(&shape, &partials).unwrap();
        assert_eq!(m.len(), 65 * 65);
        let want = 3.0 * shape.slices as f64;
        assert!(m.iter().all(|&v| v == want));
    }
}
