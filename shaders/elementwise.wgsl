// Elementwise arithmetic on rows (`elementwise/`), what a DeviceArray's operators and numpy
// ufuncs run where its rows live. A map kernel (`map.wgsl`): one item is one row of COLS
// words, and the operation (OP), the layout of `b` (word k of row i is b[i * B_ROW + k *
// B_COL]: the same rows, one row for every row, or one word) and SWAP (`b` is the left
// operand) are constants the builder appends, so each kernel is one straight loop. A row
// wider than PASS_COLS is walked in passes (the pass index in the uniform), each pass a
// run of columns, so an invocation's loop stays within the loop budget on every driver.
//
// Each result is one IEEE operation of numpy's ufunc, bit for bit: + - * / and sqrt are
// single correctly rounded operations where the device rounds them so (see
// `elementwise/mod.rs`); comparisons, negative and absolute read the bits, because WGSL
// lets a compiler assume no NaN is present, and numpy's answers for NaN are defined.

@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> result: array<f32>;

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// numpy's comparisons are false with a NaN operand (not_equal true).
fn ordered(x: f32, y: f32) -> bool {
    return !is_nan(x) && !is_nan(y);
}

fn truth(t: bool) -> f32 {
    return select(0.0, 1.0, t);
}

fn apply(x: f32, y: f32) -> f32 {
    switch OP {
        case 0u: { return x + y; }
        case 1u: { return x - y; }
        case 2u: { return x * y; }
        case 3u: { return x / y; }
        case 4u: { return truth(ordered(x, y) && x < y); }
        case 5u: { return truth(ordered(x, y) && x <= y); }
        case 6u: { return truth(ordered(x, y) && x > y); }
        case 7u: { return truth(ordered(x, y) && x >= y); }
        case 8u: { return truth(ordered(x, y) && x == y); }
        case 9u: { return truth(!(ordered(x, y) && x == y)); }
        case 10u: { return bitcast<f32>(bitcast<u32>(x) ^ 0x80000000u); }
        case 11u: { return bitcast<f32>(bitcast<u32>(x) & 0x7fffffffu); }
        default: { return sqrt(x); }
    }
}

fn item(i: u32) {
    let first = params.pass_index * PASS_COLS;
    let last = min(first + PASS_COLS, COLS);
    for (var k = first; k < last; k = k + 1u) {
        let own = a[i * COLS + k];
        let other = b[i * B_ROW + k * B_COL];
        var x = own;
        var y = other;
        if (SWAP) {
            x = other;
            y = own;
        }
        result[i * COLS + k] = apply(x, y);
    }
}
