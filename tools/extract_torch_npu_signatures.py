#!/usr/bin/env python3
"""Snapshot the torch_npu API that mindspeed_profiler calls, read from the wheel's sources with `ast`.

torch_npu cannot be imported without CANN (and installing it breaks `import torch` on CPU boxes),
so the npu backend is tested against a fake built from this snapshot. Reading the real package's
Python files (never importing them) keeps the fake honest: a keyword we pass that the real
function does not accept fails a test.

Usage:
    python tools/extract_torch_npu_signatures.py                      # pip download the newest wheel
    python tools/extract_torch_npu_signatures.py --version 2.14.0
    python tools/extract_torch_npu_signatures.py --wheel /tmp/tnpu/torch_npu-2.14.0-...whl
Writes mindspeed_profiler/data/torch_npu_signatures.json (or --out).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "mindspeed_profiler" / "data" / "torch_npu_signatures.json"

# public dotted name -> (module the user reaches it through, attribute path inside it)
CALLABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch_npu.profiler.profile.__init__": ("torch_npu.profiler", ("profile", "__init__")),
    "torch_npu.profiler.profile.start": ("torch_npu.profiler", ("profile", "start")),
    "torch_npu.profiler.profile.stop": ("torch_npu.profiler", ("profile", "stop")),
    "torch_npu.profiler.profile.step": ("torch_npu.profiler", ("profile", "step")),
    "torch_npu.profiler.profile.export_chrome_trace": ("torch_npu.profiler", ("profile", "export_chrome_trace")),
    "torch_npu.profiler.profile.add_metadata": ("torch_npu.profiler", ("profile", "add_metadata")),
    "torch_npu.profiler.profile.add_metadata_json": ("torch_npu.profiler", ("profile", "add_metadata_json")),
    "torch_npu.profiler.schedule.__init__": ("torch_npu.profiler", ("schedule", "__init__")),
    "torch_npu.profiler.tensorboard_trace_handler": ("torch_npu.profiler", ("tensorboard_trace_handler",)),
    "torch_npu.profiler._ExperimentalConfig.__init__": ("torch_npu.profiler", ("_ExperimentalConfig", "__init__")),
    "torch_npu.profiler.profiler.analyse": ("torch_npu.profiler.profiler", ("analyse",)),
    "torch_npu.npu.mstx.mark": ("torch_npu.npu", ("mstx", "mark")),
    "torch_npu.npu.mstx.range_start": ("torch_npu.npu", ("mstx", "range_start")),
    "torch_npu.npu.mstx.range_end": ("torch_npu.npu", ("mstx", "range_end")),
    "torch_npu.npu.mstx.range_push": ("torch_npu.npu", ("mstx", "range_push")),
    "torch_npu.npu.mstx.range_pop": ("torch_npu.npu", ("mstx", "range_pop")),
    "torch_npu.npu.is_available": ("torch_npu.npu", ("is_available",)),
    "torch_npu.npu.synchronize": ("torch_npu.npu", ("synchronize",)),
}
# enum-like classes whose members we name: class attribute name -> resolved value
ENUM_CLASSES: dict[str, tuple[str, str]] = {
    "ProfilerLevel": ("torch_npu.profiler", "ProfilerLevel"),
    "AiCMetrics": ("torch_npu.profiler", "AiCMetrics"),
    "ExportType": ("torch_npu.profiler", "ExportType"),
}
# instance attributes we set directly (documented in backends/npu.py): checked against profile's own assignments
INSTANCE_ATTRS_OF = ("torch_npu.profiler", "profile")
CONSTANTS = ("MAX_WORKER_NAME_LENGTH",)
CONSTANT_MODULE = "torch_npu.profiler.analysis.prof_common_func._constant"


class Source:
    """The wheel's Python files, parsed lazily, addressed by dotted module name."""

    def __init__(self, wheel: Path):
        self.zip = zipfile.ZipFile(wheel)
        self.names = set(self.zip.namelist())
        self._trees: dict[str, ast.Module] = {}

    def path_of(self, module: str) -> str:
        base = module.replace(".", "/")
        for cand in (f"{base}.py", f"{base}/__init__.py"):
            if cand in self.names:
                return cand
        raise KeyError(f"module {module} not found in the wheel")

    def tree(self, module: str) -> ast.Module:
        if module not in self._trees:
            self._trees[module] = ast.parse(self.zip.read(self.path_of(module)).decode("utf-8"))
        return self._trees[module]

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, ast.AST]:
        """Find the def/class that `module.name` refers to, following `from .x import y as name`."""
        if depth > 8:
            raise KeyError(f"import chain too deep for {module}.{name}")
        tree = self.tree(module)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                return module, node
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        target = _absolute(module, node, self.path_of(module).endswith("__init__.py"))
                        return self.resolve(target, alias.name, depth + 1)
        raise KeyError(f"{name} not defined in {module}")


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _default(expr: ast.expr | None) -> dict[str, Any]:
    if expr is None:
        return {"has_default": False}
    out: dict[str, Any] = {"has_default": True, "default_src": ast.unparse(expr)}
    try:
        out["default"] = ast.literal_eval(expr)
    except (ValueError, SyntaxError):
        pass
    return out


