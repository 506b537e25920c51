//! Elementwise arithmetic on rows: what a DeviceArray's operators and numpy ufuncs
//! (`+ - * /`, the six comparisons, `negative`, `absolute`, `sqrt`) run where its rows live,
//! in float32, float64 or float16 (stored; computed in float32 and rounded once, as numpy's
//! float16 loops do). Each is one IEEE operation per value, the one numpy's ufunc of that
//! dtype does, so a row's result does not depend on which device computed it, on the host
//! device ([`host`]) or in WGSL (`shaders/elementwise.wgsl`, [`wgsl`]), as long as the device
//! rounds `/` and `sqrt` correctly: WGSL allows 2.5 ULP for `x / y` and inherits `sqrt`'s
//! accuracy from `inverseSqrt` (2 ULP), so a hardware GPU may differ there in the last bits;
//! the host device and Mesa's lavapipe and llvmpipe (IEEE division and square root through
//! LLVM) do not. Comparisons write 1.0 or 0.0 (the Python package turns them into numpy's
//! booleans).
//!
//! One item is one row (`cols` values): the second operand is the same rows, one row for
//! every row, or one value for every value (a scalar), bound as the resident layer binds any
//! operand; a unary operation binds one unused value there.

pub mod host;
mod op;
mod wgsl;

use std::borrow::Cow;

use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::kernel::{FamilyDefinition, Input, Kernel, Output};
use crate::resident::{Operand, Ready};

use host::Elementwise;
pub use op::{Layout, Op, OPS};

/// Columns one pass of a row walks: loop trips of an invocation stay within
/// [`LOOP_BUDGET`](crate::kernel::LOOP_BUDGET), whatever the row's width.
pub const PASS_COLS: usize = 16_384;

// A pass's trips and its loop's exit test fit the budget.
const _: () = assert!((PASS_COLS as u64) < crate::kernel::LOOP_BUDGET);

/// The WGSL of `op` over rows of `cols` values of `dtype`, the second operand laid out as
/// `layout` (`swap`: it is the left operand): the map skeleton, the operation's text
/// (`shaders/elementwise.wgsl` for float32, [`wgsl`] for the others) and the constants that
/// specialise it.
pub fn source(op: Op, (cols, dtype): (usize, Dtype), layout: Layout, swap: bool) -> String {
    let (b_row, b_col) = layout.strides(cols);
    let (enable, body) = match dtype {
        Dtype::F32 => ("", Cow::Borrowed(include_str!("../../../../shaders/elementwise.wgsl"))),
        _ if op.is_arithmetic() => (dtype.wgsl_enable(), Cow::Owned(wgsl::body(op, dtype))),
        _ => ("", Cow::Owned(wgsl::body(op, dtype))),
    };
    format!(
        "{enable}{}{body}\nconst OP: u32 = {}u;\nconst COLS: u32 = {cols}u;\nconst PASS_COLS: u32 = \
         {PASS_COLS}u;\nconst B_ROW: u32 = {b_row}u;\nconst B_COL: u32 = {b_col}u;\nconst \
         SWAP: bool = {swap};\n",
        include_str!("../../../../shaders/map.wgsl"),
        op.code(),
    )
}

/// Passes of a chunk: one per [`PASS_COLS`] columns (`params[0]` is the row's width).
fn passes(_items: u32, params: &[u32]) -> u32 {
    params
        .first()
        .map_or(1, |&cols| cols.div_ceil(PASS_COLS as u32))
}

/// The kernel of `op` over rows of `cols` values of `dtype` (`cols` > 0, even for
/// float16), the second operand laid out as `layout`, `swap` when it is the left operand;
/// its host twin set. A float32 kernel is the one it always was (id, source, pipeline key).
pub fn kernel(op: Op, (cols, dtype): (usize, Dtype), layout: Layout, swap: bool) -> Kernel {
    let id = format!("{}/{cols}/{layout:?}/{swap}", op.name());
    let text = source(op, (cols, dtype), layout, swap);
    let mut kernel = Kernel::map(id, Family::Elementwise, Cow::Owned(text));
    kernel.dtype = dtype;
    kernel.inputs = vec![
        Input::PerItem(dtype.words_of(cols)),
        layout.input(cols, dtype),
    ];
    kernel.output = Output::PerItem(dtype.words_of(cols));
    // The width, for `passes` (the shader has it as a constant).
    kernel.params = vec![cols as u32];
    kernel.passes = Some(passes);
    kernel.flops_per_item = cols as f64;
    kernel.host = Some(std::sync::Arc::new(Elementwise {
        op,
        cols,
        layout,
        swap,
        dtype,
    }));
    kernel
}

