#!/usr/bin/env python3
"""Snapshot the torch_npu API that mindspeed_profiler calls, read from the wheels' sources with `ast`.

torch_npu cannot be imported without CANN (and installing it breaks `import torch` on CPU boxes),
so the npu backend is tested against a fake built from these snapshots. Reading the real package's
Python files (never importing them) keeps the fake honest: a keyword we pass that the real
function of that release does not accept fails a test. The backend also reads them at run time
when it cannot inspect the installed torch_npu itself.

A snapshot covers the profiler (`profile.__init__`, start / stop / step, export_chrome_trace,
add_metadata[_json]), `_ExperimentalConfig.__init__`, `schedule`, `tensorboard_trace_handler`,
`profiler.profiler.analyse`, the mstx functions, the dynamic profiling API
(`torch_npu.profiler.dynamic_profile`: init / step / start), the enums we name (ProfilerLevel,
AiCMetrics, ExportType, ProfilerActivity), the instance attributes `profile.__init__` assigns and
the constants we use. What a release does not have is listed under "absent" (never an error).

Regenerate every snapshot (newest release of each line 2.1 ... newest, plus the exact releases
pinned by MindSpeed-RL, PINNED below; pip downloads each wheel without installing it):
    python tools/extract_torch_npu_signatures.py --all [--wheel-dir /tmp/tnpu_wheels]
One release, or one wheel you already have:
    python tools/extract_torch_npu_signatures.py --version 2.5.1
    python tools/extract_torch_npu_signatures.py --wheel /tmp/tnpu/torch_npu-2.14.0-...whl [--out FILE]
Writes mindspeed_profiler/data/torch_npu-<version>.json (one per release, sorted keys) and
refreshes mindspeed_profiler/data/torch_npu_index.json from the snapshots there (not with --out).
    python tools/extract_torch_npu_signatures.py --table     # docs/profiling.md's table of differences
mindspeed_profiler/data/torch_npu_signatures.json is the first (2.14.0) snapshot, kept unchanged for
readers of the old path; tests/test_npu_versions.py checks the extractor reproduces it (and, with
TORCH_NPU_WHEEL_DIR set to the downloaded wheels, that every snapshot matches its wheel).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent.parent / "mindspeed_profiler" / "data"
INDEX_NAME = "torch_npu_index.json"
FIRST_LINE = (2, 1)  # the oldest release line snapshotted by --all
# exact releases snapshotted besides the newest of each line: who pins them
PINNED = {"2.5.1": "MindSpeed-RL 2.0.0 - 2.3.0", "2.7.1": "MindSpeed-RL master"}

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
    "torch_npu.profiler.dynamic_profile.init": ("torch_npu.profiler.dynamic_profile", ("init",)),
    "torch_npu.profiler.dynamic_profile.step": ("torch_npu.profiler.dynamic_profile", ("step",)),
    "torch_npu.profiler.dynamic_profile.start": ("torch_npu.profiler.dynamic_profile", ("start",)),
    "torch_npu.npu.mstx.mark": ("torch_npu.npu", ("mstx", "mark")),
    "torch_npu.npu.mstx.range_start": ("torch_npu.npu", ("mstx", "range_start")),
    "torch_npu.npu.mstx.range_end": ("torch_npu.npu", ("mstx", "range_end")),
    "torch_npu.npu.mstx.range_push": ("torch_npu.npu", ("mstx", "range_push")),
    "torch_npu.npu.mstx.range_pop": ("torch_npu.npu", ("mstx", "range_pop")),
    "torch_npu.npu.mstx.mstx_range": ("torch_npu.npu", ("mstx", "mstx_range")),
    "torch_npu.npu.is_available": ("torch_npu.npu", ("is_available",)),
    "torch_npu.npu.synchronize": ("torch_npu.npu", ("synchronize",)),
}
# callables every release has had (the snapshot file format predates "absent"): missing = a broken wheel
REQUIRED = ("torch_npu.profiler.profile.__init__", "torch_npu.profiler._ExperimentalConfig.__init__",
            "torch_npu.profiler.tensorboard_trace_handler", "torch_npu.profiler.schedule.__init__")
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
    try:
        _, cls = src.resolve(CONSTANT_MODULE, "Constant")
    except KeyError:
        return {}
    out: dict[str, Any] = {}
    for node in cls.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, SyntaxError):
                pass
    return out


def _callable(src: Source, module: str, path: tuple[str, ...]) -> tuple[str, ast.FunctionDef, bool]:
    """(defining module, def node, is a staticmethod) of `module.path`, or KeyError when absent."""
    where, node = src.resolve(module, path[0])
    is_static = False
    if len(path) > 1:
        if not isinstance(node, ast.ClassDef):
            raise KeyError(f"{module}.{path[0]} is not a class")
        node = _member(src, where, node, path[1])
        is_static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    if not isinstance(node, ast.FunctionDef):
        raise KeyError(f"{module}.{'.'.join(path)} is not a function")
    return where, node, is_static


def extract(wheel: Path) -> dict[str, Any]:
    src = Source(wheel)
    consts = _constants(src)
    functions: dict[str, Any] = {}
    absent: list[str] = []
    for public, (module, path) in CALLABLES.items():
        try:
            where, node, is_static = _callable(src, module, path)
        except KeyError:
            if public in REQUIRED:
                raise
            absent.append(public)  # not in this release: the snapshot says so
            continue
        functions[public] = {
            "file": src.path_of(where),
            "line": node.lineno,
            "staticmethod": is_static,
            "params": _signature(node, is_static),
        }
    enums: dict[str, dict[str, Any]] = {}
    for public, (module, name) in ENUM_CLASSES.items():
        try:
            _, cls = src.resolve(module, name)
        except KeyError:
            absent.append(public)
            continue
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
        "absent": sorted(absent),
        "enums": enums,
        "instance_attributes": {"torch_npu.profiler.profile": attrs},
        "constants": {k: consts[k] for k in CONSTANTS if k in consts},
    }


# ------------------------------------------------------------------------------ writing


def dumps(obj: Any, indent: int = 0, width: int = 120) -> str:
    """Deterministic JSON (sorted keys), one line per value that fits in `width`: small and diffable."""
    flat = json.dumps(obj, sort_keys=True, ensure_ascii=False)
    if len(flat) + indent <= width or not isinstance(obj, (dict, list)) or not obj:
        return flat
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(obj, dict):
        items = [f"{inner}{json.dumps(k)}: {dumps(obj[k], indent + 1, width)}" for k in sorted(obj)]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    return "[\n" + ",\n".join(inner + dumps(v, indent + 1, width) for v in obj) + "\n" + pad + "]"


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dumps(obj) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def snapshot_name(version: str) -> str:
    return f"torch_npu-{version}.json"


def write_index(data_dir: Path) -> dict[str, Any]:
    """torch_npu_index.json: every snapshot in data_dir, oldest first, with its release line."""
    versions: dict[str, Any] = {}
    for path in data_dir.glob("torch_npu-*.json"):
        snap = json.loads(path.read_text(encoding="utf-8"))
        v = snap["version"]
        versions[v] = {"file": path.name, "line": line_of(v), "wheel": snap["wheel"]}
        if v in PINNED:
            versions[v]["pinned_by"] = PINNED[v]
    order = sorted(versions, key=version_key)
    index = {
        "schema": 1,
        "package": "torch-npu",
        "generated_by": "tools/extract_torch_npu_signatures.py --all",
        "versions": versions,
        "order": order,
        "newest": order[-1] if order else None,
    }
    write_json(data_dir / INDEX_NAME, index)
    return index


# ------------------------------------------------------------------------------ the docs table

_EXP = "torch_npu.profiler._ExperimentalConfig.__init__"
# column -> (what it checks, as a function of one snapshot)
def _params(snap: dict[str, Any], fn: str) -> list[str]:
    entry = snap["functions"].get(fn)
    return [p["name"] for p in entry["params"] if p["name"] != "self"] if entry else []


def _yes(flag: bool) -> str:
    return "yes" if flag else "**no**"


FEATURES: list[tuple[str, Any]] = [
    ("`_ExperimentalConfig(mstx=)`", lambda s: _yes("mstx" in _params(s, _EXP))),
    ("`msprof_tx=`", lambda s: _yes("msprof_tx" in _params(s, _EXP))),
    ("`mstx_domain_include/exclude=`", lambda s: _yes("mstx_domain_include" in _params(s, _EXP))),
    ("`host_sys=`, `sys_io=`", lambda s: _yes("host_sys" in _params(s, _EXP))),
    ("`Level_none`", lambda s: _yes("Level_none" in s["enums"].get("ProfilerLevel", {}))),
    ("`ExportType.Db`", lambda s: _yes("Db" in s["enums"].get("ExportType", {}) and "export_type" in _params(s, _EXP))),
    ("`analyse(export_type=)`", lambda s: _yes("export_type" in _params(s, "torch_npu.profiler.profiler.analyse"))),
    ("mstx `domain=`", lambda s: _yes("domain" in _params(s, "torch_npu.npu.mstx.range_start"))),
    ("`mstx.mark(...)`", lambda s: ", ".join(_params(s, "torch_npu.npu.mstx.mark"))),
    ("`range_push/pop`", lambda s: _yes("torch_npu.npu.mstx.range_push" in s["functions"])),
    ("`profile._step_num_offset`", lambda s: _yes("_step_num_offset" in s["instance_attributes"]["torch_npu.profiler.profile"])),
    ("`dynamic_profile.start`", lambda s: _yes("torch_npu.profiler.dynamic_profile.start" in s["functions"])),
]


def feature_table(data_dir: Path = DATA_DIR) -> str:
    """The markdown table of docs/profiling.md "torch_npu versions": one row per snapshot."""
    index = json.loads((data_dir / INDEX_NAME).read_text(encoding="utf-8"))
    rows = ["| torch-npu | " + " | ".join(name for name, _ in FEATURES) + " |",
            "|---" * (len(FEATURES) + 1) + "|"]
    for v in index["order"]:
        snap = json.loads((data_dir / index["versions"][v]["file"]).read_text(encoding="utf-8"))
        pin = index["versions"][v].get("pinned_by")
        label = f"{v} ({pin})" if pin else v
        rows.append(f"| {label} | " + " | ".join(str(check(snap)) for _, check in FEATURES) + " |")
    return "\n".join(rows)


# ------------------------------------------------------------------------------ versions, downloads

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?(?:[.-]?(?:rc|a|b)\d+)?$")


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of a torch-npu release number such as 2.7.1.post11 (final releases only)."""
    m = _VERSION.match(version)
    if not m:
        return (-1,)
    major, minor, patch, post = m.groups()
    return (int(major), int(minor), int(patch or 0), int(post or -1) + 1)


