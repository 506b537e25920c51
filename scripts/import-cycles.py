#!/usr/bin/env python3
"""Import circles in the core, at two granularities. Modules: one node per source file,
edges from its `crate::` and `super::` paths and from a parent's `use child::` lines (test
modules left out). Folders: one node per top-level file or folder of the crate (`ga/`,
`kernel.rs`, ...), an edge wherever a module of one reaches a module of another, so the
top-level modules must form layers. Prints every strongly connected component of more than
one node at each granularity and exits 1 if there is any: `make lint` runs it on
rust/amari-gpu/src."""
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
sys.setrecursionlimit(10000)
def circles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def sc(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in graph[v]:
            if w not in index: sc(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    for v in list(graph):
        if v not in index: sc(v)
    return out
def report(graph, what):
    out = circles(graph)
    for c in out:
        print(c)
        for v in c: print('   ', v or 'lib', '->', sorted(w for w in graph[v] if w in c))
    print(what + ':', len(out))
    return len(out)
# lib.rs declares and re-exports every top-level module: it is above them all, no node.
top = lambda m: m.split('::')[0]
folders = {top(m): set() for m in mods if m}
for m, ws in edges.items():
    if not m: continue
    folders[top(m)].update(top(w) for w in ws if w and top(w) != top(m))
found = report(edges, 'import circles') + report(folders, 'folder circles')
sys.exit(1 if found else 0)
