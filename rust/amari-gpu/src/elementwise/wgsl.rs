//! The WGSL of the float64 and float16 elementwise kernels (float32's is
//! `shaders/elementwise.wgsl`, unchanged). Arithmetic (`+ - * /`, `sqrt`) binds the rows as
//! arrays of the dtype: float64 computes in float64, float16 values are widened to float32,
//! computed there and rounded once at the store, as numpy's float16 loops do. The
//! comparisons, `negative` and `absolute` bind the rows as `u32` words and work on the bits
//! (a NaN is recognised by its bits, ±0 compare equal, the others order by sign and
//! magnitude), because WGSL lets a compiler assume no NaN is present and has no `bitcast` of
//! `f64`; so their answers need no float64 support and match numpy's for every value.
//!
//! A float16 row holds an even count of values (two to a word), so an invocation writes
//! whole words of its own row only.

use super::op::Op;
use crate::dtype::Dtype;

/// Comparisons on the bits of a value held as `(lo, hi)` words: `hi` holds the sign at
/// `SIGN` and the exponent's all-ones pattern is `INF` (float64: the high word; float16:
/// the value's 16 bits, `lo` zero).
const BITS: &str = "\
fn mag(v: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(v.x, v.y & (SIGN - 1u));
}

fn is_nan(v: vec2<u32>) -> bool {
    let m = mag(v);
    return m.y > INF || (m.y == INF && m.x != 0u);
}

fn is_zero(v: vec2<u32>) -> bool {
    let m = mag(v);
    return m.y == 0u && m.x == 0u;
}

// |x| < |y| on the bits.
fn mag_less(x: vec2<u32>, y: vec2<u32>) -> bool {
    let mx = mag(x);
    let my = mag(y);
    return mx.y < my.y || (mx.y == my.y && mx.x < my.x);
}

// x < y for values that are not NaN.
fn less(x: vec2<u32>, y: vec2<u32>) -> bool {
    if (is_zero(x) && is_zero(y)) {
        return false;
    }
    let sx = (x.y & SIGN) != 0u;
    let sy = (y.y & SIGN) != 0u;
    if (sx != sy) {
        return sx;
    }
    if (sx) {
        return mag_less(y, x);
    }
    return mag_less(x, y);
}

fn equal(x: vec2<u32>, y: vec2<u32>) -> bool {
    return all(x == y) || (is_zero(x) && is_zero(y));
}

// The bits of numpy's answer (1.0 / 0.0 for a comparison).
fn apply(x: vec2<u32>, y: vec2<u32>) -> vec2<u32> {
    let ordered = !is_nan(x) && !is_nan(y);
    var t = false;
    switch OP {
        case 4u: { t = ordered && less(x, y); }
        case 5u: { t = ordered && (less(x, y) || equal(x, y)); }
        case 6u: { t = ordered && less(y, x); }
        case 7u: { t = ordered && (less(y, x) || equal(x, y)); }
        case 8u: { t = ordered && equal(x, y); }
        case 9u: { t = !(ordered && equal(x, y)); }
        case 10u: { return vec2<u32>(x.x, x.y ^ SIGN); }
        default: { return vec2<u32>(x.x, x.y & (SIGN - 1u)); }
    }
    return select(vec2<u32>(0u, 0u), ONE, t);
}

// The answer for value k of row i (`b` on the left when SWAP).
fn answer(i: u32, k: u32) -> vec2<u32> {
    let own = value_a(i * COLS + k);
    let other = value_b(i * B_ROW + k * B_COL);
    if (SWAP) {
        return apply(other, own);
    }
    return apply(own, other);
}
";

