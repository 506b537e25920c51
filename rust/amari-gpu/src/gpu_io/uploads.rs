//! The uploads of one submission, staged through one pooled mapped buffer: each upload
//! takes its pooled target and queues its bytes; [`Uploads::record`] writes them all into
//! one staging buffer of the pool's and records the copies into the submission's encoder,
//! before the passes that read them. `Queue::write_buffer` would create a staging buffer
//! per write (a few µs each on GL and lavapipe); this creates none once the pool is warm.

use super::faults::lost;
use crate::device::GpuDevice;
use crate::error::Result;
use crate::pool::Pooled;

/// Usage of the staging an upload is copied from.
const STAGING_USAGE: wgpu::BufferUsages =
    wgpu::BufferUsages::MAP_WRITE.union(wgpu::BufferUsages::COPY_SRC);

/// Uploads queued for one submission: their bytes one after another, and per upload its
/// target, where its bytes start and how many there are.
#[derive(Default)]
pub(crate) struct Uploads {
    bytes: Vec<u8>,
    copies: Vec<(wgpu::Buffer, u64, u64)>,
}

impl Uploads {
    /// A pooled buffer of `usage` (and `COPY_DST`), at least one word long, that holds
    /// `words` once [`Uploads::record`] has been recorded before its use.
    pub(crate) fn buffer<T: bytemuck::Pod>(
        &mut self,
        dev: &GpuDevice,
        words: &[T],
        usage: wgpu::BufferUsages,
    ) -> Pooled {
        let bytes = (std::mem::size_of_val(words) as u64).max(4);
        let target = dev.pool.take(
            &dev.gpu().device,
            bytes,
            usage | wgpu::BufferUsages::COPY_DST,
        );
        self.write(&target, words);
        target
    }

    /// Queues `words` for the start of `target` (a `COPY_DST` buffer).
    pub(crate) fn write<T: bytemuck::Pod>(&mut self, target: &wgpu::Buffer, words: &[T]) {
        let data: &[u8] = bytemuck::cast_slice(words);
        if data.is_empty() {
            return;
        }
        let at = self.bytes.len() as u64;
        self.bytes.extend_from_slice(data);
        // Copies move whole words: keep every upload's start aligned.
        self.bytes.resize(self.bytes.len().div_ceil(4) * 4, 0);
        self.copies
            .push((wgpu::Buffer::clone(target), at, data.len() as u64));
    }

    /// Writes the queued uploads into one staging buffer from the device's pool and
    /// records their copies into `encoder`, the staging going back to the pool once the
    /// encoder's submission has run. Call before recording any pass that reads them.
    pub(crate) fn record(
        &mut self,
        dev: &GpuDevice,
        encoder: &mut wgpu::CommandEncoder,
    ) -> Result<()> {
        if self.copies.is_empty() {
            return Ok(());
        }
        let size = self.bytes.len() as u64;
        let staging = dev.pool.take(&dev.gpu().device, size, STAGING_USAGE);
        {
            let mut view = staging
                .slice(..size)
                .get_mapped_range_mut()
                .map_err(|e| lost(dev.id, format!("upload staging mapping failed: {e}")))?;
            view.copy_from_slice(&self.bytes);
        }
        staging.unmap();
        for (target, at, bytes) in self.copies.drain(..) {
            encoder.copy_buffer_to_buffer(&staging, at, &target, 0, bytes);
        }
        self.bytes.clear();
        staging.recall_on_submit(encoder);
        Ok(())
    }
}
