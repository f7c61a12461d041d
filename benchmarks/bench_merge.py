"""The timeline merge at scale: wall time, peak RSS and output sizes (timeline.json vs .pftrace).

Synthetic segments in the tracer's own on-disk format, written by the tracer's own writer
(tracing/segment.py's header and line encoder, sinks.FileSink): one driver with `rpc` spans and
N workers, each with iterations > stages > user spans, flushed in batches in end order as the
recorder does. The merge (`merge_timeline_dir`: JSON and protobuf) runs in a child process, so its
peak RSS is its own. Target: peak RSS <= 1 GB at 1,000 segments x 20,000 spans.

Run by hand (the 1,000 x 20,000 case takes many minutes on 2 cores and ~10 GB of disk):
    python benchmarks/bench_merge.py --segments 200 --spans 20000 [--segments 1000 ...] [--doc docs/perf_timeline.md]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

T0_WALL = 1_700_000_000_000_000_000
BATCH = 4096   # the recorder's flush_every_events


def write_segments(directory: str, segments: int, spans: int, seed: int = 1) -> int:
    """`segments` segment files of `spans` spans each (the first is the driver); returns the bytes."""
    from mindspeed_profiler.core import formats
    from mindspeed_profiler.tracing import segment
    from mindspeed_profiler.tracing.sinks import FileSink

    rnd = random.Random(seed)
    total = 0
    for k in range(segments):
        role, rank = ("driver", 0) if k == 0 else ("ActorGroup", k - 1)
        pid = 100_000 + k
        sink = FileSink(directory, formats.segment_name(role, rank, "bench-host", pid))
        header = segment.make_header(role, rank, T0_WALL + k * 1000, 10**9, {"pid": pid, "run_id": "bench"})
        out = [segment.dumps_line(header),
               segment.dumps_line({"type": formats.SEG_THREAD, "lane": 1, "tid": pid, "name": "MainThread", "task": None})]
        t = 10**9 + rnd.randrange(10**6)
        n = 0
        it = 0
        while n < spans:
            it += 1
            it_start = t
            for stage in ("actor_generate", "actor_update"):
                st_start = t
                for _ in range(min(48, spans - n - 2)):   # user spans (or rpc calls on the driver), ended first
                    dur = rnd.randrange(20_000, 200_000)
                    cat, name = ("rpc", "actor.update") if k == 0 else ("user", rnd.choice(("forward", "backward", "allreduce")))
                    out.append(segment.dumps_line(["X", name, cat, t, dur, 1, {"stage": stage, "iteration": it, "mb": n % 8}]))
                    t += dur + 5_000
                    n += 1
                out.append(segment.dumps_line(["X", stage, "stage", st_start, t - st_start, 1, {"stage": stage, "iteration": it}]))
                n += 1
                t += 10_000
            out.append(segment.dumps_line(["X", "iteration", "iteration", it_start, t - it_start, 1, {"iteration": it}]))
            n += 1
            if len(out) >= BATCH:
                sink.write(b"".join(out))
                total += sum(map(len, out))
                out = []
        out.append(segment.dumps_line({"type": formats.SEG_STATS, "recorded": n, "dropped": 0, "failed_writes": 0}))
        out.append(segment.dumps_line({"type": formats.SEG_CLOSE}))
        sink.write(b"".join(out))
        total += sum(map(len, out))
        sink.close()
    return total


_CHILD = "import sys; from mindspeed_profiler.analysis.timeline.merge import merge_timeline_dir; merge_timeline_dir(sys.argv[1])"


def merge_in_child(directory: str) -> dict:
    """Wall and CPU seconds (the CPU time is what a busy machine does not inflate) and peak RSS
    (bytes) of one merge in a fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, directory])
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the merge failed (status {status})")
    return {"wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_bytes": usage.ru_maxrss * 1024}


def run_case(segments: int, spans: int, base: str) -> dict:
    d = tempfile.mkdtemp(prefix=f"bench-merge-{segments}x{spans}-", dir=base)
    try:
        t0 = time.perf_counter()
        seg_bytes = write_segments(d, segments, spans)
        gen_s = time.perf_counter() - t0
        res = merge_in_child(d)
        res.update(segments=segments, spans_per_segment=spans, spans=segments * spans, segments_bytes=seg_bytes,
                   generate_s=round(gen_s, 1), json_bytes=os.path.getsize(os.path.join(d, "timeline.json")),
                   pftrace_bytes=os.path.getsize(os.path.join(d, "timeline.pftrace")))
        return res
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


def to_markdown(results: list[dict]) -> str:
    lines = ["| segments x spans | spans | merge wall | merge CPU | peak RSS | segments on disk | timeline.json | timeline.pftrace |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['segments']} x {r['spans_per_segment']:,} | {r['spans'] / 1e6:.1f} M | {r['wall_s']:.0f} s | {r.get('cpu_s', float('nan')):.0f} s | "
                     f"{_gb(r['peak_rss_bytes'])} | {_gb(r['segments_bytes'])} | {_gb(r['json_bytes'])} | "
                     f"{_gb(r['pftrace_bytes'])} ({r['pftrace_bytes'] / r['json_bytes']:.0%} of the JSON) |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--segments", type=int, action="append", help="segments per case (repeat for several cases)")
    ap.add_argument("--spans", type=int, default=20_000, help="spans per segment")
    ap.add_argument("--dir", default=None, help="where the segments go (default: the system's temporary directory)")
    ap.add_argument("--json", default=None, help="append each case's figures to this JSON-lines file")
    args = ap.parse_args()
    results = []
    for n in args.segments or [200]:
        r = run_case(n, args.spans, args.dir)
        print(json.dumps(r), flush=True)
        if args.json:
            with open(args.json, "a") as fh:
                fh.write(json.dumps(r) + "\n")
        results.append(r)
    print(to_markdown(results))


if __name__ == "__main__":
    main()
