//! Users' own row kernels (`map_rows`): a WGSL `fn row(a: array<amari_float, Ca>, ...) ->
//! array<amari_float, out_cols>` (`amari_float` is `f32`, or `f64` for float64 rows, which
//! only devices with `SHADER_F64` are given) wrapped into a compute shader (`wrap`), checked with naga before
//! any device sees it (`check`), and run through the planner like a built-in map kernel on
//! the wgpu devices of one driver (`place`): two drivers compile the same WGSL to different
//! bits (`length`, `dot`, `exp`...), and a call must give the same bits however it is
//! split. The host device has no implementation of a user's WGSL, so the plan leaves it
//! out. The pipeline is cached per device under an id derived from the generated source,
//! so the same kernel compiles once per device (up to `device::MAX_USER_PIPELINES`).

mod arrays;
mod check;
mod wrap;

use crate::context::MultiGpuContext;
use crate::device::GpuDevice;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::kernel::{Input, Kernel, Output};
use crate::resident::{Operand, Ready};

pub use arrays::{RowArray, RowsCall};
pub use wrap::Column;

use arrays::items;

/// 64-bit FNV-1a of `text`: a stable name for a generated module (the same on every run,
/// unlike the standard library's hasher), used as the pipeline-cache key and the label.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The checked kernel of `call`: its WGSL parsed and validated by naga, `row`'s signature
/// matched against the arrays. `Error::KernelCompile` says where and what does not match.
pub fn kernel(call: &RowsCall<'_>) -> Result<Kernel> {
    let columns: Vec<Column> = call
        .arrays
        .iter()
        .map(|a| Column {
            cols: a.cols(),
            broadcast: a.broadcast(),
        })
        .collect();
    kernel_of(
        call.source,
        &columns,
        (&call.params, call.dtype),
        call.out_cols,
    )
}

/// The checked kernel of `source` for arrays of these `columns` (in `row`'s parameter
/// order), named `params`, rows of `dtype` and `out_cols` output values: what [`kernel`]
/// builds, without the data (resident calls have their rows on the devices).
pub fn kernel_of(
    source: &str,
    columns: &[Column],
    (params, dtype): (&[(String, f32)], Dtype),
    out_cols: usize,
) -> Result<Kernel> {
    if out_cols == 0 {
        return Err(Error::invalid(
            "out_cols",
            "expected an integer >= 1, got 0",
        ));
    }
    if dtype == Dtype::F16 {
        return Err(Error::invalid(
            "dtype",
            "expected float32 or float64 rows (map_rows has no float16 kernels), got float16",
        ));
    }
    let names: Vec<String> = params.iter().map(|(n, _)| n.clone()).collect();
    let text = check::checked_module(source, columns, (&names, dtype), out_cols)?;
    let id = format!("{:016x}", fnv1a(&text));
    let mut kernel = Kernel::map(id, Family::Rows, text);
    kernel.entry = wrap::ENTRY;
    kernel.dtype = dtype;
    let words = |values: usize| dtype.words(values);
    kernel.inputs = columns
        .iter()
        .map(|c| {
            Ok(if c.broadcast {
                Input::Whole(words(c.cols)?)
            } else {
                Input::PerItem(words(c.cols)?)
            })
        })
        .collect::<Result<_>>()?;
    kernel.output = Output::PerItem(words(out_cols)?);
    kernel.params = params.iter().map(|(_, v)| v.to_bits()).collect();
    kernel.loop_check = true;
    // Unknown arithmetic: one operation per word moved is the planner's guess; the family
    // has no calibrated rate of its own, so the mean measured rate applies.
    kernel.flops_per_item = (kernel.input_words_per_item() + kernel.output_words_per_item()) as f64;
    Ok(kernel)
}

