//! One logical device of a context, of either kind behind one interface: a wgpu device and
//! queue opened on an adapter with the adapter's own limits, its pipeline cache and buffer
//! pool; or the host CPU device ([`crate::host::device::HostDevice`]). What every kind shares (id,
//! adapter description, health, counters, hardware group, limits) is on [`GpuDevice`]; the
//! planner, scheduler, health, stats and profiler see only that. The worker and calibration
//! dispatch on [`DeviceKind`]; every wgpu path reaches the wgpu parts through
//! [`GpuDevice::gpu`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::adapter::AdapterInfo;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::health::{Counters, Health};
use crate::host::device::HostDevice;
use crate::kernel::Kernel;
use crate::pool::BufferPool;

/// A compiled kernel: its pipeline and the layout its bind groups are made against, looked
/// up once so that no chunk asks the pipeline for it again.
pub struct Compiled {
    /// The compute pipeline.
    pub pipeline: wgpu::ComputePipeline,
    /// Its bind group 0 layout.
    pub layout: wgpu::BindGroupLayout,
}

impl std::ops::Deref for Compiled {
    type Target = wgpu::ComputePipeline;
    fn deref(&self) -> &wgpu::ComputePipeline {
        &self.pipeline
    }
}

/// Users' kernels (`map_rows`) a device keeps compiled at most: each distinct source is a
/// pipeline (Mesa's hold about 0.2 MiB each), so without a bound a program generating
/// kernels grows without end. 64 covers any working set of hand-written kernels; the least
/// recently used one is dropped (and compiled again if it comes back). Built-in kernels are
/// a fixed set and never dropped.
pub const MAX_USER_PIPELINES: usize = 64;

/// A compiled pipeline in a device's cache, with when it was last used.
struct Cached {
    compiled: Arc<Compiled>,
    /// Value of the cache's use clock at the last lookup.
    used: u64,
    /// A user's kernel: counted against [`MAX_USER_PIPELINES`].
    user: bool,
}

/// A device's compiled pipelines by kernel id.
#[derive(Default)]
struct Pipelines {
    by_id: HashMap<String, Cached>,
    clock: u64,
}

impl Pipelines {
    fn get(&mut self, id: &str) -> Option<Arc<Compiled>> {
        self.clock += 1;
        let clock = self.clock;
        self.by_id.get_mut(id).map(|c| {
            c.used = clock;
            Arc::clone(&c.compiled)
        })
    }

    /// Adds `compiled`, dropping the least recently used users' kernels past the bound.
    fn insert(&mut self, id: String, compiled: Arc<Compiled>, user: bool) {
        self.clock += 1;
        self.by_id.insert(
            id,
            Cached {
                compiled,
                used: self.clock,
                user,
            },
        );
        while self.users() > MAX_USER_PIPELINES {
            let oldest = self
                .by_id
                .iter()
                .filter(|(_, c)| c.user)
                .min_by_key(|(_, c)| c.used)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => self.by_id.remove(&id),
                None => break,
            };
        }
    }

    fn users(&self) -> usize {
        self.by_id.values().filter(|c| c.user).count()
    }
}

/// The wgpu parts of a device: device, queue, pipeline cache, timestamp query sets and what
/// the driver reported when it lost the device.
pub struct WgpuDevice {
    /// The wgpu device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// Idle two-entry timestamp query sets, reused across chunks.
    pub query_sets: Mutex<Vec<wgpu::QuerySet>>,
    pipelines: Mutex<Pipelines>,
    lost: Arc<Mutex<Option<String>>>,
    /// Held around every poll and submit of the device (`gpu_io::wait`'s `poll`, `submit`):
    /// wgpu-core 30 asserts when a poll waiting for a submission finds the queue emptied by
    /// another thread's maintenance (a submit's or a poll's) between its fence read and its
    /// own (gfx-rs/wgpu#9958).
    pub(crate) maintain: Arc<Mutex<()>>,
}

/// What runs a device's chunks.
pub enum DeviceKind {
    /// A wgpu device on an adapter: upload, dispatch, readback.
    Wgpu(WgpuDevice),
    /// The host CPU: native kernels on a thread pool, in place.
    Host(HostDevice),
}

