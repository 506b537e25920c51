//! Kernels for the generated operations: one per algebra, operation, broadcast (a single
//! multivector is bound whole, uploaded once per device) and dtype, from a process-wide cache
//! of generated sources.

use std::sync::Arc;

use crate::ga::host::GaKernel;
use crate::dtype::Dtype;
use crate::kernel::FmaMode;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::algebra::Algebra;
use super::codegen::{generate, Broadcast};
use super::operation::{product_terms, sandwich_terms, Operation};
use super::sandwich_map::entries;
use crate::family::Family;
use crate::kernel::{Input, Kernel, Output};

/// Kernel id: algebra, operation and broadcast, so the per-device pipeline cache (keyed by
/// id) holds one pipeline per generated source.
pub fn kernel_id(algebra: &Algebra, op: Operation, broadcast: Broadcast) -> String {
    let (p, q, r) = algebra.signature();
    format!("ga_cl{p}{q}{r}_{}_{}", op.name(), broadcast.name())
}

/// The generated source and arithmetic per item of kernel `id`, made once per process.
/// Sources are kept for the life of the process like the pipelines compiled from them, so
/// they are leaked into `&'static str`s instead of being copied into every kernel.
fn generated(id: &str, make: impl FnOnce() -> (String, f64)) -> (&'static str, f64) {
    static GENERATED: OnceLock<Mutex<HashMap<String, (&'static str, f64)>>> = OnceLock::new();
    let mut generated = GENERATED
        .get_or_init(Default::default)
        .lock()
        .expect("generated-kernel cache");
    *generated.entry(id.to_string()).or_insert_with(|| {
        let (source, flops) = make();
        (Box::leak(source.into_boxed_str()), flops)
    })
}

/// Arithmetic per item, for the cost model: a multiply and an add per product term (per
/// entry of the map of a sandwich by one rotor).
fn flops_per_item(algebra: &Algebra, op: Operation, broadcast: Broadcast) -> f64 {
    let blades = algebra.blades() as f64;
    match op {
        Operation::Geometric | Operation::Outer | Operation::Inner | Operation::Scalar => {
            2.0 * product_terms(algebra, op).len() as f64
        }
        Operation::Sandwich if broadcast == Broadcast::Left => {
            2.0 * entries(algebra).len() as f64
        }
        Operation::Sandwich => {
            let (first, second) = sandwich_terms(algebra);
            2.0 * (first.len() + second.len()) as f64
        }
        // abs, max, divide, square and add per word, a division per word for the result.
        Operation::Normalize => 6.0 * blades,
        _ => blades,
    }
}

/// The kernel of `op` in `algebra` computing in `dtype` (the operation must have passed
/// [`Operation::check`] and [`Operation::check_dtype`]). Its id is the same in every dtype;
/// the dtype is its own field (pipelines are cached by both, see `Kernel::pipeline_key`).
pub fn kernel(algebra: &Algebra, op: Operation, broadcast: Broadcast, dtype: Dtype) -> Kernel {
    let id = kernel_id(algebra, op, broadcast);
    // Widths in words: two per float64 value, half a word per float16 one (checked even).
    let words = dtype.words_of(algebra.blades());
    let inputs = (0..op.operands().len())
        .map(|slot| match (slot, broadcast) {
            // A sandwich by one rotor binds its map M (blades × blades values, in the dtype
            // the kernel computes in: float32 for float16 rows) in place of the rotor.
            (0, Broadcast::Left) if op == Operation::Sandwich => {
                Input::Whole(algebra.blades() * dtype.compute().words_of(algebra.blades()))
            }
            (0, Broadcast::Left) | (1, Broadcast::Right) => Input::Whole(words),
            _ => Input::PerItem(words),
        })
        .collect();
    let mut kernel = Kernel {
        inputs,
        output: Output::PerItem(dtype.words_of(op.output_words(algebra))),
        host: Some(Arc::new(
            GaKernel::new(*algebra, op, broadcast, FmaMode::default()).in_dtype(dtype),
        )),
        dtype,
        ..Kernel::map(id, Family::GeometricAlgebra, "")
    };
    let (source, flops) = generated(&kernel.pipeline_key(), || {
        (
            generate(algebra, op, broadcast, dtype),
            flops_per_item(algebra, op, broadcast),
        )
    });
    kernel.source = source.into();
    kernel.flops_per_item = flops;
    kernel
}