/// What decides the bits a device computes for a user's WGSL: its backend and driver (the
/// compiler) and the hardware it compiles for. Devices alike in all of these (the logical
/// devices of one adapter, or identical adapters of one driver) give the same bits.
fn driver_of(dev: &GpuDevice) -> (&str, u32, u32, &str, &str, &str) {
    let a = &dev.adapter;
    (
        a.backend.as_str(),
        a.vendor_id,
        a.device_id,
        a.name.as_str(),
        a.driver.as_str(),
        a.driver_info.as_str(),
    )
}

/// Restricts `kernel` to the devices that may run a user's WGSL in `ctx`: the wgpu devices
/// of the driver of the context's first wgpu device running the kernel's dtype (the lowest
/// id), healthy or not, so
/// that every call on the context computes the same bits whatever the strategy, the device
/// count or the devices' health. Refuses a context with no wgpu device before any work:
/// the host device cannot run a shader, and without this check the call would fail later
/// with a device error that says nothing of the cause.
pub fn place(ctx: &MultiGpuContext, kernel: &mut Kernel) -> Result<()> {
    let dtype = kernel.dtype;
    let all_wgpu = || ctx.devices().iter().filter(|d| d.as_host().is_none());
    // Only devices that compute in the rows' dtype are candidates (float64: SHADER_F64).
    let mut wgpu = all_wgpu().filter(|d| d.runs(dtype));
    if dtype != Dtype::F32 && all_wgpu().next().is_some() && !all_wgpu().any(|d| d.runs(dtype)) {
        let lacking: Vec<String> = all_wgpu().filter_map(|d| d.lacks(dtype)).collect();
        return Err(Error::invalid(
            "dtype",
            format!(
                "map_rows computes {dtype} rows on wgpu devices with {} only (the host CPU \
                 device cannot run WGSL), and this context has none: {}. Pass \
                 dtype=numpy.float32 to compute in float32",
                dtype.feature_name(),
                lacking.join("; ")
            ),
        ));
    }
    let Some(first) = wgpu.next() else {
        return Err(Error::invalid(
            "ctx",
            "expected a context with a wgpu device (map_rows runs WGSL, which the host CPU \
             device cannot), got one whose only device is the host; open a wgpu adapter too, \
             e.g. MultiGpuContext(backends=[\"vulkan\", \"host\"])",
        ));
    };
    let driver = driver_of(first);
    let mut devices = vec![first.id];
    devices.extend(wgpu.filter(|d| driver_of(d) == driver).map(|d| d.id));
    kernel.devices = Some(devices);
    Ok(())
}

/// The checks of `call` that need no context: its arrays' shapes and rows in the caller's
/// terms and its kernel (naga); its items and checked kernel. A cluster's driver calls it
/// on the whole call before it splits the rows over its nodes.
pub fn check_call(call: &RowsCall<'_>) -> Result<(usize, Kernel)> {
    Ok((items(call)?, kernel(call)?))
}