def _signature(fn: ast.FunctionDef, is_static: bool) -> list[dict[str, Any]]:
    a = fn.args
    params: list[dict[str, Any]] = []
    positional = a.posonlyargs + a.args
    pos_defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (arg, d) in enumerate(zip(positional, pos_defaults)):
        kind = "POSITIONAL_ONLY" if i < len(a.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        params.append({"name": arg.arg, "kind": kind, **_default(d)})
    if a.vararg:
        params.append({"name": a.vararg.arg, "kind": "VAR_POSITIONAL", "has_default": False})
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append({"name": arg.arg, "kind": "KEYWORD_ONLY", **_default(d)})
    if a.kwarg:
        params.append({"name": a.kwarg.arg, "kind": "VAR_KEYWORD", "has_default": False})
    return params


def _member(src: Source, module: str, cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    """A method of `cls`, searching its base classes (resolved from `module`) when not defined on it."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    for base in cls.bases:
        if isinstance(base, ast.Name):
            try:
                base_module, base_cls = src.resolve(module, base.id)
            except KeyError:
                continue  # a base from outside the wheel (e.g. torch)
            if isinstance(base_cls, ast.ClassDef):
                try:
                    return _member(src, base_module, base_cls, name)
                except KeyError:
                    pass
    raise KeyError(f"{cls.name}.{name} not found")


def _constants(src: Source) -> dict[str, Any]:
    """Class-level assignments of torch_npu's `Constant` class, literal values only."""
    _, cls = src.resolve(CONSTANT_MODULE, "Constant")
    out: dict[str, Any] = {}
    for node in cls.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, SyntaxError):
                pass
    return out


def extract(wheel: Path) -> dict[str, Any]:
    src = Source(wheel)
    consts = _constants(src)
    functions: dict[str, Any] = {}
    for public, (module, path) in CALLABLES.items():
        where, node = src.resolve(module, path[0])
        is_static = False
        if len(path) > 1:
            assert isinstance(node, ast.ClassDef)
            node = _member(src, where, node, path[1])
            is_static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
        assert isinstance(node, ast.FunctionDef)
        functions[public] = {
            "file": src.path_of(where),
            "line": node.lineno,
            "staticmethod": is_static,
            "params": _signature(node, is_static),
        }
    enums: dict[str, dict[str, Any]] = {}
    for public, (module, name) in ENUM_CLASSES.items():
        _, cls = src.resolve(module, name)
        members: dict[str, Any] = {}
        for node in cls.body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                value = node.value
                if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "Constant":
                    members[node.targets[0].id] = consts.get(value.attr, f"Constant.{value.attr}")
                else:
                    try:
                        members[node.targets[0].id] = ast.literal_eval(value)
                    except (ValueError, SyntaxError):
                        members[node.targets[0].id] = ast.unparse(value)
        enums[public] = members
    # ProfilerActivity is a C++ enum: its members are the ones the Python sources reference.
    activity: set[str] = set()
    for name in src.names:
        if name.startswith("torch_npu/profiler/") and name.endswith(".py"):
            for node in ast.walk(ast.parse(src.zip.read(name).decode("utf-8"))):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ProfilerActivity":
                    activity.add(node.attr)
    enums["ProfilerActivity"] = {m: m for m in sorted(activity)}
    # instance attributes assigned in profile.__init__ (we set step offsets on the object)
    where, cls = src.resolve(*INSTANCE_ATTRS_OF)
    attrs = sorted({t.attr for t in ast.walk(_member(src, where, cls, "__init__")) if isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name) and t.value.id == "self" and isinstance(t.ctx, ast.Store)})
    version = None
    if "torch_npu/version.py" in src.names:
        for node in ast.parse(src.zip.read("torch_npu/version.py").decode()).body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__version__":
                version = ast.literal_eval(node.value)
    return {
        "schema": 1,
        "package": "torch-npu",
        "version": version,
        "wheel": wheel.name,
        "generated_by": "tools/extract_torch_npu_signatures.py (ast, no import)",
        "functions": functions,
        "enums": enums,
        "instance_attributes": {"torch_npu.profiler.profile": attrs},
        "constants": {k: consts[k] for k in CONSTANTS if k in consts},
    }


def download(version: str | None, dest: Path) -> Path:
    spec = f"torch-npu=={version}" if version else "torch-npu"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", spec, "-d", str(dest)]
    subprocess.run(cmd, check=True)
    wheels = sorted(dest.glob("torch_npu-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download produced no torch_npu wheel in {dest}")
    return wheels[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", type=Path, help="a downloaded torch_npu wheel (default: pip download it)")
    ap.add_argument("--version", help="torch-npu version to download (default: newest)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if args.wheel:
        if not args.wheel.is_file():
            raise SystemExit(f"--wheel {args.wheel}: no such file")
        wheel = args.wheel
    else:
        wheel = download(args.version, Path(tempfile.mkdtemp(prefix="torch_npu_")))
    snap = extract(wheel)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(snap, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, args.out)
    print(f"wrote {args.out} ({len(snap['functions'])} functions, torch-npu {snap['version']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
