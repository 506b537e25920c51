//! Temporal blocking of a band's grid steps on the host: a pass runs several steps of a
//! round over the band's rows as a wavefront, so that each step reads the rows of the step
//! before from a small ring that stays in the core's cache instead of from the whole band
//! buffer in memory. The cells and their arithmetic are those of one step at a time (the
//! row kernel is the same); only the order the rows are visited changes, and no cell's
//! value depends on it.
//!
//! The wavefront: at iteration `t`, step `j` of the pass computes row `t - (j - 1)`, from
//! rows `t - j .. t - j + 2` of step `j - 1`, which steps `j - 1` computed at iterations
//! `t - 2 ..= t`. Iterations go two at a time (a turn computes two rows of each step, in
//! one sweep where it can), so a ring of four rows per step holds what they read. The
//! first step reads the band buffer, the last writes it. The rows are cut into one chunk
//! per thread, in proportion to each thread's pace in the passes before; a chunk also
//! computes, for step `j`, the `d - j` rows beyond each of its
//! edges that its last step needs (overlapped tiles: a triangle recomputed at each cut,
//! none between rows). A pass may read the step before it from rows kept elsewhere (a
//! new layout's rows where the caller's grid has them) instead of the band buffer, which
//! then need not hold them.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use rayon::prelude::*;

use crate::runner::bands::Stop;

/// What a pass computes: one row of a step from the three rows around it in the step
/// before, on a band buffer of whole rows.
pub(crate) trait Stencil: Sync {
    /// A buffer word: a cell (heat) or a word of packed cells (Life).
    type Cell: bytemuck::Pod + Default + Send + Sync;

    /// Words per buffer row.
    fn row_len(&self) -> usize;

    /// Whether buffer row `r` keeps its value at every step (a Dirichlet frame row): it is
    /// copied, and the rows around it are not read.
    fn fixed(&self, r: usize) -> bool;

    /// Row `out` of a step from rows `up`, `at` and `down` of the step before.
    fn row(
        &self,
        up: &[Self::Cell],
        at: &[Self::Cell],
        down: &[Self::Cell],
        out: &mut [Self::Cell],
    );

    /// Two rows one above the other (neither fixed): `outs[0]` from `rows[..3]`, `outs[1]`
    /// from `rows[1..]`, the cells of [`row`](Self::row) for each; a stencil that can
    /// computes them in one sweep.
    fn rows2(&self, rows: [&[Self::Cell]; 4], outs: [&mut [Self::Cell]; 2]) {
        let [up, at, at2, down] = rows;
        let [out, out2] = outs;
        self.row(up, at, at2, out);
        self.row(at, at2, down, out2);
    }
}

/// Bytes of ring rows one thread keeps during a pass: under the 1-2 MiB of L2 per core
/// of current x86-64 and arm64 server and desktop cores, with room for the rows of the
/// band buffer the first step reads and the last writes.
const RING_BYTES: usize = 768 << 10;

/// Most steps one pass runs: a host round checks for cancellation between passes, so this
/// bounds the wait for a cancelled call; past 16 steps the ring's reuse gains little more.
const MAX_DEPTH: usize = 16;

/// Steps a pass runs on rows of `row_bytes` bytes (at least 1): as many as keep [`SLOTS`]
/// rows per step within [`RING_BYTES`], at most [`MAX_DEPTH`].
pub(crate) fn depth(row_bytes: usize) -> usize {
    (RING_BYTES / (SLOTS * row_bytes.max(1))).clamp(1, MAX_DEPTH)
}

/// Buffer row `r`'s words of a step, wherever they are kept.
pub(crate) type Rows<'a, T> = dyn Fn(usize) -> &'a [T] + Sync + 'a;

/// One pass: steps `steps` (1-based, consecutive, counted from the band's last exchange)
/// with the buffer rows `rows(k)` that step `k` computes.
pub(crate) struct Pass<'a> {
    /// The steps.
    pub(crate) steps: Range<usize>,
    /// Buffer rows each step computes: rows of step `k` lie one row inside those of step
    /// `k - 1` at an edge whose rows are not fixed, as `domain::bands` shrinks them.
    pub(crate) rows: &'a (dyn Fn(usize) -> Range<usize> + Sync),
    /// Whether the call was cancelled: a pass of several steps then stops where it is,
    /// leaving its rows partly computed (the round it belongs to fails as cancelled, and
    /// its buffers are not read again).
    pub(crate) stop: &'a Stop<'a>,
}

