"""The package's import graph from its source (no import is run): every `import` / `from ... import`
of a module, at the top or inside a function (a lazy import hides a cycle, it does not remove it),
except under `if TYPE_CHECKING:`. An edge goes to the most specific module named: `from a.b import c`
is an edge to a.b.c when c is a module, else to a.b (its __init__). Importing a.b.c also runs the
__init__ of each package above it that the importer is not inside (when that __init__ imports
anything: an empty one cannot close a cycle) (a module of a.b importing a.b.c
finds a.b already initialising; one outside it does not): an edge to each of those too, so that
`x -> a.b.c` with `a.b/__init__ -> ... -> x` is a cycle, as Python finds it."""
from __future__ import annotations

import ast
from pathlib import Path


def modules(root: Path, package: str) -> dict[str, Path]:
    out = {}
    for p in sorted((root / package).rglob("*.py")):
        parts = list(p.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    skip.update(id(n) for n in ast.walk(sub))
    return skip


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                while parts and ".".join(parts) not in mods:
                    parts.pop()
                if parts:
                    out.add(".".join(parts))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                full = f"{mod}.{a.name}"
                if full in mods:
                    out.add(full)
                elif mod in mods:
                    out.add(mod)
    out.discard(name)
    return out


def graph(root: Path, package: str) -> dict[str, set[str]]:
    mods = modules(root, package)
    g = {name: imports_of(name, path, mods) for name, path in mods.items()}
    for name, out in g.items():   # the package __init__s an import runs (those that import anything)
        for target in list(out):
            parts = target.split(".")
            for k in range(2, len(parts)):
                pkg = ".".join(parts[:k])
                if g.get(pkg) and not (name == pkg or name.startswith(pkg + ".")):
                    out.add(pkg)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in g:
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in g:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out
