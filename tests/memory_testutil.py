"""A run directory with memory files (issue 47) for the analysis tests: two actor ranks with the
metrics tracker, per-stage device memory through the CUDA fake (tests/fake_device_memory.py), rank 1
running out of device memory in actor_update of iteration 3 with `oom_snapshot` on (its record and
the allocator's snapshot), and a host watermark record made while tracemalloc traces."""
from __future__ import annotations

import contextlib
import mmap
import os
import tracemalloc
from pathlib import Path
from typing import Any, Iterator

import pytest

from fake_device_memory import GIB, MIB, FakeAllocator, install_cuda
from mindspeed_profiler import IntegratedProfiler, load_config, tracing
from mindspeed_profiler.metrics import oom

OOM_RANK, OOM_ITERATION, OOM_STAGE = 1, 3, "actor_update"
PAGE = os.sysconf("SC_PAGE_SIZE")


def touch(nbytes: int) -> mmap.mmap:
    """`nbytes` of new resident host memory (every page written): an anonymous mapping of its own,
    never memory malloc keeps. In the suite's process an in-process `analyse` has raised glibc's
    mmap threshold to 256 MB (commands/analyse.py), so a bytearray of 96 MB came from heap pages
    still resident from earlier tests, and the process's resident peak did not move (three tests
    failed in the whole suite, none alone)."""
    buf = mmap.mmap(-1, nbytes)
    buf[::PAGE] = b"\x01" * len(range(0, nbytes, PAGE))
    return buf


@contextlib.contextmanager
def traced_profiler(cfg: Any) -> Iterator[IntegratedProfiler]:
    """actor rank 0's profiler with this process's tracer, started; stopped and the tracer shut down after."""
    tracing.init_tracer(cfg, role="actor", rank=0)
    try:
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        prof.start()
        yield prof
        prof.stop()
    finally:
        tracing.shutdown_tracer()


def oom_run(root: Path, iterations: int = 4) -> Path:
    cfg = load_config({"integrated": {"profile_save_path": str(root)},
                       "metrics": {"enable": True, "oom_snapshot": True, "host_memory_watermark": None}})
    with pytest.MonkeyPatch.context() as mp:
        alloc = install_cuda(mp, FakeAllocator(capacity=8 * GIB))
        for rank in (0, 1):
            prof = IntegratedProfiler(cfg, role="actor", rank=rank, world_size=2)
            weights = alloc.alloc(GIB)
            prof.start()
            try:
                for it in range(1, iterations + 1):
                    with prof.stage("actor_generate"):
                        kv = alloc.alloc((1 + 2 * rank) * GIB)   # rank 1's engine cache: 3x rank 0's
                        alloc.free(kv)
                    with prof.stage(OOM_STAGE):
                        grads = alloc.alloc(512 * MIB)
                        if rank == OOM_RANK and it == OOM_ITERATION:
                            alloc.alloc(6 * GIB)
                        alloc.free(grads)
                    prof.step()
            except Exception:
                pass
            finally:
                if rank == 0:   # a host record as the watermark writes it, with tracemalloc's top sites
                    tracemalloc.start()
                    try:
                        prof._metrics.memory.record(oom.HOST_WATERMARK, "actor_generate", iterations, None,
                                                    watermark={"share": 0.5, "line_bytes": 1, "limit_bytes": 2,
                                                               "limit_source": "test", "rss_bytes": 1, "crossing": 1})
                    finally:
                        tracemalloc.stop()
                prof.stop()
                alloc.free(weights)
    return root


def memory_rule_summary() -> dict:
    """A summary whose memory rows trigger each of memory's four rules (memory_rules.py): an
    out-of-memory record, a host watermark record, a rank standing out in a stage, a stage at 95% of
    the device."""
    from mindspeed_profiler.analysis.analyzers.oom import OOM_RECORDS
    from mindspeed_profiler.analysis.analyzers.stage_memory import STAGE_MEMORY

    def stage(rank: int, reserved: int) -> dict:
        return STAGE_MEMORY.row(role="actor", rank=rank, stage="actor_update", calls=1, iterations=1,
                                device_allocated_peak_bytes=reserved, device_reserved_peak_bytes=reserved,
                                host_peak_bytes=GIB, host_peak_median_bytes=GIB, offload_bytes=0, onload_bytes=0,
                                failed_calls=0, capacity_bytes=80 * GIB, host_limit_bytes=None, host_peak_scope="stage")

    def record(kind: str, **kw) -> dict:
        return OOM_RECORDS.row(record=f"{kind}.memory.json", kind=kind, run_id=None, role="actor", rank=1,
                               stage="actor_update", iteration=3, **kw)

    return {"captures": [{"path": "metrics/memory", "kind": "memory", "stage_memory": {
        "stages": [stage(0, 40 * GIB), stage(1, 40 * GIB), stage(2, 76 * GIB)],
        "records": [record("device_oom", tried_bytes=GIB, device_free_bytes=0),
                    record("host_watermark", host_rss_bytes=9 * GIB, host_limit_bytes=10 * GIB)],
        "live": []}}]}