/// The checked call of `op` on `a` (rows of `cols` values of `dtype`, resident or host
/// words) and `b` (laid out as `layout`; None for a unary operation), `swap` when `b` is the
/// left operand: ready to run where `a`'s rows live.
pub fn elementwise<'a>(
    op: Op,
    a: Operand<'a>,
    (cols, dtype): (usize, Dtype),
    b: Option<(Operand<'a>, Layout)>,
    swap: bool,
) -> Result<Ready<'a>> {
    const UNUSED: [f32; 2] = [0.0; 2];
    let (b, layout) = match (op.is_unary(), b) {
        (true, None) => (
            Operand::Host(&UNUSED[..dtype.words_of(1).max(1)]),
            Layout::Scalar,
        ),
        (false, Some(b)) => b,
        (true, Some(_)) => {
            return Err(Error::invalid(
                "b",
                format!("expected None for {}, which takes one operand, got an operand", op.name()),
            ))
        }
        (false, None) => {
            return Err(Error::invalid(
                "b",
                format!("expected a second operand for {}, got None", op.name()),
            ))
        }
    };
    let rows = check(a, (cols, dtype), b, layout)?;
    let kernel = kernel(op, (cols, dtype), layout, swap);
    Ok(Ready::new(move |ctx, out, strategy| {
        ctx.run_map_to(&kernel, &[("a", a), ("b", b)], rows, out, strategy)
    }))
}

/// The rows of `a`, after checking that `a` is rows of `cols` values of `dtype` (resident
/// ones of that dtype) and `b` fits `layout`.
fn check(a: Operand<'_>, (cols, dtype): (usize, Dtype), b: Operand<'_>, layout: Layout) -> Result<usize> {
    if cols == 0 {
        return Err(Error::invalid("cols", "expected an integer >= 1, got 0"));
    }
    let width = dtype.words(cols).map_err(|_| {
        Error::invalid(
            "a",
            format!(
                "expected rows of an even number of float16 values (two to a 4-byte word), \
                 got rows of {cols}"
            ),
        )
    })?;
    for (name, operand) in [("a", a), ("b", b)] {
        if let Operand::Resident(r) = operand {
            if r.dtype() != dtype {
                return Err(Error::invalid(
                    name,
                    format!(
                        "expected a DeviceArray of {dtype} (the dtype the operation computes \
                         in), got one of {}",
                        r.dtype()
                    ),
                ));
            }
        }
    }
    let words = |op: Operand<'_>| match op {
        Operand::Host(data) => (data.len() / width, data.len() % width, data.len()),
        Operand::Resident(r) => (r.rows(), if r.cols() == width { 0 } else { 1 }, r.rows() * r.cols()),
    };
    let (rows, spare, _) = words(a);
    if spare != 0 {
        return Err(Error::Shape {
            argument: "a".into(),
            expected: format!("(N, {cols})"),
            actual: format!("{} words", words(a).2),
        });
    }
    let wanted = match layout {
        Layout::Rows => vec![rows, width],
        Layout::Row => vec![1, width],
        Layout::Scalar => vec![1, dtype.words_of(1).max(1)],
    };
    let (b_rows, b_spare, b_words) = words(b);
    let fits = match (layout, b) {
        (Layout::Rows, _) => b_rows == rows && b_spare == 0,
        (_, Operand::Host(_)) => b_words == wanted[0] * wanted[1],
        (_, Operand::Resident(_)) => false,
    };
    if !fits {
        return Err(Error::Shape {
            argument: "b".into(),
            expected: format!("{} words", wanted[0] * wanted[1]),
            actual: format!("{b_words} words"),
        });
    }
    Ok(rows)
}

/// The family's definition: its operations, and addition over rows of 8 words it is
/// calibrated with.
pub const DEFINITION: FamilyDefinition = FamilyDefinition {
    family: Family::Elementwise,
    is_operation: |name| Op::parse(name).is_ok(),
    reference: || kernel(Op::Add, (REFERENCE_COLS, Dtype::F32), Layout::Rows, false),
    reference_flops_per_item: REFERENCE_COLS as f64,
    calibration_min_items: 1 << 12,
};

/// Words per row of the calibration reference.
const REFERENCE_COLS: usize = 8;

crate::family::declare_family! {
    /// Elementwise arithmetic on rows (a DeviceArray's operators and ufuncs).
    Elementwise = "elementwise";
}

#[cfg(test)]
mod tests {
    use super::host::apply;
    use super::*;
    use crate::kernel::HostImpl;

    #[test]
    fn every_op_parses_from_its_name() {
        for op in OPS {
            assert_eq!(Op::parse(op.name()), Ok(op));
        }
        assert!(Op::parse("exp").is_err());
    }

