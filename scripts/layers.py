#!/usr/bin/env python3
"""The structure check of src/ (scripts/check-layers.sh runs it):

1. every import between two folders of src/ is declared in
   scripts/layers.txt, and the declared folder graph has no cycle;
2. the ground floor (the folders layers.txt marks `ground`) uses no
   other folder but the ground floor;
3. no two files import each other, directly or through others, inside a
   folder or across folders (test files and `#[cfg(test)]` modules aside:
   a test may use what its subject does not);
4. no feature's file name stands in two folders: a file stem (role names
   such as mod, manager, driver, fake, types, client aside) used by two
   folders is a feature cut in two.

Imports are read from the code as text: `use` trees, `crate::...` and
`super::...` paths; comments are skipped. A module's declaration of its own
children (`mod x;`, `pub use x::...` in the file that declares `x`) is
that module's index, not an import.

Prints each problem on a line of its own and exits 1 if there is any.
Standard library only.
"""

import re
import sys
from pathlib import Path

# Role names any subsystem may have: not features.
ROLE_STEMS = {
    "mod", "lib", "main", "manager", "driver", "fake", "types", "client",
    "tests", "error", "runtime", "http", "grpc", "tls", "start", "config",
}


def parse_map(text):
    """layers.txt -> (deps: folder -> set of folders, ground: set)."""
    deps, ground = {}, set()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            raise ValueError(f"layers.txt:{n}: expected 'folder: uses ...', got {raw!r}")
        head, _, rest = line.partition(":")
        words = head.split()
        if not words or len(words) > 2 or (len(words) == 2 and words[0] != "ground"):
            raise ValueError(f"layers.txt:{n}: expected '[ground] folder:', got {head!r}")
        folder = words[-1]
        if folder in deps:
            raise ValueError(f"layers.txt:{n}: {folder} declared twice")
        if len(words) == 2:
            ground.add(folder)
        deps[folder] = set(rest.split())
    for folder, uses in deps.items():
        for u in uses:
            if u not in deps:
                raise ValueError(f"layers.txt: {folder} uses {u}, which is not declared")
    return deps, ground


def find_cycle(graph):
    """One cycle of `graph` (node -> iterable of nodes) as a list, or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = {n: WHITE for n in graph}
    stack = []

    def visit(n):
        color[n] = GREY
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if color.get(m, WHITE) == GREY:
                return stack[stack.index(m):] + [m]
            if color.get(m, WHITE) == WHITE:
                color.setdefault(m, WHITE)
                found = visit(m)
                if found:
                    return found
        stack.pop()
        color[n] = BLACK
        return None

    for n in sorted(graph):
        if color[n] == WHITE:
            found = visit(n)
            if found:
                return found
    return None


def strongly_connected(graph):
    """Tarjan's components of more than one node, each sorted."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def is_test_file(rel):
    stem = Path(rel).stem
    return stem == "tests" or stem.endswith("_tests")


