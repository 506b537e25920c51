//! Every WGSL file in `shaders/`, and every shader the crate embeds, parses and validates
//! with naga (no GPU needed). Generated shaders are validated by their generators' tests.

mod common;

use common::validate;
use std::path::Path;

#[test]
fn every_shader_file_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shaders");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("shaders/ exists") {
        let path = entry.expect("readable entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("wgsl") {
            let source = std::fs::read_to_string(&path).expect("readable shader");
            validate(&path.display().to_string(), &source);
            seen += 1;
        }
    }
    assert!(seen > 0, "no .wgsl file found in {}", dir.display());
}

#[test]
fn embedded_shaders_validate() {
    for (name, source) in amari_gpu::shaders::ALL {
        validate(name, source);
    }
}
