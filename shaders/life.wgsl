// One step of Conway's Game of Life on a torus, on a band of rows. Cells are bytes (0 or 1)
// packed four to a u32 word, rows padded to whole words (padding cells are 0 and stay 0);
// one thread computes one word. Neighbour counts are added four cells at a time: each of the
// rows above, at and below gives the word shifted one cell left and right (the cells beside
// the word fetched on their own, the row's ends wrapping), and the eight byte-wise sums
// never exceed 8, so no byte carries into the next. Rows above and below come from the
// band's ghost rows.

struct Params {
    width: u32,        // cells per row
    row_words: u32,    // u32 words per row (width / 4 rounded up)
    lo: u32,           // first buffer row this step computes
    hi: u32,           // one past the last
    slice_rows: u32,   // rows per z slice of the dispatch (at most the y limit)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

fn cell(row: u32, c: u32) -> u32 {
    return (src[row * p.row_words + (c >> 2u)] >> ((c & 3u) * 8u)) & 1u;
}

// The word of cells to the left (x: lane j holds cell c0 + j - 1) and to the right (y: lane
// j holds cell c0 + j + 1) of word `w` of `row`, whose cells are `x`.
fn sides(row: u32, w: u32, x: u32) -> vec2<u32> {
    let c0 = w * 4u;
    let last = p.width - 1u;
    let left = (x << 8u) | cell(row, select(c0 - 1u, last, c0 == 0u));
    var right = x >> 8u;
    if (c0 + 3u < last) {
        right = right | (cell(row, c0 + 4u) << 24u);
    } else {
        // The row's last cell is in this word: its right neighbour is the row's first.
        let shift = (last - c0) * 8u;
        right = (right & ~(0xffu << shift)) | (cell(row, 0u) << shift);
    }
    return vec2<u32>(left, right);
}

@compute @workgroup_size(64, 4)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // x: word within the row, y + z: row (z slices only for bands taller than the y limit).
    let w = gid.x;
    let r = p.lo + gid.y + gid.z * p.slice_rows;
    if (w >= p.row_words || r >= p.hi) {
        return;
    }
    let up = src[(r - 1u) * p.row_words + w];
    let at = src[r * p.row_words + w];
    let down = src[(r + 1u) * p.row_words + w];
    let su = sides(r - 1u, w, up);
    let sa = sides(r, w, at);
    let sd = sides(r + 1u, w, down);
    let n = (su.x + up + su.y) + (sa.x + sa.y) + (sd.x + down + sd.y);
    var out = 0u;
    for (var b = 0u; b < 4u; b = b + 1u) {
        if (w * 4u + b >= p.width) {
            break;
        }
        let count = (n >> (b * 8u)) & 0xffu;
        let alive = (at >> (b * 8u)) & 1u;
        let next = select(0u, 1u, count == 3u || (count == 2u && alive == 1u));
        out = out | (next << (b * 8u));
    }
    dst[r * p.row_words + w] = out;
}
