//! On-disk cache of calibration measurements, keyed by adapter identity and package
//! version, so later contexts start without measuring. Written atomically (temporary file
//! and rename) so a crash never leaves a half-written cache.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The number changes whenever what calibration measures, or how, changes, so that figures
/// measured another way are measured again rather than reused (v2: kernel sizes found on the
/// device).
const FILE_NAME: &str = "calibration-v2.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    entries: BTreeMap<String, serde_json::Value>,
}

/// The cache directory: `AMARI_GPU_CACHE_DIR`, else the platform's user cache dir.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("AMARI_GPU_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let base = if cfg!(target_os = "macos") {
        home.map(|h| h.join("Library/Caches"))
    } else if cfg!(windows) {
        std::env::var_os("LOCALAPPDATA").map(PathBuf::from)
    } else {
        std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".cache")))
    };
    base.map(|b| b.join("amari-gpu"))
}

fn read(path: &PathBuf) -> CacheFile {
    // A missing or unreadable cache is only a reason to measure again.
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Cached figures for `key`, if any (and if they still parse as `T`).
pub fn load<T: DeserializeOwned>(key: &str) -> Option<T> {
    let path = cache_dir()?.join(FILE_NAME);
    serde_json::from_value(read(&path).entries.remove(key)?).ok()
}

/// Stores figures for `key`; failures to write are returned, not fatal to callers.
pub fn store<T: Serialize>(key: &str, figures: &T) -> std::io::Result<()> {
    let dir = cache_dir()
        .ok_or_else(|| std::io::Error::other("no cache directory (set AMARI_GPU_CACHE_DIR)"))?;
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(FILE_NAME);
    let mut file = read(&path);
    file.entries.insert(
        key.to_string(),
        serde_json::to_value(figures).map_err(std::io::Error::other)?,
    );
    let temporary = dir.join(format!("{FILE_NAME}.{}.tmp", std::process::id()));
    std::fs::write(
        &temporary,
        serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&temporary, &path)
}
