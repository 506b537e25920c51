//! Per-device buffer pool: buffers are looked up by usage and size class and handed back
//! after use, so repeated calls allocate nothing (the pattern of wgpu's `repeated_compute`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Bytes a pool keeps idle at most; beyond that returned buffers are dropped.
const MAX_IDLE_BYTES: u64 = 512 << 20;

/// Sizes are rounded up to a power of two (at least 4 KiB) so that chunks of slightly
/// different lengths share buffers; a size whose class would pass the device's buffer limit
/// keeps its own (4-byte aligned) size instead.
pub fn size_class(bytes: u64, max_buffer: u64) -> u64 {
    let class = bytes.max(4096).next_power_of_two();
    if class <= max_buffer {
        class
    } else {
        bytes.div_ceil(4) * 4
    }
}

#[derive(Default)]
struct Idle {
    buffers: HashMap<(u32, u64), Vec<wgpu::Buffer>>,
    bytes: u64,
    /// Bytes of every buffer the pool created that still exists (idle or on loan).
    live: u64,
    /// How many buffers `live` counts, and how many of them are idle.
    live_count: usize,
    idle_count: usize,
}

/// A pool of idle buffers for one device.
#[derive(Clone)]
pub struct BufferPool {
    idle: Arc<Mutex<Idle>>,
    /// The device's largest buffer, which size classes must not pass.
    max_buffer: u64,
}

/// A buffer on loan from a pool; goes back when dropped.
pub struct Pooled {
    buffer: Option<wgpu::Buffer>,
    pool: BufferPool,
}

impl std::ops::Deref for Pooled {
    type Target = wgpu::Buffer;
    fn deref(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("buffer present until drop")
    }
}

impl Pooled {
    /// Destroys the buffer instead of returning it: used when a device failed with the
    /// buffer possibly still in use.
    pub fn discard(mut self) {
        if let Some(buffer) = self.buffer.take() {
            let mut idle = self.pool.idle.lock().expect("pool lock");
            idle.live -= buffer.size();
            idle.live_count -= 1;
        }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool.give_back(buffer);
        }
    }
}

impl BufferPool {
    /// An empty pool for a device whose largest buffer is `max_buffer` bytes.
    pub fn new(max_buffer: u64) -> Self {
        BufferPool {
            idle: Arc::default(),
            max_buffer,
        }
    }

    /// A buffer of at least `bytes` with exactly `usage`.
    pub fn take(&self, device: &wgpu::Device, bytes: u64, usage: wgpu::BufferUsages) -> Pooled {
        let class = size_class(bytes, self.max_buffer);
        let reused = {
            let mut idle = self.idle.lock().expect("pool lock");
            let found = idle
                .buffers
                .get_mut(&(usage.bits(), class))
                .and_then(Vec::pop);
            if found.is_some() {
                idle.bytes -= class;
                idle.idle_count -= 1;
            }
            found
        };
        let buffer = reused.unwrap_or_else(|| {
            let mut idle = self.idle.lock().expect("pool lock");
            idle.live += class;
            idle.live_count += 1;
            drop(idle);
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("amari-gpu pooled"),
                size: class,
                usage,
                mapped_at_creation: false,
            })
        });
        Pooled {
            buffer: Some(buffer),
            pool: self.clone(),
        }
    }

    fn give_back(&self, buffer: wgpu::Buffer) {
        let class = buffer.size();
        let mut idle = self.idle.lock().expect("pool lock");
        if idle.bytes + class > MAX_IDLE_BYTES {
            idle.live -= class;
            idle.live_count -= 1;
            return;
        }
        idle.bytes += class;
        idle.idle_count += 1;
        idle.buffers
            .entry((buffer.usage().bits(), class))
            .or_default()
            .push(buffer);
    }

    /// Bytes currently held idle.
    pub fn idle_bytes(&self) -> u64 {
        self.idle.lock().expect("pool lock").bytes
    }

    /// Bytes of all buffers the pool created that still exist (idle or in use).
    pub fn live_bytes(&self) -> u64 {
        self.idle.lock().expect("pool lock").live
    }

    /// Buffers the pool created that still exist (idle or on loan).
    pub fn live_buffers(&self) -> usize {
        self.idle.lock().expect("pool lock").live_count
    }

    /// Buffers currently held idle.
    pub fn idle_buffers(&self) -> usize {
        self.idle.lock().expect("pool lock").idle_count
    }

    /// Drops every idle buffer (after a failure nothing from the device is reused).
    pub fn clear(&self) {
        let mut idle = self.idle.lock().expect("pool lock");
        let dropped = idle.bytes;
        idle.buffers.clear();
        idle.bytes = 0;
        idle.live -= dropped;
        idle.live_count -= idle.idle_count;
        idle.idle_count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_round_up_to_powers_of_two() {
        assert_eq!(size_class(0, 1 << 30), 4096);
        assert_eq!(size_class(4097, 1 << 30), 8192);
        assert_eq!(size_class(1 << 20, 1 << 30), 1 << 20);
        assert_eq!(size_class((1 << 29) + 2, (1 << 29) + 100), (1 << 29) + 4);
    }
}
