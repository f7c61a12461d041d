"""Old import paths keep working (mindspeed_profiler/compat.py): every moved module's old dotted name
imports the same module object as its new one, the old re-export modules give the same objects,
every import path README.md and docs/ show works, and the package itself imports only new names."""
from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from import_graph import from_module, modules

import mindspeed_profiler
from mindspeed_profiler import compat

PACKAGE = "mindspeed_profiler"
OLD = [f"{PACKAGE}.{old}" for old in compat.MOVED]


@pytest.mark.parametrize("old", OLD)
def test_an_old_path_is_the_new_module(old):
    new = compat.new_name(old)
    a, b = importlib.import_module(old), importlib.import_module(new)
    assert a is b and b.__name__ == new and b.__spec__.name == new


def test_a_submodule_of_a_moved_package_is_one_module():
    import mindspeed_profiler.analysis.report.sections as old
    from mindspeed_profiler.analysis.results.report import sections as new
    assert old is new and sys.modules[f"{PACKAGE}.analysis.report.sections"] is new


def test_old_names_and_from_imports_give_the_same_objects():
    from mindspeed_profiler.mstx import mstx_timer_decorator
    from mindspeed_profiler.mindspeed_rl import get_grpo_profiler
    from mindspeed_profiler.profiler import IntegratedProfiler
    from mindspeed_profiler.formats import CAT_STAGE
    from mindspeed_profiler.analysis import questions
    from mindspeed_profiler.runtime import mstx, profiler
    from mindspeed_profiler.integrations import mindspeed_rl
    from mindspeed_profiler.core import formats
    from mindspeed_profiler.analysis.models import questions as q
    assert mstx_timer_decorator is mstx.mstx_timer_decorator is mindspeed_profiler.mstx_timer_decorator
    assert get_grpo_profiler is mindspeed_rl.get_grpo_profiler
    assert IntegratedProfiler is profiler.IntegratedProfiler is mindspeed_profiler.IntegratedProfiler
    assert CAT_STAGE == formats.CAT_STAGE and questions is q


@pytest.mark.parametrize("old", sorted(compat.COMPOSITES))
def test_the_old_re_export_modules_give_the_same_objects(old):
    module = importlib.import_module(f"{PACKAGE}.{old}")
    for name, where in compat.COMPOSITES[old].items():
        if name == "*":
            src = importlib.import_module(f"{PACKAGE}.{where}")
            for n in compat._public(src):
                assert getattr(module, n) is getattr(src, n)
        else:
            mod, attr = where.split(":")
            assert getattr(module, name) is getattr(importlib.import_module(f"{PACKAGE}.{mod}"), attr)


def test_the_old_merge_and_dialect_names():
    from mindspeed_profiler.tracing.merge import build_timeline, load_timeline, write_timeline  # noqa: F401
    from mindspeed_profiler.config_dialects import split_overrides, translate, from_verl  # noqa: F401
    from mindspeed_profiler.analysis.timeline.merge import read_timeline_file
    assert load_timeline is read_timeline_file


def test_no_old_name_exists_on_disk_so_none_is_shadowed():
    on_disk = set(modules(REPO_ROOT, PACKAGE))
    clash = sorted(set(OLD) & on_disk | {f"{PACKAGE}.{c}" for c in compat.COMPOSITES} & on_disk)
    assert not clash, "an old name that is also a module on disk: " + ", ".join(clash)
    for old, new in compat.MOVED.items():
        assert f"{PACKAGE}.{new}" in on_disk, f"compat.MOVED names a module that does not exist: {new}"


def _old(name: str) -> bool:
    rel = name[len(PACKAGE) + 1:] if name.startswith(PACKAGE + ".") else None
    return rel is not None and (compat.new_name(name) is not None or rel in compat.COMPOSITES)


def test_the_package_imports_no_old_path():
    bad = []
    for name, path in modules(REPO_ROOT, PACKAGE).items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                bad += [f"{name}:{node.lineno} {a.name}" for a in node.names if _old(a.name)]
            elif isinstance(node, ast.ImportFrom):
                mod = from_module(name, is_pkg, node)
                if _old(mod):
                    bad.append(f"{name}:{node.lineno} {mod}")
                bad += [f"{name}:{node.lineno} {mod}.{a.name}" for a in node.names if _old(f"{mod}.{a.name}")]
    assert not bad, "the package imports old paths (use the new ones):\n" + "\n".join(bad)


DOC_IMPORT = re.compile(r"^\s*(?:from (mindspeed_profiler[\w.]*) import ([\w, ]+)|import (mindspeed_profiler[\w.]*))", re.M)


def _documented_imports() -> list[tuple[str, str, list[str]]]:
    out = []
    for doc in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for m in DOC_IMPORT.finditer(doc.read_text(encoding="utf-8")):
            if m.group(1):
                names = [n.strip().split(" as ")[0] for n in m.group(2).split(",") if n.strip()]
                out.append((doc.name, m.group(1), names))
            else:
                out.append((doc.name, m.group(3), []))
    return out


def _documented_dotted() -> list[tuple[str, str]]:
    """`mindspeed_profiler.x.y` written in backticks: a module, or a module's attribute."""
    out = []
    for doc in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        out += [(doc.name, d) for d in re.findall(r"`(mindspeed_profiler(?:\.\w+)+)`", doc.read_text(encoding="utf-8"))]
    return out


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_every_documented_dotted_name_resolves():
    found = _documented_dotted()
    assert len(found) >= 5, found
    bad = []
    for doc, dotted in found:
        try:
            _resolve(dotted)
        except Exception as e:   # noqa: BLE001 - report every one
            bad.append(f"{doc}: {dotted}: {e!r}")
    assert not bad, "\n".join(bad)


def test_every_documented_import_path_works():
    found = _documented_imports()
    assert len(found) >= 10, found
    bad = []
    for doc, mod, names in found:
        try:
            module = importlib.import_module(mod)
            for n in names:
                if not hasattr(module, n):
                    importlib.import_module(f"{mod}.{n}")
        except Exception as e:   # noqa: BLE001 - report every one
            bad.append(f"{doc}: {mod} {names}: {e!r}")
    assert not bad, "\n".join(bad)


def test_documented_module_commands_exist():
    bad = []
    for doc in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for mod in re.findall(r"-m (mindspeed_profiler[\w.]*)", doc.read_text(encoding="utf-8")):
            if importlib.util.find_spec(mod) is None:
                bad.append(f"{doc.name}: python -m {mod}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("argv", [["-m", "mindspeed_profiler.analyse", "--help"],
                                  ["mindspeed_profiler/analyse.py", "--help"],
                                  ["-m", "mindspeed_profiler.analysis.questions"]])
def test_entry_points_run(argv):
    r = subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ("usage" in r.stdout) or ("| table |" in r.stdout), r.stdout[:500]