/// `call` on the wgpu devices of `ctx`: its arrays' shapes and rows checked in the
/// caller's terms, its kernel (naga), and a context that can run it; what runs it into
/// `out` (items × `out_cols` words) by the rule of every map operation: over host arrays
/// through the planner, or, when an array is resident, where its rows live (host arrays
/// uploaded to match).
pub fn map_rows<'a>(ctx: &MultiGpuContext, call: RowsCall<'a>) -> Result<Ready<'a>> {
    let (items, mut kernel) = check_call(&call)?;
    place(ctx, &mut kernel)?;
    Ok(Ready::new(move |ctx, out, strategy| {
        let names: Vec<String> = (0..call.arrays.len())
            .map(|k| format!("arrays[{k}]"))
            .collect();
        let operands: Vec<(&str, Operand<'_>)> = names
            .iter()
            .zip(&call.arrays)
            .map(|(name, a)| (name.as_str(), a.data))
            .collect();
        ctx.run_map_to(&kernel, &operands, items, out, strategy)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(source: &'a str, arrays: Vec<RowArray<'a>>, out_cols: usize) -> RowsCall<'a> {
        RowsCall {
            source,
            arrays,
            out_cols,
            params: vec![("scale".into(), 2.0)],
            dtype: Dtype::F32,
        }
    }

    const ROWS: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];

    fn pairs() -> RowArray<'static> {
        RowArray {
            data: Operand::Host(&ROWS),
            shape: &[3, 2],
        }
    }

    #[test]
    fn a_good_kernel_wraps_and_validates() {
        let source = "fn row(a: array<f32, 2>) -> array<f32, 1> {\n    \
                      return array<f32, 1>(params.scale * (a[0] + a[1]));\n}\n";
        let k = kernel(&call(source, vec![pairs()], 1)).expect("valid");
        assert_eq!(k.inputs, vec![Input::PerItem(2)]);
        assert_eq!(k.params, vec![2.0f32.to_bits()]);
        assert_eq!(items(&call(source, vec![pairs()], 1)), Ok(3));
    }

    #[test]
    fn a_syntax_error_names_the_users_line_and_column() {
        let source =
            "fn row(a: array<f32, 2>) -> array<f32, 1> {\n    return array<f32, 1>(a[0] +);\n}\n";
        let Err(Error::KernelCompile(message)) = kernel(&call(source, vec![pairs()], 1)) else {
            panic!("expected a compile error");
        };
        assert!(message.contains("line 2, column"), "{message}");
    }

    #[test]
    fn a_signature_mismatch_says_which_part() {
        let source =
            "fn row(a: array<f32, 3>) -> array<f32, 1> {\n    return array<f32, 1>(a[0]);\n}\n";
        let Err(Error::KernelCompile(message)) = kernel(&call(source, vec![pairs()], 1)) else {
            panic!("expected a compile error");
        };
        assert!(
            message.contains("parameter 1 (a) must be array<f32, 2>"),
            "{message}"
        );
        let source = "fn row(a: array<f32, 2>) -> array<f32, 2> {\n    return array<f32, 2>(a[0], a[1]);\n}\n";
        let Err(Error::KernelCompile(message)) = kernel(&call(source, vec![pairs()], 1)) else {
            panic!("expected a compile error");
        };
        assert!(message.contains("must return array<f32, 1>"), "{message}");
        let Err(Error::KernelCompile(message)) = kernel(&call("fn f() {}", vec![pairs()], 1))
        else {
            panic!("expected a compile error");
        };
        assert!(message.contains("found none"), "{message}");
    }

    fn compile_message(source: &str, arrays: Vec<RowArray<'_>>) -> String {
        match kernel(&call(source, arrays, 1)) {
            Err(Error::KernelCompile(message)) => message,
            other => panic!("expected a compile error, got {other:?}"),
        }
    }

    const GOOD: &str = "fn row(a: array<f32, 2>) -> array<f32, 1> {\n    \
                        return array<f32, 1>(a[0]);\n}\n";

    #[test]
    fn the_users_own_resources_overrides_and_entry_points_are_refused_where_declared() {
        for (declaration, why) in [
            (
                "@group(0) @binding(99) var<storage, read> x: array<f32>;",
                "@group/@binding",
            ),
            (
                "@group(1) @binding(0) var<uniform> x: vec4<f32>;",
                "@group/@binding",
            ),
            (
                "@group(0) @binding(5) var x: texture_2d<f32>;",
                "@group/@binding",
            ),
            (
                "@group(0) @binding(5) var<storage, read_write> x: atomic<u32>;",
                "@group/@binding",
            ),
            ("var<workgroup> x: array<f32, 4>;", "var<workgroup>"),
            ("override x: f32;", "override x"),
            (
                "@compute @workgroup_size(1) fn x() {}",
                "`x` is an entry point",
            ),
        ] {
            let source = format!("// kernel\n  {declaration}\n{GOOD}");
            let message = compile_message(&source, vec![pairs()]);
            assert!(message.contains("line 2, column "), "{message}");
            assert!(message.contains(why), "{message}");
        }
        // A var<private> and a const are the user's to declare.
        let source = format!("var<private> x: array<f32, 4>;\nconst y = 2.0;\n{GOOD}");
        assert!(kernel(&call(&source, vec![pairs()], 1)).is_ok());
    }

    #[test]
    fn private_memory_is_bounded_at_its_declaration() {
        let local = "fn row(a: array<f32, 2>) -> array<f32, 1> {\n    \
                     var t: array<f32, 100000000>;\n    \
                     t[u32(a[0])] = a[1];\n    return array<f32, 1>(t[0]);\n}\n";
        let message = compile_message(local, vec![pairs()]);
        assert!(
            message.contains("line 2, column 5 of source: `var t` takes 400000000 bytes"),
            "{message}"
        );
        let global = format!("var<private> t: array<f32, 4097>;\n{GOOD}");
        let message = compile_message(&global, vec![pairs()]);
        assert!(message.contains("line 1, column"), "{message}");
        assert!(message.contains("at most 16384"), "{message}");
        // The rows passed to row count too: 5,000 columns are 20,000 bytes.
        let wide = vec![0.0f32; 5000];
        let source = "fn row(a: array<f32, 5000>) -> array<f32, 1> {\n    \
                      return array<f32, 1>(a[0]);\n}\n";
        let arrays = vec![RowArray {
            data: Operand::Host(&wide),
            shape: &[1, 5000],
        }];
        let message = compile_message(source, arrays);
        assert!(message.contains("copies of the rows"), "{message}");
        // Under the bound is fine.
        let fits = local.replace("100000000", "3000");
        assert!(kernel(&call(&fits, vec![pairs()], 1)).is_ok());
    }

    #[test]
    fn float64_rows_take_two_words_a_value_and_an_f64_row() {
        let source = "fn row(a: array<amari_float, 2>) -> array<amari_float, 1> {\n    \
                      return array<amari_float, 1>(a[0] * amari_float(params.scale));\n}\n";
        let words = [0.0f32; 12];
        let arrays = vec![RowArray {
            data: Operand::Host(&words),
            shape: &[3, 2],
        }];
        let mut wide = call(source, arrays, 1);
        wide.dtype = Dtype::F64;
        assert_eq!(items(&wide), Ok(3));
        let k = kernel(&wide).expect("valid");
        assert_eq!(k.dtype, Dtype::F64);
        assert_eq!(k.inputs, vec![Input::PerItem(4)]);
        assert_eq!(k.output, Output::PerItem(2));
        assert_eq!(k.loop_check_bytes(), 8);
        // The check value's low word (the one the executor reads) is nonzero.
        assert!(k.source.contains("1.0000000000000002lf"));
        assert_eq!((1.0000000000000002f64).to_bits() as u32, 1);
        // The same source on float32 rows.
        assert_eq!(
            kernel(&call(source, vec![pairs()], 1)).map(|k| k.dtype),
            Ok(Dtype::F32)
        );
        // An f32 kernel on float64 rows says how to write one.
        let mut narrow = call(GOOD, wide.arrays.clone(), 1);
        narrow.dtype = Dtype::F64;
        let Err(Error::KernelCompile(message)) = kernel(&narrow) else {
            panic!("expected a compile error");
        };
        assert!(message.contains("must be array<f64, 2>"), "{message}");
        assert!(message.contains("amari_float"), "{message}");
        // float64 words that do not make up the shape.
        let odd = [0.0f32; 11];
        let short = RowArray {
            data: Operand::Host(&odd),
            shape: &[3, 2],
        };
        let mut bad = call(source, vec![short], 1);
        bad.dtype = Dtype::F64;
        assert!(matches!(items(&bad), Err(Error::Shape { .. })));
    }

    #[test]
    fn rows_must_agree() {
        let short = RowArray {
            data: Operand::Host(&ROWS[..4]),
            shape: &[2, 2],
        };
        let err = items(&call("", vec![pairs(), short], 1)).unwrap_err();
        assert!(matches!(err, Error::Shape { ref argument, .. } if argument == "arrays[1]"));
    }
}
