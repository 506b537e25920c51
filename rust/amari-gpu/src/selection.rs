//! Which adapters a context opens, and how many logical devices on each: a pure function of
//! the enumeration and the caller's options, so it is tested without a GPU.

use crate::adapter::{canonical_backend, AdapterInfo, BACKEND_NAMES, DEVICE_TYPE_NAMES};
use crate::error::{Error, Result};
use crate::options::{check_names, describe_request, ContextOptions, MAX_DEVICES_PER_ADAPTER};

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
    if options.devices_per_adapter == 0 {
        return Err(Error::invalid(
            "devices_per_adapter",
            "expected an integer >= 1, got 0",
        ));
    }
    if options.devices_per_adapter > MAX_DEVICES_PER_ADAPTER {
        return Err(Error::invalid(
            "devices_per_adapter",
            format!(
                "expected an integer from 1 to {MAX_DEVICES_PER_ADAPTER}, got {}",
                options.devices_per_adapter
            ),
        ));
    }
    if options.max_devices == Some(0) {
        return Err(Error::invalid(
            "max_devices",
            "expected an integer >= 1 or None, got 0",
        ));
    }
    if options.chunk_items == Some(0) {
        return Err(Error::invalid(
            "chunk_items",
            "expected an integer >= 1 or None, got 0",
        ));
    }
    if options.host_threads == Some(0) {
        return Err(Error::invalid(
            "host_threads",
            "expected an integer >= 1 or None, got 0",
        ));
    }
    if options.sync_timeout_ms == Some(0) {
        return Err(Error::invalid(
            "sync_timeout_ms",
            "expected an integer >= 1 or None, got 0",
        ));
    }
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
            format!(
                "No adapter {}; {}",
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
    if log::log_enabled!(log::Level::Info) {
        log::info!("{}", describe_selection(infos, options, &devices));
    }
    Ok(devices)
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

/// One line saying which adapters a context opens, how many devices on each, and why the
/// others were left out.
fn describe_selection(
    infos: &[AdapterInfo],
    options: &ContextOptions,
    devices: &[usize],
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
    let skipped: Vec<String> = infos
        .iter()
        .filter_map(|i| match reason(i, options, devices) {
            (true, _) => None,
            (false, why) => Some(format!("[{}] {} ({}): {why}", i.index, i.name, i.backend)),
        })
        .collect();
    let mut line = format!("opening {} devices on {}", devices.len(), opened.join(", "));
    if !skipped.is_empty() {
        line.push_str(&format!("; left out {}", skipped.join(", ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_selection_line_names_what_was_opened_and_why_others_were_not() {
        let infos = vec![
            info(0, "lavapipe", "vulkan", "cpu", None),
            info(1, "llvmpipe", "gl", "cpu", None),
        ];
        let options = ContextOptions {
            backends: Some(vec!["vulkan".into()]),
            devices_per_adapter: 2,
            ..Default::default()
        };
        let devices = select(&infos, &options).unwrap();
        assert_eq!(
            describe_selection(&infos, &options, &devices),
            "opening 2 devices on [0] lavapipe (vulkan) x2; left out [1] llvmpipe (gl): backend not in backends="
        );
    }

    fn info(
        index: usize,
        name: &str,
        backend: &str,
        kind: &str,
        dup: Option<usize>,
    ) -> AdapterInfo {
        AdapterInfo {
            index,
            name: name.into(),
            vendor: "v".into(),
            vendor_id: 1,
            device_id: 0,
            backend: backend.into(),
            device_type: kind.into(),
            driver: String::new(),
            driver_info: String::new(),
            pci_bus_id: String::new(),
            limits: BTreeMap::new(),
            features: vec![],
            same_device_as: dup,
        }
    }

    fn machine() -> Vec<AdapterInfo> {
        vec![
            info(0, "gpu", "vulkan", "discrete_gpu", None),
            info(1, "igpu", "vulkan", "integrated_gpu", None),
            info(2, "lavapipe", "vulkan", "cpu", None),
            info(3, "gpu", "gl", "discrete_gpu", Some(0)),
            info(4, "cpu model", "host", "cpu", None),
        ]
    }

    /// This machine: lavapipe, llvmpipe (another software adapter) and the host device.
    fn software_only() -> Vec<AdapterInfo> {
        vec![
            info(0, "lavapipe", "vulkan", "cpu", None),
            info(1, "llvmpipe", "gl", "cpu", None),
            info(2, "cpu model", "host", "cpu", None),
        ]
    }

    fn named(names: &[&str]) -> ContextOptions {
        ContextOptions {
            backends: Some(names.iter().map(|n| n.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn default_takes_distinct_hardware_and_the_host() {
        let got = select(&machine(), &ContextOptions::default()).unwrap();
        assert_eq!(got, vec![0, 1, 4]);
    }

    #[test]
    fn default_without_hardware_is_the_host_alone() {
        let infos = software_only();
        assert_eq!(select(&infos, &ContextOptions::default()).unwrap(), vec![2]);
        // The software adapters stay selectable by name or index.
        assert_eq!(select(&infos, &named(&["vulkan"])).unwrap(), vec![0]);
        assert_eq!(
            select(&infos, &named(&["vulkan", "host"])).unwrap(),
            vec![0, 2]
        );
        assert_eq!(select(&infos, &named(&["HOST"])).unwrap(), vec![2]);
        let by_index = ContextOptions {
            adapters: Some(vec![1]),
            ..Default::default()
        };
        assert_eq!(select(&infos, &by_index).unwrap(), vec![1]);
    }

    #[test]
    fn no_wgpu_adapter_at_all_is_the_host_alone() {
        let infos = vec![info(0, "cpu model", "host", "cpu", None)];
        assert_eq!(select(&infos, &ContextOptions::default()).unwrap(), vec![0]);
        assert!(matches!(
            select(&infos, &named(&["vulkan"])),
            Err(Error::NoAdapter(_))
        ));
    }

    #[test]
    fn device_types_takes_every_distinct_adapter_of_the_kinds_named() {
        let of = |types: &[&str]| ContextOptions {
            device_types: Some(types.iter().map(|t| t.to_string()).collect()),
            ..Default::default()
        };
        assert_eq!(select(&machine(), &of(&["cpu"])).unwrap(), vec![2, 4]);
        assert_eq!(select(&machine(), &of(&["discrete_gpu"])).unwrap(), vec![0]);
        assert_eq!(
            select(&software_only(), &of(&["cpu"])).unwrap(),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn the_host_is_one_device_whatever_devices_per_adapter() {
        let options = ContextOptions {
            devices_per_adapter: 3,
            ..Default::default()
        };
        assert_eq!(
            select(&machine(), &options).unwrap(),
            vec![0, 0, 0, 1, 1, 1, 4]
        );
        // The host comes last, so a cap drops it first.
        let capped = ContextOptions {
            max_devices: Some(4),
            ..options
        };
        assert_eq!(select(&machine(), &capped).unwrap(), vec![0, 0, 0, 1]);
        let mixed = ContextOptions {
            devices_per_adapter: 2,
            ..named(&["vulkan", "host"])
        };
        assert_eq!(select(&software_only(), &mixed).unwrap(), vec![0, 0, 2]);
    }

    #[test]
    fn default_falls_back_to_software_without_hardware_or_host() {
        let infos = vec![
            info(0, "llvmpipe", "vulkan", "cpu", None),
            info(1, "llvmpipe", "gl", "cpu", Some(0)),
        ];
        assert_eq!(select(&infos, &ContextOptions::default()).unwrap(), vec![0]);
    }

    #[test]
    fn the_reasons_say_why_each_adapter_was_or_was_not_chosen() {
        let text = |pairs: &[(bool, &str)]| -> Vec<(bool, String)> {
            pairs.iter().map(|&(c, w)| (c, w.to_string())).collect()
        };
        assert_eq!(
            explain(&machine(), &ContextOptions::default()).unwrap(),
            text(&[
                (true, "hardware GPU"),
                (true, "hardware GPU"),
                (
                    false,
                    "software adapter on the host's cores (name it with backends= or adapters=)"
                ),
                (false, "same device as adapter 0"),
                (true, "the host CPU device"),
            ])
        );
        assert_eq!(
            explain(&software_only(), &named(&["vulkan", "host"])).unwrap(),
            text(&[
                (true, "backend in backends="),
                (false, "backend not in backends="),
                (true, "backend in backends="),
            ])
        );
        // A request that matches nothing explains every adapter; bad options are errors.
        let nothing = explain(&software_only(), &named(&["metal"])).unwrap();
        assert!(nothing.iter().all(|(chosen, _)| !chosen), "{nothing:?}");
        assert!(explain(&software_only(), &named(&["cuda"])).is_err());
    }

    #[test]
    fn explicit_backends_include_duplicates() {
        let options = ContextOptions {
            backends: Some(vec!["gl".into()]),
            ..Default::default()
        };
        assert_eq!(select(&machine(), &options).unwrap(), vec![3]);
    }

    #[test]
    fn devices_per_adapter_repeats_and_max_devices_truncates() {
        let options = ContextOptions {
            adapters: Some(vec![2, 0]),
            devices_per_adapter: 3,
            max_devices: Some(4),
            ..Default::default()
        };
        assert_eq!(select(&machine(), &options).unwrap(), vec![2, 2, 2, 0]);
    }

    #[test]
    fn bad_options_name_the_argument() {
        let bad = [
            ContextOptions {
                devices_per_adapter: 0,
                ..Default::default()
            },
            ContextOptions {
                backends: Some(vec!["cuda".into()]),
                ..Default::default()
            },
            ContextOptions {
                device_types: Some(vec!["tpu".into()]),
                ..Default::default()
            },
            ContextOptions {
                adapters: Some(vec![9]),
                ..Default::default()
            },
            ContextOptions {
                adapters: Some(vec![1, 1]),
                ..Default::default()
            },
            ContextOptions {
                devices_per_adapter: MAX_DEVICES_PER_ADAPTER + 1,
                ..Default::default()
            },
        ];
        let arguments = [
            "devices_per_adapter",
            "backends",
            "device_types",
            "adapters",
            "adapters",
            "devices_per_adapter",
        ];
        for (options, argument) in bad.iter().zip(arguments) {
            match select(&machine(), options) {
                Err(Error::InvalidArgument { argument: a, .. }) => assert_eq!(a, argument),
                other => panic!("expected InvalidArgument({argument}), got {other:?}"),
            }
        }
    }

    #[test]
    fn nothing_selected_is_no_adapter_with_a_hint() {
        match select(&[], &ContextOptions::default()) {
            Err(Error::NoAdapter(message)) => assert!(message.contains("mesa-vulkan-drivers")),
            other => panic!("expected NoAdapter, got {other:?}"),
        }
        let options = ContextOptions {
            device_types: Some(vec!["virtual_gpu".into()]),
            ..Default::default()
        };
        assert!(matches!(
            select(&machine(), &options),
            Err(Error::NoAdapter(_))
        ));
        let options = ContextOptions {
            backends: Some(vec!["metal".into()]),
            device_types: Some(vec!["cpu".into()]),
            ..Default::default()
        };
        match select(&machine(), &options) {
            Err(Error::NoAdapter(message)) => {
                assert!(
                    message
                        .starts_with("No adapter on backends metal, of types cpu; available: [0]"),
                    "{message}"
                );
                assert!(!message.contains("Some("), "{message}");
            }
            other => panic!("expected NoAdapter, got {other:?}"),
        }
    }
}
