"""Cluster scale: `analyse -j 2` on 10 / 100 / 1,000 / 10,000 small real-shaped captures.

    python benchmarks/bench_scale.py                      # 10, 100, 1000, 10000 captures
    python benchmarks/bench_scale.py --max 1000           # stop at 1,000 (10,000 takes minutes on 2 cores)
    python benchmarks/bench_scale.py --trace tests/data/...json.gz --export-type text

Each capture is one of our torch capture directories (`<stage>/<role>_rank<R>_step3-3_<host>_<pid>_..._pt/`
with its mindspeed_profiler_meta.json: rank, pid, stage from there), holding a real Kineto trace
(default: a rank of HolisticTraceAnalysis' 128-rank NCCL job, ../shared/data/kineto/gpu_rank0.json.gz,
1.8 MB of JSON, 4,855 events, 162 op and 199 kernel names). The trace file is a hard link to one copy
(its bytes are the same on every rank; what differs per capture is the metadata), so that making
10,000 captures takes seconds, not a 17 GB copy. Two stages (actor_generate, actor_update), ranks
0 .. N/2 - 1 in each.

The analysis runs in a child process (`python -m mindspeed_profiler.analyse DIR -j 2`, its terminal summary
to /dev/null, and again with
`--export-type db` up to --db-max captures);
per N: wall time, the driver's peak RSS (the child's own VmHWM, /proc/<pid>/status, polled until it
exits; its -j worker processes are not the driver), summary.json, capture_totals.jsonl, analysis.db
and report.html sizes.
Prints a markdown table (docs/perf_scale.md records one run).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared" / "data" / "kineto" / "gpu_rank0.json.gz"
STAGES = ("actor_generate", "actor_update")


def make_captures(d: Path, n: int, trace: Path) -> None:
    """n capture directories under d, each with its metadata and a hard link to `trace`."""
    d.mkdir(parents=True)
    src = d.parent / "trace.json.gz"   # outside DIR: the one copy every capture links to
    shutil.copyfile(trace, src)
    for i in range(n):
        stage, rank, pid = STAGES[i % len(STAGES)], i // len(STAGES), 10_000 + i
        cap = d / stage / f"actor_rank{rank}_step3-3_node{rank // 8}_{pid}_20261202120000000_pt"
        cap.mkdir(parents=True)
        name = f"actor_rank{rank}.{pid}.pt.trace.json.gz"
        try:
            os.link(src, cap / name)
        except OSError:   # a file system without hard links: a copy
            shutil.copyfile(src, cap / name)
        meta = {"schema": 1, "run_id": "20261202-120000-bench0", "request_id": None, "role": "actor", "stage": stage,
                "rank": rank, "world_size": max(1, n // len(STAGES)), "local_rank": rank % 8, "parallel": None,
                "steps": [3, 3], "warmup_steps": 0, "backend": "torch", "device": "cuda", "level": "level1",
                "export_type": "text", "host": f"node{rank // 8}", "pid": pid,
                "node": {"host": f"node{rank // 8}", "ray_node_id": None}, "clock": None,
                "start_time": "2026-12-02T12:00:00Z", "end_time": "2026-12-02T12:00:01Z", "status": "ok", "errors": [],
                "trace_files": [name]}
        (cap / "mindspeed_profiler_meta.json").write_text(json.dumps(meta), encoding="utf-8")
    src.unlink()


def _hwm_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def run_one(d: Path, jobs: int, export_type: str) -> dict:
    """The analysis in a child process: its wall time and the driver's peak RSS (VmHWM of the child
    itself, read every 50 ms until it exits: the worker processes are not counted)."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "mindspeed_profiler.analyse", str(d), "-j", str(jobs),
                             "--export-type", export_type], stdout=subprocess.DEVNULL)
    hwm = 0
    while proc.poll() is None:
        hwm = max(hwm, _hwm_kb(proc.pid) or 0)
        time.sleep(0.05)
    res = {"rc": proc.returncode, "wall_s": time.perf_counter() - t, "rss_kb": hwm}
    a = d / "analysis"
    size = lambda name: (a / name).stat().st_size if (a / name).exists() else None
    res.update(summary=size("summary.json"), totals=size("capture_totals.jsonl"), db=size("analysis.db"),
               report=size("report.html"))
    if res["rc"] not in (0, 1):
        raise SystemExit(f"analyse exited {res['rc']} on {d}")
    return res


def _mb(v: int | None) -> str:
    return "" if v is None else f"{v / 1e6:,.1f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10,100,1000,10000", help="numbers of captures (default: %(default)s)")
    p.add_argument("--max", type=int, default=None, help="skip the sizes above this")
    p.add_argument("--db-max", type=int, default=1000,
                   help="also analyse with --export-type db up to this size (analysis.db holds every event: "
                        "~2 MB per capture of this trace; default: %(default)s)")
    p.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="the Kineto trace every capture holds")
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args()
    if not args.trace.is_file():
        raise SystemExit(f"bench_scale: trace {args.trace} not found (--trace PATH)")
    sizes = [int(s) for s in args.sizes.split(",") if args.max is None or int(s) <= args.max]
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix=f"msp-scale-{n}-") as tmp:
            d = Path(tmp) / "profiler_data"
            t = time.perf_counter()
            make_captures(d, n, args.trace)
            made = time.perf_counter() - t
            res = run_one(d, args.jobs, "text")
            db = run_one(d, args.jobs, "db") if n <= args.db_max else {}
        res.update(n=n, make_s=made, db_run=db)
        rows.append(res)
        print(f"N={n}: {res['wall_s']:.1f} s, driver peak RSS {res['rss_kb'] / 1024:.0f} MB, summary.json "
              f"{_mb(res['summary'])} MB, capture_totals.jsonl {_mb(res['totals'])} MB, report.html "
              f"{_mb(res['report'])} MB" + (f"; --export-type db: {db['wall_s']:.1f} s, driver peak RSS "
                                            f"{db['rss_kb'] / 1024:.0f} MB, analysis.db {_mb(db['db'])} MB" if db else ""),
              file=sys.stderr, flush=True)
    print("| captures | wall s | s per 1,000 captures | driver peak RSS MB | summary.json MB | capture_totals.jsonl MB | "
          "report.html MB | db: wall s | db: driver peak RSS MB | analysis.db MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        db = r["db_run"]
        print(f"| {r['n']:,} | {r['wall_s']:.1f} | {1000 * r['wall_s'] / r['n']:.1f} | {r['rss_kb'] / 1024:.0f} | "
              f"{_mb(r['summary'])} | {_mb(r['totals'])} | {_mb(r['report'])} | "
              + (f"{db['wall_s']:.1f} | {db['rss_kb'] / 1024:.0f} | {_mb(db['db'])} |" if db else "- | - | - |"))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
