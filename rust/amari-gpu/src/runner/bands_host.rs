//! The host device's bands: host vectors of 32-bit words (rows padded as on a wgpu device)
//! that the bands' host steps update in place on the device's thread pool, with the fma
//! rounding of the wgpu devices beside it, several steps per pass over a band's rows
//! (`Program::depth`). A new layout's rows, handed to its first round as uploads of every
//! buffer row (`Bands::reads_uploads_in_place`), are read by the first pass where they are
//! (the caller's grid) instead of copied in. A panic in a step fails the device; a
//! cancelled call stops between passes (a host round can be long). The buffers come from the host device's spares and go
//! back to them when the bands are dropped, so a grid call's bands land in pages the last
//! one mapped; they are not zeroed first (`push` says why no word is read unwritten). Rows
//! written in and read out are copied on the device's threads; a round that reads a band's
//! one range back into a place (its owned rows onto the board) has its last pass write
//! them there instead of into the band (`Program::run`).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use super::bands::{BandRound, Bands, Program, Ran, RowMove, Runs};
use crate::alloc;
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::gpu_io::lost;
use crate::host::device::HostDevice;
use crate::host::rows::{copy_rows, new_rows};

/// One band's two buffers and its steps.
pub(super) struct HostBand {
    /// Words as f32 (the spares' type); the steps see them as u32 words.
    buffers: [Vec<f32>; 2],
    row_bytes: usize,
    program: Box<dyn Program>,
}

impl HostBand {
    fn bytes(&self, current: usize) -> &[u8] {
        bytemuck::cast_slice(&self.buffers[current])
    }
}

/// The bands on the host device.
pub(super) struct HostBands<'d> {
    dev: &'d GpuDevice,
    host: &'d HostDevice,
    list: Vec<HostBand>,
}

impl<'d> HostBands<'d> {
    /// No bands yet on `dev`, the host device `host`.
    pub(super) fn new(dev: &'d GpuDevice, host: &'d HostDevice) -> Self {
        HostBands {
            dev,
            host,
            list: Vec::new(),
        }
    }
}

impl Drop for HostBands<'_> {
    fn drop(&mut self) {
        for band in self.list.drain(..) {
            for buffer in band.buffers {
                self.host.spare.keep(buffer);
            }
        }
    }
}

