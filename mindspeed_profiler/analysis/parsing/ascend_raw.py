"""Raw Ascend captures (FRAMEWORK/ + PROF_*/, no ASCEND_PROFILER_OUTPUT yet): parsed by
torch_npu's offline parser in a child process, only where torch_npu + CANN work."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PARSE_SNIPPET = (
    "import sys\n"
    "from torch_npu.profiler.profiler import analyse\n"
    "analyse(sys.argv[1], max_process_number=int(sys.argv[2]), export_type=sys.argv[3])\n"
)


def npu_parser_available(python: str = sys.executable, timeout: float = 120.0) -> tuple[bool, str]:
    """Whether torch_npu (with CANN) imports in a child process; (ok, reason)."""
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    try:
        p = subprocess.run([python, "-c", "import torch_npu; from torch_npu.profiler.profiler import analyse"],
                           env=env, capture_output=True, text=True, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        return False, f"{type(exc).__name__}: {exc}"
    if p.returncode == 0:
        return True, ""
    last = (p.stderr.strip().splitlines() or ["import failed"])[-1]
    return False, last[:300]


def parse_raw(capture: Path, max_process_number: int, export_type: str, python: str = sys.executable,
              timeout: float = 3600.0) -> tuple[bool, str]:
    """Run torch_npu's offline parser on one raw capture in a child process; (ok, message)."""
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    try:
        p = subprocess.run([python, "-c", PARSE_SNIPPET, str(capture), str(max(1, max_process_number)), export_type],
                           env=env, capture_output=True, text=True, timeout=timeout)
    except Exception as exc:  # noqa: BLE001
        return False, f"torch_npu offline parse failed: {type(exc).__name__}: {exc}"
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return False, f"torch_npu offline parse exited {p.returncode}: {tail[:300]}"
    return True, ""