def module_of(rel):
    """'agent/worker/mod.rs' -> ('agent', 'worker'); 'lib.rs' -> ()."""
    parts = list(Path(rel).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(re.sub(r"//.*", "", line) for line in text.splitlines())


def strip_test_modules(text):
    """The code before the first `#[cfg(test)]` item that is a module."""
    m = re.search(r"#\[cfg\(test\)\]\s*(#\[[^\]]*\]\s*)*(pub(\([^)]*\))?\s+)?mod\s", text)
    return text[: m.start()] if m else text


def expand_use(tree):
    """'a::{b::{C, d}, e}' -> ['a::b::C', 'a::b::d', 'a::e'] (aliases dropped)."""
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        return [re.sub(r"as\w+$", "", tree)] if tree else []
    prefix, body = tree[:i], tree[i + 1 : tree.rindex("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        for sub in expand_use(p):
            out.append(prefix + sub if sub not in ("self",) else prefix.rstrip(":"))
    return out


def paths_in(text):
    """Every module path the code names, as written."""
    out = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        out.extend(expand_use(m.group(1).strip()))
    for m in re.finditer(r"\b(?:crate|super|self)(?:::\w+)+", text):
        out.append(m.group(0))
    return out


def resolve(path, here, modules, children):
    """The module (tuple) a path lands in, or None if outside the crate."""
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = here
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    elif segs[0] in children.get(here, ()):
        base = here
    else:
        return None  # an external crate, std, or a local name
    best = base if base in modules else None
    cur = base
    for s in segs:
        cur = cur + (s,)
        if cur in modules:
            best = cur
        else:
            break
    return best


def analyse(src_files, deps, ground):
    """src_files: {rel path: text}. Returns the list of problems."""
    problems = []
    modules = {}
    for rel in src_files:
        if rel == "main.rs":
            continue
        modules[module_of(rel)] = rel
    children = {}
    for mod in modules:
        if mod:
            children.setdefault(mod[:-1], set()).add(mod[-1])

    file_edges, folder_edges = {}, {}
    for rel, text in sorted(src_files.items()):
        if rel == "main.rs":
            continue
        here = module_of(rel)
        folder = here[0] if here else None
        code = strip_comments(text)
        for path in set(paths_in(code)):
            target = resolve(path, here, modules, children)
            if target is None or target == here or not target:
                continue
            tfolder = target[0]
            if folder and tfolder != folder:
                folder_edges.setdefault(folder, {}).setdefault(tfolder, rel)
        if is_test_file(rel):
            continue
        for path in set(paths_in(strip_test_modules(code))):
            target = resolve(path, here, modules, children)
            if target is None or target == here or not target:
                continue
            if target[:-1] == here:  # a module's own child: its index
                continue
            trel = modules[target]
            if is_test_file(trel):
                continue
            file_edges.setdefault(rel, set()).add(trel)

    folders = {m[0] for m in modules if m and (len(m) > 1 or modules[m].endswith("mod.rs"))}
    for f in sorted(folders - set(deps)):
        problems.append(f"layers: src/{f}/ is not declared in scripts/layers.txt")
    for f, targets in sorted(folder_edges.items()):
        for t, rel in sorted(targets.items()):
            if f in deps and t not in deps[f]:
                problems.append(f"layers: src/{rel} uses crate::{t}, which {f} may not use (scripts/layers.txt)")
    for g in sorted(ground):
        for u in sorted(deps.get(g, ())):
            if u not in ground:
                problems.append(f"layers: the ground floor's {g} is declared to use the subsystem {u}")
    cycle = find_cycle(deps)
    if cycle:
        problems.append("layers: the declared folder graph has a cycle: " + " -> ".join(cycle))
    for comp in strongly_connected(file_edges):
        problems.append("layers: files import each other: " + ", ".join(f"src/{c}" for c in comp))

    stems = {}
    for rel in src_files:
        if is_test_file(rel) or "/" not in rel:
            continue
        stem = Path(rel).stem
        if stem in ROLE_STEMS:
            continue
        stems.setdefault(stem, set()).add(rel.split("/")[0])
    for stem, where in sorted(stems.items()):
        if len(where) > 1:
            problems.append(f"layers: the file name {stem}.rs stands in {len(where)} folders: " + ", ".join(f"src/{w}/" for w in sorted(where)))
    return problems


def main():
    root = Path(__file__).resolve().parent.parent
    deps, ground = parse_map((root / "scripts" / "layers.txt").read_text())
    src = root / "src"
    files = {str(p.relative_to(src)): p.read_text() for p in sorted(src.rglob("*.rs"))}
    problems = analyse(files, deps, ground)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        sys.exit(1)
    edges = sum(len(v) for v in deps.values())
    print(f"layering: ok ({len(deps)} folders, {edges} declared uses, no cycles; ground floor: {' '.join(sorted(ground))})")


if __name__ == "__main__":
    main()
