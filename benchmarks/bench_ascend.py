"""Ours vs msprof-analyze on the real Ascend capture sets (run by hand; figures in docs/perf_analysis.md).

    python benchmarks/bench_ascend.py [--repeat 5] [--sets text_l0,db_l0,...]

Each measurement is a whole process, as users run them, side by side in one run (interleaved, the
median of --repeat): msprof-analyze 26.2.0 `msprof-analyze cluster -d SET -m all -o OUT` (the
`crosscheck` extra) and `python -m mindspeed_profiler.analyse SET -j 1 --no-html -q -o OUT`. The
sets are the tests' (tests/ascend_data.py: ../shared/ascend-2rank and tests/data/ascend), unpacked
to a temporary directory; each run gets a fresh copy so neither tool finds the other's output.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
import ascend_data  # noqa: E402


def _timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=900)
    dt = time.perf_counter() - t
    if r.returncode not in (0, 1):   # ours: 1 = some capture partial, still a full analysis
        raise SystemExit(f"{cmd[0]} failed ({r.returncode}): {r.stderr[-2000:]}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sets", default=",".join(n for n in ascend_data.CAPTURE_SETS if ascend_data.available(n)))
    args = ap.parse_args()
    msprof = shutil.which("msprof-analyze") or str(Path(sys.executable).with_name("msprof-analyze"))
    work = Path(tempfile.mkdtemp(prefix="bench_ascend_"))
    ascend_data.use_root(work / "sets")
    print("| set | ranks | export | msprof-analyze cluster -m all (s) | ours (s) | msprof-analyze / ours |")
    print("|---|---|---|---|---|---|")
    try:
        for name in args.sets.split(","):
            src, s = ascend_data.ascend_set(name), ascend_data.SETS[name]
            theirs, ours = [], []
            for i in range(args.repeat):
                for who in ("msprof", "ours") if i % 2 == 0 else ("ours", "msprof"):
                    run = work / f"{name}-{who}-{i}"
                    shutil.copytree(src, run / "in")
                    if who == "msprof":
                        theirs.append(_timed([msprof, "cluster", "-d", str(run / "in"), "-m", "all", "-o", str(run / "out")]))
                    else:
                        ours.append(_timed([sys.executable, "-m", "mindspeed_profiler.analyse", str(run / "in"), "-j", "1",
                                            "--no-html", "-q", "-o", str(run / "out")]))
                    shutil.rmtree(run, ignore_errors=True)
            m, o = statistics.median(theirs), statistics.median(ours)
            print(f"| {name} | {len(s.ranks)} | {s.export} | {m:.2f} | {o:.2f} | {m / o:.1f}x |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