impl Bands for HostBands<'_> {
    fn push(&mut self, rows: usize, row_bytes: usize, program: Box<dyn Program>) -> Result<()> {
        let words = alloc::product("grid", &[rows, row_bytes / 4], 4)?;
        // Not zeroed: the layout fills every row of the current buffer (from the board or
        // an old band) before a step reads it, and a step of a round reads, in the other
        // buffer, only rows the step before it wrote there: rows a step computes lie
        // inside those of the step before it, and a fixed (Dirichlet frame) row, which is
        // copied, is the only row whose neighbours are not read.
        self.list.push(HostBand {
            buffers: [
                self.host.spare.take_any("grid", words)?,
                self.host.spare.take_any("grid", words)?,
            ],
            row_bytes,
            program,
        });
        Ok(())
    }

    fn write(&mut self, band: usize, current: usize, at: usize, bytes: &[u8]) {
        let b = &mut self.list[band];
        #[cfg(test)]
        if b.row_bytes == WATCHED.load(std::sync::atomic::Ordering::SeqCst) {
            WRITTEN.fetch_add(bytes.len(), std::sync::atomic::Ordering::SeqCst);
        }
        let (rb, at) = (b.row_bytes, at * b.row_bytes);
        let buffer: &mut [u8] = bytemuck::cast_slice_mut(&mut b.buffers[current]);
        let rows = &mut buffer[at..at + bytes.len()];
        copy_rows(Some(&self.host.pool), (rows, rb), (bytes, rb), rb, |_| ());
    }

    fn reads_uploads_in_place(&self) -> bool {
        true
    }

    fn copy_from(&mut self, old: &dyn Bands, moved: RowMove, current: usize) -> Result<()> {
        let Some(old) = old.stored().downcast_ref::<Vec<HostBand>>() else {
            return Err(Error::Internal(format!(
                "device {}'s old and new bands are of different kinds",
                self.dev.id
            )));
        };
        let from = &old[moved.from_band];
        let rb = from.row_bytes;
        let source = &from.bytes(current)[moved.from_row * rb..(moved.from_row + moved.rows) * rb];
        self.write(moved.band, current, moved.to_row, source);
        Ok(())
    }

    fn submit(&mut self) {}

    fn round(&mut self, round: &BandRound<'_>) -> Result<Ran> {
        self.round_into(round, &mut [])
    }

    fn round_into(&mut self, round: &BandRound<'_>, into: &mut [&mut [u8]]) -> Result<Ran> {
        let host = self.host;
        // Uploads that tile a band's buffer rows (a new layout's, left where they are) are
        // read by its first pass in place; any others are written in.
        let mut lent: Vec<Option<&Runs<'_>>> = vec![None; self.list.len()];
        for (band, uploads) in round.uploads.iter().enumerate() {
            let b = &self.list[band];
            let rows = b.buffers[round.current].len() * 4 / b.row_bytes.max(1);
            let tiles = tiles_rows(uploads, b.row_bytes, rows);
            if round.steps > 0 && tiles {
                lent[band] = Some(uploads);
                continue;
            }
            for &(at, bytes) in uploads {
                self.write(band, round.current, at, bytes);
            }
        }
        let submitted = Instant::now();
        let cancelled = || round.interrupt.is_some_and(|i| i.is_cancelled());
        let list = &mut self.list;
        // A band that wants one range back into a place (its owned rows onto the board)
        // has its round's last pass write them there: no copy out of its buffer after.
        let wanted_places = round.wanted.iter().map(Vec::len).sum::<usize>();
        let mut places: Vec<Option<&mut [u8]>> = Vec::new();
        if round.steps > 0 && wanted_places == into.len() {
            let mut rest = into.iter_mut();
            for ranges in round.wanted.iter().take(list.len()) {
                let mine: Vec<&mut [u8]> =
                    rest.by_ref().take(ranges.len()).map(|p| &mut **p).collect();
                places.push(match <[_; 1]>::try_from(mine) {
                    Ok([place]) => Some(place),
                    Err(_) => None,
                });
            }
        }
        let mut placed = vec![false; list.len()];
        let stepped = catch_unwind(AssertUnwindSafe(|| {
            host.pool.run_with(|| {
                let mut work = 0;
                // Passes of several steps each, every band's pass before the next pass: the
                // bands are independent within a round, so the order changes no bits.
                let depth = list.iter().map(|b| b.program.depth()).min().unwrap_or(1);
                let mut k = 1;
                while k <= round.steps {
                    if cancelled() {
                        return Err(Error::Cancelled);
                    }
                    #[cfg(test)]
                    if let Some(b) = list.first() {
                        let armed = &super::bands::PANIC_IN_STEP;
                        let order = std::sync::atomic::Ordering::SeqCst;
                        if armed.compare_exchange(b.row_bytes, 0, order, order).is_ok() {
                            panic!("a host band step failed (test)");
                        }
                    }
                    let end = (k + depth.max(1)).min(round.steps + 1);
                    for (i, b) in list.iter_mut().enumerate() {
                        let from = (round.current + k - 1) % 2;
                        let [x, y] = &mut b.buffers;
                        let (src, other) = if from == 0 { (x, y) } else { (y, x) };
                        let words = [
                            bytemuck::cast_slice_mut(src),
                            bytemuck::cast_slice_mut(other),
                        ];
                        let fma = host.fma_for(b.program.dtype());
                        let place = match places.get_mut(i) {
                            Some(Some(place)) if end == round.steps + 1 => {
                                let rows = round.wanted[i][0].clone();
                                bytemuck::try_cast_slice_mut::<u8, u32>(place)
                                    .ok()
                                    .filter(|p| p.len() * 4 == rows.len() * b.row_bytes)
                                    .map(|p| (rows, p))
                            }
                            _ => None,
                        };
                        let direct = place.is_some();
                        // Only the round's first pass reads the step before it elsewhere.
                        let first = lent[i].filter(|_| k == 1);
                        let wrote = b.program.run(k..end, words, place, fma, &cancelled, first);
                        if direct && !wrote {
                            // Not taken: the last pass runs into the buffers as any other.
                            let [x, y] = &mut b.buffers;
                            let (src, other) = if from == 0 { (x, y) } else { (y, x) };
                            let words = [
                                bytemuck::cast_slice_mut(src),
                                bytemuck::cast_slice_mut(other),
                            ];
                            b.program.run(k..end, words, None, fma, &cancelled, first);
                        }
                        placed[i] = direct && wrote;
                        work += (k..end).map(|j| b.program.work(j)).sum::<u64>();
                    }
                    k = end;
                }
                Ok(work)
            })
        }));
        let work = stepped.map_err(|panic| {
            let what = Error::from_panic("a host band step", panic.as_ref());
            lost(self.dev.id, what.to_string())
        })??;
        let finished = Instant::now();
        let after = (round.current + round.steps) % 2;
        let wanted: Vec<_> = self
            .list
            .iter()
            .enumerate()
            .zip(round.wanted)
            .flat_map(|(b, ranges)| ranges.iter().map(move |r| (b, r)))
            .collect();
        let mut rows = Vec::new();
        let mut bytes_down = 0;
        if !into.is_empty() {
            // Straight from the band into its place (the board): no rows in between.
            if wanted.len() != into.len() {
                return Err(Error::Internal(format!(
                    "{} read-back ranges for {} places on the board",
                    wanted.len(),
                    into.len()
                )));
            }
            for (((i, b), r), dst) in wanted.into_iter().zip(into.iter_mut()) {
                let rb = b.row_bytes;
                let from = &b.bytes(after)[r.start * rb..r.end * rb];
                if dst.len() != from.len() {
                    return Err(Error::Internal(format!(
                        "a place of {} bytes on the board for {} rows of {rb} bytes",
                        dst.len(),
                        r.len()
                    )));
                }
                if !placed[i] {
                    copy_rows(Some(&host.pool), (&mut **dst, rb), (from, rb), rb, |_| ());
                }
                bytes_down += from.len() as u64;
            }
        } else {
            for ((_, b), r) in wanted {
                let rb = b.row_bytes;
                let from = &b.bytes(after)[r.start * rb..r.end * rb];
                let bytes =
                    new_rows::<u8>(Some(&host.pool), (from, rb), r.len(), rb).ok_or_else(|| {
                        Error::HostOutOfMemory {
                            argument: "grid".into(),
                            bytes: from.len() as u128,
                        }
                    })?;
                bytes_down += bytes.len() as u64;
                rows.push(bytes);
            }
        }
        Ok(Ran {
            rows,
            submitted,
            finished,
            ticks: None,
            work,
            bytes_down,
        })
    }

    fn discard(self: Box<Self>) {}

    fn stored(&self) -> &dyn Any {
        &self.list
    }
}

/// Whether `uploads` are runs of whole rows of `row_bytes` covering buffer rows `0..rows`
/// exactly, each starting where the one before it ends.
fn tiles_rows(uploads: &Runs<'_>, row_bytes: usize, rows: usize) -> bool {
    let mut next = 0;
    for &(at, bytes) in uploads {
        if at != next || row_bytes == 0 || !bytes.len().is_multiple_of(row_bytes) {
            return false;
        }
        next += bytes.len() / row_bytes;
    }
    next == rows
}

/// The row width in bytes of the host bands whose written bytes [`WRITTEN`] counts (0:
/// none), for the test of a layout read in place; keyed by width so that other tests'
/// grids, stepped at the same time, do not count.
#[cfg(test)]
pub(crate) static WATCHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Bytes written into host bands of rows of [`WATCHED`] bytes, on any thread.
#[cfg(test)]
pub(crate) static WRITTEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
