//! Reductions over a resident array: a kernel with one partial per chunk (`Output::PerChunk`)
//! run on the problem's chunk grid (chunks of `chunk_items` rows counted from row 0, as the
//! engine cuts a numpy input), so the partials are the ones the numpy path computes, bit
//! for bit, and the caller's sum in chunk order is too. The call is pieces of the one worker
//! loop: a shard's chunks (those wholly inside it) are one piece, queued on the device
//! holding the shard (`Shards::reduce_shard`: one submission on a wgpu device, in place on
//! the host device); each run of chunks cut by shard boundaries is another, its rows
//! assembled on the device that takes it. A device that fails hands its pieces to the
//! others, whose `assemble` rebuilds the lost rows from the lineage; rows rebuilt for a
//! whole lost shard are kept in its place. Only rows that change device, and the partials,
//! cross to the host.

use std::ops::Range;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::array::{ResidentArray, Snapshot};
use super::pieces::Operand;
use super::pieces::Repair;
use super::place::Recording;
use crate::context::shard::shards_of;
use crate::context::{MultiGpuContext, Target};
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::kernel::{Input, Kernel, Output};
use crate::runner::{Partials, ShardChunks};
use crate::worker::{Landing, Pieces};

/// One piece of a reduction: chunks of the grid, and the rows they are reduced from (a
/// whole shard, or the rows of chunks cut by shard boundaries).
struct Span {
    home: usize,
    chunks: Range<usize>,
    base: Range<usize>,
}

/// The pieces of one reduction, and the partials they fill.
struct ChunkPieces<'c> {
    ctx: &'c MultiGpuContext,
    kernel: &'c Kernel,
    snapshot: Snapshot,
    per_row: Option<&'c [f32]>,
    /// Words of `per_row` for each row.
    per_row_words: usize,
    chunk_items: usize,
    n: usize,
    cols: usize,
    words: usize,
    spans: Vec<Span>,
    recording: Recording,
    /// By piece: its partials' place in the output, taken by whoever lands it.
    outputs: Vec<Mutex<Option<&'c mut [f32]>>>,
    /// Whole lost shards rebuilt on the device that took their piece.
    repairs: Mutex<Vec<Repair>>,
}

/// A piece's partials, on their way from the device or computed.
enum Landed<'p, 'c> {
    Device(
        &'p ChunkPieces<'c>,
        usize,
        Box<dyn Partials>,
        Option<Repair>,
    ),
    Ready(&'p ChunkPieces<'c>, usize, Vec<f32>),
}

/// The pieces of a reduction over `n` rows held as `shards`, in chunks of `chunk_items`:
/// the chunks wholly inside each shard, then the runs of chunks cut by its boundaries.
fn spans(shards: &[(usize, Range<usize>)], n: usize, chunk_items: usize) -> Vec<Span> {
    let chunks = n.div_ceil(chunk_items);
    let mut covered = vec![false; chunks];
    let mut spans = Vec::new();
    for (device, rows) in shards {
        let first = rows.start.div_ceil(chunk_items);
        let last = if rows.end == n {
            chunks
        } else {
            rows.end / chunk_items
        };
        if first < last {
            covered[first..last].fill(true);
            let (home, base) = (*device, rows.clone());
            spans.push(Span {
                home,
                chunks: first..last,
                base,
            });
        }
    }
    let mut c = 0;
    while c < chunks {
        let end = (c..chunks).find(|&e| covered[e]).unwrap_or(chunks);
        if end > c {
            let base = c * chunk_items..(end * chunk_items).min(n);
            let home = shards
                .iter()
                .find(|(_, rows)| rows.contains(&base.start))
                .map_or(0, |(device, _)| *device);
            spans.push(Span {
                home,
                chunks: c..end,
                base,
            });
        }
        c = end + 1;
    }
    spans
}

