//! [`HostKernel`]: the host twin of one WGSL kernel, built by the family's kernel builder
//! from the same description, and what a [`crate::kernel::Kernel`] holds as its host
//! implementation ([`HostImpl`]).

use std::ops::Range;
use std::sync::Arc;

use super::arith::FmaMode;
use super::cl3::Cl3Product;
use super::fisher::FisherSyrk;
use super::ga::GaKernel;
use super::maps::FisherMap;
use super::tropical::{TropicalMatvec, TropicalProduct};
use crate::kernel::HostImpl;

/// A kernel the host device runs per chunk: the host twin of one WGSL kernel.
#[derive(Debug, Clone)]
pub enum HostKernel {
    /// A generated geometric-algebra kernel.
    Ga(GaKernel),
    /// The static Cl(3,0) product (`ga::cl3`), which has no `fma`.
    Cl3(Cl3Product),
    /// A tropical matrix product over row blocks (`tropical::kernels::tiled`).
    TropicalProduct(TropicalProduct),
    /// A tropical matrix-vector product over rows (`tropical::kernels::matvec`).
    TropicalMatvec(TropicalMatvec),
    /// The empirical-Fisher SYRK, one partial per chunk (`fisher::shaped_kernel`).
    FisherSyrk(FisherSyrk),
    /// A per-sample Fisher map (softmax, categorical, Gaussian).
    FisherMap(FisherMap),
}

impl HostKernel {
    /// Runs items `range` on the current rayon pool (see [`super::HostPool::run`]).
    pub fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        match self {
            HostKernel::Ga(k) => k.run(inputs, range, output),
            HostKernel::Cl3(k) => k.run(inputs, range, output),
            HostKernel::TropicalProduct(k) => k.run(inputs, range, output),
            HostKernel::TropicalMatvec(k) => k.run(inputs, range, output),
            HostKernel::FisherSyrk(k) => k.run(inputs, range, output),
            HostKernel::FisherMap(k) => k.run(inputs, range, output),
        }
    }

    /// The same kernel rounding `fma` as `mode` says (the mode of the devices it must agree
    /// with; kernels without `fma` are unchanged).
    pub fn with_fma(&self, mode: FmaMode) -> HostKernel {
        let mut k = self.clone();
        match &mut k {
            HostKernel::Ga(g) => g.fma = mode,
            HostKernel::FisherSyrk(f) => f.fma = mode,
            HostKernel::FisherMap(FisherMap::CategoricalOuter { fma, .. }) => *fma = mode,
            HostKernel::Cl3(_)
            | HostKernel::TropicalProduct(_)
            | HostKernel::TropicalMatvec(_)
            | HostKernel::FisherMap(_) => {}
        }
        k
    }
}

impl HostImpl for HostKernel {
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        HostKernel::run(self, inputs, range, output);
    }

    fn with_fma(&self, mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(HostKernel::with_fma(self, mode))
    }
}
