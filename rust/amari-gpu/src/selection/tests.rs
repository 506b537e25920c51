//! Unit tests of the selection: hand-made enumerations (hardware GPUs, software adapters, the
//! host device) against the rule and the reasons it gives.

use super::*;
use crate::options::MAX_DEVICES_PER_ADAPTER;
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
    assert_eq!(
        selection(&infos, &options).unwrap().summary,
        "opening 2 devices on [0] lavapipe (vulkan) x2; left out [1] llvmpipe (gl): backend not in backends="
    );
}

#[test]
fn devices_per_adapter_on_the_host_alone_is_a_note_with_every_left_out_adapter() {
    // No hardware GPU: the host device alone, whatever devices_per_adapter asked for.
    let options = ContextOptions {
        devices_per_adapter: 2,
        ..Default::default()
    };
    let chosen = selection(&software_only(), &options).unwrap();
    assert_eq!(chosen.devices, vec![2]);
    let left: Vec<(Option<usize>, &str)> = chosen
        .left_out
        .iter()
        .map(|l| (l.adapter, l.reason.as_str()))
        .collect();
    assert_eq!(
        left,
        vec![
            (
                Some(0),
                "software adapter on the host's cores (name it with backends= or adapters=)"
            ),
            (
                Some(1),
                "software adapter on the host's cores (name it with backends= or adapters=)"
            ),
        ]
    );
    assert_eq!(chosen.notes.len(), 1);
    assert!(chosen.notes[0].starts_with("devices_per_adapter=2 does not apply to the host device"));
    assert!(chosen.notes[0].ends_with("so the context has 1 device"));
    assert!(chosen
        .summary
        .starts_with("opening 1 device on [2] cpu model (host) x1; left out [0] lavapipe"));
    assert!(chosen.summary.contains("; note: devices_per_adapter=2"));
    // Beside a wgpu adapter the note stays, without the "1 device" clause.
    let beside = ContextOptions {
        devices_per_adapter: 2,
        ..named(&["vulkan", "host"])
    };
    let chosen = selection(&software_only(), &beside).unwrap();
    assert_eq!(chosen.devices, vec![0, 0, 2]);
    assert_eq!(chosen.notes.len(), 1);
    assert!(!chosen.notes[0].contains("1 device"));
    // With devices_per_adapter=1 there is nothing to say.
    assert!(selection(&software_only(), &ContextOptions::default())
        .unwrap()
        .notes
        .is_empty());
}

#[test]
fn a_named_backend_without_adapter_is_left_out_with_its_reason() {
    let chosen = selection(&software_only(), &named(&["vulkan", "metal", "dx12"])).unwrap();
    let missing: Vec<&LeftOut> = chosen
        .left_out
        .iter()
        .filter(|l| l.adapter.is_none())
        .collect();
    assert_eq!(missing.len(), 2);
    assert_eq!(missing[0].backend, "metal");
    assert_eq!(missing[1].backend, "dx12");
    if !cfg!(any(target_os = "macos", target_os = "ios")) {
        assert_eq!(
            missing[0].reason,
            "no adapter: Metal exists only on macOS and iOS"
        );
    }
    if !cfg!(windows) {
        assert_eq!(missing[1].reason, "no adapter: DX12 exists only on Windows");
    }
    assert!(chosen.summary.contains("backend metal: no adapter"));
    // Nothing selected: the error says why the backend has no adapter.
    match select(&software_only(), &named(&["metal"])) {
        Err(Error::NoAdapter(message)) => {
            assert!(message.contains("backend metal: no adapter"), "{message}")
        }
        other => panic!("expected NoAdapter, got {other:?}"),
    }
}

#[test]
fn devices_cut_by_max_devices_are_a_note() {
    let options = ContextOptions {
        devices_per_adapter: 3,
        max_devices: Some(2),
        ..named(&["vulkan"])
    };
    let chosen = selection(&software_only(), &options).unwrap();
    assert_eq!(chosen.devices, vec![0, 0]);
    assert_eq!(
        chosen.notes,
        vec!["max_devices=2 opened 2 of the 3 devices the selection has".to_string()]
    );
}

fn info(index: usize, name: &str, backend: &str, kind: &str, dup: Option<usize>) -> AdapterInfo {
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
            // The missing backend says why it is missing, then what is there.
            assert!(
                message.starts_with(
                    "No adapter on backends metal, of types cpu (backend metal: no adapter"
                ),
                "{message}"
            );
            assert!(message.contains("); available: [0]"), "{message}");
            assert!(!message.contains("Some("), "{message}");
        }
        other => panic!("expected NoAdapter, got {other:?}"),
    }
}
