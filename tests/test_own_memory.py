"""The profiler's own memory (issue 47): each buffer's stated per-item size holds on this build (the
bounds in the capture metadata are count bound x that size), the metadata reports them and their
sum, and a long run (1,000 iterations, tracer and metrics on) grows the process's resident memory by
less than GROWTH_BOUND between its 100th and its 1,000th iteration (measured here: ~0.2 MB)."""
from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import time
import tracemalloc

from conftest import REPO_ROOT
from memory_testutil import traced_profiler
from mindspeed_profiler import IntegratedProfiler, load_config, tracing
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.metrics.stage_memory import MAX_CALLS_PER_ITERATION, StageMemory
from mindspeed_profiler.runtime import own_memory as om

GROWTH_BOUND = 2 * 2**20   # bytes, iterations 100 -> 1,000: ten times what this box measured

LONG_RUN = textwrap.dedent("""
    import json, sys, time
    from mindspeed_profiler import IntegratedProfiler, load_config, tracing
    from mindspeed_profiler.runtime.host_memory import rss_bytes
    cfg = load_config({"integrated": {"profile_save_path": sys.argv[1]},
                       "tracer": {"enable": True, "flush_interval_s": 0.2}, "metrics": {"enable": True}})
    tracing.init_tracer(cfg, role="actor", rank=0)
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    marks = {}
    for it in range(1, 1001):
        for stage in ("actor_generate", "actor_compute_log_prob", "actor_update"):
            with prof.stage(stage):
                pass
        prof.step(tokens=100, samples=4)
        if it in (100, 1000):
            time.sleep(0.5)   # the flusher has emptied the tracer's buffer
            marks[it] = rss_bytes()
    prof.stop()
    tracing.shutdown_tracer()
    print(json.dumps(marks))
""")


def _bytes_per(n: int, fn) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = fn(n)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return (after - before) / n


def test_the_stated_item_sizes_hold(tmp_path, clean_state):
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path)},
                       "tracer": {"enable": True, "flush_interval_s": 3600, "flush_every_events": 10**7},
                       "metrics": {"enable": True}})
    tracing.init_tracer(cfg, role="actor", rank=0)
    try:
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        prof.start()

        def stage_spans(n):
            for _ in range(n):
                with prof.stage("actor_generate"):
                    pass
            return STATE.tracer._buf
        per_span = _bytes_per(5000, stage_spans)   # the tracer's span and the meter's call, together
        now = time.time()
        items = [{"id": f"s{i}", "start": now, "end": now + 1.0, "prompt_tokens": 10, "response_tokens": 20,
                  "finish_reason": "stop"} for i in range(5000)]
        per_sample = _bytes_per(5000, lambda n: prof.record_samples(items[:n], "actor_generate"))
        prof.stop()
    finally:
        tracing.shutdown_tracer()
    meter = StageMemory()

    def calls(n):
        for i in range(n):
            meter.exit(meter.enter("actor_update", 1))
        return meter.calls
    per_call = _bytes_per(MAX_CALLS_PER_ITERATION, calls)
    meter.close()
    assert per_span < om.TRACER_EVENT_BYTES + om.STAGE_CALL_BYTES, per_span
    assert per_sample < om.SAMPLE_BYTES, per_sample
    assert per_call < om.STAGE_CALL_BYTES, per_call


def test_the_capture_metadata_reports_the_bounds_and_their_sum(tmp_path, clean_state):
    cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path), "backend": "torch",
                                      "profile_step_start": 1, "profile_step_end": 2},
                       "tracer": {"enable": True, "buffer_max_events": 1000}, "metrics": {"enable": True}})
    with traced_profiler(cfg) as prof:
        with prof.stage("actor_update"):
            pass
        prof.step()
    (meta_path,) = tmp_path.glob("all/*_pt/mindspeed_profiler_meta.json")
    own = json.loads(meta_path.read_text())["own_memory"]
    bounds = own["bounds_bytes"]
    assert bounds["tracer_events"] == 1000 * om.TRACER_EVENT_BYTES
    assert bounds["capture"] == 1024 * 2**20          # capture_memory_budget_mb's default
    assert bounds["stage_memory"] >= MAX_CALLS_PER_ITERATION * om.STAGE_CALL_BYTES
    assert own["total_bytes"] == sum(bounds.values()) and own["unbounded"] == [] and own["resident_bytes"] > 0


def test_an_unbounded_capture_says_so():
    cfg = load_config({"integrated": {"profile": True, "capture_memory_budget_mb": None}}, check_paths=False)
    own = om.own_memory(cfg.integrated)
    assert own["bounds_bytes"]["capture"] is None and own["unbounded"] == ["capture"]


def test_a_long_run_s_resident_growth_is_bounded(tmp_path):
    out = subprocess.run([sys.executable, "-c", LONG_RUN, str(tmp_path)], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    marks = json.loads(out.stdout.strip().splitlines()[-1])
    grown = marks["1000"] - marks["100"]
    assert grown < GROWTH_BOUND, f"grew {grown / 2**20:.2f} MiB from iteration 100 to 1,000"
    rows = (tmp_path / "metrics" / "actor_rank0.jsonl").read_text().splitlines()
    assert len(rows) == 1000   # the tracker ran all along (its memory keys in every row)
    assert all("perf/max_host_memory_gb/actor_update" in json.loads(r) for r in rows[::100])