/// Runs `pass` on a band whose buffer `src` holds the step before it, or whose rows of
/// that step `first` gives when given (`src`'s words are then not read): the result is in
/// `src` after an even number of steps, in `other` after an odd one (as stepping from one
/// buffer to the other would leave it). Rows a step does not compute keep their words.
/// With `into` = (buffer rows `rows`, their place), the last step writes those rows (all
/// among the rows it computes) there instead and no other rows: both buffers are left as
/// the steps before it left them, and a pass reads `src` apart from where it writes (no
/// copies of the rows beyond its chunks' edges).
pub(crate) fn run<S: Stencil>(
    s: &S,
    pass: &Pass<'_>,
    src: &mut [S::Cell],
    other: &mut [S::Cell],
    into: Option<(Range<usize>, &mut [S::Cell])>,
    first: Option<&Rows<'_, S::Cell>>,
) {
    let d = pass.steps.len();
    let rl = s.row_len();
    let n = src.len() / rl;
    if d == 0 {
        return;
    }
    if let Some(read) = first {
        // Read from elsewhere, so even `src` can take the result without copies of rows.
        let (rows, out) = match into {
            Some((rows, place)) => (rows, place),
            None if d % 2 == 1 => (0..n, other),
            None => (0..n, src),
        };
        return apart(s, pass, rows, read, out);
    }
    let (rows, out): (Range<usize>, &mut [S::Cell]) = match into {
        Some((rows, place)) => (rows, place),
        None if d % 2 == 1 => (0..n, other),
        None => return in_place(s, pass, src),
    };
    let src: &[S::Cell] = src;
    apart(s, pass, rows, &|r| &src[r * rl..(r + 1) * rl], out);
}

/// The pass's last step's rows `rows` into `out` (those rows' words), the step before the
/// pass read by `read`, which shares no words with `out`.
fn apart<S: Stencil>(
    s: &S,
    pass: &Pass<'_>,
    rows: Range<usize>,
    read: &Rows<'_, S::Cell>,
    out: &mut [S::Cell],
) {
    let d = pass.steps.len();
    let rl = s.row_len();
    if d == 1 {
        let step = (pass.rows)(pass.steps.start);
        let (lo, hi) = (step.start.max(rows.start), step.end.min(rows.end));
        let at = (lo.min(hi) - rows.start) * rl;
        return single_into(
            s,
            lo..hi.max(lo),
            read,
            &mut out[at..at + hi.saturating_sub(lo) * rl],
        );
    }
    let spans = chunks(rows.clone(), d);
    let outs = split_rows(out, &spans, rl);
    each_chunk(pass, &spans, outs, |i, out| {
        wavefront(s, pass, spans[i].clone(), Source::Rows(read), out)
    });
}

/// `rows` cut into one chunk per thread, each tall enough that its recomputed triangles
/// (about d² rows per cut) stay small beside its `d` steps of its rows. With a chunk for
/// every thread of the pool, each thread's chunk is in proportion to its pace in the
/// passes before ([`PACES`]): a round waits for its slowest chunk, and the cores of a
/// machine need not be alike (a VM's vCPUs beside other tenants' work, or a CPU's
/// performance and efficiency cores). Where the chunks are cut changes no cell.
fn chunks(rows: Range<usize>, d: usize) -> Vec<Range<usize>> {
    let n = rows.len();
    let threads = rayon::current_num_threads().max(1);
    let chunks = (n / (8 * d)).clamp(1, threads);
    let weights = PACES.with_borrow(|paces| match chunks == threads && paces.len() == threads {
        true => shares(paces),
        false => vec![1.0; chunks],
    });
    cut(rows, &weights)
}

