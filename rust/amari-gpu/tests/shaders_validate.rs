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
