#!/usr/bin/env python3
"""Snapshot the torch_npu memory functions the memory tracking calls (metrics/device_memory.py),
read from the wheels' sources with `ast` (never imported: torch_npu needs CANN), into
mindspeed_profiler/data/torch_npu_memory.json: per release, each function's parameters, as
tools/extract_torch_npu_signatures.py records the profiler's. tests/fake_device_memory.py binds every
call of its NPU fake against them.

    python tools/extract_torch_npu_memory.py --wheel-dir /tmp/tnpu_wheels [--version 2.14.0 --version 2.5.1]
(pip downloads a wheel that is not in the directory; 2.14.0 is the newest release, 2.5.1 the one
MindSpeed-RL 2.0-2.3 pins.)
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "mindspeed_profiler" / "data" / "torch_npu_memory.json"
VERSIONS = ("2.14.0", "2.5.1")
# public dotted name -> (module, attribute path): what device_memory.py and the fakes call
CALLABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    **{f"torch_npu.npu.{n}": ("torch_npu.npu", (n,)) for n in (
        "is_available", "is_initialized", "current_device", "get_device_properties", "get_device_name", "mem_get_info")},
    # torch_npu.npu has these through `from .memory import *` (which the ast reader does not follow)
    **{f"torch_npu.npu.{n}": ("torch_npu.npu.memory", (n,)) for n in (
        "memory_stats", "memory_stats_as_nested_dict", "reset_peak_memory_stats", "max_memory_allocated",
        "max_memory_reserved", "memory_allocated", "memory_reserved")},
    "torch_npu.npu.memory._record_memory_history": ("torch_npu.npu.memory", ("_record_memory_history",)),
    "torch_npu.npu.memory._record_memory_history_impl": ("torch_npu.npu.memory", ("_record_memory_history_impl",)),
    "torch_npu.npu.memory._snapshot": ("torch_npu.npu.memory", ("_snapshot",)),
}


def _base_tool() -> Any:
    spec = importlib.util.spec_from_file_location("extract_torch_npu_signatures", HERE / "extract_torch_npu_signatures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def extract(wheel: Path, base: Any) -> dict[str, Any]:
    src = base.Source(wheel)
    functions: dict[str, Any] = {}
    absent = []
    for public, (module, path) in CALLABLES.items():
        try:
            where, node, is_static = base._callable(src, module, path)
        except KeyError:
            absent.append(public)
            continue
        functions[public] = {"file": src.path_of(where), "line": node.lineno, "params": base._signature(node, is_static)}
    return {"wheel": wheel.name, "functions": functions, "absent": sorted(absent)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wheel-dir", type=Path, default=Path("/tmp/tnpu_wheels"))
    p.add_argument("--version", action="append", help="a torch-npu release (repeatable; default: %s)" % ", ".join(VERSIONS))
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    base = _base_tool()
    args.wheel_dir.mkdir(parents=True, exist_ok=True)
    releases = {}
    for version in args.version or VERSIONS:
        releases[version] = extract(base._wheel_for(version, args.wheel_dir), base)
    doc = {"schema": 1, "package": "torch-npu", "generated_by": "tools/extract_torch_npu_memory.py (ast, no import)",
           "newest": (args.version or VERSIONS)[0], "releases": releases}
    base.write_json(args.out, doc)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