/// A device opened by a context, of either kind.
pub struct GpuDevice {
    /// Context-wide id (position in `ctx.devices`).
    pub id: usize,
    /// The adapter it was opened on (for the host device, its description as an adapter).
    pub adapter: AdapterInfo,
    /// What runs its chunks.
    pub kind: DeviceKind,
    /// The limits the device was granted (the adapter's own; for the host, memory only).
    pub limits: wgpu::Limits,
    /// Idle buffers for reuse (always empty on the host device).
    pub pool: BufferPool,
    /// Whether the device may be given work.
    pub health: Health,
    /// What the device has done.
    pub counters: Counters,
    /// Physical-device group (devices sharing one piece of hardware share it).
    pub group: usize,
    /// Nanoseconds per GPU timestamp tick, when the device records timestamps.
    pub timestamp_period_ns: Option<f64>,
    /// The dtypes its kernels may compute in, narrowest first: float32 everywhere, float64
    /// and float16 where the adapter offers their shader features (every one on the host).
    pub dtypes: Vec<Dtype>,
}

impl GpuDevice {
    /// Opens a device on `adapter`, requesting everything the adapter offers. GPU
    /// timestamps are requested when the adapter has them and `timestamps` allows; the
    /// float64 and float16 shader features whenever the adapter has them (the device then
    /// runs those dtypes).
    pub fn open(
        id: usize,
        adapter: &wgpu::Adapter,
        info: &AdapterInfo,
        group: usize,
        timestamps: bool,
    ) -> Result<Self> {
        let offered = adapter.features();
        let timestamps = timestamps && offered.contains(wgpu::Features::TIMESTAMP_QUERY);
        let dtypes = Dtype::supported_by(offered);
        let mut features = dtypes
            .iter()
            .fold(wgpu::Features::empty(), |f, d| f | d.feature());
        if timestamps {
            features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        let limits = adapter.limits();
        let descriptor = wgpu::DeviceDescriptor {
            label: Some("amari-gpu"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::default(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) =
            pollster::block_on(adapter.request_device(&descriptor)).map_err(|e| {
                Error::DeviceLost {
                    device: id,
                    reason: format!(
                        "could not open a device on adapter {} ({}): {e}",
                        info.index, info.name
                    ),
                }
            })?;
        let lost = Arc::new(Mutex::new(None));
        let lost_flag = Arc::clone(&lost);
        device.set_device_lost_callback(move |reason, message| {
            *lost_flag.lock().expect("lost flag") =
                Some(format!("device lost ({reason:?}): {message}"));
        });
        // Errors outside our error scopes (there should be none) must not abort the process,
        // which is wgpu's default; they are recorded and surface as a device failure.
        let uncaptured = Arc::clone(&lost);
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            *uncaptured.lock().expect("lost flag") = Some(format!("uncaptured error: {error}"));
        }));
        let timestamp_period_ns = timestamps.then(|| f64::from(queue.get_timestamp_period()));
        let max_buffer = limits.max_buffer_size;
        Ok(GpuDevice {
            id,
            adapter: info.clone(),
            kind: DeviceKind::Wgpu(WgpuDevice {
                device,
                queue,
                query_sets: Mutex::new(Vec::new()),
                pipelines: Mutex::new(Pipelines::default()),
                lost,
                maintain: Arc::default(),
            }),
            limits,
            timestamp_period_ns,
            pool: BufferPool::new(max_buffer),
            health: Health::default(),
            counters: Counters::default(),
            group,
            dtypes,
        })
    }

    /// The host device, described by `info`, in hardware group `group`.
    pub fn host(id: usize, info: &AdapterInfo, group: usize, host: HostDevice) -> Self {
        let max = crate::host::cpu::MAX_BUFFER_BYTES;
        GpuDevice {
            id,
            adapter: info.clone(),
            kind: DeviceKind::Host(host),
            limits: wgpu::Limits {
                max_buffer_size: max,
                max_storage_buffer_binding_size: max,
                ..wgpu::Limits::default()
            },
            timestamp_period_ns: None,
            pool: BufferPool::new(max),
            health: Health::default(),
            counters: Counters::default(),
            group,
            dtypes: Dtype::ALL.to_vec(),
        }
    }

    /// The host device's parts, if this is the host device.
    pub fn as_host(&self) -> Option<&HostDevice> {
        match &self.kind {
            DeviceKind::Host(h) => Some(h),
            DeviceKind::Wgpu(_) => None,
        }
    }

    /// Whether the device computes in `dtype` (its adapter has the shader feature).
    pub fn runs(&self, dtype: Dtype) -> bool {
        self.dtypes.contains(&dtype)
    }

    /// Why the device cannot run kernels of `dtype` ("float64 needs SHADER_F64: device 1
    /// 'llvmpipe' (gl) lacks it"), or `None` when it can.
    pub fn lacks(&self, dtype: Dtype) -> Option<String> {
        (!self.runs(dtype)).then(|| {
            format!(
                "{dtype} needs {}: device {} '{}' ({}) lacks it",
                dtype.feature_name(),
                self.id,
                self.adapter.name,
                self.adapter.backend
            )
        })
    }

