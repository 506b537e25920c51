//! Which adapters a context opens, and how many logical devices on each: a pure function of
//! the enumeration and the caller's options, so it is tested without a GPU. The same rule
//! says why every other adapter (and every named backend without one) was left out, and
//! which options could not apply: what the context reports to its user (`Selection`).

use crate::adapter::{
    backend_unavailable_reason, canonical_backend, AdapterInfo, BACKEND_NAMES, DEVICE_TYPE_NAMES,
};
use crate::error::{Error, Result};
use crate::options::{check_names, describe_request, ContextOptions};

fn describe_available(infos: &[AdapterInfo]) -> String {
    if infos.is_empty() {
        return "this machine reports no adapter at all".to_string();
    }
    let list: Vec<String> = infos
        .iter()
        .map(|i| {
            format!(
                "[{}] {} ({}, {})",
                i.index, i.name, i.backend, i.device_type
            )
        })
        .collect();
    format!("available: {}", list.join("; "))
}

/// The selection without `adapters=` or `backends=`: every distinct hardware GPU adapter
/// (one per physical device, the first backend that reports it) and the host device. CPU
/// adapters (lavapipe, llvmpipe, WARP) run on the cores the host device already uses, so
/// they are opened only when named; with `device_types=` every distinct adapter of the kinds
/// named (software ones and the host, of kind "cpu", included). Only a machine with neither a
/// hardware GPU nor the host device falls back to its software adapters.
fn default_selection(infos: &[AdapterInfo], options: &ContextOptions) -> Vec<usize> {
    let distinct: Vec<&AdapterInfo> = infos
        .iter()
        .filter(|i| i.same_device_as.is_none())
        .filter(|i| {
            options
                .device_types
                .as_ref()
                .is_none_or(|types| types.contains(&i.device_type))
        })
        .collect();
    if options.device_types.is_some() {
        return distinct.iter().map(|i| i.index).collect();
    }
    let chosen: Vec<usize> = distinct
        .iter()
        .filter(|i| i.is_host() || !i.is_software())
        .map(|i| i.index)
        .collect();
    if chosen.is_empty() {
        distinct.iter().map(|i| i.index).collect()
    } else {
        chosen
    }
}

/// Returns the selected adapter indices, one entry per logical device to open (an adapter
/// appears `devices_per_adapter` times in a row).
pub fn select(infos: &[AdapterInfo], options: &ContextOptions) -> Result<Vec<usize>> {
    options.check()?;
    if let Some(backends) = &options.backends {
        check_names("backends", backends, &BACKEND_NAMES)?;
    }
    if let Some(types) = &options.device_types {
        check_names("device_types", types, &DEVICE_TYPE_NAMES)?;
    }
    let backend_ok = |info: &AdapterInfo| match &options.backends {
        None => true,
        Some(names) => names
            .iter()
            .any(|n| canonical_backend(n) == Some(info.backend.as_str())),
    };
    let type_ok = |info: &AdapterInfo| match &options.device_types {
        None => true,
        Some(types) => types.contains(&info.device_type),
    };

    let chosen: Vec<usize> = if let Some(indices) = &options.adapters {
        for (position, &index) in indices.iter().enumerate() {
            if index >= infos.len() {
                return Err(Error::invalid(
                    "adapters",
                    format!(
                        "index {index} is out of range; {}",
                        describe_available(infos)
                    ),
                ));
            }
            if indices[..position].contains(&index) {
                return Err(Error::invalid(
                    "adapters",
                    format!("index {index} is listed twice; use devices_per_adapter for several devices on one adapter"),
                ));
            }
        }
        indices
            .iter()
            .copied()
            .filter(|&i| backend_ok(&infos[i]) && type_ok(&infos[i]))
            .collect()
    } else if options.backends.is_some() {
        infos
            .iter()
            .filter(|i| backend_ok(i) && type_ok(i))
            .map(|i| i.index)
            .collect()
    } else {
        default_selection(infos, options)
    };

    if chosen.is_empty() {
        let what = if infos.is_empty() {
            "No GPU adapter found".to_string()
        } else {
            let missing: Vec<String> = unavailable_backends(infos, options)
                .iter()
                .map(|l| format!("backend {}: {}", l.backend, l.reason))
                .collect();
            let missing = if missing.is_empty() {
                String::new()
            } else {
                format!(" ({})", missing.join("; "))
            };
            format!(
                "No adapter {}{missing}; {}",
                describe_request(options),
                describe_available(infos)
            )
        };
        return Err(Error::no_adapter_hint(&what));
    }
    // The host device is one device whatever `devices_per_adapter`: its threads are its
    // parallelism.
    let mut devices: Vec<usize> = chosen
        .iter()
        .flat_map(|&i| {
            let copies = if infos[i].is_host() {
                1
            } else {
                options.devices_per_adapter
            };
            std::iter::repeat_n(i, copies)
        })
        .collect();
    if let Some(max) = options.max_devices {
        devices.truncate(max);
    }
    Ok(devices)
}

