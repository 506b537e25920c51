// Checks of the per-sample Fisher maps' inputs where resident rows live: per chunk of rows,
// the first row (counted from the chunk's start) that breaks a rule, or that a float32
// check cannot clear for certain, per run of rows; 0xffffffff when none. The host gathers
// the rows and runs the numpy path's exact checks only when some row is flagged, so the
// errors, and which inputs pass, are that path's. Values are judged from their bits: WGSL
// promises neither IEEE compares with NaN nor subnormals.
//
// Rules: 0, probabilities: finite, >= 0 (-0 included), and a float32 sum within the
// tolerance of 1 by more than its rounding error can move it (the numpy path sums in
// float64); 1, positive: finite and > 0; 2, finite.
//
// Rows of float64 values (`wide`: two words a value, the low one first) are judged from
// their high words (and the low ones for zero), and summed as float32 values truncated
// toward zero from the float64 ones (a relative error below 2^-23 each, kept clear too).
//
// ABI shared by every kernel: binding 0 holds the chunk's item count, grid row width and
// first row, then this kernel's parameters; the input follows, the output comes last.

struct Params {
    n: u32,
    row_threads: u32,
    first: u32, // the chunk's first row in the bound rows
    _pad0: u32,
    k: u32,     // words per row
    rule: u32,
    wide: u32,  // 1: float64 values, two words each; 0: float32 values
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<u32>;
@group(0) @binding(2) var<storage, read_write> flagged: array<u32>;

const SLICES: u32 = 16u; // CHECK_SLICES in host/fisher_checks.rs
const NONE: u32 = 0xffffffffu;
const TOLERANCE: f32 = 1e-3; // PROBS_SUM_TOLERANCE in fisher/categorical.rs

var<workgroup> first_bad: atomic<u32>;

// The float64 magnitude of words `high` (sign cleared) and `low` as a float32 truncated
// toward zero: 0 below float32's normal range, -1 above its range (no probability).
fn wide_value(high: u32, low: u32) -> f32 {
    let e = i32(high >> 20u) - 896;
    if (e >= 255) {
        return -1.0;
    }
    if (e <= 0) {
        return 0.0;
    }
    return bitcast<f32>((u32(e) << 23u) | ((high & 0xfffffu) << 3u) | (low >> 29u));
}

// Whether row `r` of the chunk passes for certain.
fn clears(r: u32) -> bool {
    let base = (params.first + r) * params.k;
    var sum = 0.0;
    for (var j = 0u; j < params.k; j = j + 1u + params.wide) {
        let bits = rows[base + j + params.wide];
        let magnitude = bits & 0x7fffffffu;
        var zero = magnitude == 0u;
        var value = bitcast<f32>(bits);
        if (params.wide == 1u) {
            if (magnitude >= 0x7ff00000u) {
                return false;
            }
            let low = rows[base + j];
            zero = zero && low == 0u;
            value = wide_value(magnitude, low);
        } else if (magnitude >= 0x7f800000u) {
            return false;
        }
        if (params.rule == 1u && (bits >> 31u != 0u || zero)) {
            return false;
        }
        if (params.rule == 0u) {
            if ((bits >> 31u != 0u && !zero) || value < 0.0) {
                return false;
            }
            sum = sum + value;
        }
    }
    if (params.rule != 0u) {
        return true;
    }
    // A float32 sum of k non-negative terms is within k 2^-24 s of the exact sum (and so of
    // the float64 one); twice that, and the rounding of the test itself, kept clear (k the
    // row's words: float64 rows count each value twice); float64 values truncated lose
    // below 2^-23 s more, kept clear twice over.
    let scale = max(sum, 1.0);
    let slack = f32(params.k) * scale * 1.1920929e-7 + scale * 9.536743e-7
        + f32(params.wide) * scale * 2.3841858e-7;
    return abs(sum - 1.0) <= TOLERANCE - slack;
}

// One workgroup per run of the chunk's rows (SLICES near-equal runs), 64 threads taking
// every 64th row of it; the smallest flagged row wins.
@compute @workgroup_size(64)
fn flag_rows(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let slice = wid.y;
    if (lid == 0u) {
        atomicStore(&first_bad, NONE);
    }
    workgroupBarrier();
    let base = params.n / SLICES;
    let extra = params.n % SLICES;
    let start = slice * base + min(slice, extra);
    let end = start + base + select(0u, 1u, slice < extra);
    for (var r = start + lid; r < end; r = r + 64u) {
        if (!clears(r)) {
            atomicMin(&first_bad, r);
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        flagged[slice] = atomicLoad(&first_bad);
    }
}
