// One step of Conway's Game of Life on a torus, on a band of rows. Cells are bytes (0 or 1)
// packed four to a u32 word, rows padded to whole words; one thread computes one word from
// the three words above, at and below it, fetching a neighbour outside them (the column
// left of its first cell and right of its last, which wrap) cell by cell.
// Rows above and below come from the band's ghost rows.

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
    let word = src[row * p.row_words + (c >> 2u)];
    return (word >> ((c & 3u) * 8u)) & 1u;
}

// Cell `c` of `row`, from `word` (word `w` of that row) when it holds it.
fn bit(word: u32, w: u32, row: u32, c: u32) -> u32 {
    if ((c >> 2u) == w) {
        return (word >> ((c & 3u) * 8u)) & 1u;
    }
    return cell(row, c);
}

@compute @workgroup_size(64, 4)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // x: word within the row, y + z: row (z slices only for bands taller than the y limit).
    let w = gid.x;
    let r = p.lo + gid.y + gid.z * p.slice_rows;
    if (w >= p.row_words || r >= p.hi) {
        return;
    }
    let rows = array<u32, 3>(r - 1u, r, r + 1u);
    let words = array<u32, 3>(
        src[rows[0] * p.row_words + w],
        src[r * p.row_words + w],
        src[rows[2] * p.row_words + w],
    );
    var out = 0u;
    for (var b = 0u; b < 4u; b = b + 1u) {
        let c = w * 4u + b;
        if (c >= p.width) {
            break;
        }
        let left = select(c - 1u, p.width - 1u, c == 0u);
        let right = select(c + 1u, 0u, c + 1u == p.width);
        var n = 0u;
        for (var i = 0u; i < 3u; i = i + 1u) {
            n = n + bit(words[i], w, rows[i], left) + bit(words[i], w, rows[i], right);
            if (i != 1u) {
                n = n + bit(words[i], w, rows[i], c);
            }
        }
        let alive = (words[1] >> (b * 8u)) & 1u;
        let next = select(0u, 1u, n == 3u || (n == 2u && alive == 1u));
        out = out | (next << (b * 8u));
    }
    dst[r * p.row_words + w] = out;
}
