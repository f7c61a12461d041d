"""docs/architecture.md's layer map gives each folder of the package one layer, and the import graph
agrees with it (read from the source by tests/import_graph.py: lazy and `if TYPE_CHECKING:` imports
included); its module list names every module, exactly once, and only modules that exist;
docs/glossary.md defines each term once.

A module is named by its path under mindspeed_profiler/ (`config/load.py`); a package by its
directory (`config/`), the top-level package by `__init__.py`. The layer map's rows name a folder
(`analysis/pipeline/`: every module under it) or a file at the package root (`cli.py`), and look like
`| `config/` | 3 | its job |`; a module's layer is its longest matching row's. The module list's rows
have no layer column: `| `config/load.py` | its one job |`.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from import_graph import graph

PACKAGE = "mindspeed_profiler"
DOC = REPO_ROOT / "docs" / "architecture.md"
GLOSSARY = REPO_ROOT / "docs" / "glossary.md"

# bottom to top; the two layer-2 boxes stand side by side and must not import each other
LAYER_ORDER = {"1": 1, "2r": 2, "2a": 2, "3": 3, "4": 4, "5": 5, "6": 6}
SIDE_BY_SIDE = {("2r", "2a"), ("2a", "2r")}
ROW_RE = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([^|]+?)\s*\|")
LIST_HEADING = "## What is where"


def doc_name(path: Path) -> str:
    """The doc's name of a module file."""
    rel = path.relative_to(REPO_ROOT / PACKAGE)
    if rel.name == "__init__.py":
        return "__init__.py" if rel.parent == Path(".") else rel.parent.as_posix() + "/"
    return rel.as_posix()


def dotted(name: str) -> str:
    """The dotted module name of a doc name."""
    if name == "__init__.py":
        return PACKAGE
    return PACKAGE + "." + name.rstrip("/").removesuffix(".py").replace("/", ".")


def package_modules() -> dict[str, Path]:
    return {doc_name(p): p for p in sorted((REPO_ROOT / PACKAGE).rglob("*.py"))}


def map_rows(text: str) -> list[tuple[str, str]]:
    """(folder or root file, layer) of every row of the layer map (rows whose second column is a layer)."""
    rows = []
    for line in text.splitlines():
        m = ROW_RE.match(line)
        if m and m.group(2) in LAYER_ORDER:
            rows.append((m.group(1), m.group(2)))
    return rows


def list_names(text: str) -> list[str]:
    """The module names of the module list (the tables under "What is where")."""
    part = text.split(LIST_HEADING, 1)[1] if LIST_HEADING in text else ""
    part = part.split("\n## ", 1)[0]
    return [m.group(1) for m in map(ROW_RE.match, part.splitlines()) if m and m.group(2) not in LAYER_ORDER]


def covers(row: str, name: str) -> bool:
    return name == row or (row.endswith("/") and name.startswith(row))


def layer_of(rows: list[tuple[str, str]], name: str) -> str | None:
    """The layer of a module: its longest matching row's."""
    best = max((r for r in rows if covers(r[0], name)), key=lambda r: len(r[0]), default=None)
    return best[1] if best else None


@pytest.fixture(scope="module")
def text() -> str:
    return DOC.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def rows(text) -> list[tuple[str, str]]:
    return map_rows(text)


def test_every_module_has_a_layer(rows):
    missing = sorted(n for n in package_modules() if layer_of(rows, n) is None)
    assert not missing, "modules in no folder of docs/architecture.md's layer map: " + ", ".join(missing)


def test_the_map_is_by_folder_each_row_real_and_once(rows):
    names = [r for r, _ in rows]
    assert len(names) <= 25, "the layer map is a folder rule, not a module list"
    for r in names:
        assert r.endswith("/") or "/" not in r, f"{r}: a row names a folder, or a file at the package root"
    empty = sorted(r for r in names if not any(covers(r, n) for n in package_modules()))
    assert not empty, "layer map rows that name no module: " + ", ".join(empty)
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, "named more than once in the layer map: " + ", ".join(twice)