    #[test]
    fn a_wide_row_is_walked_in_passes_within_the_loop_budget() {
        let k = kernel(Op::Add, (3 * PASS_COLS + 1, Dtype::F32), Layout::Row, false);
        assert_eq!(k.pass_count(10), 4);
        assert_eq!(kernel(Op::Sqrt, (8, Dtype::F32), Layout::Scalar, false).pass_count(10), 1);
    }

    #[test]
    fn operands_must_fit_their_layout() {
        let a = [1.0f32; 6];
        let row = [2.0f32; 3];
        assert!(check(Operand::Host(&a), (3, Dtype::F32), Operand::Host(&row), Layout::Row).is_ok());
        let err = check(Operand::Host(&a), (3, Dtype::F32), Operand::Host(&row), Layout::Rows).unwrap_err();
        assert!(matches!(err, Error::Shape { ref argument, .. } if argument == "b"));
        let err = check(Operand::Host(&a), (4, Dtype::F32), Operand::Host(&row), Layout::Scalar).unwrap_err();
        assert!(matches!(err, Error::Shape { ref argument, .. } if argument == "a"));
    }

    #[test]
    fn float64_and_float16_sources_validate_for_every_op_and_layout() {
        let caps = naga::valid::Capabilities::FLOAT64 | naga::valid::Capabilities::SHADER_FLOAT16;
        for dtype in [Dtype::F64, Dtype::F16] {
            for op in OPS {
                for layout in [Layout::Rows, Layout::Row, Layout::Scalar] {
                    let text = source(op, (4, dtype), layout, true);
                    let module = naga::front::wgsl::parse_str(&text).unwrap_or_else(|e| {
                        panic!("{dtype} {op:?}: {}", e.emit_to_string(&text))
                    });
                    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
                        .validate(&module)
                        .unwrap_or_else(|e| panic!("{dtype} {op:?}: {}", e.emit_to_string(&text)));
                }
            }
        }
    }

    #[test]
    fn a_float16_row_of_an_odd_count_is_refused_naming_a() {
        let a = [0.0f32; 3];
        let err = check(Operand::Host(&a), (3, Dtype::F16), Operand::Host(&a[..1]), Layout::Scalar)
            .unwrap_err()
            .to_string();
        assert!(err.contains("even number of float16 values"), "{err}");
    }

    #[test]
    fn float64_and_float16_host_answers_are_numpys_rules() {
        use super::host::apply_f16;
        // ±0 equal, NaN unordered, the sign bit flipped on a NaN too.
        assert_eq!(apply::<f64>(Op::Equal, 0.0, -0.0), 1.0);
        assert_eq!(apply::<f64>(Op::NotEqual, f64::NAN, f64::NAN), 1.0);
        assert_eq!(apply::<f64>(Op::Less, f64::NAN, 1.0), 0.0);
        let nan = f64::from_bits(0x7ff8_0000_0000_0001);
        assert_eq!(apply::<f64>(Op::Negative, nan, 0.0).to_bits(), 0xfff8_0000_0000_0001);
        // float16: 1 + 2^-11 rounds to even (1.0) once; 65504 * 2 overflows to infinity.
        assert_eq!(apply_f16(Op::Add, 0x3c00, 0x1000), 0x3c00);
        assert_eq!(apply_f16(Op::Multiply, 0x7bff, 0x4000), 0x7c00);
        assert_eq!(apply_f16(Op::Negative, 0x7e01, 0), 0xfe01);
        assert_eq!(apply_f16(Op::Less, 0x8000, 0x0000), 0);
    }

    #[test]
    fn negative_and_absolute_work_on_the_sign_bit_nan_too() {
        let nan = f32::from_bits(0x7fc0_0001);
        assert_eq!(apply(Op::Negative, nan, 0.0).to_bits(), 0xffc0_0001);
        assert_eq!(apply(Op::Absolute, -nan, 0.0).to_bits(), 0x7fc0_0001);
        assert_eq!(apply(Op::Negative, 0.0f32, 0.0).to_bits(), (-0.0f32).to_bits());
    }

    #[test]
    fn a_row_operand_and_a_swap_line_up_as_the_shader_reads_them() {
        let kernel = Elementwise {
            op: Op::Subtract,
            cols: 2,
            layout: Layout::Row,
            swap: true,
            dtype: Dtype::F32,
        };
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut out = [0.0; 4];
        kernel.run(&[&a, &[10.0, 20.0]], 1..3, &mut out);
        assert_eq!(out, [7.0, 16.0, 5.0, 14.0]);
    }
}