def line_of(version: str) -> str:
    k = version_key(version)
    return f"{k[0]}.{k[1]}" if len(k) > 1 else version


def registry_versions() -> list[str]:
    """Every torch-npu release the package index has (pip index versions)."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "torch-npu"],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"Available versions:\s*(.+)", out)
    if not m:
        raise SystemExit(f"pip index versions torch-npu: no version list in {out!r}")
    return [v.strip() for v in m.group(1).split(",") if v.strip()]


def choose_versions(available: list[str]) -> list[str]:
    """The newest final release of each line from FIRST_LINE on, plus the PINNED releases."""
    newest: dict[tuple[int, int], str] = {}
    for v in available:
        k = version_key(v)
        if len(k) < 4 or not _VERSION.match(v) or re.search(r"(rc|a|b)\d+$", v) or k[:2] < FIRST_LINE:
            continue
        if k[:2] not in newest or k > version_key(newest[k[:2]]):
            newest[k[:2]] = v
    chosen = set(newest.values()) | {v for v in PINNED if v in available}
    return sorted(chosen, key=version_key)


def download(version: str | None, dest: Path) -> Path:
    """pip download one torch-npu wheel (never installed): cp311 manylinux x86_64, else any platform."""
    spec = f"torch-npu=={version}" if version else "torch-npu"
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(dest)]
    attempts = [
        base + ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                "--platform", "manylinux2014_x86_64", spec],
        base + [spec],  # this interpreter and platform
        base + ["--python-version", "3.11", "--platform", "manylinux_2_28_aarch64", "--platform", "manylinux_2_17_aarch64",
                "--platform", "manylinux2014_aarch64", spec],
    ]
    for cmd in attempts:
        if subprocess.run(cmd).returncode == 0:
            break
    pattern = f"torch_npu-{version}-*.whl" if version else "torch_npu-*.whl"
    wheels = sorted(dest.glob(pattern))
    if not wheels:
        raise SystemExit(f"pip download produced no torch_npu wheel for {spec} in {dest}")
    return wheels[-1]


def _wheel_for(version: str, wheel_dir: Path) -> Path:
    have = sorted(wheel_dir.glob(f"torch_npu-{version}-*.whl"))
    return have[0] if have else download(version, wheel_dir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="every release line (newest of each) plus the pinned releases, and the index")
    ap.add_argument("--wheel", type=Path, help="a downloaded torch_npu wheel (default: pip download it)")
    ap.add_argument("--version", help="torch-npu version to download (default: newest)")
    ap.add_argument("--wheel-dir", type=Path, help="where downloaded wheels are kept and reused (default: a temporary directory)")
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where snapshots and the index are written")
    ap.add_argument("--out", type=Path, help="write this one snapshot here instead of <data-dir>/torch_npu-<version>.json")
    ap.add_argument("--table", action="store_true", help="print the docs/profiling.md feature table of the snapshots in --data-dir")
    args = ap.parse_args(argv)
    if args.table:
        print(feature_table(args.data_dir))
        return 0
    wheel_dir = args.wheel_dir or Path(tempfile.mkdtemp(prefix="torch_npu_"))
    wheel_dir.mkdir(parents=True, exist_ok=True)
    if args.all:
        if args.wheel or args.version or args.out:
            raise SystemExit("--all takes no --wheel / --version / --out")
        for version in choose_versions(registry_versions()):
            snap = extract(_wheel_for(version, wheel_dir))
            write_json(args.data_dir / snapshot_name(snap["version"]), snap)
            print(f"wrote {snapshot_name(snap['version'])} ({len(snap['functions'])} functions, absent: {', '.join(snap['absent']) or '-'})")
        index = write_index(args.data_dir)
        print(f"wrote {INDEX_NAME}: {', '.join(index['order'])}")
        return 0
    if args.wheel:
        if not args.wheel.is_file():
            raise SystemExit(f"--wheel {args.wheel}: no such file")
        wheel = args.wheel
    else:
        wheel = download(args.version, wheel_dir)
    snap = extract(wheel)
    out = args.out or args.data_dir / snapshot_name(snap["version"] or "unknown")
    write_json(out, snap)
    if args.out is None:
        write_index(args.data_dir)
    print(f"wrote {out} ({len(snap['functions'])} functions, torch-npu {snap['version']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
