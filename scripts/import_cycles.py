#!/usr/bin/env python3
"""File-level import circles inside Rust crates.

Usage: import_cycles.py CRATE_SRC_DIR...

Each `.rs` file is a module (`a/mod.rs` and `a.rs` are module `a`). A file
depends on another when it names it by a path that starts with `crate::`,
`super::` or `self::` (in a `use` or anywhere in its code; comments and
`#[cfg(test)] mod tests` are left out), or names an item the other's
parent re-exports from it (`pub use child::Item`). A circle is a set of
two or more files each reachable from the others; a circle makes the
files one unit that must be read together, which is what issue 43 asks
the `cli`, `client` and `server` crates to be free of.

Prints every circle with the edges inside it and exits 1 if any crate
has one; exits 0 and prints "no import circles" otherwise.
"""

import os
import re
import sys
from collections import defaultdict

PATH = re.compile(r"\b((?:crate|super|self)(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+)")
GROUPED = re.compile(r"\buse (crate|super|self)::\{([^}]*)\}")
REEXPORT = re.compile(r"pub(?:\([a-z]+\))? use (?:self::)?([a-z_][a-z0-9_]*)::([^;]*);")
NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:,|\}|$)")
TESTS = re.compile(r"#\[cfg\(test\)\]\s*mod tests")
COMMENT = re.compile(r"//[^\n]*")


def modules(root):
    """Module path (`a::b`, "" for the crate root) -> file."""
    found = {}
    for directory, _, names in os.walk(root):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(directory, name)
            parts = os.path.relpath(path, root)[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            found["::".join(parts)] = path
    return found


def source(path):
    """The file's code without its tests and comments."""
    with open(path) as file:
        text = file.read()
    return COMMENT.sub("", TESTS.split(text)[0])


def resolver(files, reexports):
    def resolve(module, path):
        segments = path.split("::")
        head, segments = segments[0], segments[1:]
        if head == "crate":
            base = []
        else:
            base = module.split("::") if module else []
            if head == "super":
                base = base[:-1]
            while segments and segments[0] == "super":
                base, segments = base[:-1], segments[1:]
        for i in range(len(segments), -1, -1):
            candidate = "::".join(base + segments[:i])
            if candidate in files:
                if i < len(segments):
                    return reexports.get((candidate, segments[i]), candidate)
                return candidate
        return None

    return resolve


def edges_of(files):
    reexports = {}
    codes = {module: source(path) for module, path in files.items()}
    for module, code in codes.items():
        for found in REEXPORT.finditer(code):
            child = (module + "::" if module else "") + found.group(1)
            if child in files:
                for name in NAME.findall(found.group(2)):
                    reexports[(module, name)] = child
    resolve = resolver(files, reexports)
    edges = defaultdict(set)
    for module, code in codes.items():
        paths = [found.group(1) for found in PATH.finditer(code)]
        for found in GROUPED.finditer(code):
            for item in found.group(2).split(","):
                item = item.strip().split(" as ")[0].strip()
                if item and item != "self":
                    paths.append(found.group(1) + "::" + item)
        for path in paths:
            target = resolve(module, path)
            if target is not None and target != module:
                edges[module].add(target)
    return edges


def circles(nodes, edges):
    """Strongly connected components of two or more nodes (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(100_000)
    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return found


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    total = 0
    for root in sys.argv[1:]:
        files = modules(root)
        if not files:
            print(f"{root}: no .rs files", file=sys.stderr)
            return 2
        edges = edges_of(files)
        for circle in circles(files, edges):
            total += 1
            print(f"{root}: import circle of {len(circle)} files: {', '.join(circle)}")
            for module in circle:
                for other in sorted(edges[module] & set(circle)):
                    print(f"    {module} -> {other}")
    if total:
        print(f"{total} import circle(s)")
        return 1
    print("no import circles in " + ", ".join(sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