impl MultiGpuContext {
    /// The partials, in chunk order, of `kernel` over the rows of `array` (named `argument`
    /// in errors) cut into chunks of `chunk_items` rows: the kernel's inputs are the rows,
    /// then (when given) `per_row`, the same number of words for every row (one float32
    /// value, or the two words of a float64 one), which is uploaded.
    pub(crate) fn run_resident_chunks(
        &self,
        kernel: &Kernel,
        array: &ResidentArray,
        argument: &str,
        per_row: Option<&[f32]>,
        chunk_items: usize,
    ) -> Result<Vec<f32>> {
        let Output::PerChunk(words) = kernel.output else {
            return Err(Error::Internal(format!(
                "kernel {} has no per-chunk output",
                kernel.id
            )));
        };
        let (n, cols) = (array.rows, array.cols);
        let mut expected = vec![Input::PerItem(cols)];
        let mut per_row_words = 0;
        if let Some(w) = per_row {
            per_row_words = w.len() / n.max(1);
            if per_row_words == 0 || w.len() != n * per_row_words {
                return Err(Error::Internal("per-row input of the wrong length".into()));
            }
            expected.push(Input::PerItem(per_row_words));
        }
        if kernel.inputs != expected || chunk_items == 0 {
            return Err(Error::Internal(format!(
                "kernel {} does not reduce rows of {cols} words",
                kernel.id
            )));
        }
        crate::interrupt::check()?;
        let snapshot = array.snapshot(&self.resident, argument)?;
        let chunks = n.div_ceil(chunk_items);
        let mut partials = crate::alloc::zeroed("partials", chunks * words)?;
        let placed: Vec<_> = (snapshot.shards.iter())
            .map(|(device, rows, _)| (*device, rows.clone()))
            .collect();
        let spans = spans(&placed, n, chunk_items);
        let homes: Vec<usize> = spans.iter().map(|s| s.home).collect();
        // Each piece's partials: its chunks' place in the output.
        let mut by_start: Vec<(usize, usize)> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| (s.chunks.start, i))
            .collect();
        by_start.sort_unstable();
        let mut outputs: Vec<Option<&mut [f32]>> = spans.iter().map(|_| None).collect();
        let mut rest = &mut partials[..];
        for (_, i) in by_start {
            let (head, tail) =
                std::mem::take(&mut rest).split_at_mut(spans[i].chunks.len() * words);
            outputs[i] = Some(head);
            rest = tail;
        }
        let recording = self.resident_call(&format!("resident/{}", kernel.id), n, Some(kernel));
        let call = ChunkPieces {
            ctx: self,
            kernel,
            snapshot,
            per_row,
            per_row_words,
            chunk_items,
            n,
            cols,
            words,
            spans,
            recording,
            outputs: outputs.into_iter().map(Mutex::new).collect(),
            repairs: Mutex::new(Vec::new()),
        };
        self.run_pieces(kernel, &call, &homes, &call.recording)?;
        let repairs = (call.repairs)
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        self.keep_repairs(&[(argument, Operand::Resident(array))], repairs);
        Ok(partials)
    }

    /// Rows `rows` of a resident array (`cols` words per row) on the host: read from the
    /// shards holding them, rebuilt from the lineage where their device failed (see
    /// `shard_rows`).
    pub(crate) fn read_rows(
        &self,
        snapshot: &Snapshot,
        cols: usize,
        rows: Range<usize>,
        timeout: Option<Duration>,
    ) -> Result<Vec<f32>> {
        let mut out = crate::alloc::zeroed("resident rows", rows.len() * cols)?;
        for shard in &snapshot.shards {
            let held = &shard.1;
            let (start, end) = (rows.start.max(held.start), rows.end.min(held.end));
            if start >= end {
                continue;
            }
            let target = &mut out[(start - rows.start) * cols..(end - rows.start) * cols];
            self.shard_rows(snapshot, shard, cols, start..end, target, timeout)?;
        }
        Ok(out)
    }
}

