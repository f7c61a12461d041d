"""How fast a cold `analyse DIR` of one large trace could be on this box: the work any analysis in
Python must do, each piece measured, and the least wall time that work allows on N cores, against
0.5x the floor (issue 34; run by hand, results in docs/perf_analysis.md, "The cold command: the bound").

    python benchmarks/bench_parse_bound.py [--rounds 5] [--cores N ...] [--real FILE ...]

Each piece is measured in a fresh process (as a cold command pays it); medians of --rounds:
  start     `python -c pass`: the interpreter and site (wall)
  imports   `python -c "import numpy, msgspec"` (one OpenBLAS thread), less `start`: what a typed
            decode needs before its first event (wall)
  inflate   zlib of the whole file (CPU s)
  decode    msgspec's typed decode of every event into typed_events' Structs, batch by batch as
            jsonscan cuts them: the fewest Python objects an analysis of every event can make here
  columns   ours: those events to EventTable's columns (typed_events.columns + EventTable.add_batch)
  analysis  ours: the capture's analysis from the parsed trace (summary, op rows, memory block), and
            the imports it needs beyond numpy and msgspec (the analyzers, rich)
  floor     the floor command of bench_parse_floor.py (wall)
The bound adds CPU work that must happen after the start and spreads it over `cores` with no loss:
start + (imports + inflate + decode [+ columns [+ analysis]]) / cores. A real command also waits
(the decode cannot begin before its imports, the parse before the inflate's first bytes), so it is
a lower bound: a command that stays above 0.5x the floor in it cannot reach 0.5x by overlap alone.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_parse_floor import FLOOR_CMD, real_traces, run_command  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# in a fresh process: the decode, the columns and the analysis of one trace, CPU s each (the batches
# recorded by a first, full parse, which also warms what a parse warms: a lower bound)
PIECES = r"""
import gc, sys, time, zlib
from pathlib import Path
import numpy, msgspec
p = Path(sys.argv[1])
clock = time.process_time
t = clock(); raw = zlib.decompressobj(31).decompress(p.read_bytes()) if p.name.endswith(".gz") else p.read_bytes(); inflate = clock() - t
del raw
t = clock()
from mindspeed_profiler.analysis.inputs import kineto
from mindspeed_profiler.analysis.parsing import jsonscan, kineto_trace, split_parse, typed_events as te
from mindspeed_profiler.analysis.parsing.events import EventTable
import mindspeed_profiler.analysis.pipeline.batch, mindspeed_profiler.analysis.results.console
analysis_imports = clock() - t
batches = []
real = te.BatchDecoder.__call__
def record(self, data):
    batches.append(bytes(data))
    return real(self, data)
te.BatchDecoder.__call__ = record
gc.disable()
trace = kineto_trace.read_kineto_trace(p)
te.BatchDecoder.__call__ = real
t = clock(); decoded = [te._DECODER.decode(b) for b in batches]; decode = clock() - t
t = clock()
table = EventTable()
for evs in decoded:
    table.add_batch(te.columns(evs))
table.finish(); columns = clock() - t
kineto.read_kineto_trace = lambda path: trace   # the analysis alone, every part in this process
with split_parse.helpers(0):
    t = clock(); kineto.analyse_trace_file(p, 20, False); analysis = clock() - t
print(inflate, decode, columns, analysis + analysis_imports, len(batches))
"""


def wall_of(argv: list[str], env: dict | None = None) -> float:
    return run_command(argv, env)[0]


def measure(path: Path, rounds: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    rows: dict[str, list[float]] = {k: [] for k in ("start", "imports", "inflate", "decode", "columns", "analysis", "floor")}
    for _ in range(rounds + 1):   # the first round not counted (page cache, .pyc files)
        start = wall_of([sys.executable, "-c", "pass"])
        imports = wall_of([sys.executable, "-c", "import numpy, msgspec"], env) - start
        floor = wall_of([sys.executable, "-c", FLOOR_CMD, str(path)])
        p = subprocess.run([sys.executable, "-c", PIECES, str(path)], env=env, capture_output=True, text=True,
                           timeout=600, cwd="/tmp")
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-1500:])
        inflate, decode, columns, analysis, _ = (float(x) for x in p.stdout.split())
        for k, v in zip(rows, (start, imports, inflate, decode, columns, analysis, floor)):
            rows[k].append(v)
    return {k: statistics.median(v[1:]) for k, v in rows.items()}


def bounds(m: dict[str, float], cores: int) -> list[tuple[str, float]]:
    base = m["imports"] + m["inflate"] + m["decode"]
    return [("decode only", m["start"] + base / cores),
            ("+ our columns", m["start"] + (base + m["columns"]) / cores),
            ("+ our columns and analysis", m["start"] + (base + m["columns"] + m["analysis"]) / cores)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real", nargs="*", default=[], help="trace files (default: HTA's two largest, as bench_parse_floor)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cores", type=int, nargs="*", default=[os.cpu_count() or 1],
                    help="the core counts to bound for (default: this box's)")
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")
    for path in real_traces(args.real):
        m = measure(path, args.rounds)
        target = 0.5 * m["floor"]
        print(f"\n{path.name}: median of {args.rounds}, s\n\n| piece | s |\n|---|---:|")
        for k, v in m.items():
            print(f"| {k} | {v:.3f} |")
        print(f"\n| least wall time (0.5x the floor: {target:.3f} s) | cores | s | / floor | 0.5x |\n|---|---:|---:|---:|---|")
        for cores in args.cores:
            for label, b in bounds(m, cores):
                print(f"| {label} | {cores} | {b:.3f} | {b / m['floor']:.2f} | {'within' if b <= target else 'above'} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
