#!/usr/bin/env python3
"""Import circles between the core's modules: one node per source file, edges from its
`crate::` and `super::` paths and from a parent's `use child::` lines (test modules left
out). Prints every strongly connected component of more than one module and exits 1 if
there is any: `make lint` runs it on rust/amari-gpu/src."""
import os, re, sys
root = sys.argv[1]
mods = {}
for dp, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            rel = os.path.relpath(os.path.join(dp, f), root)[:-3].split(os.sep)
            if rel[-1] == 'mod': rel = rel[:-1]
            if rel == ['lib']: rel = []
            mods['::'.join(rel)] = os.path.join(dp, f)
def resolve(path):
    parts = path.split('::')
    while parts:
        if '::'.join(parts) in mods: return '::'.join(parts)
        parts = parts[:-1]
    return None
edges = {m: set() for m in mods}
for m, f in mods.items():
    src = open(f).read()
    src = src.split('#[cfg(test)]')[0]
    parent = m.rsplit('::', 1)[0] if '::' in m else ''
    is_dir = f.endswith('mod.rs') or f.endswith('lib.rs')
    base = m if is_dir else parent
    for p in re.findall(r'crate::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)', src):
        t = resolve(p)
        if t and t != m: edges[m].add(t)
    for p in re.findall(r'\bsuper::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)', src):
        up = parent
        t = resolve((up + '::' if up else '') + p) or (up or None)
        if t is not None and t != m: edges[m].add(t)
    if re.search(r'\bsuper::\{', src) or re.search(r'\buse super::[A-Z]', src):
        if parent != m: edges[m].add(parent)
    for p in re.findall(r'^(?:pub(?:\([a-z]+\))? )?use ([a-z_][a-z0-9_]*)::', src, flags=re.M):
        if p in ('std', 'crate', 'super', 'self', 'wgpu', 'serde', 'bytemuck', 'pollster'): continue
        t = resolve((m + '::' if m else '') + p)
        if t and t != m: edges[m].add(t)
index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def sc(v):
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: out.append(sorted(comp))
for v in list(edges):
    if v not in index: sc(v)
for c in out:
    print(c)
    for v in c: print('   ', v or 'lib', '->', sorted(w for w in edges[v] if w in c))
print('import circles:', len(out))
sys.exit(1 if out else 0)
