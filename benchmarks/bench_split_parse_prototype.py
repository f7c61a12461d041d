"""A prototype measurement (not the package's code): one trace parsed by two processes.

The main process parses the batches that start in the first half of the expanded stream, a forked
helper those in the second half, each into its own EventTable; the helper pickles its finished
Events back and the main process concatenates the columns, re-interning the helper's strings. The
merge is incomplete (memory records, collective args, names and B / E events are not merged) and
both processes still inflate and cut the whole stream, so the split figures are a lower bound of
what an exact version would cost, and the results are not checked. docs/perf_analysis.md ("Two
processes for one trace") records a run and the design an exact version would need.

Run: python benchmarks/bench_split_parse_prototype.py [TRACE ...]   (default: HTA's two largest)
"""
from __future__ import annotations

import gc
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_parse_floor import real_traces  # noqa: E402
from mindspeed_profiler.analysis.parsing import jsonscan, typed_events  # noqa: E402
from mindspeed_profiler.analysis.parsing.events import EventTable, Events  # noqa: E402
from mindspeed_profiler.analysis.parsing.kineto_trace import read_kineto_trace  # noqa: E402

_SKIP = object()
_STRINGS = (("name", "names"), ("cat", "cats"), ("pid", "pids"), ("tid", "tids"), ("task", "tasks"))


def half_table(path: Path, second: bool, total: int) -> EventTable:
    """The batches of one half (by the offset their bytes start at) in an EventTable."""
    table, dec, seen = EventTable(), typed_events.BatchDecoder(), [0]

    def decode(data: bytes):
        start = seen[0]
        seen[0] += len(data)
        return dec(data) if (start >= total // 2) == second else _SKIP

    jsonscan.load_trace(path, lambda b: None if b is _SKIP else table.add_batch(b), decode=decode)
    return table


def split_parse(path: Path) -> Events:
    total = jsonscan.expanded_size(path)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the helper
        os.close(r)
        gc.disable()
        blob = pickle.dumps(half_table(path, True, total).finish(), protocol=5)
        with os.fdopen(w, "wb") as f:
            f.write(blob)
        os._exit(0)
    os.close(w)
    gc.disable()
    try:
        ev = half_table(path, False, total).finish()
        with os.fdopen(r, "rb") as f:
            blob = f.read()
        os.waitpid(pid, 0)
        part = pickle.loads(blob)
        for col, vals in _STRINGS:
            ids = {v: i for i, v in enumerate(getattr(ev, vals))}
            remap = np.array([ids.setdefault(v, len(ids)) for v in getattr(part, vals)], dtype=np.int32)
            theirs = getattr(part, col)
            setattr(ev, col, np.concatenate([getattr(ev, col), remap[theirs] if len(remap) else theirs]))
        for col in ("ts", "dur", "corr"):
            setattr(ev, col, np.concatenate([getattr(ev, col), getattr(part, col)]))
    finally:
        gc.enable()
    return ev


def main() -> None:
    for p in real_traces(sys.argv[1:]):
        read_kineto_trace(p)
        split_parse(p)
        one, two = [], []
        for _ in range(5):
            t = time.perf_counter()
            read_kineto_trace(p)
            one.append(time.perf_counter() - t)
            t = time.perf_counter()
            split_parse(p)
            two.append(time.perf_counter() - t)
        print(f"{p.name}: one process {np.median(one):.3f} s, two processes {np.median(two):.3f} s (median of 5)")


if __name__ == "__main__":
    main()