/// `rows` cut into consecutive chunks in proportion to `weights` (one each), none empty
/// where there are at least as many rows as weights.
fn cut(rows: Range<usize>, weights: &[f64]) -> Vec<Range<usize>> {
    let (n, k) = (rows.len(), weights.len());
    let total: f64 = weights.iter().sum();
    let mut at = rows.start;
    let mut sum = 0.0;
    let mut spans = Vec::with_capacity(k);
    for (i, w) in weights.iter().enumerate() {
        sum += w;
        // At least one row for each chunk after this one, where there are rows enough.
        let left = (k - 1 - i).min(n);
        let share = (n as f64 * sum / total).round() as usize;
        let end = if i + 1 == k {
            rows.end
        } else {
            (rows.start + share).clamp((at + 1).min(rows.end - left), rows.end - left)
        };
        spans.push(at..end);
        at = end;
    }
    spans
}

/// Each thread's weight from its measured pace: equal until every thread has one or while
/// every pace is within [`ALIKE`] of their mean (passes on like cores measure a few
/// percent apart from call to call, and cutting by that noise lengthens as many rounds as
/// it shortens), else the pace, within half and twice the mean (so that one slow
/// measurement, a thread descheduled once, does not starve a thread's next chunk).
fn shares(paces: &[f64]) -> Vec<f64> {
    if paces.iter().any(|&p| !(p.is_finite() && p > 0.0)) {
        return vec![1.0; paces.len()];
    }
    let mean = paces.iter().sum::<f64>() / paces.len() as f64;
    if paces.iter().all(|&p| (p / mean - 1.0).abs() <= ALIKE) {
        return vec![1.0; paces.len()];
    }
    paces
        .iter()
        .map(|&p| p.clamp(mean / 2.0, mean * 2.0))
        .collect()
}

/// How far from their mean the threads' paces may lie and still be cut alike.
const ALIKE: f64 = 0.08;

/// The weight of a pass's measured pace in the kept one: a phase of a busy machine lasts
/// seconds, many passes, so a few passes' memory smooths a pass's noise and still follows it.
const NEW_PACE: f64 = 0.25;

/// Sets this thread's [`PACES`] (tests: passes cut unevenly on purpose).
#[cfg(test)]
pub(crate) fn set_paces(paces: Vec<f64>) {
    PACES.set(paces);
}

thread_local! {
    /// The pace of each thread of this thread's pool (by its index) in the last passes
    /// this thread cut into chunks: rows times steps a second over the pass's mean, moved a
    /// quarter of the way to each new measurement ([`NEW_PACE`]). A thread belongs to one pool,
    /// so its copy is its pool's; empty until it has run a pass of a chunk per thread.
    static PACES: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
}

