"""The reference tools, run as their users run them: msprof-analyze (Ascend) and
HolisticTraceAnalysis (Kineto), both from the optional `crosscheck` extra (setup.py), each in a
child process of this interpreter. Without them the cross-check tests skip, saying why; with
MSP_REQUIRE_CROSSCHECK=1 (CI) a missing tool is a failure instead."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REQUIRED = os.environ.get("MSP_REQUIRE_CROSSCHECK") == "1"

# msprof-analyze's `cluster -m all` on each directory, in one process (its import costs seconds,
# each set a fraction of one): the same entry point as the command line
MSPROF_DRIVER = """
import sys, logging
from msprof_analyze.cluster_analyse.cluster_analysis import cluster_analysis_main
for src, out in zip(sys.argv[1::2], sys.argv[2::2]):
    sys.argv = ["msprof-analyze cluster", "-d", src, "-m", "all", "-o", out]
    cluster_analysis_main()
"""

# HTA's temporal breakdown per trace directory, as JSON on the last line
HTA_DRIVER = """
import sys, json, os, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
out = {}
for d in sys.argv[1:]:
    ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
    out[d] = ta.get_temporal_breakdown(visualize=False).to_dict(orient="records")
print("HTA-JSON " + json.dumps(out))
"""


def need(module: str, extra: str = "crosscheck") -> None:
    if importlib.util.find_spec(module) is None:
        why = f"{module} is not installed (pip install -e .[{extra}]; ./run test installs it)"
        if REQUIRED:
            pytest.fail(why + " and MSP_REQUIRE_CROSSCHECK=1")
        pytest.skip(why)


def run_msprof_analyze(pairs: list[tuple[Path, Path]], timeout: float = 600) -> None:
    """msprof-analyze cluster -d SRC -m all -o OUT for each (SRC, OUT)."""
    need("msprof_analyze")
    args = [str(x) for pair in pairs for x in pair]
    p = subprocess.run([sys.executable, "-c", MSPROF_DRIVER, *args], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]


def run_hta(trace_dirs: list[Path], ns: bool = True, timeout: float = 600) -> dict[str, list[dict]]:
    """HTA's get_temporal_breakdown() (include_last_profiler_step=True; no ns rounding when `ns`)
    for each directory holding one trace: {dir: rows}."""
    need("hta")
    env = dict(os.environ, HTA_DISABLE_NS_ROUNDING="1" if ns else "0")
    p = subprocess.run([sys.executable, "-c", HTA_DRIVER, *map(str, trace_dirs)], capture_output=True, text=True,
                       timeout=timeout, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("HTA-JSON "))
    return json.loads(line[len("HTA-JSON "):])
