//! Geometric-algebra kernels on the host: the generated WGSL kernels' arithmetic, run from
//! the term lists of [`host_program`](super::host_program). Items are taken [`LANES`] at a time
//! and transposed into blade-major registers (`[blade][lane]`), so every fused
//! multiply-add of the generated chain runs on [`LANES`] items at once, in the generated
//! order; the result is transposed back straight into the output slice. One body serves
//! every dtype the family computes in (`T: Real`, float32 or float64): a float64 kernel reads
//! and writes two words per value and runs the same chains in float64. A float16 kernel is
//! the float32 one between `host::f16`'s conversions (`ga::host_f16`); the Cl(3,0) product
//! runs its own blocks in every dtype (`ga::host_cl3`), float16 converted in registers at
//! its loads and stores.

use std::marker::PhantomData;
use std::ops::Range;

use crate::dtype::Dtype;
use crate::host::arith::Real;
use crate::kernel::{FmaMode, HostImpl};

use std::sync::Arc;

use super::algebra::Algebra;
use super::codegen::Broadcast;
use super::host_cl3::{chains_split, is_cl3_chain, run_chains, streams, Storage};
use super::host_normalize::{normalize_rows, NormFloat};
use super::host_program::{Program, Source, Stage, Step};
use super::operation::Operation;
use super::sandwich_map;
use crate::host::simd::{dispatch, Level, Task};

/// Items computed together, one per SIMD lane (two AVX2 vectors, one AVX-512 vector).
pub const LANES: usize = 16;
/// Items per rayon task.
const GRAIN: usize = 1024;

type Lanes<T> = [[T; LANES]; 64];

/// A generated geometric-algebra kernel on the host: the same (algebra, operation,
/// broadcast) that `ga::kernels::kernel` builds a WGSL kernel from.
#[derive(Debug, Clone)]
pub struct GaKernel {
    /// The algebra.
    pub algebra: Algebra,
    /// The operation.
    pub op: Operation,
    /// Which operand, if any, is one multivector bound whole.
    pub broadcast: Broadcast,
    /// How the devices it must agree with round `fma`.
    pub fma: FmaMode,
    /// What it computes in (float32 or float64).
    pub dtype: Dtype,
    program: Arc<Program>,
    /// The program is the Cl(3,0) product's chains, which `cl3::run_chains` computes with
    /// in-register transposes (same steps, same order, same bits) in every dtype.
    cl3_chains: bool,
}

/// One operand as the chunk sees it (its words).
#[derive(Clone, Copy)]
enum Rows<'a> {
    /// This chunk's rows.
    Batch(&'a [f32]),
    /// One multivector for every row.
    Single(&'a [f32]),
}

impl GaKernel {
    /// The host kernel of `op` in `algebra` (the operation must have passed
    /// [`Operation::check`]).
    pub fn new(algebra: Algebra, op: Operation, broadcast: Broadcast, fma: FmaMode) -> GaKernel {
        let program = if broadcast.is_map(op) {
            Program::SandwichMap
        } else {
            Program::new(&algebra, op)
        };
        let cl3_chains = broadcast == Broadcast::None
            && matches!(&program, Program::Products(stages)
                if stages.len() == 1 && algebra.blades() == 8 && is_cl3_chain(&stages[0].steps));
        GaKernel {
            algebra,
            op,
            broadcast,
            fma,
            dtype: Dtype::F32,
            program: Arc::new(program),
            cl3_chains,
        }
    }

    /// The same kernel computing in `dtype` (float32, float64, or float16 storage).
    pub fn in_dtype(self, dtype: Dtype) -> GaKernel {
        // The in-register Cl(3,0) chains run in every dtype: float32, float64, and float32
        // between float16 storage's loads and stores.
        GaKernel { dtype, ..self }
    }

    /// Words per item of the output.
    pub fn output_words(&self) -> usize {
        self.op.output_words(&self.algebra)
    }
}

impl HostImpl for GaKernel {
    /// Runs items `range` (inputs are the whole problem's operands, per the kernel's
    /// bindings) into `output`, which holds exactly those items' words.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        match self.dtype {
            Dtype::F64 => self.run_in::<f64>(inputs, range, output),
            Dtype::F16 if self.cl3_chains => self.run_cl3(inputs, range, output, Storage::F16),
            Dtype::F16 => self.run_f16(inputs, range, output),
            Dtype::F32 => self.run_in::<f32>(inputs, range, output),
        }
    }

    /// The same kernel with its `fma` chains rounded as `mode` says.
    fn with_fma(&self, mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(GaKernel {
            fma: mode,
            ..self.clone()
        })
    }

    /// Past one piece of the path `run` takes: the Cl(3,0) chains', a sandwich map's, or
    /// the programs'. float16 splits into tiles, and each tile's float32 run into pieces.
    fn splits(&self, items: usize) -> bool {
        if self.cl3_chains {
            return chains_split(items);
        }
        let grain = match *self.program {
            Program::SandwichMap => sandwich_map::GRAIN,
            _ => GRAIN,
        };
        match self.dtype {
            Dtype::F16 => self.f16_splits(items, grain),
            _ => items > grain,
        }
    }
}

