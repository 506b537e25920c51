// The skeleton of every map kernel (`Kernel::map`'s ABI): binding 0 holds the item count and
// the number of threads per row of the two-dimensional dispatch grid; the kernel's inputs
// follow, its output comes last. One thread per item: `main` finds the thread's item and
// leaves the grid's spare threads idle. A map kernel's file is appended to this one: it
// declares its bindings from 1 on and `fn item(i: u32)`, the work of item `i`. A kernel that
// walks a dimension in passes (`Kernel::passes`) reads the pass index in `pass_index`.

struct Params {
    n: u32,
    row_threads: u32,
    _pad0: u32,
    pass_index: u32,
}

@group(0) @binding(0) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * params.row_threads + gid.x;
    if (i >= params.n) {
        return;
    }
    item(i);
}