/// The kernel's text after `map.wgsl`: bindings, `apply` and `item`, for `op` in `dtype`
/// (float64 or float16); the builder puts the `enable` line first (arithmetic only: the
/// bit operations read words) and appends the constants.
pub(super) fn body(op: Op, dtype: Dtype) -> String {
    if !op.is_arithmetic() {
        let (sign, inf, one, value, store) = match dtype {
            Dtype::F16 => (
                "0x8000u",
                "0x7c00u",
                "vec2<u32>(0u, 0x3c00u)",
                F16_BITS_VALUE,
                F16_BITS_ITEM,
            ),
            _ => (
                "0x80000000u",
                "0x7ff00000u",
                "vec2<u32>(0u, 0x3ff00000u)",
                F64_BITS_VALUE,
                F64_BITS_ITEM,
            ),
        };
        return format!(
            "{}{BITS}{value}{store}const SIGN: u32 = {sign};\nconst INF: u32 = {inf};\n\
             const ONE: vec2<u32> = {one};\n",
            bindings("u32"),
        );
    }
    let operation = match op {
        Op::Add => "x + y",
        Op::Subtract => "x - y",
        Op::Multiply => "x * y",
        Op::Divide => "x / y",
        _ => "sqrt(x)",
    };
    let compute = dtype.compute().wgsl();
    let element = dtype.wgsl();
    format!(
        "{}\nfn apply(x: {compute}, y: {compute}) -> {compute} {{\n    return {operation};\n}}\n\n\
         fn item(i: u32) {{\n    let first = params.pass_index * PASS_COLS;\n    let last = \
         min(first + PASS_COLS, COLS);\n    for (var k = first; k < last; k = k + 1u) {{\n        \
         let own = {compute}(a[i * COLS + k]);\n        let other = {compute}(b[i * B_ROW + k * \
         B_COL]);\n        var x = own;\n        var y = other;\n        if (SWAP) {{\n            \
         x = other;\n            y = own;\n        }}\n        result[i * COLS + k] = \
         {element}(apply(x, y));\n    }}\n}}\n",
        bindings(element),
    )
}

/// The three storage bindings of the map ABI, of element type `element`.
fn bindings(element: &str) -> String {
    format!(
        "@group(0) @binding(1) var<storage, read> a: array<{element}>;\n@group(0) @binding(2) \
         var<storage, read> b: array<{element}>;\n@group(0) @binding(3) var<storage, \
         read_write> result: array<{element}>;\n"
    )
}

/// Value `v` of float64 words as `(lo, hi)`.
const F64_BITS_VALUE: &str = "
fn value_a(v: u32) -> vec2<u32> {
    return vec2<u32>(a[2u * v], a[2u * v + 1u]);
}

fn value_b(v: u32) -> vec2<u32> {
    return vec2<u32>(b[2u * v], b[2u * v + 1u]);
}
";

/// A row of float64 values, one value (two words) per step.
const F64_BITS_ITEM: &str = "
fn item(i: u32) {
    let first = params.pass_index * PASS_COLS;
    let last = min(first + PASS_COLS, COLS);
    for (var k = first; k < last; k = k + 1u) {
        let r = answer(i, k);
        result[2u * (i * COLS + k)] = r.x;
        result[2u * (i * COLS + k) + 1u] = r.y;
    }
}
";

/// Value `v` of float16 words as `(0, bits)`.
const F16_BITS_VALUE: &str = "
fn half_of(word: u32, v: u32) -> vec2<u32> {
    return vec2<u32>(0u, (word >> (16u * (v % 2u))) & 0xffffu);
}

fn value_a(v: u32) -> vec2<u32> {
    return half_of(a[v / 2u], v);
}

fn value_b(v: u32) -> vec2<u32> {
    return half_of(b[v / 2u], v);
}
";

/// A row of float16 values, two values (one word) per step: a pass covers PASS_COLS values
/// (PASS_COLS is even), so a word is never split between passes.
const F16_BITS_ITEM: &str = "
fn item(i: u32) {
    let first = params.pass_index * PASS_COLS;
    let last = min(first + PASS_COLS, COLS);
    for (var k = first; k < last; k = k + 2u) {
        result[(i * COLS + k) / 2u] = answer(i, k).y | (answer(i, k + 1u).y << 16u);
    }
}
";