impl GaKernel {
    /// [`HostImpl::run`] in `T`: values of `T::WORDS` words each.
    pub(super) fn run_in<T: NormFloat>(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        use rayon::prelude::*;
        // Widths in words.
        let w = self.algebra.blades() * T::WORDS;
        let ow = self.output_words() * T::WORDS;
        assert_eq!(
            output.len(),
            range.len() * ow,
            "output of the chunk's items"
        );
        let operand = |slot: usize| -> Rows<'_> {
            let whole = matches!(
                (slot, self.broadcast),
                (0, Broadcast::Left) | (1, Broadcast::Right)
            );
            if whole {
                Rows::Single(&inputs[slot][..w])
            } else {
                Rows::Batch(&inputs[slot][range.start * w..range.end * w])
            }
        };
        if self.cl3_chains {
            let storage = if T::WORDS == 2 { Storage::F64 } else { Storage::F32 };
            self.run_cl3(inputs, range, output, storage);
            return;
        }
        let program = &*self.program;
        if let Program::SandwichMap = program {
            // Rows of every blade, or of those `sandwich(..., blades=)` names.
            let order = self.op.blades(&self.algebra).ascending();
            let xw = order.len() * T::WORDS;
            let (map, x) = (inputs[0], &inputs[1][range.start * xw..range.end * xw]);
            let fused = self.fma == FmaMode::Fused;
            if T::WORDS == 2 {
                sandwich_map::run_f64(map, x, output, (&order, fused));
                return;
            }
            // Streamed past the caches when the call's rows and result outgrow them.
            let stream = streams(inputs[1].len().saturating_mul(8));
            sandwich_map::run(map, x, output, (&order, fused), Level::detect(), stream);
            return;
        }
        let a = operand(0);
        let b = (self.op.operands().len() > 1).then(|| operand(1));
        let fused = self.fma == FmaMode::Fused;
        output
            .par_chunks_mut(GRAIN * ow)
            .enumerate()
            .for_each(|(task, out)| {
                let first = task * GRAIN;
                let n = out.len() / ow;
                let (a, b) = (part(a, first, n, w), b.map(|b| part(b, first, n, w)));
                let blades = w / T::WORDS;
                match program {
                    Program::Products(stages) => {
                        run_products::<T>(stages, blades, a, b, out, fused);
                    }
                    Program::Linear(map) => linear::<T>(map, a, blades, out),
                    Program::SandwichMap => unreachable!("run above"),
                    Program::Normalize(signs) => {
                        let Rows::Batch(x) = a else {
                            unreachable!("unary operands are batches")
                        };
                        normalize_rows::<T>(x, signs, out, self.fma);
                    }
                }
            });
    }
}

impl GaKernel {
    /// The Cl(3,0) product's chains (`cl3_chains`) over items `range`, rows stored as
    /// `storage` says.
    fn run_cl3(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32], storage: Storage) {
        let w = storage.words();
        let rows = range.start * w..range.end * w;
        run_chains(
            &inputs[0][rows.clone()],
            &inputs[1][rows],
            output,
            storage,
            self.fma == FmaMode::Fused,
            streams(inputs[0].len().saturating_mul(12)),
        );
    }
}

/// Items `first..first + n` of `rows`.
fn part(rows: Rows<'_>, first: usize, n: usize, w: usize) -> Rows<'_> {
    match rows {
        Rows::Batch(x) => Rows::Batch(&x[first * w..(first + n) * w]),
        single => single,
    }
}

fn row<'a>(rows: Rows<'a>, item: usize, w: usize) -> &'a [f32] {
    match rows {
        Rows::Batch(x) => &x[item * w..(item + 1) * w],
        Rows::Single(x) => x,
    }
}

/// `out[k] = ±x[i]` (or 0.0) for rows of `w` values of `T`.
fn linear<T: Real>(map: &[Option<(u8, bool)>], x: Rows<'_>, w: usize, out: &mut [f32]) {
    let words = w * T::WORDS;
    for (item, res) in out.chunks_exact_mut(words).enumerate() {
        let x = row(x, item, words);
        for (k, m) in map.iter().enumerate() {
            let value = match *m {
                Some((i, false)) => T::read(x, i as usize),
                Some((i, true)) => -T::read(x, i as usize),
                None => T::ZERO,
            };
            T::write(res, k, value);
        }
    }
}

/// The product stages over rows of `w` values of `T`.
fn run_products<T: Real>(
    stages: &[Stage],
    w: usize,
    a: Rows<'_>,
    b: Option<Rows<'_>>,
    out: &mut [f32],
    fused: bool,
) {
    macro_rules! blades {
        ($($n:literal)*) => {
            match (w, fused) {
                $(
                    ($n, true) => dispatch(Products::<T, $n, true> { stages, a, b, out, _values: PhantomData }),
                    ($n, false) => dispatch(Products::<T, $n, false> { stages, a, b, out, _values: PhantomData }),
                )*
                _ => unreachable!("2 to 64 blades"),
            }
        };
    }
    blades!(2 4 8 16 32 64)
}

