//! Adapter enumeration: every adapter wgpu reports on every native backend, described in
//! plain data, with duplicates (one physical device seen through two backends) marked.

use std::collections::BTreeMap;

/// A graphics API wgpu can drive, by its lower-case name.
pub fn backend_name(backend: wgpu::Backend) -> &'static str {
    match backend {
        wgpu::Backend::Vulkan => "vulkan",
        wgpu::Backend::Metal => "metal",
        wgpu::Backend::Dx12 => "dx12",
        wgpu::Backend::Gl => "gl",
        wgpu::Backend::BrowserWebGpu => "webgpu",
        wgpu::Backend::Noop => "noop",
    }
}

/// The backend names accepted by `backends=`: the wgpu backends [`parse_backend`] accepts,
/// in order of preference for duplicates, then the host device's [`HOST_BACKEND`].
pub const BACKEND_NAMES: [&str; 5] = ["vulkan", "metal", "dx12", "gl", HOST_BACKEND];

/// The backend name of the host CPU device (`host::cpu::describe`).
pub const HOST_BACKEND: &str = "host";

/// The canonical name of a backend as given to `backends=` (aliases resolved), or `None`
/// for an unknown name.
pub fn canonical_backend(name: &str) -> Option<&'static str> {
    if name.eq_ignore_ascii_case(HOST_BACKEND) {
        return Some(HOST_BACKEND);
    }
    parse_backend(name).map(backend_name)
}

/// Parses a backend name as accepted by the public API.
pub fn parse_backend(name: &str) -> Option<wgpu::Backend> {
    match name.to_ascii_lowercase().as_str() {
        "vulkan" => Some(wgpu::Backend::Vulkan),
        "metal" => Some(wgpu::Backend::Metal),
        "dx12" => Some(wgpu::Backend::Dx12),
        "gl" | "gles" | "opengl" => Some(wgpu::Backend::Gl),
        _ => None,
    }
}

/// Why a backend has no adapter on this machine, in a few words: the platforms a backend
/// exists on first (Metal and DX12 are not a missing driver on Linux), else the drivers it
/// needs. For the host device's backend, which always exists, an empty string.
pub fn backend_unavailable_reason(backend: &str) -> String {
    let platform_only = match canonical_backend(backend) {
        Some("metal") if !cfg!(any(target_os = "macos", target_os = "ios")) => {
            Some("Metal exists only on macOS and iOS")
        }
        Some("dx12") if !cfg!(windows) => Some("DX12 exists only on Windows"),
        _ => None,
    };
    if let Some(why) = platform_only {
        return format!("no adapter: {why}");
    }
    match canonical_backend(backend) {
        Some("vulkan") => {
            "no adapter: no Vulkan driver (ICD) was found or it failed to load".to_string()
        }
        Some("gl") => {
            "no adapter: no OpenGL ES 3.1 driver (EGL) was found or it failed to load".to_string()
        }
        Some(HOST_BACKEND) => String::new(),
        Some(other) => format!("no adapter: the {other} driver was not found or failed to load"),
        None => format!("unknown backend {backend:?}"),
    }
}

/// The device kind names used by the public API.
pub const DEVICE_TYPE_NAMES: [&str; 5] = [
    "discrete_gpu",
    "integrated_gpu",
    "virtual_gpu",
    "cpu",
    "other",
];

/// The public name of a device kind.
pub fn device_type_name(device_type: wgpu::DeviceType) -> &'static str {
    match device_type {
        wgpu::DeviceType::DiscreteGpu => "discrete_gpu",
        wgpu::DeviceType::IntegratedGpu => "integrated_gpu",
        wgpu::DeviceType::VirtualGpu => "virtual_gpu",
        wgpu::DeviceType::Cpu => "cpu",
        wgpu::DeviceType::Other => "other",
    }
}

/// A readable vendor name for display only. Nothing in the crate decides anything from it:
/// capabilities are measured on the device.
pub fn vendor_name(vendor_id: u32, driver: &str) -> String {
    let known = match vendor_id {
        0x1002 | 0x1022 => "AMD",
        0x10DE => "NVIDIA",
        0x8086 => "Intel",
        0x106B => "Apple",
        0x13B5 => "ARM",
        0x5143 => "Qualcomm",
        0x1414 => "Microsoft",
        0x10005 => "Mesa",
        _ => "",
    };
    if !known.is_empty() {
        known.to_string()
    } else if !driver.is_empty() {
        driver.to_string()
    } else {
        format!("0x{vendor_id:04x}")
    }
}

/// Everything known about one adapter before a device is opened on it.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterInfo {
    /// Position in the enumeration; stable for one process.
    pub index: usize,
    /// Adapter name as the driver reports it.
    pub name: String,
    /// Readable vendor name (display only).
    pub vendor: String,
    /// Backend-specific vendor id (PCI id for hardware adapters).
    pub vendor_id: u32,
    /// Backend-specific device id.
    pub device_id: u32,
    /// "vulkan" | "metal" | "dx12" | "gl" | "host" (the host CPU device).
    pub backend: String,
    /// "discrete_gpu" | "integrated_gpu" | "virtual_gpu" | "cpu" | "other".
    pub device_type: String,
    /// Driver name.
    pub driver: String,
    /// Driver version text.
    pub driver_info: String,
    /// PCI bus id where the backend reports one, else empty.
    pub pci_bus_id: String,
    /// The adapter's own limits, by WebGPU limit name.
    pub limits: BTreeMap<String, u64>,
    /// Optional features the adapter supports, as lower-case names.
    pub features: Vec<String>,
    /// Index of an earlier adapter that is the same physical device through another backend.
    pub same_device_as: Option<usize>,
}