    /// Whether the device can run `kernel`: a wgpu device when it runs the kernel's dtype;
    /// the host device only kernels with a host implementation; and only the devices a
    /// kernel names, when it names them.
    pub fn can_run(&self, kernel: &Kernel) -> bool {
        self.runs(kernel.dtype)
            && (self.as_host().is_none() || kernel.host.is_some())
            && kernel
                .devices
                .as_ref()
                .is_none_or(|only| only.contains(&self.id))
    }

    /// The wgpu parts. Only wgpu paths call this (upload, dispatch, readback, wgpu
    /// calibration, wgpu grid bands): the worker, calibration and grid layouts dispatch on
    /// [`DeviceKind`] (a band on the host device is a host vector), so the host device never
    /// reaches it; if it did, the panic would surface as that device's failure (workers
    /// catch panics).
    pub fn gpu(&self) -> &WgpuDevice {
        match &self.kind {
            DeviceKind::Wgpu(w) => w,
            DeviceKind::Host(_) => panic!("device {} is the host device: no wgpu parts", self.id),
        }
    }

    /// The pipeline of `kernel`, compiled once per device (a user's kernel again after
    /// [`MAX_USER_PIPELINES`] others pushed it out). A user's kernel that the driver refuses
    /// is the user's error (`KernelCompile`), which leaves the device healthy; a built-in
    /// one that fails is a device failure.
    pub fn pipeline(&self, kernel: &Kernel) -> Result<Arc<Compiled>> {
        let DeviceKind::Wgpu(gpu) = &self.kind else {
            return Err(Error::Internal(format!(
                "kernel {} compiled for the host device {}",
                kernel.id, self.id
            )));
        };
        let user = kernel.family == Family::Rows;
        let key = kernel.pipeline_key();
        if let Some(found) = gpu
            .pipelines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(found);
        }
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = gpu
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&kernel.id),
                source: wgpu::ShaderSource::Wgsl(kernel.source.clone()),
            });
        let pipeline = gpu
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&kernel.id),
                layout: None,
                module: &module,
                entry_point: Some(kernel.entry),
                compilation_options: wgpu::PipelineCompilationOptions::default(),
                cache: None,
            });
        if let Some(error) = pollster::block_on(scope.pop()) {
            if user {
                return Err(Error::KernelCompile(format!(
                    "map_rows: device {} ({}, {}) refused the kernel although naga accepted \
                     it; no device was marked unhealthy. The driver said: {error}",
                    self.id, self.adapter.name, self.adapter.backend
                )));
            }
            return Err(Error::DeviceLost {
                device: self.id,
                reason: format!("kernel {} failed to compile: {error}", kernel.id),
            });
        }
        let layout = pipeline.get_bind_group_layout(0);
        let pipeline = Arc::new(Compiled { pipeline, layout });
        gpu.pipelines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.into_owned(), Arc::clone(&pipeline), user);
        Ok(pipeline)
    }

    /// Users' kernels (`map_rows`) compiled and kept on this device (at most
    /// [`MAX_USER_PIPELINES`]); 0 on the host device.
    pub fn user_pipelines(&self) -> usize {
        match &self.kind {
            DeviceKind::Wgpu(gpu) => gpu
                .pipelines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .users(),
            DeviceKind::Host(_) => 0,
        }
    }

    /// A two-entry timestamp query set (begin and end of a pass), reused when one is idle.
    pub fn take_query_set(&self) -> wgpu::QuerySet {
        let gpu = self.gpu();
        let idle = gpu.query_sets.lock().expect("query set lock").pop();
        idle.unwrap_or_else(|| {
            gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("amari-gpu pass timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            })
        })
    }

    /// Returns a query set taken with [`GpuDevice::take_query_set`] for reuse.
    pub fn give_back_query_set(&self, queries: wgpu::QuerySet) {
        self.gpu()
            .query_sets
            .lock()
            .expect("query set lock")
            .push(queries);
    }

    /// What the driver reported when the device was lost, if it was.
    pub fn lost_reason(&self) -> Option<String> {
        match &self.kind {
            DeviceKind::Wgpu(gpu) => gpu.lost.lock().expect("lost flag").clone(),
            DeviceKind::Host(_) => None,
        }
    }

    /// Largest buffer binding (bytes) a kernel may use on this device.
    pub fn max_binding_bytes(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }
}
