//! Per-device buffer pool: buffers are looked up by usage and size class and handed back
//! after use, so repeated calls allocate nothing (the pattern of wgpu's `repeated_compute`);
//! and the bind groups made over its buffers, kept for as long as the pool keeps every
//! buffer they bind, so that a call repeated on the same buffers makes no bind group.
//! Upload staging (`MAP_WRITE | COPY_SRC`) is pooled too, mapped while idle: a submission
//! takes one, writes its uploads into it and hands it back mapped again once the submission
//! has run ([`Pooled::recall_on_submit`], the pattern of wgpu's `StagingBelt`), so no upload
//! creates a buffer (as `Queue::write_buffer` does on every call).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Bytes a pool keeps idle at most; beyond that returned buffers are dropped.
const MAX_IDLE_BYTES: u64 = 512 << 20;

/// Bind groups a pool keeps at most. A loop of calls binds a handful of buffer sets; past
/// the bound the cache starts over (a bind group holds its buffers alive, so the cache
/// never keeps one the pool has let go of, and the bound keeps its own size small).
const MAX_BIND_GROUPS: usize = 256;

/// A bind group's layout and, per entry, its binding, buffer, offset and size.
type GroupKey = (
    wgpu::BindGroupLayout,
    Vec<(u32, wgpu::Buffer, u64, Option<u64>)>,
);

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
    /// The buffers `live` counts (the pool's own, idle or on loan), and how many are idle.
    ours: HashSet<wgpu::Buffer>,
    idle_count: usize,
    /// Bind groups over the pool's own buffers only, forgotten when one of them goes.
    groups: HashMap<GroupKey, wgpu::BindGroup>,
    /// Bind groups looked up in `groups` and found there.
    group_hits: u64,
    /// Upload staging buffers handed out, and how many of those were reused mapped.
    staged: u64,
    staged_reused: u64,
    /// How many times the pool was cleared: staging recalled across a clear is let go.
    clears: u64,
}

impl Idle {
    /// Stops counting `buffer` as the pool's: it is dropped (or discarded) now, and so is
    /// every bind group over it.
    fn let_go(&mut self, buffer: &wgpu::Buffer) {
        self.live -= buffer.size();
        self.ours.remove(buffer);
        self.groups
            .retain(|(_, entries), _| entries.iter().all(|(_, b, _, _)| b != buffer));
    }
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
            self.pool.let_go(&buffer);
        }
    }

    /// Hands an upload staging buffer, unmapped after its writes, back to the pool once the
    /// submission of `encoder` has run and it is mapped again; a buffer whose mapping fails
    /// (a lost device), whose encoder is never submitted or whose pool was cleared since
    /// (a failed device) is let go instead, so the pool never hands out dead staging.
    pub fn recall_on_submit(mut self, encoder: &wgpu::CommandEncoder) {
        let Some(buffer) = self.buffer.take() else {
            return;
        };
        let clears = self.pool.idle.lock().expect("pool lock").clears;
        let recall = Recall {
            buffer: Some(buffer.clone()),
            pool: self.pool.clone(),
        };
        encoder.map_buffer_on_submit(&buffer, wgpu::MapMode::Write, .., move |mapped| {
            let mut recall = recall;
            // After a failure (a clear) nothing from before it is reused.
            let cleared = recall.pool.idle.lock().expect("pool lock").clears != clears;
            if mapped.is_ok() && !cleared {
                if let Some(buffer) = recall.buffer.take() {
                    recall.pool.give_back(buffer);
                }
            }
        });
    }
}

/// An upload staging buffer on its way back to the pool; let go if dropped on the way.
struct Recall {
    buffer: Option<wgpu::Buffer>,
    pool: BufferPool,
}

