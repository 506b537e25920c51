//! What a kernel is to the executor: a WGSL entry point, how each input is bound (sliced per
//! chunk, or whole for every chunk), what it writes (per item, or one partial result per
//! chunk), extra uniform parameters and how its workgroups are laid out.
//!
//! Every kernel shares one binding layout (see `shaders/`): binding 0 is a uniform holding
//! the chunk's item count, the grid row width and the kernel's own parameters; inputs
//! follow in order; the output is last.
//!
//! Every width here (`Input::PerItem(words)`, `Output::PerChunk(words)`, the lengths of the
//! slices a host kernel gets) counts the engine's 4-byte words, whatever the kernel computes
//! in: the kernel's [`Dtype`] says what a word holds (one float32, half a float64, two
//! float16; see `crate::dtype`).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use crate::dispatch::{grid_for, WORKGROUP_SIZE};
use crate::dtype::Dtype;
use crate::family::Family;

/// Loop iterations one invocation of a built-in kernel runs at most, every trip of every
/// loop counted (each loop's exit test too). Mesa's llvmpipe and lavapipe stop an
/// invocation's loops silently once 65,535 trips have run over all of them together, so a
/// kernel whose loops grow with the problem splits them over passes ([`Kernel::passes`]) or
/// bounds its chunks ([`Kernel::max_chunk_items`]) to stay within half of that, on every
/// device: what it computes then never depends on the driver.
pub const LOOP_BUDGET: u64 = 32_768;

/// Word of the uniform header that holds the pass index (see [`Kernel::passes`]).
pub const PASS_WORD: usize = 3;

/// How `fma(a, b, c)` rounds on the devices the host must reproduce. WGSL does not require
/// `fma` to be fused: its accuracy is that of `a * b + c`. Hardware GPUs compile it to their
/// fused multiply-add (one rounding); Mesa's CPU drivers (lavapipe and llvmpipe, measured
/// with LLVM 15 on an AVX2+FMA machine) evaluate a product and a sum (two roundings). So the
/// host kernels take the mode of the devices they run beside ([`HostImpl::with_fma`]), and a
/// device's mode is measured, not assumed (see [`FmaMode::from_probe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FmaMode {
    /// One rounding: IEEE fusedMultiplyAdd (hardware GPUs; `f32::mul_add`).
    #[default]
    Fused,
    /// Two roundings, `RN(RN(a * b) + c)` (Mesa lavapipe and llvmpipe).
    Separate,
}

impl FmaMode {
    /// The operands of a probe: `fma(PROBE[0], PROBE[1], PROBE[2])` is −2⁻⁴⁶ when fused and
    /// 0 when rounded twice.
    pub const PROBE: [f32; 3] = [1.0 + f32::EPSILON, 1.0 - f32::EPSILON, -1.0];

    /// The float64 probe: `fma(PROBE_F64[0], PROBE_F64[1], PROBE_F64[2])` is −2⁻¹⁰⁴ when
    /// fused and 0 when rounded twice. A device's float64 `fma` is measured apart from its
    /// float32 one: a driver may fuse one and not the other.
    pub const PROBE_F64: [f64; 3] = [1.0 + f64::EPSILON, 1.0 - f64::EPSILON, -1.0];

    /// The mode a device's result of the probe reveals, or `None` for neither value.
    pub fn from_probe(result: f32) -> Option<FmaMode> {
        // Both values are exact in float64, so the float32 result is judged there.
        FmaMode::from_probe_f64(f64::from(result), f64::from(f32::EPSILON))
    }

    /// The mode a device's result of a probe in a type of machine epsilon `epsilon` reveals
    /// (the float64 probe: `epsilon` is `f64::EPSILON`), or `None` for neither value.
    pub fn from_probe_f64(result: f64, epsilon: f64) -> Option<FmaMode> {
        if result == -(epsilon * epsilon) {
            Some(FmaMode::Fused)
        } else if result == 0.0 {
            Some(FmaMode::Separate)
        } else {
            None
        }
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            FmaMode::Fused => "fused",
            FmaMode::Separate => "separate",
        }
    }
}

