"""No import cycle between the package's modules, lazy (function-local) imports included: a lazy
import hides a cycle, it does not remove it. `if TYPE_CHECKING:` imports do not count (they never
run). The graph is read from the source (tests/import_graph.py), nothing is imported."""
from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import REPO_ROOT
from import_graph import cycles, graph


def _cycles_text(found: list[list[str]]) -> str:
    return "\n".join(" <-> ".join(c) for c in found)


def test_the_package_has_no_import_cycle():
    found = cycles(graph(REPO_ROOT, "mindspeed_profiler"))
    assert not found, "import cycles:\n" + _cycles_text(found)


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


def test_type_checking_imports_and_parent_packages_do_not_count(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg.sub.x import X\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.y import Y\nX = 1\n",
        "pkg/y.py": "from pkg.sub.x import X\nY = X\n",
    })
    g = graph(tmp_path, "pkg")
    assert g["pkg.sub.x"] == set() and g["pkg.y"] == {"pkg.sub.x"}
    assert cycles(g) == []
    # the same import at run time is a cycle
    (tmp_path / "pkg/sub/x.py").write_text("from pkg.y import Y\nX = 1\n")
    assert cycles(graph(tmp_path, "pkg")) == [["pkg.sub.x", "pkg.y"]]


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
