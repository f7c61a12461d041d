"""Benchmark the offline analysis (run by hand; results go to docs/perf_analysis.md).

    python benchmarks/bench_analyse.py [--hta-python /tmp/hta-venv/bin/python] [--big-mb 500] [--scale 40]

Measures, in one run on the same files:
  1. raw parse, the floor: gzip decompress + orjson.loads of each trace;
  2. our analysis of that trace (load + full summary: device breakdown, steps, top ops with self
     and device time, kernels, annotations), in-process, one core;
  3. HolisticTraceAnalysis: TraceAnalysis(trace_dir) load + get_temporal_breakdown(), in its own
     venv (never a dependency of ours), timed inside that process, import time excluded;
on (a) the real GPU traces of /work/shared/data/kineto and (b) a scaled copy of them (events
replicated with time offsets, `--scale` times); and (c) a synthetic Kineto trace of `--big-mb`
MB analysed by the CLI in a child process: wall time and peak RSS (streaming loader).
"""
from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

DATA = Path(os.environ.get("MSP_DATA", "/work/shared/data")) / "kineto"
HTA_SNIPPET = r"""
import json, sys, time, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
t1 = time.perf_counter()
df = a.get_temporal_breakdown(visualize=False)
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t, "breakdown_s": t2 - t1, "rows": df.to_dict(orient="records")}))
"""


def best(fn, n=3):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def raw_parse(path: Path):
    """The floor: read + gunzip + orjson.loads, with the cyclic GC paused as our analysis does."""
    gc.disable()
    try:
        return _raw(path)
    finally:
        gc.enable()


def _raw(path: Path):
    return orjson.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())


def ours(path: Path):
    from mindspeed_profiler.analysis.pipeline.capture import analyse_capture
    r = analyse_capture(str(path.parent), {"path": path.name, "kind": "kineto", "files": [path.name]}, 20, False)
    assert r["capture"]["status"] == "ok", r["capture"]["error"]
    return r


def ours_dir(d: Path):
    """The whole directory as the CLI does it (2 worker processes, summary.json, no HTML)."""
    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
    summary, code = analyse_directory(d, jobs=2, html=False, progress=False)
    assert code == 0
    return summary