/// A kernel's implementation on the host device, written by its family beside the WGSL one
/// (`ga::host`, `tropical::host`, ...): bit-identical to the WGSL kernel when it rounds `fma`
/// as the wgpu devices beside it do.
pub trait HostImpl: std::fmt::Debug + Send + Sync {
    /// Runs items `range` of a problem whose inputs are `inputs` (bound as the WGSL kernel
    /// binds them) on the current rayon pool, writing the chunk's `output` in place.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]);
    /// The same kernel rounding `fma` as `mode` says.
    fn with_fma(&self, mode: FmaMode) -> Arc<dyn HostImpl>;
    /// Whether [`HostImpl::run`] over `items` items shares its work among the pool's
    /// threads. A fast-path call runs its kernel on the calling thread only when it does
    /// not (see `HostDevice::run`): from a thread outside every rayon pool, a split goes
    /// to rayon's global pool, whose threads then compete with the host device's for the
    /// same CPUs. Each kernel answers with the test its `run` splits by; one that does not
    /// say always runs on the pool.
    fn splits(&self, items: usize) -> bool {
        let _ = items;
        true
    }
}

/// What a kernel family is, in one place. Each family writes its own in its folder's
/// `mod.rs` (`ga::DEFINITION`, `tropical::DEFINITION`, `fisher::DEFINITION`) beside the
/// [`Family`] constant it is about (its builders name only that constant), and the crate
/// root's `families!` lists them. Calibration measures its reference kernel, the cost model
/// turns that rate into flop/s for every kernel of the family, and `Family::of` finds the
/// family of a public operation's name in it.
#[derive(Debug)]
pub struct FamilyDefinition {
    /// Which family: its name is the key of its measured rate in capabilities, the
    /// calibration cache and the model's history.
    pub family: Family,
    /// Whether a public operation's name (an entry point's, as workloads and profiles name
    /// it) is one of the family's.
    pub is_operation: fn(&str) -> bool,
    /// Builds the calibration reference kernel (with its host twin, so the host device is
    /// measured on the same kernel). A family's measured items/s on it, times
    /// `reference_flops_per_item`, is a device's arithmetic rate for every kernel of the
    /// family.
    pub reference: fn() -> Kernel,
    /// Arithmetic operations per item of the reference kernel.
    pub reference_flops_per_item: f64,
    /// Items of the first calibration dispatch; calibration grows the size from there until
    /// a dispatch takes long enough to time well on the device at hand.
    pub calibration_min_items: usize,
}

impl FamilyDefinition {
    /// The family's name ([`Family::name`]).
    pub fn name(&self) -> &'static str {
        self.family.name()
    }
}

/// How an input is bound (widths in 4-byte words; the kernel's dtype says what they hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// `words` words per item; each chunk binds its own items.
    PerItem(usize),
    /// One array of `words` words bound whole to every chunk (uploaded once per device).
    Whole(usize),
}

/// What a kernel writes (widths in 4-byte words; the kernel's dtype says what they hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// `words` words per item, written into the caller's array.
    PerItem(usize),
    /// `words` words per chunk: partial results the host combines in chunk order.
    PerChunk(usize),
}

/// How the workgroups of one chunk are laid out.
#[derive(Debug, Clone, Copy)]
pub enum Dispatch {
    /// `threads_per_item` threads per item in 64-thread workgroups, folded into two
    /// dimensions; the shader's linear thread index is `gid.y * row_threads + gid.x`.
    Linear {
        /// Threads per item.
        threads_per_item: u32,
    },
    /// A kernel-specific grid, from the chunk's item count and the kernel's parameters.
    Custom(fn(items: u32, params: &[u32]) -> [u32; 3]),
}