/// Runs `work(i, outs[i])` for each chunk `spans[i]` (`outs[i]` its rows). With a chunk for every
/// thread of the pool, chunk `i` runs on thread `i` (a broadcast) and its pace is kept
/// for the next cut ([`chunks`]); otherwise the chunks go to whichever thread is free.
fn each_chunk<T: Send>(
    pass: &Pass<'_>,
    spans: &[Range<usize>],
    outs: Vec<&mut [T]>,
    work: impl Fn(usize, &mut [T]) + Sync,
) {
    let threads = rayon::current_num_threads();
    if threads < 2 || spans.len() != threads {
        outs.into_par_iter()
            .enumerate()
            .for_each(|(i, out)| work(i, out));
        return;
    }
    let d = pass.steps.len();
    let outs: Vec<Mutex<Option<&mut [T]>>> =
        outs.into_iter().map(|o| Mutex::new(Some(o))).collect();
    let paces = rayon::broadcast(|ctx| {
        let i = ctx.index();
        let out = outs[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        let start = Instant::now();
        work(i, out);
        let seconds = start.elapsed().as_secs_f64();
        // A cancelled pass stops part way: no pace.
        (!(pass.stop)() && seconds > 0.0).then(|| (spans[i].len() * d) as f64 / seconds)
    });
    // Kept relative to the pass's mean, so that passes of other shapes (rows of other
    // widths, other cells) weigh alike.
    let measured: Vec<f64> = paces.iter().flatten().copied().collect();
    let mean = measured.iter().sum::<f64>() / measured.len().max(1) as f64;
    if !(mean.is_finite() && mean > 0.0) {
        return;
    }
    PACES.with_borrow_mut(|kept| {
        if kept.len() != threads {
            *kept = vec![0.0; threads];
        }
        for (old, new) in kept.iter_mut().zip(paces) {
            if let Some(new) = new.map(|p| p / mean) {
                *old = if *old > 0.0 {
                    *old + NEW_PACE * (new - *old)
                } else {
                    new
                };
            }
        }
    });
}

/// A pass of an even number of steps (two or more) from `src` back into it.
fn in_place<S: Stencil>(s: &S, pass: &Pass<'_>, src: &mut [S::Cell]) {
    let d = pass.steps.len();
    let rl = s.row_len();
    let n = src.len() / rl;
    let spans = chunks(0..n, d);
    // In place: a chunk's last step overwrites rows its neighbours' first step reads, so
    // each chunk reads the rows beyond its edges from a copy taken before any is written.
    let halos: Vec<Halo<S::Cell>> = spans
        .iter()
        .map(|span| {
            let above = span.start.saturating_sub(d)..span.start;
            let below = span.end..(span.end + d).min(n);
            Halo {
                above: src[above.start * rl..above.end * rl].to_vec(),
                below: src[below.start * rl..below.end * rl].to_vec(),
            }
        })
        .collect();
    let outs = split_rows(src, &spans, rl);
    each_chunk(pass, &spans, outs, |i, out| {
        let source = Source::InPlace {
            above: &halos[i].above,
            below: &halos[i].below,
        };
        wavefront(s, pass, spans[i].clone(), source, out)
    });
}

/// Copies of the rows a chunk of an in-place pass reads beyond its edges.
struct Halo<T> {
    /// Up to the pass's depth rows above the chunk.
    above: Vec<T>,
    /// Up to the pass's depth rows below it.
    below: Vec<T>,
}

/// One step: rows `rows` of `dst` from `src`, a row per task.
pub(crate) fn single<S: Stencil>(s: &S, rows: Range<usize>, src: &[S::Cell], dst: &mut [S::Cell]) {
    let rl = s.row_len();
    single_into(
        s,
        rows.clone(),
        &|r| &src[r * rl..(r + 1) * rl],
        &mut dst[rows.start * rl..rows.end * rl],
    );
}

/// One step: rows `rows` from the step before's rows `read` into `out` (those rows'
/// words), a row per task.
fn single_into<S: Stencil>(
    s: &S,
    rows: Range<usize>,
    read: &Rows<'_, S::Cell>,
    out: &mut [S::Cell],
) {
    let rl = s.row_len();
    let start = rows.start;
    out.par_chunks_mut(rl).enumerate().for_each(|(i, out)| {
        let r = start + i;
        let at = read(r);
        if s.fixed(r) {
            out.copy_from_slice(at);
        } else {
            s.row(read(r - 1), at, read(r + 1), out);
        }
    });
}

/// `buffer` cut into the rows of each span (the spans tile its rows in order).
fn split_rows<'b, T>(buffer: &'b mut [T], spans: &[Range<usize>], rl: usize) -> Vec<&'b mut [T]> {
    let mut rest = buffer;
    let mut outs = Vec::with_capacity(spans.len());
    for span in spans {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(span.len() * rl);
        outs.push(head);
        rest = tail;
    }
    outs
}

/// Where a chunk's first step reads the rows of the step before the pass.
enum Source<'a, 'r, T> {
    /// Rows apart from the ones the pass writes: the other buffer (an odd pass writes into
    /// the buffer it does not read), or rows kept elsewhere.
    Rows(&'a Rows<'r, T>),
    /// The chunk's own rows in place, and copies of the rows up to the pass's depth
    /// beyond its edges.
    InPlace { above: &'a [T], below: &'a [T] },
}

/// Row `r` of the step before the pass, for a chunk of rows `span` whose own rows are `own`.
fn input<'x, 'r: 'x, T>(
    source: &Source<'x, 'r, T>,
    own: &'x [T],
    span: &Range<usize>,
    rl: usize,
    r: usize,
) -> &'x [T] {
    match *source {
        Source::Rows(read) => read(r),
        Source::InPlace { above, below } => {
            if r < span.start {
                let first = span.start - above.len() / rl;
                &above[(r - first) * rl..(r - first + 1) * rl]
            } else if r >= span.end {
                &below[(r - span.end) * rl..(r - span.end + 1) * rl]
            } else {
                &own[(r - span.start) * rl..(r - span.start + 1) * rl]
            }
        }
    }
}

