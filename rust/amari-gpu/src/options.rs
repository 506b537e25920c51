//! What a caller asks for when opening a context: the adapters (by backend, kind or
//! index), how many logical devices on each, chunking, timeouts, the default strategy and
//! kernel timing; with the checks of the names given, the one check of every number's range
//! (each bounded where a larger value could never work), and the request in words.

use crate::adapter::canonical_backend;
use crate::error::{Error, Result};

/// Largest `devices_per_adapter`: each logical device is a wgpu device with its own queue,
/// worker thread and buffer pools, and opening one takes tens of milliseconds.
pub const MAX_DEVICES_PER_ADAPTER: usize = 64;

/// Largest `chunk_items`: a kernel is told its chunk's item count as a WGSL `u32`, so a
/// larger chunk could never run on any device.
pub const MAX_CHUNK_ITEMS: usize = u32::MAX as usize;

/// Host device threads allowed per hardware thread: a few more threads than cores can hide
/// stalls, thousands only cost (5000 threads took 27 s to open a context and 185 s for its
/// first call on a 2-core machine).
pub const HOST_THREADS_PER_HARDWARE_THREAD: usize = 4;

/// Largest `sync_timeout_ms`: one day. A chunk is small work (tens of megabytes); a longer
/// wait is no timeout at all (pass `None`), and deadlines past it would overflow the clock.
pub const MAX_SYNC_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// Largest `host_threads` on this machine: [`HOST_THREADS_PER_HARDWARE_THREAD`] times its
/// hardware threads.
pub fn max_host_threads() -> usize {
    crate::host::cpu::hardware_threads().saturating_mul(HOST_THREADS_PER_HARDWARE_THREAD)
}

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
    /// Items per chunk, 1 to [`MAX_CHUNK_ITEMS`]; `None` lets the context derive it from
    /// the problem size.
    pub chunk_items: Option<usize>,
    /// A device that takes longer than this to finish one chunk is treated as failed;
    /// 1 to [`MAX_SYNC_TIMEOUT_MS`].
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
    /// Given, it is 1 to [`max_host_threads`].
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

impl ContextOptions {
    /// Checks every number against its range, before anything is opened: a value out of
    /// range is an [`Error::InvalidArgument`] naming the option, the range and the value.
    /// (`max_devices` only caps the count: any value from 1 is meaningful.)
    pub fn check(&self) -> Result<()> {
        let device_count = Some(self.devices_per_adapter as u64);
        in_range(
            "devices_per_adapter",
            device_count,
            MAX_DEVICES_PER_ADAPTER as u64,
            "",
        )?;
        let max_devices = self.max_devices.map(|n| n as u64);
        in_range("max_devices", max_devices, u64::MAX, " or None")?;
        let chunk_items = self.chunk_items.map(|n| n as u64);
        in_range(
            "chunk_items",
            chunk_items,
            MAX_CHUNK_ITEMS as u64,
            " or None",
        )?;
        let host_threads = self.host_threads.map(|n| n as u64);
        let note = format!(
            " or None ({HOST_THREADS_PER_HARDWARE_THREAD} per hardware thread of this machine, \
             which has {})",
            crate::host::cpu::hardware_threads()
        );
        in_range(
            "host_threads",
            host_threads,
            max_host_threads() as u64,
            &note,
        )?;
        in_range(
            "sync_timeout_ms",
            self.sync_timeout_ms,
            MAX_SYNC_TIMEOUT_MS,
            " or None",
        )
    }
}

/// `value` (when given) within `1..=max`, else an error naming `argument`, the range (with
/// `note` after it) and the value.
fn in_range(argument: &str, value: Option<u64>, max: u64, note: &str) -> Result<()> {
    match value {
        Some(v) if v == 0 || v > max => {
            let range = if max == u64::MAX {
                "an integer >= 1".to_string()
            } else {
                format!("an integer from 1 to {max}")
            };
            Err(Error::invalid(
                argument,
                format!("expected {range}{note}, got {v}"),
            ))
        }
        _ => Ok(()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(options: ContextOptions) -> (String, String) {
        match options.check() {
            Err(Error::InvalidArgument { argument, message }) => (argument, message),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    /// Every number out of its range is refused at construction, naming the option, the
    /// range and the value (before, `chunk_items = 2**64 - 1` opened a context on which every
    /// call failed, and `host_threads = 5000` took 27 s to open).
    #[test]
    fn numbers_out_of_range_name_the_option_the_range_and_the_value() {
        let most_threads = max_host_threads();
        let cases: Vec<(ContextOptions, &str, String, String)> = vec![
            (
                ContextOptions {
                    devices_per_adapter: 0,
                    ..Default::default()
                },
                "devices_per_adapter",
                "from 1 to 64".into(),
                "got 0".into(),
            ),
            (
                ContextOptions {
                    devices_per_adapter: 65,
                    ..Default::default()
                },
                "devices_per_adapter",
                "from 1 to 64".into(),
                "got 65".into(),
            ),
            (
                ContextOptions {
                    max_devices: Some(0),
                    ..Default::default()
                },
                "max_devices",
                ">= 1 or None".into(),
                "got 0".into(),
            ),
            (
                ContextOptions {
                    chunk_items: Some(usize::MAX),
                    ..Default::default()
                },
                "chunk_items",
                format!("from 1 to {}", u32::MAX),
                format!("got {}", usize::MAX),
            ),
            (
                ContextOptions {
                    chunk_items: Some(0),
                    ..Default::default()
                },
                "chunk_items",
                format!("from 1 to {}", u32::MAX),
                "got 0".into(),
            ),
            (
                ContextOptions {
                    host_threads: Some(most_threads + 1),
                    ..Default::default()
                },
                "host_threads",
                format!("from 1 to {most_threads} or None (4 per hardware thread"),
                format!("got {}", most_threads + 1),
            ),
            (
                ContextOptions {
                    host_threads: Some(0),
                    ..Default::default()
                },
                "host_threads",
                format!("from 1 to {most_threads}"),
                "got 0".into(),
            ),
            (
                ContextOptions {
                    sync_timeout_ms: Some(u64::MAX),
                    ..Default::default()
                },
                "sync_timeout_ms",
                format!("from 1 to {MAX_SYNC_TIMEOUT_MS}"),
                format!("got {}", u64::MAX),
            ),
        ];
        for (options, argument, range, value) in cases {
            let (a, message) = refused(options);
            assert_eq!(a, argument);
            assert!(message.contains(&range), "{message} should say {range}");
            assert!(
                message.ends_with(&value),
                "{message} should end with {value}"
            );
        }
    }

    #[test]
    fn the_bounds_themselves_are_accepted() {
        let options = ContextOptions {
            devices_per_adapter: MAX_DEVICES_PER_ADAPTER,
            max_devices: Some(usize::MAX),
            chunk_items: Some(MAX_CHUNK_ITEMS),
            host_threads: Some(max_host_threads()),
            sync_timeout_ms: Some(MAX_SYNC_TIMEOUT_MS),
            ..Default::default()
        };
        assert_eq!(options.check(), Ok(()));
        assert_eq!(ContextOptions::default().check(), Ok(()));
    }
}
