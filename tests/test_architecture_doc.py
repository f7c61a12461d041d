"""docs/architecture.md's map names every module of the package, exactly once, and only modules
that exist; the layers it gives them agree with the import graph (read from the source by
tests/import_graph.py, lazy imports included, `if TYPE_CHECKING:` ones not); docs/glossary.md
defines each term once.

A module is named by its path under mindspeed_profiler/ (`config/load.py`); a package by its
directory (`config/`), the top-level package by `__init__.py`. Map rows look like
`| `config/load.py` | 3 | its one job |`.
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


def doc_name(path: Path) -> str:
    """The map's name of a module file."""
    rel = path.relative_to(REPO_ROOT / PACKAGE)
    if rel.name == "__init__.py":
        return "__init__.py" if rel.parent == Path(".") else rel.parent.as_posix() + "/"
    return rel.as_posix()


def dotted(name: str) -> str:
    """The dotted module name of a map name."""
    if name == "__init__.py":
        return PACKAGE
    return PACKAGE + "." + name.rstrip("/").removesuffix(".py").replace("/", ".")


def package_modules() -> dict[str, Path]:
    return {doc_name(p): p for p in sorted((REPO_ROOT / PACKAGE).rglob("*.py"))}


def map_rows(text: str) -> list[tuple[str, str]]:
    """(module, layer) of every row of the map's tables."""
    rows = []
    for line in text.splitlines():
        m = ROW_RE.match(line)
        if m and m.group(2) in LAYER_ORDER:
            rows.append((m.group(1), m.group(2)))
    return rows


@pytest.fixture(scope="module")
def rows() -> list[tuple[str, str]]:
    return map_rows(DOC.read_text(encoding="utf-8"))


def test_every_module_is_on_the_map(rows):
    named = {m for m, _ in rows}
    missing = sorted(set(package_modules()) - named)
    assert not missing, "modules not named in docs/architecture.md's map: " + ", ".join(missing)


def test_the_map_names_only_modules_that_exist_and_each_once(rows):
    names = [m for m, _ in rows]
    gone = sorted(set(names) - set(package_modules()))
    assert not gone, "docs/architecture.md names modules that do not exist: " + ", ".join(gone)
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, "named more than once in docs/architecture.md's map: " + ", ".join(twice)


def violations(layer: dict[str, str], g: dict[str, set[str]]) -> list[str]:
    """Each import from a module to one in a higher layer, or across the side-by-side boxes."""
    bad = []
    for mod, deps in sorted(g.items()):
        if mod not in layer:
            continue   # reported by test_every_module_is_on_the_map
        for dep in sorted(deps):
            if dep not in layer or dep == mod:
                continue
            a, b = layer[mod], layer[dep]
            if LAYER_ORDER[b] > LAYER_ORDER[a] or (a, b) in SIDE_BY_SIDE:
                bad.append(f"{mod} (layer {a}) imports {dep} (layer {b})")
    return bad


def test_imports_never_go_up_a_layer(rows):
    bad = violations({dotted(m): lay for m, lay in rows}, graph(REPO_ROOT, PACKAGE))
    assert not bad, "imports against docs/architecture.md's layers:\n" + "\n".join(bad)


def test_the_layer_check_catches_a_planted_import(rows):
    layer = {dotted(m): lay for m, lay in rows}
    g = graph(REPO_ROOT, PACKAGE)
    before = set(violations(layer, g))
    f, p, b, r = (f"{PACKAGE}.{m}" for m in ("formats", "profiler", "analysis.batch", "backends.registry"))
    g[f] = g[f] | {p}          # the contract importing the runtime: up three layers
    g[b] = g[b] | {r}          # the analysis importing a backend: across the side-by-side boxes
    assert set(violations(layer, g)) - before == {f"{f} (layer 1) imports {p} (layer 4)",
                                                  f"{b} (layer 2a) imports {r} (layer 2r)"}


def test_the_map_parser_reads_rows_and_skips_other_tables():
    text = "| module | layer | its one job |\n|---|---|---|\n| `fileio.py` | 1 | writes |\n" \
           "| `x.py` | not a layer | prose |\n| `config/` | 3 | the package |\n"
    assert map_rows(text) == [("fileio.py", "1"), ("config/", "3")]
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
