//! The host CPU device as a [`Runner`]: nothing is staged, the kernel reads the caller's
//! inputs and writes the chunk's output slice in place on the device's thread pool. A chunk
//! is begun by noting its range and run when it is finished, one at a time (depth 1), so a
//! worker never holds a chunk it is not about to run. A panicking kernel is a failure of the
//! device (see `HostDevice::run`).

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use super::{Begun, Finished, Job, Runner};
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::host::device::HostDevice;
use crate::kernel::{HostImpl, Kernel};

impl Runner for HostDevice {
    type Prepared = Arc<dyn HostImpl>;
    type Flight = Range<usize>;
    type Held = ();
    const DEPTH: usize = 1;

    fn prepare(&self, _dev: &GpuDevice, kernel: &Kernel) -> Result<Arc<dyn HostImpl>> {
        match kernel.host.as_ref() {
            Some(implementation) => Ok(HostDevice::prepare(self, implementation.as_ref())),
            None => Err(Error::Internal(format!(
                "kernel {} has no host implementation but was given to the host device",
                kernel.id
            ))),
        }
    }

    fn begin(
        &self,
        _dev: &GpuDevice,
        _job: &Job<'_>,
        _prepared: &Arc<dyn HostImpl>,
        range: Range<usize>,
        _held: &mut (),
    ) -> Result<(Range<usize>, Begun)> {
        let begun = Begun {
            submitted: Instant::now(),
            bytes_up: 0,
            bytes_down: 0,
        };
        Ok((range, begun))
    }

    fn wait_submitted(&self, _: &GpuDevice, _: &Job<'_>, _: &mut Range<usize>) -> Result<()> {
        Ok(())
    }

    fn finish(
        &self,
        dev: &GpuDevice,
        job: &Job<'_>,
        prepared: &Arc<dyn HostImpl>,
        range: Range<usize>,
        output: &mut [f32],
    ) -> Result<Finished> {
        let start = Instant::now();
        self.run(dev.id, prepared.as_ref(), job.inputs, range, output)?;
        let done = Instant::now();
        Ok(Finished {
            wait_start: start,
            wait_end: done,
            copied: done,
            ticks: None,
            staged: false,
        })
    }

    fn abandon(&self, _flights: Vec<Range<usize>>, _held: Option<()>, _later: bool) {}
}