impl Drop for Recall {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool.let_go(&buffer);
        }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            // Upload staging comes back mapped, by `recall_on_submit`, or not at all.
            if buffer.usage().contains(wgpu::BufferUsages::MAP_WRITE) {
                self.pool.let_go(&buffer);
            } else {
                self.pool.give_back(buffer);
            }
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

    /// A buffer of at least `bytes` with exactly `usage`. A `MAP_WRITE` buffer comes mapped
    /// (created so, or recalled so by [`Pooled::recall_on_submit`]).
    pub fn take(&self, device: &wgpu::Device, bytes: u64, usage: wgpu::BufferUsages) -> Pooled {
        let upload = usage.contains(wgpu::BufferUsages::MAP_WRITE);
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
            if upload {
                idle.staged += 1;
                idle.staged_reused += u64::from(found.is_some());
            }
            found
        };
        let buffer = reused.unwrap_or_else(|| {
            let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("amari-gpu pooled"),
                size: class,
                usage,
                mapped_at_creation: upload,
            });
            let mut idle = self.idle.lock().expect("pool lock");
            idle.live += class;
            idle.ours.insert(buffer.clone());
            buffer
        });
        Pooled {
            buffer: Some(buffer),
            pool: self.clone(),
        }
    }

    /// Forgets `buffer` (dropped now, with every bind group over it).
    fn let_go(&self, buffer: &wgpu::Buffer) {
        self.idle.lock().expect("pool lock").let_go(buffer);
    }

    fn give_back(&self, buffer: wgpu::Buffer) {
        let class = buffer.size();
        let mut idle = self.idle.lock().expect("pool lock");
        if idle.bytes + class > MAX_IDLE_BYTES {
            idle.let_go(&buffer);
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
        self.idle.lock().expect("pool lock").ours.len()
    }

    /// Upload staging buffers handed out, and how many of them were reused (mapped again
    /// after an earlier submission) rather than created.
    pub fn staged(&self) -> (u64, u64) {
        let idle = self.idle.lock().expect("pool lock");
        (idle.staged, idle.staged_reused)
    }

    /// Bind groups the pool keeps, and how many lookups found theirs there.
    pub fn bind_groups(&self) -> (usize, u64) {
        let idle = self.idle.lock().expect("pool lock");
        (idle.groups.len(), idle.group_hits)
    }

    /// A bind group of `entries` against `layout`: the one made before when every entry
    /// binds a buffer of this pool's (same buffers, offsets and sizes), else a new one,
    /// kept for next time when its buffers are all the pool's.
    pub fn bind_group(
        &self,
        device: &wgpu::Device,
        label: &str,
        layout: &wgpu::BindGroupLayout,
        entries: &[wgpu::BindGroupEntry<'_>],
    ) -> wgpu::BindGroup {
        let key: Option<GroupKey> = entries
            .iter()
            .map(|e| match &e.resource {
                wgpu::BindingResource::Buffer(b) => Some((
                    e.binding,
                    b.buffer.clone(),
                    b.offset,
                    b.size.map(std::num::NonZeroU64::get),
                )),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(|bound| (layout.clone(), bound));
        let ours =
            |idle: &Idle, key: &GroupKey| key.1.iter().all(|(_, b, _, _)| idle.ours.contains(b));
        if let Some(key) = &key {
            let mut idle = self.idle.lock().expect("pool lock");
            if let Some(group) = idle.groups.get(key).cloned() {
                idle.group_hits += 1;
                return group;
            }
        }
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout,
            entries,
        });
        if let Some(key) = key {
            let mut idle = self.idle.lock().expect("pool lock");
            if ours(&idle, &key) {
                if idle.groups.len() >= MAX_BIND_GROUPS {
                    idle.groups.clear();
                }
                idle.groups.insert(key, group.clone());
            }
        }
        group
    }

    /// Buffers currently held idle.
    pub fn idle_buffers(&self) -> usize {
        self.idle.lock().expect("pool lock").idle_count
    }

    /// Drops every idle buffer (after a failure nothing from the device is reused).
    pub fn clear(&self) {
        let mut idle = self.idle.lock().expect("pool lock");
        let dropped = idle.bytes;
        idle.bytes = 0;
        idle.live -= dropped;
        let gone: Vec<wgpu::Buffer> = idle.buffers.drain().flat_map(|(_, b)| b).collect();
        for buffer in &gone {
            idle.ours.remove(buffer);
        }
        idle.idle_count = 0;
        idle.groups.clear();
        idle.clears += 1;
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
