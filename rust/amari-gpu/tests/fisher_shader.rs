//! `shaders/fisher.wgsl`, as the crate embeds it, parses and validates with naga (no GPU
//! needed), and declares every entry point the family's kernels name.

mod common;

use amari_gpu::fisher;
use common::validate;

#[test]
fn fisher_shader_validates_with_naga() {
    let module = validate("fisher.wgsl", fisher::SHADER);
    let entries: Vec<&str> = module
        .entry_points
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    let kernels = [
        fisher::tiled_kernel(5),
        fisher::naive_kernel(5),
        fisher::softmax_kernel(5),
        fisher::reference_kernel(),
    ];
    for kernel in &kernels {
        assert!(
            entries.contains(&kernel.entry),
            "kernel {} names entry point {} missing from {entries:?}",
            kernel.id,
            kernel.entry
        );
    }
}

#[test]
fn the_generated_maps_validate_and_declare_their_entry_points() {
    for kernel in [
        fisher::categorical_outer_kernel(5),
        fisher::gaussian_diag_kernel(5),
    ] {
        let module = validate(&kernel.id, &kernel.source);
        assert!(
            module.entry_points.iter().any(|e| e.name == kernel.entry),
            "{}",
            kernel.id
        );
    }
}

#[test]
fn the_resident_passes_validate_and_declare_their_entry_points() {
    let module = validate("fisher_resident.wgsl", fisher::RESIDENT_SOURCE);
    let entries: Vec<&str> = module
        .entry_points
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    for kernel in [fisher::column_max_kernel(5), fisher::prepare_kernel(5, 8)] {
        assert!(
            entries.contains(&kernel.entry),
            "{} in {entries:?}",
            kernel.entry
        );
    }
    let checks = validate("fisher_checks.wgsl", fisher::CHECKS_SOURCE);
    let kernel = fisher::flag_kernel(5, amari_gpu::fisher::host_checks::Rule::Positive);
    assert_eq!(checks.entry_points[0].name, kernel.entry);
}

#[test]
fn the_embedded_shader_is_the_file_in_shaders() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shaders/fisher.wgsl");
    let on_disk = std::fs::read_to_string(path).expect("shaders/fisher.wgsl is readable");
    assert_eq!(on_disk, fisher::SHADER);
}