/// An adapter, or a backend named in `backends=` without any adapter, that a context left
/// out, and why in a few words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The adapter's index; `None` for a backend that has no adapter on this machine.
    pub adapter: Option<usize>,
    /// The adapter's name (empty for a backend without adapter).
    pub name: String,
    /// The adapter's backend, or the backend named without adapter.
    pub backend: String,
    /// Why it was left out.
    pub reason: String,
}

/// What a context chose and why: the adapter of each logical device, what was left out, and
/// the options that could not apply as asked. Computed once, when the context opens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// The adapter index of each logical device, in device-id order.
    pub devices: Vec<usize>,
    /// Every adapter not opened, in enumeration order, then every named backend that has
    /// no adapter.
    pub left_out: Vec<LeftOut>,
    /// Options that could not apply as given (`devices_per_adapter` on the host device,
    /// devices cut by `max_devices`), one sentence each.
    pub notes: Vec<String>,
    /// The one line the context logs at INFO when it opens.
    pub summary: String,
}

/// The backends named in `backends=` (other than the host's) for which `infos` has no
/// adapter, each with the reason.
fn unavailable_backends(infos: &[AdapterInfo], options: &ContextOptions) -> Vec<LeftOut> {
    let mut missing: Vec<LeftOut> = Vec::new();
    for name in options.backends.iter().flatten() {
        let Some(backend) = canonical_backend(name) else {
            continue;
        };
        if infos.iter().any(|i| i.backend == backend)
            || missing.iter().any(|m| m.backend == backend)
        {
            continue;
        }
        missing.push(LeftOut {
            adapter: None,
            name: String::new(),
            backend: backend.to_string(),
            reason: backend_unavailable_reason(backend),
        });
    }
    missing
}

/// The options that could not apply as given to the devices `devices` opened.
fn selection_notes(
    infos: &[AdapterInfo],
    options: &ContextOptions,
    devices: &[usize],
) -> Vec<String> {
    let mut notes = Vec::new();
    let per = options.devices_per_adapter;
    if per > 1 && devices.iter().any(|&i| infos[i].is_host()) {
        let only = if devices.iter().all(|&i| infos[i].is_host()) {
            " and no wgpu adapter was selected, so the context has 1 device"
        } else {
            ""
        };
        notes.push(format!(
            "devices_per_adapter={per} does not apply to the host device (it is one device: \
             its threads are its parallelism){only}"
        ));
    }
    if let Some(max) = options.max_devices {
        if let Some(all) = wanted_devices(infos, options).filter(|&all| all > max) {
            notes.push(format!(
                "max_devices={max} opened {max} of the {all} devices the selection has"
            ));
        }
    }
    notes
}

/// How many logical devices the selection would have without `max_devices`.
fn wanted_devices(infos: &[AdapterInfo], options: &ContextOptions) -> Option<usize> {
    let unbounded = ContextOptions {
        max_devices: None,
        ..options.clone()
    };
    select(infos, &unbounded).ok().map(|d| d.len())
}

