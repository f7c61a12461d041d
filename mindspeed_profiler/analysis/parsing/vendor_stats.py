"""Summaries of vendor reports made by the vendor's own tool, when it is on PATH here:

  - `.nsys-rep`: `nsys stats --report cuda_gpu_kern_sum --report nvtx_sum --format csv --output <tmp>/stats`
    (one `<tmp>/stats_<report>.csv` per report; every row kept, the top ones returned);
  - an msprof output directory: `msprof-analyze -m all -d <dir> -o <tmp>` (its CSV outputs listed,
    cluster_step_trace_time.csv read when it is there).

Files in, rows out; the tools run in a temporary directory, so the run's own data is never written to.
"""
from __future__ import annotations

import csv
import shutil
import subprocess
import tempfile
from pathlib import Path

from mindspeed_profiler.core import formats

from .numbers import real_or

NSYS = "nsys"
MSPROF_ANALYZE = "msprof-analyze"
NSYS_REPORTS = ("cuda_gpu_kern_sum", "nvtx_sum")
TIMEOUT_S = 900


def needs(tool: str) -> str | None:
    """None when `tool` is on PATH here, else the reason a report stays unparsed."""
    return None if shutil.which(tool) else f"not parsed: needs {tool}"


def _run(cmd: list[str], cwd: str) -> None:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if out.returncode != 0:
        tail = (out.stderr or out.stdout or "").strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd[:2])} exited with {out.returncode}: {' / '.join(tail)}")


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        return [dict(r) for r in csv.DictReader(fh)]


def _top(rows: list[dict[str, str]], top_n: int) -> list[dict[str, str]]:
    key = next((k for k in (rows[0] if rows else {}) if k.startswith("Total Time")), None)
    if key:
        rows = sorted(rows, key=lambda r: -real_or(str(r.get(key)).replace(",", "")))
    return rows[:top_n]


def nsys_stats(report: Path, top_n: int = 20) -> dict:
    """{"reports": {name: top rows}} from `nsys stats`; raises when nsys fails."""
    with tempfile.TemporaryDirectory(prefix="msp-nsys-") as tmp:
        cmd = [NSYS, "stats", *[a for r in NSYS_REPORTS for a in ("--report", r)], "--format", "csv",
               "--output", str(Path(tmp) / "stats"), str(report)]
        _run(cmd, tmp)
        out = {}
        for path in sorted(Path(tmp).glob("stats_*.csv")):
            out[path.stem[len("stats_"):]] = _top(_read_csv(path), top_n)
    return {"tool": NSYS, "reports": out}


def msprof_analyze(report_dir: Path, top_n: int = 20) -> dict:
    """{"outputs": [csv names], "step_trace": rows}: msprof-analyze's view of an msprof output."""
    with tempfile.TemporaryDirectory(prefix="msp-msprof-") as tmp:
        _run([MSPROF_ANALYZE, "-m", "all", "-d", str(report_dir), "-o", tmp], tmp)
        csvs = sorted(Path(tmp).rglob("*.csv"))
        step = next((p for p in csvs if p.name == formats.CLUSTER_STEP_TRACE_FILE), None)
        return {"tool": MSPROF_ANALYZE, "outputs": [str(p.relative_to(tmp)) for p in csvs],
                "step_trace": _read_csv(step)[:top_n] if step else None}