/// A compute kernel over items.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Pipeline-cache key; two kernels with the same id must have the same source.
    pub id: String,
    /// Kernel family: which measured rate the cost model applies.
    pub family: Family,
    /// WGSL source.
    pub source: Cow<'static, str>,
    /// Entry point name.
    pub entry: &'static str,
    /// The inputs, in binding order.
    pub inputs: Vec<Input>,
    /// The output.
    pub output: Output,
    /// Extra uniform words after the header (f32 values as their bits).
    pub params: Vec<u32>,
    /// Workgroup layout.
    pub dispatch: Dispatch,
    /// Arithmetic operations per item (for the cost model).
    pub flops_per_item: f64,
    /// The host device's implementation, bit-identical to the WGSL one (its `fma` rounding
    /// set by the device that runs it). A kernel without one is never planned on the host.
    pub host: Option<Arc<dyn HostImpl>>,
    /// Dispatches one chunk of `items` items takes (None: one). A kernel whose loops grow
    /// with a dimension of the problem walks that dimension in passes of bounded length
    /// (within [`LOOP_BUDGET`]), each dispatched over the same bindings and continuing from
    /// what the pass before it wrote; word [`PASS_WORD`] of the uniform is the pass index.
    pub passes: Option<fn(items: u32, params: &[u32]) -> u32>,
    /// Items per chunk at most, for a kernel whose loops grow with the items of a chunk
    /// (None: only the binding limit bounds a chunk). The chunk grid is cut within it on
    /// every device, so it never depends on the device set.
    pub max_chunk_items: Option<usize>,
    /// Items per chunk at least when the grid is the default sizing (None: no floor), for
    /// a kernel whose per-chunk output would otherwise outweigh its inputs (a reduction's
    /// partials); a function of the problem only, like the rest of the grid. A caller's
    /// `chunk_items` is taken as given.
    pub min_chunk_items: Option<usize>,
    /// The only devices (by id) that may run it, when its bits depend on the driver that
    /// compiles it (a user's WGSL, see `rows`); `None`: every device `GpuDevice::can_run`
    /// allows.
    pub devices: Option<Vec<usize>>,
    /// The kernel writes a value whose first word is nonzero after its per-item output when
    /// a driver cut an invocation's loops short (`rows::wrap` says how it knows); the
    /// executor binds that value ([`Kernel::loop_check_bytes`]), clears it and refuses the
    /// chunk's results when its first word is set.
    pub loop_check: bool,
    /// What the kernel computes in and its words hold (float32 unless a builder says
    /// otherwise): only devices that run the dtype are given it (`GpuDevice::can_run`).
    pub dtype: Dtype,
}

impl Kernel {
    /// An elementwise kernel: per-item inputs of the given widths, a per-item output, one
    /// thread per item.
    pub fn map(
        id: impl Into<String>,
        family: Family,
        source: impl Into<Cow<'static, str>>,
    ) -> Kernel {
        Kernel {
            id: id.into(),
            family,
            source: source.into(),
            entry: "main",
            inputs: Vec::new(),
            output: Output::PerItem(1),
            params: Vec::new(),
            dispatch: Dispatch::Linear {
                threads_per_item: 1,
            },
            flops_per_item: 1.0,
            host: None,
            passes: None,
            max_chunk_items: None,
            min_chunk_items: None,
            devices: None,
            loop_check: false,
            dtype: Dtype::F32,
        }
    }

