//! The host CPU described like an adapter: its model name (from `/proc/cpuinfo` on Linux,
//! `sysctl` on macOS, else the architecture), hardware threads, SIMD level, and the limits
//! its kernels have (none but memory, which `capabilities` reports).

use std::collections::BTreeMap;

use super::simd::Level;
use crate::adapter::{AdapterInfo, HOST_BACKEND};

/// The driver name the host device reports.
pub const DRIVER: &str = "amari-gpu host kernels";

/// Largest buffer and binding of the host device: its arrays are the caller's own, limited
/// by memory only (1 TiB stands for "no limit" without overflowing size arithmetic).
pub const MAX_BUFFER_BYTES: u64 = 1 << 40;

/// Hardware threads of the machine (at least 1).
pub fn hardware_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Bytes of the CPU's last-level cache: the largest level Linux lists under
/// `/sys/devices/system/cpu/cpu0/cache`, else 32 MiB (where outputs larger than it are
/// written past the caches, a guess elsewhere costs speed only).
pub fn last_level_cache_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        cache_levels()
            .into_iter()
            .max()
            .map_or(32 << 20, |(_, bytes)| bytes)
    })
}

/// Bytes of the caches each core keeps to itself, over every hardware thread: level 2 as
/// Linux lists it for cpu0 (else 1 MiB) times [`hardware_threads`] (an over-count where
/// two threads share a core, which only moves the size past which a call could stream).
pub fn private_cache_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        let l2 = cache_levels()
            .into_iter()
            .filter(|&(level, _)| level == 2)
            .map(|(_, bytes)| bytes)
            .max()
            .unwrap_or(1 << 20);
        l2.saturating_mul(hardware_threads())
    })
}

/// (level, bytes) of every cache Linux lists under `/sys/devices/system/cpu/cpu0/cache`
/// (none elsewhere).
fn cache_levels() -> Vec<(u32, usize)> {
    let read = |index: usize, file: &str| {
        std::fs::read_to_string(format!(
            "/sys/devices/system/cpu/cpu0/cache/index{index}/{file}"
        ))
        .ok()
    };
    let size = |text: String| {
        let text = text.trim();
        let (digits, scale) = match text.strip_suffix('K') {
            Some(d) => (d, 1 << 10),
            None => match text.strip_suffix('M') {
                Some(d) => (d, 1 << 20),
                None => (text, 1),
            },
        };
        digits
            .parse::<usize>()
            .ok()
            .map(|d| d.saturating_mul(scale))
    };
    (0..16)
        .filter_map(|i| {
            Some((
                read(i, "level")?.trim().parse::<u32>().ok()?,
                size(read(i, "size")?)?,
            ))
        })
        .collect()
}

/// The CPU's model name, or the architecture when the platform does not tell.
pub fn model_name() -> String {
    let from_os = if cfg!(target_os = "linux") {
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(key, _)| matches!(key.trim(), "model name" | "Model" | "cpu model"))
                    .map(|(_, value)| value.trim().to_string())
            })
    } else if cfg!(target_os = "macos") {
        std::process::Command::new("sysctl")
            .args(["-n", "machdep.cpu.brand_string"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    } else {
        None
    };
    from_os
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The host device as the `index`-th adapter of the enumeration.
pub fn describe(index: usize) -> AdapterInfo {
    let level = Level::detect();
    let mut limits = BTreeMap::new();
    limits.insert("threads".to_string(), hardware_threads() as u64);
    limits.insert("max_buffer_size".to_string(), MAX_BUFFER_BYTES);
    limits.insert(
        "max_storage_buffer_binding_size".to_string(),
        MAX_BUFFER_BYTES,
    );
    let mut features = vec![level.name().to_string()];
    if level.has_fma() {
        features.push("fma".to_string());
    }
    AdapterInfo {
        index,
        name: model_name(),
        vendor: String::new(),
        vendor_id: 0,
        device_id: 0,
        backend: HOST_BACKEND.to_string(),
        device_type: "cpu".to_string(),
        driver: DRIVER.to_string(),
        driver_info: format!("{} {}, simd {}", DRIVER, crate::VERSION, level.name()),
        pci_bus_id: String::new(),
        limits,
        features,
        same_device_as: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_described_as_a_cpu_adapter() {
        let info = describe(3);
        assert_eq!((info.index, info.backend.as_str()), (3, "host"));
        assert_eq!(info.device_type, "cpu");
        assert!(!info.name.is_empty());
        assert!(info.limit("threads") >= 1);
        assert_eq!(info.features[0], Level::detect().name());
    }
}