impl AdapterInfo {
    /// Whether this adapter runs on the CPU (a software rasteriser such as lavapipe, or the
    /// host device itself).
    pub fn is_software(&self) -> bool {
        self.device_type == "cpu"
    }

    /// Whether this is the host CPU device rather than a wgpu adapter.
    pub fn is_host(&self) -> bool {
        self.backend == HOST_BACKEND
    }

    /// A stable identity for on-disk caches: what identifies the adapter and its driver.
    pub fn identity(&self) -> String {
        format!(
            "{}|{}|{:#x}|{:#x}|{}|{}",
            self.name, self.backend, self.vendor_id, self.device_id, self.driver, self.driver_info
        )
    }

    /// Limit by name, 0 when absent.
    pub fn limit(&self, name: &str) -> u64 {
        self.limits.get(name).copied().unwrap_or(0)
    }
}

/// The compute-relevant limits, by their WebGPU names (wgpu's field names).
pub fn limits_map(limits: &wgpu::Limits) -> BTreeMap<String, u64> {
    macro_rules! by_name {
        ($($field:ident),* $(,)?) => {
            [$((stringify!($field), u64::from(limits.$field))),*]
        };
    }
    let entries = by_name![
        max_buffer_size,
        max_storage_buffer_binding_size,
        max_uniform_buffer_binding_size,
        max_storage_buffers_per_shader_stage,
        max_bind_groups,
        max_bindings_per_bind_group,
        max_compute_workgroup_storage_size,
        max_compute_invocations_per_workgroup,
        max_compute_workgroup_size_x,
        max_compute_workgroup_size_y,
        max_compute_workgroup_size_z,
        max_compute_workgroups_per_dimension,
        min_storage_buffer_offset_alignment,
    ];
    entries.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Lower-case names of the features in a set.
pub fn feature_names(features: wgpu::Features) -> Vec<String> {
    features
        .iter_names()
        .map(|(name, _)| name.to_ascii_lowercase())
        .collect()
}

/// Describes a wgpu adapter; `same_device_as` is filled in later by [`mark_duplicates`].
pub fn describe(index: usize, adapter: &wgpu::Adapter) -> AdapterInfo {
    let info = adapter.get_info();
    AdapterInfo {
        index,
        vendor: vendor_name(info.vendor, &info.driver),
        name: info.name,
        vendor_id: info.vendor,
        device_id: info.device,
        backend: backend_name(info.backend).to_string(),
        device_type: device_type_name(info.device_type).to_string(),
        driver: info.driver,
        driver_info: info.driver_info,
        pci_bus_id: info.device_pci_bus_id,
        limits: limits_map(&adapter.limits()),
        features: feature_names(adapter.features()),
        same_device_as: None,
    }
}

/// Whether two adapters from different backends are one physical device.
///
/// The PCI bus id decides when both report it. Otherwise equal non-zero PCI vendor and
/// device ids, or — for adapters without PCI ids, such as Mesa's software rasterisers,
/// which run on the same CPU whichever API drives them — the same name and device type.
fn same_physical_device(a: &AdapterInfo, b: &AdapterInfo) -> bool {
    if a.backend == b.backend {
        return false;
    }
    if !a.pci_bus_id.is_empty() && !b.pci_bus_id.is_empty() {
        return a.pci_bus_id == b.pci_bus_id;
    }
    if a.device_id != 0 && b.device_id != 0 && a.vendor_id == b.vendor_id {
        return a.device_id == b.device_id;
    }
    a.device_type == b.device_type && a.name.trim() == b.name.trim()
}

/// The preference rank of a backend: native APIs first, GL last.
fn backend_rank(backend: &str) -> usize {
    BACKEND_NAMES
        .iter()
        .position(|n| *n == backend)
        .unwrap_or(BACKEND_NAMES.len())
}

/// Marks each duplicate with the index of its original (an earlier entry). One original can
/// absorb at most one duplicate per backend, so two identical cards stay two devices.
pub fn mark_duplicates(infos: &mut [AdapterInfo]) {
    for later in 0..infos.len() {
        infos[later].same_device_as = None;
        let original = (0..later).find(|&earlier| {
            infos[earlier].same_device_as.is_none()
                && same_physical_device(&infos[earlier], &infos[later])
                && !infos[..later].iter().any(|other| {
                    other.same_device_as == Some(earlier) && other.backend == infos[later].backend
                })
        });
        infos[later].same_device_as = original;
    }
}

/// Enumerates every adapter of every native backend of `instance`, preferred backends first
/// (so that duplicates point at the preferred entry), numbered in that order.
pub fn enumerate(instance: &wgpu::Instance) -> Vec<(wgpu::Adapter, AdapterInfo)> {
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let mut pairs: Vec<(wgpu::Adapter, AdapterInfo)> = adapters
        .into_iter()
        .map(|adapter| {
            let info = describe(0, &adapter);
            (adapter, info)
        })
        .collect();
    pairs.sort_by_key(|(_, info)| backend_rank(&info.backend));
    for (index, (_, info)) in pairs.iter_mut().enumerate() {
        info.index = index;
    }
    let mut infos: Vec<AdapterInfo> = pairs.iter().map(|(_, info)| info.clone()).collect();
    mark_duplicates(&mut infos);
    for ((_, info), marked) in pairs.iter_mut().zip(infos) {
        *info = marked;
    }
    for (_, info) in &pairs {
        log::info!(
            "adapter {}: {} ({}, {}, driver {}){}",
            info.index,
            info.name,
            info.backend,
            info.device_type,
            info.driver,
            info.same_device_as
                .map_or_else(String::new, |o| format!(", same device as adapter {o}"))
        );
    }
    if pairs.is_empty() {
        log::warn!("wgpu reports no adapter on any backend");
    }
    pairs
}