struct Products<'a, T, const W: usize, const F: bool> {
    stages: &'a [Stage],
    a: Rows<'a>,
    b: Option<Rows<'a>>,
    out: &'a mut [f32],
    _values: PhantomData<T>,
}

/// Loads lanes `0..m` of `rows` from item `start` on (a single multivector is splat once).
#[inline(always)]
fn load<T: Real, const W: usize>(rows: Rows<'_>, start: usize, m: usize, to: &mut Lanes<T>) {
    if let Rows::Batch(x) = rows {
        let row = W * T::WORDS;
        let x = &x[start * row..(start + m) * row];
        for (l, item) in x.chunks_exact(row).enumerate() {
            for (k, lanes) in to.iter_mut().enumerate().take(W) {
                lanes[l] = T::read(item, k);
            }
        }
    }
}

#[inline(always)]
fn splat<T: Real, const W: usize>(rows: Option<Rows<'_>>, to: &mut Lanes<T>) {
    if let Some(Rows::Single(x)) = rows {
        for (k, lanes) in to.iter_mut().enumerate().take(W) {
            *lanes = [T::read(x, k); LANES];
        }
    }
}

/// The generated chains on every lane: each output's chain (contiguous in `steps`, opened by
/// its `first` step) is accumulated in registers, then stored once; every step is the
/// generated code's product or fused multiply-add, bit for bit. (`fma(-x, y, acc)` and
/// `(-x) * y + acc` are the negated product added, however rounded, so the sign is applied to
/// the product.)
#[inline(always)]
fn apply<T: Real, const F: bool>(steps: &[Step], x: &Lanes<T>, y: &Lanes<T>, dest: &mut Lanes<T>) {
    let mut acc = [T::ZERO; LANES];
    let mut k = None;
    for s in steps {
        let xs = &x[s.i as usize & 63];
        let ys = &y[s.j as usize & 63];
        if s.first {
            if let Some(k) = k {
                dest[k & 63] = acc;
            }
            k = Some(s.k as usize);
            if s.neg {
                (0..LANES).for_each(|l| acc[l] = -xs[l] * ys[l]);
            } else {
                (0..LANES).for_each(|l| acc[l] = xs[l] * ys[l]);
            }
        } else if s.neg {
            (0..LANES).for_each(|l| acc[l] = T::madd::<F>(-xs[l], ys[l], acc[l]));
        } else {
            (0..LANES).for_each(|l| acc[l] = T::madd::<F>(xs[l], ys[l], acc[l]));
        }
    }
    if let Some(k) = k {
        dest[k & 63] = acc;
    }
}

fn pick<'a, T>(source: Source, a: &'a Lanes<T>, b: &'a Lanes<T>, t: &'a Lanes<T>) -> &'a Lanes<T> {
    match source {
        Source::A => a,
        Source::B => b,
        Source::T => t,
    }
}

impl<T: Real, const W: usize, const F: bool> Task for Products<'_, T, W, F> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let Products { stages, a, b, out, .. } = self;
        let ow = stages.last().map_or(W, |s| s.outputs);
        let n = out.len() / (ow * T::WORDS);
        let zero = [[T::ZERO; LANES]; 64];
        let (mut sa, mut sb, mut st, mut sr) = (zero, zero, zero, zero);
        splat::<T, W>(Some(a), &mut sa);
        splat::<T, W>(b, &mut sb);
        for start in (0..n).step_by(LANES) {
            let m = LANES.min(n - start);
            load::<T, W>(a, start, m, &mut sa);
            if let Some(b) = b {
                load::<T, W>(b, start, m, &mut sb);
            }
            for stage in stages {
                if stage.to_temporaries {
                    let (x, y) = (
                        pick(stage.left, &sa, &sb, &sa),
                        pick(stage.right, &sa, &sb, &sb),
                    );
                    stage
                        .zeros
                        .iter()
                        .for_each(|&z| st[z as usize] = [T::ZERO; LANES]);
                    apply::<T, F>(&stage.steps, x, y, &mut st);
                } else {
                    let (x, y) = (
                        pick(stage.left, &sa, &sb, &st),
                        pick(stage.right, &sa, &sb, &st),
                    );
                    stage
                        .zeros
                        .iter()
                        .for_each(|&z| sr[z as usize] = [T::ZERO; LANES]);
                    apply::<T, F>(&stage.steps, x, y, &mut sr);
                }
            }
            let row = ow * T::WORDS;
            let res = &mut out[start * row..(start + m) * row];
            for (l, item) in res.chunks_exact_mut(row).enumerate() {
                for (k, lanes) in sr.iter().enumerate().take(ow) {
                    T::write(item, k, lanes[l]);
                }
            }
        }
    }
}
