//! On-disk cache of calibration measurements, keyed by adapter identity and package
//! version, so later contexts start without measuring. Written atomically (temporary file
//! and rename) so a crash never leaves a half-written cache.
//!
//! The cache is a convenience, never a reason to fail or hang: whatever sits at its path (a
//! FIFO, a directory, a dangling symlink, an unreadable or oversized file, text that is not
//! a cache) is passed over with a warning, and the figures are measured again.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::device::GpuDevice;

/// The number changes whenever what calibration measures, or how, changes, so that figures
/// measured another way are measured again rather than reused (v2: kernel sizes found on the
/// device).
const FILE_NAME: &str = "calibration-v2.json";

/// Largest cache file read: a few kilobytes per adapter make a real one; a larger file is
/// not one of ours, and reading it whole could exhaust memory.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

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

/// Logs `message` as a warning, unless it is the one warned last: one calibration reads the
/// file once per device and group, and a bad file would otherwise repeat the same warning.
fn warn_once(message: String) {
    static LAST: Mutex<Option<String>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    if last.as_deref() == Some(message.as_str()) {
        log::debug!("{message}");
    } else {
        log::warn!("{message}");
        *last = Some(message);
    }
}

/// Opens `path` for reading without waiting on it: `O_NONBLOCK` makes opening a FIFO
/// return at once (a plain open blocks until a writer appears, forever, with Ctrl-C
/// ignored inside the call); it changes nothing for a regular file.
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// The bytes of the cache file at `path`: `Ok(None)` when there is none, `Err(why)` when
/// something is there that is not a readable regular file of at most [`MAX_FILE_BYTES`].
/// The kind is checked on the opened file (`fstat`), not on the path beforehand, so that
/// nothing swapped in between the check and the open is read.
fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, String> {
    let file = match open_nonblocking(path) {
        Ok(file) => file,
        // Nothing at the path at all (a dangling symlink is something: it is reported).
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && std::fs::symlink_metadata(path).is_err() =>
        {
            return Ok(None)
        }
        Err(e) => return Err(format!("cannot be opened ({e})")),
    };
    let metadata = file
        .metadata()
        .map_err(|e| format!("cannot be examined ({e})"))?;
    if !metadata.is_file() {
        return Err(format!("is not a regular file (a {})", kind(&metadata)));
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(format!(
            "is {} bytes, more than the {MAX_FILE_BYTES} a cache file can be",
            metadata.len()
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read ({e})"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "grew past the {MAX_FILE_BYTES} bytes a cache file can be while it was read"
        ));
    }
    Ok(Some(bytes))
}

/// What a file that is not a regular file is, in words.
fn kind(metadata: &std::fs::Metadata) -> &'static str {
    let file_type = metadata.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "FIFO";
        }
        if file_type.is_socket() {
            return "socket";
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return "device";
        }
    }
    if file_type.is_dir() {
        "directory"
    } else {
        "special file"
    }
}

/// The cache file at `path`; empty when there is none or it cannot be used, with a warning
/// for the latter when `warn` (an unusable cache is only a reason to measure again).
fn read(path: &Path, warn: bool) -> CacheFile {
    let problem = match read_bytes(path) {
        Ok(None) => return CacheFile::default(),
        Ok(Some(bytes)) => match serde_json::from_slice(&bytes) {
            Ok(file) => return file,
            // JSON has no NaN or infinity: a file holding them (written by hand, or by
            // Python's json module) fails here, as does any text that is not a cache.
            Err(e) => format!("is not a calibration cache ({e})"),
        },
        Err(problem) => problem,
    };
    if warn {
        warn_once(format!(
            "calibration cache {} {problem}; measuring again without it",
            path.display()
        ));
    }
    CacheFile::default()
}

/// Cached figures for `key`, if any (and if they still parse as `T`; an entry that does
/// not is reported and measured again).
pub fn load<T: DeserializeOwned>(key: &str) -> Option<T> {
    let path = cache_dir()?.join(FILE_NAME);
    let value = read(&path, true).entries.remove(key)?;
    match serde_json::from_value(value) {
        Ok(figures) => Some(figures),
        Err(e) => {
            warn_once(format!(
                "calibration cache entry for {key} in {} cannot be used ({e}); measuring again",
                path.display()
            ));
            None
        }
    }
}

/// Stores figures for `key`; failures to write are returned, not fatal to callers.
pub fn store<T: Serialize>(key: &str, figures: &T) -> std::io::Result<()> {
    let dir = cache_dir()
        .ok_or_else(|| std::io::Error::other("no cache directory (set AMARI_GPU_CACHE_DIR)"))?;
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(FILE_NAME);
    // Quietly: whatever is wrong with the file was reported when it was loaded, and the
    // rename below replaces it (or fails, for a directory, which the caller reports).
    let mut file = read(&path, false);
    file.entries.insert(
        key.to_string(),
        serde_json::to_value(figures).map_err(std::io::Error::other)?,
    );
    let temporary = dir.join(format!("{FILE_NAME}.{}.tmp", std::process::id()));
    std::fs::write(
        &temporary,
        serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&temporary, &path).inspect_err(|_| {
        // Nothing half-written left behind.
        let _ = std::fs::remove_file(&temporary);
    })
}

/// The cache key of `dev`'s figures: its adapter and this version (logical devices on one
/// adapter share them), and for the host device its pool's size and the build's kind (its
/// rates scale with its pool, and are the build's own: an unoptimised build measures slower).
pub(super) fn device_key(dev: &GpuDevice) -> String {
    let mut key = format!("{}|amari-gpu {}", dev.adapter.identity(), crate::VERSION);
    if let Some(host) = dev.as_host() {
        key.push_str(&format!("|threads {}", host.pool.threads()));
        if cfg!(debug_assertions) {
            key.push_str("|debug");
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "amari-gpu-cache-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_missing_file_is_no_problem_and_a_cache_is_read() {
        let dir = scratch("plain");
        assert_eq!(read_bytes(&dir.join("absent")), Ok(None));
        let path = dir.join(FILE_NAME);
        std::fs::write(&path, br#"{"entries": {"a": 1.5}}"#).unwrap();
        assert_eq!(read(&path, true).entries["a"], serde_json::json!(1.5));
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Anything but a regular file of a sane size is reported, never read whole and never
    /// waited on.
    #[test]
    fn what_is_not_a_cache_file_is_reported() {
        let dir = scratch("odd");
        let directory = dir.join("a-directory");
        std::fs::create_dir(&directory).unwrap();
        let huge = dir.join("huge");
        File::create(&huge)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let mut cases = vec![
            (directory, "not a regular file (a directory)"),
            (huge, "more than"),
        ];
        #[cfg(unix)]
        {
            let dangling = dir.join("dangling");
            std::os::unix::fs::symlink(dir.join("nowhere"), &dangling).unwrap();
            cases.push((dangling, "cannot be opened"));
        }
        for (path, expected) in cases {
            let problem = read_bytes(&path).unwrap_err();
            assert!(problem.contains(expected), "{path:?}: {problem}");
            assert!(read(&path, true).entries.is_empty());
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A FIFO at the path is reported at once: a plain open would wait for a writer forever.
    /// Read on another thread, so that a regression fails this test instead of hanging it.
    #[cfg(unix)]
    #[test]
    fn a_fifo_is_reported_without_waiting_for_a_writer() {
        let dir = scratch("fifo");
        let fifo = dir.join(FILE_NAME);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let (sender, receiver) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || sender.send(read_bytes(&path)));
        let read = receiver
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("reading a FIFO must not block");
        assert_eq!(read, Err("is not a regular file (a FIFO)".to_string()));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