def test_each_folder_is_one_layer(rows):
    """A row inside another row's folder (analysis/pipeline/ in analysis/) repeats its layer."""
    bad = [f"{inner} ({li}) inside {outer} ({lo})" for outer, lo in rows for inner, li in rows
           if inner != outer and covers(outer, inner) and li != lo]
    assert not bad, "folders holding two layers:\n" + "\n".join(bad)


def test_the_module_list_names_every_module_once_and_only_real_ones(text):
    names = list_names(text)
    modules = set(package_modules())
    missing = sorted(modules - set(names))
    assert not missing, "modules not in docs/architecture.md's module list: " + ", ".join(missing)
    gone = sorted(set(names) - modules)
    assert not gone, "docs/architecture.md lists modules that do not exist: " + ", ".join(gone)
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, "listed more than once: " + ", ".join(twice)


def violations(layer: dict[str, str], g: dict[str, set[str]]) -> list[str]:
    """Each import from a module to one in a higher layer, or across the side-by-side boxes."""
    bad = []
    for mod, deps in sorted(g.items()):
        if mod not in layer:
            continue   # reported by test_every_module_has_a_layer
        for dep in sorted(deps):
            if dep not in layer or dep == mod:
                continue
            a, b = layer[mod], layer[dep]
            if LAYER_ORDER[b] > LAYER_ORDER[a] or (a, b) in SIDE_BY_SIDE:
                bad.append(f"{mod} (layer {a}) imports {dep} (layer {b})")
    return bad


def layers(rows) -> dict[str, str]:
    return {dotted(n): layer_of(rows, n) for n in package_modules() if layer_of(rows, n)}


def test_imports_never_go_up_a_layer(rows):
    bad = violations(layers(rows), graph(REPO_ROOT, PACKAGE))
    assert not bad, "imports against docs/architecture.md's layers:\n" + "\n".join(bad)


def test_the_layer_check_catches_a_planted_import(rows):
    layer = layers(rows)
    g = graph(REPO_ROOT, PACKAGE)
    before = set(violations(layer, g))
    f, p, b, r = (f"{PACKAGE}.{m}" for m in ("core.formats", "runtime.profiler", "analysis.pipeline.batch",
                                            "backends.registry"))
    g[f] = g[f] | {p}          # the contract importing the runtime: up three layers
    g[b] = g[b] | {r}          # the analysis importing a backend: across the side-by-side boxes
    assert set(violations(layer, g)) - before == {f"{f} (layer 1) imports {p} (layer 4)",
                                                  f"{b} (layer 2a) imports {r} (layer 2r)"}


def test_the_map_parser_reads_folder_rows_and_the_module_list():
    text = "| folder | layer | job |\n|---|---|---|\n| `core/` | 1 | plumbing |\n" \
           "| `x.py` | not a layer | prose |\n| `config/` | 3 | the package |\n| `cli.py` | 6 | cli |\n" \
           f"{LIST_HEADING}\n\n| module | its one job |\n|---|---|\n| `core/fileio.py` | writes |\n\n## Recipes\n| `y.py` | z |\n"
    rows = map_rows(text)
    assert rows == [("core/", "1"), ("config/", "3"), ("cli.py", "6")]
    assert list_names(text) == ["core/fileio.py"]
    assert layer_of(rows, "core/fileio.py") == "1" and layer_of(rows, "config/") == "3"
    assert layer_of(rows, "cli.py") == "6" and layer_of(rows, "analyse.py") is None
    assert layer_of(rows + [("core/sub/", "1")], "core/sub/a.py") == "1"
    assert dotted("config/") == "mindspeed_profiler.config" and dotted("__init__.py") == "mindspeed_profiler"
    assert dotted("analysis/inputs/ascend.py") == "mindspeed_profiler.analysis.inputs.ascend"


def test_the_glossary_defines_each_term_once():
    assert GLOSSARY.is_file(), "docs/glossary.md is missing"
    headings = [ln[4:].strip() for ln in GLOSSARY.read_text(encoding="utf-8").splitlines() if ln.startswith("### ")]
    assert len(headings) >= 20, headings
    key = [h.lower() for h in headings]
    twice = sorted({h for h in key if key.count(h) > 1})
    assert not twice, "terms defined more than once in docs/glossary.md: " + ", ".join(twice)


def test_the_architecture_doc_links_the_glossary():
    assert "glossary.md" in DOC.read_text(encoding="utf-8")
