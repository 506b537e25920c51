//! Kernels for the generated operations: one per algebra, operation, broadcast (a single
//! multivector is bound whole, uploaded once per device) and dtype, each built once per
//! process and kept.

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

/// Arithmetic per item, for the cost model: a multiply and an add per product term (per
/// entry of the map of a sandwich by one rotor).
fn flops_per_item(algebra: &Algebra, op: Operation, broadcast: Broadcast) -> f64 {
    let blades = algebra.blades() as f64;
    match op {
        Operation::Geometric | Operation::Outer | Operation::Inner | Operation::Scalar => {
            2.0 * product_terms(algebra, op).len() as f64
        }
        _ if broadcast.is_map(op) => {
            let blades = op.blades(algebra);
            let named = |b: usize| blades.column(b).is_some();
            2.0 * entries(algebra).iter().filter(|e| named(e.k) && named(e.i)).count() as f64
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
/// Built once per process and key: a tiny call would otherwise spend microseconds
/// re-deriving the product terms and formatting ids on every call.
pub fn kernel(algebra: &Algebra, op: Operation, broadcast: Broadcast, dtype: Dtype) -> Kernel {
    type Key = (Algebra, Operation, Broadcast, Dtype);
    static KERNELS: OnceLock<Mutex<HashMap<Key, Kernel>>> = OnceLock::new();
    let key = (*algebra, op, broadcast, dtype);
    let mut kernels = KERNELS.get_or_init(Default::default).lock().expect("GA kernel cache");
    kernels
        .entry(key)
        .or_insert_with(|| build(algebra, op, broadcast, dtype))
        .clone()
}

/// Builds the kernel of `op` in `algebra` computing in `dtype`: its host program (the
/// product terms) and its generated source.
fn build(algebra: &Algebra, op: Operation, broadcast: Broadcast, dtype: Dtype) -> Kernel {
    let id = kernel_id(algebra, op, broadcast);
    // Widths in words: two per float64 value, half a word per float16 one (checked even).
    let words = |slot| dtype.words_of(op.input_words(slot, algebra));
    let inputs = (0..op.operands().len())
        .map(|slot| match (slot, broadcast) {
            // A sandwich by one rotor binds its map M (k × k values for rows of k blades, in
            // the dtype the kernel computes in: float32 for float16 rows) in place of the rotor.
            (0, _) if broadcast.is_map(op) => {
                let k = op.blades(algebra).len();
                Input::Whole(k * dtype.compute().words_of(k))
            }
            (0, Broadcast::Left) | (1, Broadcast::Right) => Input::Whole(words(slot)),
            _ => Input::PerItem(words(slot)),
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
    // Built once per process and key (see `kernel`), like the pipelines compiled from it:
    // the source is leaked into a `&'static str` rather than copied into every clone.
    let source: &'static str = Box::leak(generate(algebra, op, broadcast, dtype).into_boxed_str());
    kernel.source = source.into();
    kernel.flops_per_item = flops_per_item(algebra, op, broadcast);
    kernel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_is_built_once_per_key() {
        let cl3 = Algebra::new(3, 0, 0).expect("Cl(3,0)");
        let first = kernel(&cl3, Operation::Geometric, Broadcast::None, Dtype::F32);
        let again = kernel(&cl3, Operation::Geometric, Broadcast::None, Dtype::F32);
        // The same leaked source, not a second generation of it.
        assert!(std::ptr::eq(first.source.as_ref(), again.source.as_ref()));
        assert!(Arc::ptr_eq(
            first.host.as_ref().expect("host twin"),
            again.host.as_ref().expect("host twin")
        ));
        // Other keys get their own kernels.
        let f64k = kernel(&cl3, Operation::Geometric, Broadcast::None, Dtype::F64);
        assert_eq!(f64k.dtype, Dtype::F64);
        assert_ne!(first.source, f64k.source);
        let outer = kernel(&cl3, Operation::Outer, Broadcast::None, Dtype::F32);
        assert_ne!(first.source, outer.source);
    }
}
