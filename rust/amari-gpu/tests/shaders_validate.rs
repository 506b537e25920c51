//! Every shader the crate embeds parses and validates with naga (no GPU needed), and every
//! WGSL file in `shaders/` is part of one of them: some files are parts, valid only assembled
//! (the map skeleton and the map kernels appended to it, see `amari_gpu::shaders`), so each
//! file is validated as it is compiled. Generated shaders are validated by their generators'
//! tests.

mod common;

use common::validate;
use std::path::Path;

/// Every shader the crate embeds, by name: the shared ones and the kernel families' own.
fn embedded() -> Vec<(&'static str, &'static str)> {
    let mut all = amari_gpu::shaders::ALL.to_vec();
    all.extend([
        ("tropical.wgsl", amari_gpu::tropical::kernels::SOURCE),
        ("fisher.wgsl", amari_gpu::fisher::SHADER),
        ("fisher_resident.wgsl", amari_gpu::fisher::RESIDENT_SOURCE),
        ("fisher_checks.wgsl", amari_gpu::fisher::CHECKS_SOURCE),
    ]);
    // The elementwise kernels are the file specialised by constants: every operation.
    use amari_gpu::elementwise::{source, Layout, OPS};
    for op in OPS {
        let text = source(op, (3, amari_gpu::Dtype::F32), Layout::Row, true);
        all.push(("elementwise.wgsl", Box::leak(text.into_boxed_str())));
    }
    all
}

#[test]
fn every_shader_file_is_part_of_an_embedded_shader() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shaders");
    let shaders = embedded();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("shaders/ exists") {
        let path = entry.expect("readable entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("wgsl") {
            let source = std::fs::read_to_string(&path).expect("readable shader");
            assert!(
                shaders.iter().any(|(_, s)| s.contains(source.as_str())),
                "{} is in no embedded shader, so nothing validates it",
                path.display()
            );
            seen += 1;
        }
    }
    assert!(seen > 0, "no .wgsl file found in {}", dir.display());
}

#[test]
fn embedded_shaders_validate() {
    for (name, source) in embedded() {
        validate(name, source);
    }
}

#[test]
fn map_kernels_are_the_one_skeleton_and_their_item() {
    // The map ABI (uniform, entry point, bounds check) is written once, in map.wgsl: each
    // map kernel is that skeleton followed by its own file, which declares no uniform and
    // no entry point of its own.
    let skeleton = include_str!("../../../shaders/map.wgsl");
    let kernels = [
        ("copy.wgsl", amari_gpu::shaders::COPY),
        ("triad.wgsl", amari_gpu::shaders::TRIAD),
        ("peak.wgsl", amari_gpu::shaders::PEAK),
        ("geometric_cl3.wgsl", amari_gpu::shaders::GEOMETRIC_CL3),
    ];
    for (name, source) in kernels {
        let own = source
            .strip_prefix(skeleton)
            .unwrap_or_else(|| panic!("{name} does not start with map.wgsl"));
        for shared in ["struct Params", "@binding(0)", "@compute", "fn main"] {
            assert!(!own.contains(shared), "{name} declares its own {shared:?}");
        }
        assert!(own.contains("fn item(i: u32)"), "{name} has no item()");
        let module = validate(name, source);
        let entries: Vec<&str> = module
            .entry_points
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(entries, ["main"], "{name}");
    }
}