/// The selection `options` make of `infos`, with what was left out and why; logs its
/// summary at INFO (once per context: the context opens through this).
pub fn selection(infos: &[AdapterInfo], options: &ContextOptions) -> Result<Selection> {
    let devices = select(infos, options)?;
    let mut left_out: Vec<LeftOut> = infos
        .iter()
        .filter_map(|i| match reason(i, options, &devices) {
            (true, _) => None,
            (false, why) => Some(LeftOut {
                adapter: Some(i.index),
                name: i.name.clone(),
                backend: i.backend.clone(),
                reason: why,
            }),
        })
        .collect();
    left_out.extend(unavailable_backends(infos, options));
    let notes = selection_notes(infos, options, &devices);
    let summary = describe_selection(infos, &devices, &left_out, &notes);
    log::info!("{summary}");
    Ok(Selection {
        devices,
        left_out,
        notes,
        summary,
    })
}

/// Why the selection took `info` (`true`) or left it out (`false`), in a few words.
fn reason(info: &AdapterInfo, options: &ContextOptions, devices: &[usize]) -> (bool, String) {
    let by_default = options.adapters.is_none() && options.backends.is_none();
    if devices.contains(&info.index) {
        let why = if options.adapters.is_some() {
            "in adapters="
        } else if options.backends.is_some() {
            "backend in backends="
        } else if options.device_types.is_some() {
            "kind in device_types="
        } else if info.is_host() {
            "the host CPU device"
        } else if info.is_software() {
            "software adapter: no hardware GPU and no host device"
        } else {
            "hardware GPU"
        };
        return (true, why.to_string());
    }
    let why = if options
        .adapters
        .as_ref()
        .is_some_and(|a| !a.contains(&info.index))
    {
        "not in adapters=".to_string()
    } else if options.backends.as_ref().is_some_and(|names| {
        !names
            .iter()
            .any(|n| canonical_backend(n) == Some(info.backend.as_str()))
    }) {
        "backend not in backends=".to_string()
    } else if options
        .device_types
        .as_ref()
        .is_some_and(|t| !t.contains(&info.device_type))
    {
        "kind not in device_types=".to_string()
    } else if by_default {
        match info.same_device_as {
            Some(original) => format!("same device as adapter {original}"),
            None if info.is_software() && !info.is_host() => {
                "software adapter on the host's cores (name it with backends= or adapters=)"
                    .to_string()
            }
            None => "max_devices reached".to_string(),
        }
    } else {
        "max_devices reached".to_string()
    };
    (false, why)
}

/// For every adapter of `infos`, in order: whether `options` select it and why (or why
/// not), in a few words; an error when the options themselves are invalid. What `info` and
/// `doctor` show for the default selection.
pub fn explain(infos: &[AdapterInfo], options: &ContextOptions) -> Result<Vec<(bool, String)>> {
    let devices = match select(infos, options) {
        Ok(devices) => devices,
        Err(Error::NoAdapter(_)) => Vec::new(),
        Err(e) => return Err(e),
    };
    Ok(infos
        .iter()
        .map(|info| reason(info, options, &devices))
        .collect())
}

/// One line saying which adapters a context opens, how many devices on each, why the
/// others were left out, and which options could not apply.
fn describe_selection(
    infos: &[AdapterInfo],
    devices: &[usize],
    left_out: &[LeftOut],
    notes: &[String],
) -> String {
    let mut opened: Vec<String> = Vec::new();
    for &index in devices {
        let info = &infos[index];
        let count = devices.iter().filter(|&&i| i == index).count();
        let entry = format!("[{}] {} ({}) x{count}", index, info.name, info.backend);
        if !opened.contains(&entry) {
            opened.push(entry);
        }
    }
    let skipped: Vec<String> = left_out
        .iter()
        .map(|l| match l.adapter {
            Some(index) => format!("[{index}] {} ({}): {}", l.name, l.backend, l.reason),
            None => format!("backend {}: {}", l.backend, l.reason),
        })
        .collect();
    let plural = if devices.len() == 1 { "" } else { "s" };
    let mut line = format!(
        "opening {} device{plural} on {}",
        devices.len(),
        opened.join(", ")
    );
    if !skipped.is_empty() {
        line.push_str(&format!("; left out {}", skipped.join(", ")));
    }
    for note in notes {
        line.push_str(&format!("; note: {note}"));
    }
    line
}

#[cfg(test)]
mod tests;
