"""The one place old import paths live. Modules moved to the folders of their layer (issue 32):
`mindspeed_profiler.profiler` is now `mindspeed_profiler.runtime.profiler`, and so on. Code written
against the old dotted names keeps working: `install()` (run by the package's `__init__`) puts a
finder on `sys.meta_path` that answers an old name with the module at its new name, the same module
object (`import mindspeed_profiler.mstx as m; m is mindspeed_profiler.runtime.mstx`), submodules of a
moved package included (`mindspeed_profiler.analysis.report.sections`). `python -m` with an old name
runs the new module's code. Two old modules were re-export shims (`config_dialects`, `tracing.merge`):
their names are in `COMPOSITES`.

The package itself imports only new names (tests/test_compat.py checks it). A module moved later gets
one line in `MOVED`; nothing else changes.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

PACKAGE = "mindspeed_profiler"

# old dotted name (under the package) -> new one; a package moved whole carries its submodules
MOVED: dict[str, str] = {
    "formats": "core.formats",
    "fileio": "core.fileio",
    "_registry": "core.registry",
    "_warn": "core.warn",
    "yaml_bounded": "core.yaml_bounded",
    "jsonsafe": "core.jsonsafe",
    "capture_options": "core.capture_options",
    "_state": "core.state",
    "schedule": "capture.schedule",
    "stages": "capture.stages",
    "observers": "capture.observers",
    "system.config_rules": "config.system_rules",
    "profiler": "runtime.profiler",
    "session": "runtime.session",
    "signals": "runtime.signals",
    "stage_scope": "runtime.stage_scope",
    "manifest": "runtime.manifest",
    "ranks": "runtime.ranks",
    "mstx": "runtime.mstx",
    "integrations.megatron": "runtime.megatron",
    "system.settings": "runtime.system_settings",
    "tracing._wrap": "tracing.wrap",
    "tracing._metrics": "tracing.marker_metrics",
    "mindspeed_api": "integrations.mindspeed_api",
    "mindspeed_rl": "integrations.mindspeed_rl",
    "analysis.discover": "analysis.pipeline.discover",
    "analysis.batch": "analysis.pipeline.batch",
    "analysis.collect": "analysis.pipeline.collect",
    "analysis.pool": "analysis.pipeline.pool",
    "analysis.capture": "analysis.pipeline.capture",
    "analysis.ray_batch": "analysis.pipeline.ray_batch",
    "analysis.ray_node": "analysis.pipeline.ray_node",
    "analysis.merge": "analysis.timeline.merge",
    "analysis.timeline_spill": "analysis.timeline.spill",
    "analysis.timeline_stream": "analysis.timeline.stream",
    "analysis.pftrace": "analysis.timeline.pftrace",
    "analysis.system_align": "analysis.timeline.system_align",
    "analysis.system_tracks": "analysis.timeline.system_tracks",
    "analysis.outputs": "analysis.results.outputs",
    "analysis.sqlite_export": "analysis.results.sqlite_export",
    "analysis.console": "analysis.results.console",
    "analysis.facade": "analysis.results.facade",
    "analysis.report": "analysis.results.report",
    "analysis.rows": "analysis.models.rows",
    "analysis.questions": "analysis.models.questions",
    "analysis.finding_rules": "analysis.models.finding_rules",
    "analysis.summary_fields": "analysis.models.summary_fields",
    "analysis.summary_shape": "analysis.models.summary_shape",
    "analysis.display": "analysis.models.display",
    "analysis.advisor": "analysis.analyzers.advisor",
    "analysis.intervals": "analysis.analyzers.intervals",
    "analysis.analyzers._rows": "analysis.analyzers.grouping",
}

# old re-export modules: old dotted name -> {name: "new.module:attribute"}; `*` takes a module's
# public names (its __all__, else every name without a leading underscore)
COMPOSITES: dict[str, dict[str, str]] = {
    "config_dialects": {
        "*": "config.dialects",
        "RLINF_PROFILING_KEYS": "config.dialects.rlinf:RLINF_PROFILING_KEYS",
        "RLINF_TRACE_FILE": "config.dialects.rlinf:RLINF_TRACE_FILE",
        "RLINF_TRACER_KEYS": "config.dialects.rlinf:RLINF_TRACER_KEYS",
        "from_rlinf": "config.dialects.rlinf:from_rlinf",
        "VERL_CONTENTS": "config.dialects.verl:VERL_CONTENTS",
        "VERL_DEFAULT_SAVE_PATH": "config.dialects.verl:VERL_DEFAULT_SAVE_PATH",
        "VERL_GLOBAL_KEYS": "config.dialects.verl:VERL_GLOBAL_KEYS",
        "VERL_ROLE_KEYS": "config.dialects.verl:VERL_ROLE_KEYS",
        "VERL_ROLE_PATHS": "config.dialects.verl:VERL_ROLE_PATHS",
        "VERL_STAGES": "config.dialects.verl:VERL_STAGES",
        "VERL_TOOL_KEYS": "config.dialects.verl:VERL_TOOL_KEYS",
        "VERL_TOOLS": "config.dialects.verl:VERL_TOOLS",
        "VERL_TORCH_UNMAPPED_CONTENTS": "config.dialects.verl:VERL_TORCH_UNMAPPED_CONTENTS",
        "from_verl": "config.dialects.verl:from_verl",
        "split_overrides": "config.load:split_overrides",
    },
    "tracing.merge": {
        "*": "analysis.timeline.merge",
        "load_timeline": "analysis.timeline.merge:read_timeline_file",   # its name before the move
    },
}


def new_name(old: str) -> str | None:
    """The new dotted name of an old one (full names, `mindspeed_profiler.` included), or None."""
    if not old.startswith(PACKAGE + "."):
        return None
    rel = old[len(PACKAGE) + 1:]
    parts = rel.split(".")
    for k in range(len(parts), 0, -1):
        new = MOVED.get(".".join(parts[:k]))
        if new is not None:
            return ".".join([PACKAGE, new, *parts[k:]])
    return None


def _public(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    return list(names) if names is not None else [n for n in vars(module) if not n.startswith("_")]


def _composite(old: str, table: dict[str, str]) -> types.ModuleType:
    module = types.ModuleType(old, f"Kept for old imports: the names of {old} now live elsewhere (mindspeed_profiler/compat.py).")
    for name, where in table.items():
        if name == "*":
            src = importlib.import_module(f"{PACKAGE}.{where}")
            for n in _public(src):
                setattr(module, n, getattr(src, n))
        else:
            mod, attr = where.split(":")
            setattr(module, name, getattr(importlib.import_module(f"{PACKAGE}.{mod}"), attr))
    return module


class _Alias:
    """Loads an old name as the module at its new name (the same object). A loader by protocol
    (create_module / exec_module), not by importlib.abc's base class: importing importlib.abc costs
    ~14 ms (it loads importlib.resources), paid by every import of the package."""

    def __init__(self, new: str | None, table: dict[str, str] | None = None):
        self.new, self.table = new, table

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if self.table is not None:
            return _composite(spec.name, self.table)
        module = importlib.import_module(self.new)
        self._real_spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        if self.table is None:
            module.__spec__ = self._real_spec   # the import system set the alias' spec; the module keeps its own

    # `python -m <old name>` (runpy) runs the new module's code
    def get_code(self, fullname: str) -> Any:
        if self.new is None:
            return compile("", fullname, "exec")
        spec = importlib.util.find_spec(self.new)
        return spec.loader.get_code(self.new)

    def is_package(self, fullname: str) -> bool:
        return False


class _Finder:   # a meta path finder by protocol (find_spec), as _Alias is a loader
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PACKAGE + "."):
            return None
        rel = fullname[len(PACKAGE) + 1:]
        if rel in COMPOSITES:
            return importlib.machinery.ModuleSpec(fullname, _Alias(None, COMPOSITES[rel]))
        new = new_name(fullname)
        if new is None:
            return None
        spec = importlib.util.find_spec(new)
        if spec is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new), is_package=spec.submodule_search_locations is not None)


_FINDER = _Finder()


def install() -> None:
    """Answer old import paths (once per interpreter). First on sys.meta_path, so that a submodule
    of a moved package under its old name is this alias, never a second copy the path finder would
    load from the parent's __path__. No old name exists on disk (tests/test_compat.py)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _FINDER)