def hta(python: str, trace_dir: Path):
    p = subprocess.run([python, "-c", HTA_SNIPPET, str(trace_dir)], capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def scaled(src: Path, dst: Path, scale: int) -> None:
    """Replicate the trace's events `scale` times, shifted by the trace span each time."""
    obj = raw_parse(src)
    ev = obj["traceEvents"]
    xs = [e for e in ev if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in xs) - min(e["ts"] for e in xs) + 1000
    out = [e for e in ev if e.get("ph") != "X"]
    for k in range(scale):
        for e in xs:
            c = dict(e)
            c["ts"] = e["ts"] + k * span
            if c.get("name", "").startswith("ProfilerStep#"):
                c["name"] = f"ProfilerStep#{int(c['name'].split('#')[1]) + 2 * k}"
            a = c.get("args")
            if isinstance(a, dict) and "correlation" in a:
                c["args"] = dict(a, correlation=a["correlation"] + k * 10_000_000)
            out.append(c)
    obj["traceEvents"] = out
    dst.write_bytes(gzip.compress(orjson.dumps(obj), compresslevel=1))


def write_big(path: Path, target_mb: int) -> int:
    """A Kineto-like trace of ~target_mb MB (uncompressed), written in pieces (never whole in memory):
    copies of a real window one after the other, each with its own correlation ids as a long real
    trace has (copies sharing ids made HTA's launch join, calls x activities per id, quadratic: 1.2e8
    pairs and 5.5 GB at 500 MB)."""
    src = raw_parse(DATA / "gpu_rank0.json.gz")
    ev = [e for e in src["traceEvents"] if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in ev) - min(e["ts"] for e in ev) + 1000
    corr_span = 1 + max((c for e in ev if isinstance(e.get("args"), dict)
                         for c in (e["args"].get("correlation"),) if isinstance(c, int)), default=0)

    def copy(e: dict, k: int) -> dict:
        out = dict(e, ts=e["ts"] + k * span)
        a = e.get("args")
        if isinstance(a, dict) and isinstance(a.get("correlation"), int) and a["correlation"] >= 0:
            out["args"] = dict(a, correlation=a["correlation"] + k * corr_span)
        return out
    head = {k: v for k, v in src.items() if k != "traceEvents"}
    n = 0
    with open(path, "wb") as f:
        f.write(orjson.dumps(head)[:-1] + b',"traceEvents":[')
        k, first = 0, True
        while f.tell() < target_mb * 1e6:
            shifted = [copy(e, k) for e in ev]
            blob = orjson.dumps(shifted)[1:-1]
            f.write((b"" if first else b",\n") + blob)
            first = False
            n += len(shifted)
            k += 1
        f.write(b"]}")
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    ap.add_argument("--scale", type=int, default=40)
    ap.add_argument("--big-mb", type=int, default=500)
    ap.add_argument("--skip-big", action="store_true")
    args = ap.parse_args()
    have_hta = Path(args.hta_python).exists()
    work = Path(tempfile.mkdtemp(prefix="bench_analyse_"))
    try:
        sets = {"real": work / "real", "scaled": work / "scaled"}
        for d in sets.values():
            d.mkdir()
        for r in (0, 1):
            shutil.copy(DATA / f"gpu_rank{r}.json.gz", sets["real"])
            scaled(DATA / f"gpu_rank{r}.json.gz", sets["scaled"] / f"gpu_rank{r}.json.gz", args.scale)
        print("| traces | events | raw parse s (1 core) | ours s (1 core) | ours -j2 s (whole dir) "
              "| HTA load+breakdown s (its pool) | ours / raw | HTA / ours -j2 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for label, d in sets.items():
            files = sorted(d.glob("*.json.gz"))
            n_ev = sum(len(raw_parse(f)["traceEvents"]) for f in files)
            t_raw = sum(best(lambda f=f: raw_parse(f)) for f in files)
            t_ours = sum(best(lambda f=f: ours(f)) for f in files)
            t_dir = best(lambda d=d: ours_dir(d))
            t_hta = None
            if have_hta:
                h = hta(args.hta_python, d)
                t_hta = h["load_s"] + h["breakdown_s"]
            print(f"| {label} ({len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB gz) | {n_ev:,} "
                  f"| {t_raw:.3f} | {t_ours:.3f} | {t_dir:.3f} | {'' if t_hta is None else f'{t_hta:.2f}'} "
                  f"| {t_ours / t_raw:.2f} | {'' if t_hta is None else f'{t_hta / t_dir:.1f}x'} |")
        if not args.skip_big:
            big = work / "big" / "huge_rank0.pt.trace.json"
            big.parent.mkdir()
            n = write_big(big, args.big_mb)
            size = big.stat().st_size / 1e6
            raw_code = ("import gc, resource, sys, time, orjson; gc.disable(); t = time.perf_counter(); "
                        "orjson.loads(open(sys.argv[1], 'rb').read()); "
                        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
            p = subprocess.run([sys.executable, "-c", raw_code, str(big)], capture_output=True, text=True)
            t_raw, rss_raw = (float(x) for x in p.stdout.split())
            # the CLI in a child that reports its own peak RSS (RUSAGE_CHILDREN would mix in HTA's)
            wrapper = ("import resource, sys; from mindspeed_profiler.analyse import main; "
                       "code = main(sys.argv[1:]); "
                       "print('PEAK_RSS_MB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024); sys.exit(code)")
            t = time.perf_counter()
            p = subprocess.run([sys.executable, "-c", wrapper, str(big.parent), "-j", "1", "-q", "--no-html"],
                               capture_output=True, text=True)
            t_cli = time.perf_counter() - t
            rss = float(p.stdout.split("PEAK_RSS_MB")[-1].split()[0]) if "PEAK_RSS_MB" in p.stdout else float("nan")
            s = json.loads((big.parent / "analysis" / "summary.json").read_text())
            c = s["captures"][0]
            print(f"\nbig trace: {size:.0f} MB, {n:,} complete events; CLI exit {p.returncode}, status {c['status']}, "
                  f"{len(c['steps'])} steps")
            print(f"  raw orjson parse (whole file in memory, child): {t_raw:.1f} s, peak RSS {rss_raw:.0f} MB")
            print(f"  our analysis (streaming, CLI child): {t_cli:.1f} s wall, child peak RSS {rss:.0f} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
