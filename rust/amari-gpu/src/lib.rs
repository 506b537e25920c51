//! amari-gpu: geometric-algebra, tropical and information-geometry batch kernels on every
//! GPU of the machine, of any vendor, through wgpu.
//!
//! The crate knows nothing of Python; `amari-gpu-py` wraps it. Start with [`adapters`] to
//! see what the machine has and [`MultiGpuContext`] to open devices on it.

/// Declares the kernel families' folders, one line each, in measuring order (the first one
/// also sizes calibration's transfer and group-speedup runs), and lists them: each folder's
/// `DEFINITION` for calibration and `Family::of`, and with the engine's own families
/// [`Family::ALL`].
macro_rules! families {
    ($(pub mod $family:ident;)+) => {
        $(pub mod $family;)+

        impl Family {
            /// Every family: the kernel families in measuring order, then the engine's own.
            pub const ALL: [Family; [$(stringify!($family)),+].len() + 3] = [
                $($family::DEFINITION.family,)+
                Family::Stencil,
                Family::Probe,
                Family::Rows,
            ];

            /// The kernel families' definitions, in measuring order.
            pub(crate) const DEFINITIONS: [&'static kernel::FamilyDefinition;
                [$(stringify!($family)),+].len()] = [$(&$family::DEFINITION),+];
        }
    };
}

// The kernel families: a new family is its folder and one line here.
families! {
    pub mod ga;
    pub mod fisher;
    pub mod tropical;
    pub mod elementwise;
}

// The public modules: what users of the crate call. The rest are the engine's internals;
// the benches reach the raw-wgpu baseline through the `bench-support` feature.
pub mod adapter;
mod alloc;
mod calibration;
pub mod call_threads;
pub mod capabilities;
mod chunks;
pub mod context;
mod device;
mod dispatch;
pub mod domain;
pub mod dtype;
mod error;
mod family;
mod gpu_io;
mod health;
mod history;
pub mod host;
mod interrupt;
pub mod kernel;
mod model;
mod open;
mod options;
pub mod partition;
mod passes;
mod plan;
mod pool;
pub mod profile;
// Calibration times its resident kernels with the raw path; the benches compare against it.
#[cfg(feature = "bench-support")]
pub mod raw;
#[cfg(not(feature = "bench-support"))]
mod raw;
mod resident;
pub mod rows;
mod runner;
pub mod sample;
mod scheduler;
mod selection;
pub mod shaders;
mod worker;
mod workload;

pub use adapter::AdapterInfo;
pub use calibration::limits::{measure as measure_limits, DeviceLimits};
pub use chunks::chunk_items_for;
pub use context::{adapters, instance, MultiGpuContext};
pub use device::{DeviceKind, GpuDevice, WgpuDevice};
pub use dtype::Dtype;
pub use error::{Error, Result};
pub use family::Family;
pub use health::CounterSnapshot;
pub use interrupt::Interrupt;
pub use model::DeviceModel;
pub use options::ContextOptions;
pub use plan::{DeviceWorkload, Plan, Strategy};
pub use resident::{Destination, Operand as ResidentOperand, Outcome, Ready, ResidentArray};
pub use selection::{LeftOut, Selection};
pub use workload::Workload;

/// Version of the crate (and of the Python package built from it).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