    /// The key of the kernel's pipeline in a device's cache: its id, with the dtype after
    /// an `@` for every dtype but float32 (so a float32 kernel keeps the key it always had,
    /// and kernels of one id in two dtypes never share a pipeline).
    pub fn pipeline_key(&self) -> Cow<'_, str> {
        match self.dtype {
            Dtype::F32 => Cow::Borrowed(&self.id),
            other => Cow::Owned(format!("{}@{}", self.id, other.name())),
        }
    }

    /// Words per item over the per-item inputs.
    pub fn input_words_per_item(&self) -> usize {
        self.inputs
            .iter()
            .map(|i| if let Input::PerItem(w) = i { *w } else { 0 })
            .sum()
    }

    /// Bytes bound after the output for the loop check: one value of the kernel's dtype (a
    /// float64 value is only addressable whole), at least one word; 0 without a check.
    pub fn loop_check_bytes(&self) -> usize {
        if self.loop_check {
            self.dtype.bytes().max(4)
        } else {
            0
        }
    }

    /// Words per item of the output (0 for per-chunk outputs).
    pub fn output_words_per_item(&self) -> usize {
        match self.output {
            Output::PerItem(w) => w,
            Output::PerChunk(_) => 0,
        }
    }

    /// Bytes moved per item (per-item inputs uploaded plus per-item output read back).
    pub fn bytes_per_item(&self) -> u64 {
        4 * (self.input_words_per_item() + self.output_words_per_item()) as u64
    }

    /// The widest per-item binding, which the binding-size limit applies to.
    pub fn widest_binding_bytes_per_item(&self) -> u64 {
        let inputs = self
            .inputs
            .iter()
            .map(|i| if let Input::PerItem(w) = i { *w } else { 0 });
        4 * inputs
            .chain(std::iter::once(self.output_words_per_item()))
            .max()
            .unwrap_or(0)
            .max(1) as u64
    }

    /// Words of the output of a chunk of `items` items.
    pub fn output_words(&self, items: usize) -> usize {
        match self.output {
            Output::PerItem(w) => items * w,
            Output::PerChunk(w) => w,
        }
    }

    /// The uniform block: item count, grid row width, parameters, padded to 16 bytes.
    pub fn uniform(&self, items: u32, row_threads: u32) -> Vec<u32> {
        let mut words = vec![items, row_threads, 0, 0];
        words.extend_from_slice(&self.params);
        words.resize(words.len().div_ceil(4) * 4, 0);
        words
    }

    /// Dispatches a chunk of `items` items takes (at least one).
    pub fn pass_count(&self, items: u32) -> u32 {
        self.passes
            .map_or(1, |passes| passes(items, &self.params).max(1))
    }

    /// The uniform block of every pass of a chunk whose pass-0 block is `header`: the same
    /// words with the pass index in word [`PASS_WORD`].
    pub fn pass_uniforms(&self, header: &[u32]) -> Vec<Vec<u32>> {
        (0..self.pass_count(header[0]))
            .map(|pass| {
                let mut words = header.to_vec();
                words[PASS_WORD] = pass;
                words
            })
            .collect()
    }

    /// The workgroup grid and grid row width for a chunk of `items` items.
    pub fn grid(&self, items: u32, max_per_dimension: u32) -> Option<([u32; 3], u32)> {
        match self.dispatch {
            Dispatch::Linear { threads_per_item } => {
                let g = grid_for(
                    u64::from(items) * u64::from(threads_per_item),
                    max_per_dimension,
                )?;
                Some(([g.x, g.y, 1], g.x * WORKGROUP_SIZE))
            }
            Dispatch::Custom(f) => {
                let g = f(items, &self.params);
                g.iter().all(|&d| d <= max_per_dimension).then_some((g, 0))
            }
        }
    }

    /// Words input `index` must hold for a problem of `items` items.
    pub fn input_len(&self, index: usize, items: usize) -> usize {
        match self.inputs[index] {
            Input::PerItem(w) => items * w,
            Input::Whole(w) => w,
        }
    }

    /// Inputs filled with `value` for a problem of `items` items (for calibration runs).
    pub fn filled_inputs(&self, items: usize, value: f32) -> Vec<Vec<f32>> {
        (0..self.inputs.len())
            .map(|i| vec![value; self.input_len(i, items)])
            .collect()
    }

    /// The workload of running this kernel over `items` items, labelled `family/id` for
    /// profiles.
    pub fn workload(&self, items: usize) -> crate::workload::Workload {
        crate::workload::Workload {
            kernel: format!("{}/{}", self.family, self.id),
            family: Some(self.family),
            items: items as u64,
            bytes_in_per_item: 4.0 * self.input_words_per_item() as f64,
            bytes_out_per_item: 4.0 * self.output_words_per_item() as f64,
            flops_per_item: self.flops_per_item,
            dtype: self.dtype,
        }
    }
}
