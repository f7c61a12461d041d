"""The package's import graph from its source (no import is run): every `import` / `from ... import`
of a module, at the top, inside a function (a lazy import hides a cycle, it does not remove it) or
under `if TYPE_CHECKING:` (a type-only import is a dependency too: the module cannot be read, nor
moved, without the other; `type_only=False` leaves them out). An edge goes to the most specific module named: `from a.b import c`
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


def from_module(name: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` in module `name` reads from (relative ones resolved)."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, path: Path, mods: dict[str, Path], type_only: bool = True) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_only else _type_checking_nodes(tree)
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
            mod = from_module(name, is_pkg, node)
            for a in node.names:
                full = f"{mod}.{a.name}"
                if full in mods:
                    out.add(full)
                elif mod in mods:
                    out.add(mod)
    out.discard(name)
    return out


def graph(root: Path, package: str, type_only: bool = True) -> dict[str, set[str]]:
    mods = modules(root, package)
    g = {name: imports_of(name, path, mods, type_only) for name, path in mods.items()}
    for name, out in g.items():   # the package __init__s an import runs (those that import anything)
        for target in list(out):
            parts = target.split(".")
            for k in range(2, len(parts)):
                pkg = ".".join(parts[:k])
                if g.get(pkg) and not (name == pkg or name.startswith(pkg + ".")):
                    out.add(pkg)
    return g


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(root: Path, package: str) -> list[str]:
    """Each import of a private name (one leading underscore: a module or an attribute) of one
    module of the package by another: `from a.b import _c`, `import a._b`, `from a._b import c`."""
    mods = modules(root, package)
    out = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == package and any(_private(p) for p in a.name.split(".")):
                        out.append(f"{name}:{node.lineno} imports {a.name}")
            elif isinstance(node, ast.ImportFrom):
                mod = from_module(name, is_pkg, node)
                if mod.split(".")[0] != package:
                    continue
                for a in node.names:
                    if any(_private(p) for p in mod.split(".")) or _private(a.name):
                        out.append(f"{name}:{node.lineno} imports {a.name} from {mod}")
    return out


def long_modules(root: Path, package: str, limit: int) -> list[str]:
    """Each module of more than `limit` lines."""
    out = []
    for name, path in modules(root, package).items():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out.append(f"{name}: {n} lines")
    return out


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