/// A pass of two or more steps over the chunk `span`, writing its last step's rows into
/// `out` (the chunk's rows of the result buffer).
fn wavefront<S: Stencil>(
    s: &S,
    pass: &Pass<'_>,
    span: Range<usize>,
    source: Source<'_, '_, S::Cell>,
    out: &mut [S::Cell],
) {
    let rl = s.row_len();
    let d = pass.steps.len();
    // `SLOTS` rows for each step but the last, which writes `out`.
    RING.with_borrow_mut(|store| {
        let ring = ring_words::<S::Cell>(store, (d - 1) * SLOTS * stride::<S::Cell>(rl));
        steps(s, pass, span, &source, out, ring);
    });
}

thread_local! {
    /// The ring of this thread's last pass, kept for its next one (a pass's ring is up to
    /// [`RING_BYTES`]; allocating it anew per pass and chunk maps and faults fresh pages
    /// each time). Words of 8 bytes: aligned for any cell type.
    static RING: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The first `len` cells of `store`, grown as needed. Not cleared: the wavefront writes a
/// ring row before it reads it (step `j` reads rows `r - 1 ..= r + 1` of step `j - 1`,
/// which that step computed in the last two turns, as its rows and reach are one
/// row wider at every edge whose rows are not fixed). Under test they are a NaN pattern,
/// so that a row read unwritten shows in the results.
///
/// The ring starts on a 64-byte line (its slots then on the lines [`stride`] puts them).
fn ring_words<T: bytemuck::Pod>(store: &mut Vec<u64>, len: usize) -> &mut [T] {
    let words = (len * std::mem::size_of::<T>()).div_ceil(8) + LINE / 8;
    if store.len() < words {
        store.resize(words, 0);
    }
    #[cfg(test)]
    store.fill(u64::from(crate::alloc::UNWRITTEN.to_bits()) * 0x1_0000_0001);
    let skip = (LINE - store.as_ptr() as usize % LINE) % LINE / 8;
    &mut bytemuck::cast_slice_mut(&mut store[skip..skip + words - LINE / 8])[..len]
}

/// Rows each step keeps in the ring: a turn computes two rows per step, reading four of
/// the step before (`r - 1 ..= r + 2`), the oldest from two turns back.
const SLOTS: usize = 4;

/// A cache line's bytes.
const LINE: usize = 64;

/// Bytes between the end of a ring slot's row and the next slot: rows of a multiple of 4
/// KiB (1,024 float32 cells) would otherwise start every slot at the same offset within
/// 4 KiB, and a row's store and the loads of the rows of the step before a few cells
/// further on then share their low 12 address bits, which the core takes for a
/// dependence on the store (4K aliasing) and waits for. Nine lines, as measured on a
/// two-row wavefront in AVX2 on a Zen 3 core: 4.15 G cell updates/s unpadded, 4.31 with
/// one line, 4.53 with nine, 4.49 with seventeen.
const SLOT_PAD: usize = 9 * LINE;

/// Words from one ring slot's row to the next for rows of `rl` words of `T`: the row and
/// [`SLOT_PAD`], on whole lines when the row is.
fn stride<T>(rl: usize) -> usize {
    rl + SLOT_PAD / std::mem::size_of::<T>().max(1)
}

/// The wavefront of [`wavefront`] in `ring`, two iterations a turn: at every step, the
/// rows of iterations `t` and `t + 1` one after the other (step `j`'s rows `t + 1 - j` and
/// `t + 2 - j` read rows up to `t + 3 - j` of step `j - 1`, which it computed just
/// before them in the same turn). Both rows computed in one sweep where neither is
/// fixed ([`Stencil::rows2`]): each middle row is read once for both, and the four rows
/// read were written at most two turns before, most of them still in L1. One row per
/// iteration, two of the three rows a step read came from L2 (written 16 rows earlier).
fn steps<S: Stencil>(
    s: &S,
    pass: &Pass<'_>,
    span: Range<usize>,
    source: &Source<'_, '_, S::Cell>,
    out: &mut [S::Cell],
    ring: &mut [S::Cell],
) {
    let d = pass.steps.len();
    let rows: Vec<Range<usize>> = pass.steps.clone().map(|k| (pass.rows)(k)).collect();
    let first = span.start.saturating_sub(d);
    let end = span.end + 2 * d;
    // Whether step `j` computes row `r` in this chunk.
    let live = |j: usize, r: usize| {
        let reach = d - j;
        r + reach >= span.start && r < span.end + reach && rows[j - 1].contains(&r)
    };
    for (turn, t) in (first..end).step_by(2).enumerate() {
        // A few microseconds of rows between two looks at the call's cancellation.
        if turn % 8 == 0 && (pass.stop)() {
            return;
        }
        for j in 1..=d {
            // Rows `t - (j - 1)` and `t + 1 - (j - 1)` of step `j`; later steps' rows are
            // further up.
            let Some(r1) = (t + 2).checked_sub(j) else {
                break;
            };
            let r0 = (t + 1).checked_sub(j).filter(|&r| live(j, r));
            let r1 = Some(r1).filter(|&r| t + 1 < end && live(j, r));
            let at = (&span, source);
            match (r0, r1) {
                (Some(r), Some(_)) if !s.fixed(r) && !s.fixed(r + 1) => {
                    rows_at(s, (j, d), at, (&mut *out, &mut *ring), r, true);
                }
                _ => {
                    for r in [r0, r1].into_iter().flatten() {
                        rows_at(s, (j, d), at, (&mut *out, &mut *ring), r, false);
                    }
                }
            }
        }
    }
}

/// Row `r`'s `rl` words in a ring of [`SLOTS`] rows `rs` words apart.
fn slot(r: usize, (rl, rs): (usize, usize)) -> Range<usize> {
    (r % SLOTS) * rs..(r % SLOTS) * rs + rl
}

/// Where a step's row, or two rows one above the other, go.
enum Dst<'a, T> {
    One(&'a mut [T]),
    Two([&'a mut [T]; 2]),
}

/// Row `i` of `buffer`'s rows of `rl` words `rs` apart, and row `k` after it when given
/// (`k != i`).
fn dst<T>(buffer: &mut [T], (rl, rs): (usize, usize), i: usize, k: Option<usize>) -> Dst<'_, T> {
    let Some(k) = k else {
        return Dst::One(&mut buffer[i * rs..i * rs + rl]);
    };
    debug_assert_ne!(i, k);
    let (lo, hi) = (i.min(k), i.max(k));
    let (head, tail) = buffer.split_at_mut(hi * rs);
    let (low, high) = (&mut head[lo * rs..lo * rs + rl], &mut tail[..rl]);
    Dst::Two(if i < k { [low, high] } else { [high, low] })
}

/// Row `r` of step `j` of `d` (of a chunk of rows `span`), and row `r + 1` when `two`
/// (neither then fixed), from the step before: the pass's source for the first step, the
/// ring otherwise; into the ring, or `out` for the last step.
fn rows_at<S: Stencil>(
    s: &S,
    (j, d): (usize, usize),
    (span, source): (&Range<usize>, &Source<'_, '_, S::Cell>),
    (out, ring): (&mut [S::Cell], &mut [S::Cell]),
    r: usize,
    two: bool,
) {
    let rl = s.row_len();
    let rs = stride::<S::Cell>(rl);
    if j == 1 {
        let (steps, _) = ring.split_at_mut(SLOTS * rs);
        let own: &[S::Cell] = out;
        let into = dst(steps, (rl, rs), r % SLOTS, two.then_some((r + 1) % SLOTS));
        return apply(s, |q| input(source, own, span, rl, q), r, into);
    }
    let (before, after) = ring.split_at_mut((j - 1) * SLOTS * rs);
    let prev = &before[(j - 2) * SLOTS * rs..];
    let into = if j == d {
        let at = r - span.start;
        dst(out, (rl, rl), at, two.then_some(at + 1))
    } else {
        dst(
            &mut after[..SLOTS * rs],
            (rl, rs),
            r % SLOTS,
            two.then_some((r + 1) % SLOTS),
        )
    };
    apply(s, |q| &prev[slot(q, (rl, rs))], r, into);
}

/// Row `r` (copied when fixed), or rows `r` and `r + 1` in one sweep
/// ([`Stencil::rows2`]), into `into`, from rows `read(q)` of the step before.
fn apply<'a, S: Stencil>(
    s: &S,
    read: impl Fn(usize) -> &'a [S::Cell],
    r: usize,
    into: Dst<'_, S::Cell>,
) where
    S::Cell: 'a,
{
    match into {
        Dst::One(dst) if s.fixed(r) => dst.copy_from_slice(read(r)),
        Dst::One(dst) => s.row(read(r - 1), read(r), read(r + 1), dst),
        Dst::Two(dsts) => s.rows2([r - 1, r, r + 1, r + 2].map(read), dsts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_starts_on_a_line_and_its_slots_lie_apart_within_4_kib() {
        let mut store = Vec::new();
        for len in [1, 100, 5000, 3] {
            let ring = ring_words::<f32>(&mut store, len);
            assert_eq!(ring.len(), len);
            assert_eq!(ring.as_ptr() as usize % LINE, 0);
        }
        // Rows of 4 KiB: each slot starts SLOT_PAD bytes further on within 4 KiB, on a line.
        let rs = stride::<f32>(1024);
        assert_eq!(rs * 4 % 4096, SLOT_PAD);
        assert_eq!(rs * 4 % LINE, 0);
        assert_eq!(stride::<f64>(512) * 8 % 4096, SLOT_PAD);
        let (rl, rs) = (10, stride::<f32>(10));
        let slots: Vec<Range<usize>> = (0..SLOTS).map(|r| slot(r, (rl, rs))).collect();
        assert!(slots
            .windows(2)
            .all(|w| w[0].len() == rl && w[0].end <= w[1].start));
    }

    #[test]
    fn chunks_follow_their_weights_and_none_is_empty() {
        let lens = |rows: Range<usize>, w: &[f64]| -> Vec<usize> {
            let spans = cut(rows.clone(), w);
            assert_eq!(spans.len(), w.len());
            assert_eq!(spans.first().map(|s| s.start), Some(rows.start));
            assert_eq!(spans.last().map(|s| s.end), Some(rows.end));
            assert!(spans.windows(2).all(|p| p[0].end == p[1].start));
            spans.iter().map(Range::len).collect()
        };
        assert_eq!(lens(0..1024, &[1.0, 1.0]), [512, 512]);
        assert_eq!(lens(16..1040, &[1.0, 3.0]), [256, 768]);
        assert_eq!(lens(0..10, &[1.0, 1.0, 1.0]), [3, 4, 3]);
        // A weight far below the others still leaves its chunk a row; rows fewer than
        // chunks leave some chunks empty rather than overlapping.
        assert_eq!(lens(0..100, &[1e-9, 1.0]), [1, 99]);
        assert_eq!(lens(0..100, &[1.0, 1e-9]), [99, 1]);
        assert_eq!(lens(5..7, &[1.0, 1.0, 1.0]), [0, 1, 1]);
    }

    #[test]
    fn paces_weigh_alike_when_close_else_within_half_and_twice_their_mean() {
        assert_eq!(shares(&[2.0, 2.0]), [1.0, 1.0]);
        assert_eq!(shares(&[0.95, 1.05]), [1.0, 1.0]);
        assert_eq!(shares(&[0.9, 1.1]), [0.9, 1.1]);
        assert_eq!(shares(&[1.0, 3.0]), [1.0, 3.0]);
        assert_eq!(shares(&[1.0, 9.0]), [2.5, 9.0]);
        assert_eq!(shares(&[0.0, 3.0]), [1.0, 1.0]);
        assert_eq!(shares(&[f64::NAN, 3.0]), [1.0, 1.0]);
        assert_eq!(shares(&[f64::INFINITY, 3.0]), [1.0, 1.0]);
    }

    #[test]
    fn passes_keep_their_rows_per_step_in_the_ring_budget() {
        assert_eq!(depth(1024 * 4), MAX_DEPTH);
        assert_eq!(depth(RING_BYTES), 1);
        assert_eq!(depth(0), MAX_DEPTH);
        let d = depth(64 << 10);
        assert!(d >= 1 && SLOTS * d * (64 << 10) <= RING_BYTES, "{d}");
    }
}
