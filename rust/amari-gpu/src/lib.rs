//! amari-gpu: geometric-algebra, tropical and information-geometry batch kernels on every
//! GPU of the machine, of any vendor, through wgpu.
//!
//! The crate knows nothing of Python; `amari-gpu-py` wraps it. Start with [`adapters`] to
//! see what the machine has and [`MultiGpuContext`] to open devices on it.

pub mod adapter;
pub mod cache;
pub mod calibrate;
pub mod capabilities;
pub mod chunks;
pub mod concurrency;
pub mod context;
pub mod device;
pub mod dispatch;
pub mod domain;
pub mod error;
pub mod executor;
pub mod families;
pub mod fisher;
pub mod ga;
pub mod health;
pub mod history;
pub mod host;
pub mod kernel;
pub mod model;
pub mod partition;
pub mod plan;
pub mod pool;
pub mod profile;
pub mod raw;
pub mod sample;
pub mod scheduler;
pub mod selection;
pub mod shaders;
pub mod tropical;
pub mod worker;
pub mod workload;

pub use adapter::AdapterInfo;
pub use context::{adapters, instance, MultiGpuContext};
pub use device::GpuDevice;
pub use error::{Error, Result};
pub use model::DeviceModel;
pub use plan::{DeviceWorkload, Plan, Strategy};
pub use selection::ContextOptions;
pub use workload::Workload;

/// Version of the crate (and of the Python package built from it).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
