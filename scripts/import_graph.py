#!/usr/bin/env python3
"""The module graph of src/: which module's code names which other module
(`crate::a::b` paths, `use super::...` resolved), tests and comments left out.
Prints the top-level arrows and every cycle among top-level modules and among
the sibling modules of each folder; exits 1 when there is a cycle.

    python3 scripts/import_graph.py          # from the repository root

Written here, not taken from a crate: cargo-modules needs a nightly-only
rust-analyzer build, and the question (does any module name, in code, a
module that names it back) needs only the paths the source spells.
"""
import os, re, sys
from collections import defaultdict

SRC = "src"

def module_of(path):
    rel = os.path.relpath(path, SRC)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel

def code_of(text):
    # Drop #[cfg(test)] modules with a body, comments and string literals.
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod \w+ \{", text, re.M)
    if m:
        text = text[: m.start()]
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    return text

def is_test_file(path):
    return re.search(r"(^|/)(\w*_)?tests\.rs$|proptests\.rs$", path) is not None

def main():
    edges = defaultdict(set)  # module path tuple -> set of module path tuples
    mods = set()
    for root, _, files in os.walk(SRC):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(root, f)
            if is_test_file(p):
                continue
            me = tuple(module_of(p))
            mods.add(me)
            code = code_of(open(p, encoding="utf-8").read())
            for path in re.findall(r"\bcrate((?:::\w+)+)", code):
                edges[me].add(tuple(path.strip(":").split("::")))
            for path in re.findall(r"\bsuper((?:::\w+)+)", code):
                # `super` from a mod.rs is its parent folder's module.
                base = me[:-1]
                edges[me].add(base + tuple(path.strip(":").split("::")))
    mods = {m for m in mods if m}

    def prefix_in(path, depth):
        return path[:depth] if len(path) >= depth else None

    bad = False
    # Level 1: top-level modules; level 2+: siblings within each folder.
    groups = defaultdict(lambda: defaultdict(set))
    for src, targets in edges.items():
        for t in targets:
            # the longest common folder of src and t, then one more component each
            k = 0
            while k < min(len(src), len(t)) and src[k] == t[k]:
                k += 1
            if k >= len(src) or k >= len(t):
                continue  # a module naming itself or its own ancestor/descendant
            a, b = src[: k + 1], t[: k + 1]
            if b not in mods and (b + ("mod",)) not in mods and not any(m[: k + 1] == b for m in mods):
                continue  # an item, not a module (crate::error::Error is under error)
            groups[src[:k]][a].add(b)
    for folder, g in sorted(groups.items()):
        # Tarjan's strongly connected components.
        index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]
        def visit(v):
            index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
            for w in g.get(v, ()):
                if w not in index:
                    visit(w); low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(comp)
        for v in list(g):
            if v not in index:
                visit(v)
        for c in sccs:
            bad = True
            print(f"cycle in {'/'.join(folder) or 'src'}: " + " <-> ".join("::".join(m) for m in sorted(c)))
    top = groups.get((), {})
    print("top-level arrows (module -> modules it names):")
    for a in sorted(top):
        print(f"  {'::'.join(a):10} -> {', '.join(sorted('::'.join(b) for b in top[a]))}")
    print("cycles: " + ("found (above)" if bad else "none"))
    return 1 if bad else 0

sys.exit(main())
