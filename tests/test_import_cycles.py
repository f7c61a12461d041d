"""The package's import graph, read from the source (tests/import_graph.py, nothing is imported):
no cycle, counting lazy (function-local) imports (a lazy import hides a cycle, it does not remove it)
and `if TYPE_CHECKING:` ones (a type-only loop still ties two modules together); no private name (one
leading underscore, a module or an attribute) imported from another module; no module over
MAX_LINES lines. The layers are checked by tests/test_architecture_doc.py."""
from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import REPO_ROOT
from import_graph import cycles, graph, long_modules, private_imports

MAX_LINES = 600


def _cycles_text(found: list[list[str]]) -> str:
    return "\n".join(" <-> ".join(c) for c in found)


def test_the_package_has_no_import_cycle():
    found = cycles(graph(REPO_ROOT, "mindspeed_profiler"))
    assert not found, "import cycles:\n" + _cycles_text(found)


def test_no_private_name_is_imported_across_modules():
    found = private_imports(REPO_ROOT, "mindspeed_profiler")
    assert not found, "private names imported from another module (make them public or move them):\n" + "\n".join(found)


def test_no_module_is_over_the_line_limit():
    found = long_modules(REPO_ROOT, "mindspeed_profiler", MAX_LINES)
    assert not found, f"modules over {MAX_LINES} lines:\n" + "\n".join(found)


def test_private_imports_and_long_modules_are_found(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/_hidden.py": "X = 1\n",
        "pkg/a.py": "def _f():\n    return 1\n\n\ndef g():\n    return _f()\n",
        "pkg/b.py": "from pkg.a import _f, g\nfrom . import _hidden\nimport pkg._hidden\nfrom pkg.a import __doc__\n",
        "pkg/c.py": "from pkg._hidden import X\n" + "y = 1\n" * 5,
    })
    assert private_imports(tmp_path, "pkg") == [
        "pkg.b:1 imports _f from pkg.a", "pkg.b:2 imports _hidden from pkg",
        "pkg.b:3 imports pkg._hidden", "pkg.c:1 imports X from pkg._hidden"]
    assert long_modules(tmp_path, "pkg", 5) == ["pkg.a: 6 lines", "pkg.c: 6 lines"]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


def test_a_planted_cycle_is_found_also_when_lazy(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "def f():\n    from pkg.c import g  # lazy: still an edge\n    return g\n",
        "pkg/c.py": "from . import a\n",              # relative: pkg.a
        "pkg/d.py": "import pkg.a\n",                 # into the cycle, not part of it
    })
    assert cycles(graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_type_checking_imports_count_and_parent_packages_do_not(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg.sub.x import X\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.y import Y\nX = 1\n",
        "pkg/y.py": "from pkg.sub.x import X\nY = X\n",
    })
    g = graph(tmp_path, "pkg")
    assert g["pkg.sub.x"] == {"pkg.y"} and g["pkg.y"] == {"pkg.sub.x"}
    assert cycles(g) == [["pkg.sub.x", "pkg.y"]]          # a type-only loop is a loop
    assert cycles(graph(tmp_path, "pkg", type_only=False)) == []   # not one Python meets at run time
    # no edge to an empty package __init__ (pkg.sub), none to the importer's own package
    (tmp_path / "pkg/sub/x.py").write_text("X = 1\n")
    assert graph(tmp_path, "pkg")["pkg.y"] == {"pkg.sub.x"} and cycles(graph(tmp_path, "pkg")) == []


def test_a_package_init_an_import_runs_closes_a_cycle(tmp_path):
    """The shape the config split had: an outside module imports pkg.conf.errors, which runs
    pkg/conf/__init__, which imports (through validate) the outside module, half initialised. Python
    fails with "partially initialized module"; the graph has the edge to pkg.conf."""
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/conf/__init__.py": "from pkg.conf.validate import check\n",
        "pkg/conf/errors.py": "KEY = 'k'\n",
        "pkg/conf/validate.py": "from pkg.rules import rule\ncheck = rule\n",
        "pkg/rules.py": "from pkg.conf.errors import KEY\nrule = KEY\n",
    })
    g = graph(tmp_path, "pkg")
    assert g["pkg.rules"] == {"pkg.conf.errors", "pkg.conf"}
    assert cycles(g) == [["pkg.conf", "pkg.conf.validate", "pkg.rules"]]
    # an empty package __init__ runs nothing: no edge to it, no cycle
    (tmp_path / "pkg/conf/__init__.py").write_text("")
    assert cycles(graph(tmp_path, "pkg")) == []
