//! What a caller asks for when opening a context: the adapters (by backend, kind or
//! index), how many logical devices on each, chunking, timeouts, the default strategy and
//! kernel timing; with the checks of the names given and the request in words.

use crate::adapter::canonical_backend;
use crate::error::{Error, Result};

/// Largest `devices_per_adapter`: each logical device is a wgpu device with its own queue,
/// worker thread and buffer pools, and opening one takes tens of milliseconds.
pub const MAX_DEVICES_PER_ADAPTER: usize = 64;

/// What the caller asked for when opening a context.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextOptions {
    /// Only adapters on these backends ("vulkan", "metal", "dx12", "gl", "host" for the host
    /// CPU device); duplicates included.
    pub backends: Option<Vec<String>>,
    /// Only adapters of these kinds ("discrete_gpu", "integrated_gpu", "virtual_gpu", "cpu", "other").
    pub device_types: Option<Vec<String>>,
    /// Exactly these adapters, by enumeration index; duplicates included.
    pub adapters: Option<Vec<usize>>,
    /// At most this many devices in all.
    pub max_devices: Option<usize>,
    /// Logical devices opened on each selected adapter (each with its own queue), 1 to
    /// [`MAX_DEVICES_PER_ADAPTER`].
    pub devices_per_adapter: usize,
    /// Items per chunk; `None` lets the context derive it from the problem size.
    pub chunk_items: Option<usize>,
    /// A device that takes longer than this to finish one chunk is treated as failed.
    pub sync_timeout_ms: Option<u64>,
    /// Default split strategy of the context's calls.
    pub strategy: crate::plan::Strategy,
    /// Kernel timing while profiling: `Some(true)` GPU timestamp queries wherever the
    /// adapter has them, `Some(false)` host timing only, `None` GPU timestamps where the
    /// measured cost of one is under 3% of a chunk's estimated time.
    pub gpu_timestamps: Option<bool>,
    /// Threads of the host device's kernels; `None`: the machine's hardware threads minus
    /// one per hardware-GPU device of the context (each has a worker thread to feed it), at
    /// least 1. CPU adapters (lavapipe, llvmpipe) keep no core: they run on the host's.
    pub host_threads: Option<usize>,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            backends: None,
            device_types: None,
            adapters: None,
            max_devices: None,
            devices_per_adapter: 1,
            chunk_items: None,
            sync_timeout_ms: None,
            strategy: crate::plan::Strategy::Auto,
            gpu_timestamps: None,
            host_threads: None,
        }
    }
}

pub(crate) fn check_names(argument: &str, given: &[String], allowed: &[&str]) -> Result<()> {
    for name in given {
        let known = if argument == "backends" {
            canonical_backend(name).is_some()
        } else {
            allowed.contains(&name.as_str())
        };
        if !known {
            return Err(Error::invalid(
                argument,
                format!("expected names from {allowed:?}, got {name:?}"),
            ));
        }
    }
    Ok(())
}

/// The caller's filters in words: "on backends metal, of types cpu, among adapters 0, 2"
/// (the message of a selection that matched nothing; never Rust debug text).
pub(crate) fn describe_request(options: &ContextOptions) -> String {
    let mut parts = Vec::new();
    if let Some(backends) = &options.backends {
        parts.push(format!("on backends {}", backends.join(", ")));
    }
    if let Some(types) = &options.device_types {
        parts.push(format!("of types {}", types.join(", ")));
    }
    if let Some(adapters) = &options.adapters {
        let list: Vec<String> = adapters.iter().map(usize::to_string).collect();
        parts.push(format!("among adapters {}", list.join(", ")));
    }
    if parts.is_empty() {
        "was selected".to_string()
    } else {
        parts.join(", ")
    }
}