impl ChunkPieces<'_> {
    /// Partials of `span`'s chunks computed by the engine on their rows brought to the
    /// host: for a device that cannot bind a chunk window of `span.base`.
    fn through_engine(&self, span: &Span) -> Result<Vec<f32>> {
        let timeout = self.ctx.options.sync_timeout_ms.map(Duration::from_millis);
        let rows =
            span.chunks.start * self.chunk_items..(span.chunks.end * self.chunk_items).min(self.n);
        let host_rows = self
            .ctx
            .read_rows(&self.snapshot, self.cols, rows.clone(), timeout)?;
        let mut inputs: Vec<&[f32]> = vec![&host_rows];
        if let Some(w) = self.per_row {
            let k = self.per_row_words;
            inputs.push(&w[rows.start * k..rows.end * k]);
        }
        let ran = self.ctx.run_on_grid(
            self.kernel,
            &inputs,
            Target::Chunks,
            rows.len(),
            Some(self.chunk_items),
            None,
        )?;
        Ok(ran.partials)
    }
}

impl Pieces for ChunkPieces<'_> {
    fn items(&self, piece: usize) -> usize {
        let chunks = &self.spans[piece].chunks;
        (chunks.end * self.chunk_items).min(self.n) - chunks.start * self.chunk_items
    }

    fn begin(&self, dev: &GpuDevice, piece: usize) -> Result<(Box<dyn Landing + '_>, Instant)> {
        let span = &self.spans[piece];
        let base = &span.base;
        let (storage, _) =
            self.ctx
                .assemble(dev, &self.snapshot, base, self.cols, &self.recording)?;
        let lost = self
            .snapshot
            .shards
            .iter()
            .any(|(d, rows, _)| rows == base && !self.ctx.devices[*d].health.is_healthy());
        let repair = lost.then(|| Repair {
            operand: 0,
            rows: base.clone(),
            device: dev.id,
            storage: std::sync::Arc::clone(&storage),
        });
        let window = ShardChunks {
            storage: &storage,
            shard_start: base.start,
            chunks: span.chunks.clone(),
            per_row: (self.per_row)
                .map(|w| &w[base.start * self.per_row_words..base.end * self.per_row_words]),
            chunk_items: self.chunk_items,
            n: self.n,
            cols: self.cols,
            words: self.words,
        };
        let submitted = Instant::now();
        let landed = match shards_of(dev).reduce_shard(dev, self.kernel, &window)? {
            Some(partials) => Landed::Device(self, piece, partials, repair),
            None => Landed::Ready(self, piece, self.through_engine(span)?),
        };
        Ok((Box::new(landed), submitted))
    }
}

impl Landing for Landed<'_, '_> {
    fn land(self: Box<Self>, dev: &GpuDevice, timeout: Option<Duration>) -> Result<()> {
        let (call, piece) = match &*self {
            Landed::Device(call, piece, ..) | Landed::Ready(call, piece, _) => (*call, *piece),
        };
        let mut slot = call.outputs[piece]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(out) = slot.as_deref_mut() else {
            return Err(Error::Internal(format!("piece {piece} landed twice")));
        };
        match *self {
            Landed::Device(_, _, partials, repair) => {
                partials.collect(dev, out, timeout)?;
                let mut repairs = call.repairs.lock().unwrap_or_else(PoisonError::into_inner);
                repairs.extend(repair);
            }
            Landed::Ready(_, _, partials) => out.copy_from_slice(&partials),
        }
        *slot = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::spans;

    #[test]
    fn every_chunk_is_in_one_piece_whole_chunks_with_their_shard() {
        // Chunks of 10 rows over 45 rows held as 0..15 (dev 0), 15..40 (dev 1), 40..45 (dev 2).
        let shards = [(0, 0..15), (1, 15..40), (2, 40..45)];
        let got: Vec<_> = spans(&shards, 45, 10)
            .into_iter()
            .map(|s| (s.home, s.chunks, s.base))
            .collect();
        // Chunk 0 lies in shard 0, chunks 2-3 in shard 1, the short last chunk 4 in shard 2;
        // chunk 1 (rows 10..20) is cut by a boundary: a piece of its own, homed where it starts.
        assert_eq!(
            got,
            vec![
                (0, 0..1, 0..15),
                (1, 2..4, 15..40),
                (2, 4..5, 40..45),
                (0, 1..2, 10..20),
            ]
        );
    }
}
