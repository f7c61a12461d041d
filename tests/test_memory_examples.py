"""The GRPO example with memory tracking (issue 47), end to end on a real local Ray cluster (slow):

- `grpo.oom_at=3`: the reference raises torch.OutOfMemoryError in its log-prob stage of iteration 3;
  the run fails with that exception (Ray's wrapper of the worker's own object, its type and message
  as made), and the analysis shows the record (reference rank 0, reference_compute_log_prob,
  iteration 3) and the out_of_memory finding;
- per-stage host peaks per rank equal an independent reading of each worker process's VmHWM, taken
  by the driver from /proc/<pid>/status right after the call that ran the stage returned (no reset
  between: the next stage of that worker had not begun, nor its step()): the same kernel counter, so
  the reading is at least the stage's peak, and at most HOST_TOLERANCE above it (what the worker
  allocated after the stage's exit: its result's serialisation);
- the stage x rank table (stage_memory) and the timeline's counters show those peaks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO_ROOT

pytestmark = pytest.mark.slow

HOST_TOLERANCE = 16 * 2**20   # bytes a worker may add between its stage's exit and the driver's read
OOM_AT = 3

DRIVER = textwrap.dedent("""
    import json, sys, time, traceback
    from examples.common import trainer as T
    import examples.grpo.train_grpo as grpo

    def vmhwm(pid):
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    pids, windows = {}, []
    group, get = T.RayCluster.group, T.RayCluster.get

    def grouped(self, cls, size, model, seed=0):
        handles = group(self, cls, size, model, seed)
        for rank, h in enumerate(handles):
            pids[f"{cls.role}:{rank}"] = get(self, h.ready.remote())["pid"]
        return handles

    def got(self, refs):   # each driver wait, and every worker's VmHWM read right after it
        t0 = time.time_ns()
        try:
            return get(self, refs)
        finally:
            t1 = time.time_ns()
            windows.append([t0, t1, {w: vmhwm(p) for w, p in pids.items()}])

    T.RayCluster.group, T.RayCluster.get = grouped, got
    out = {"error": None}
    try:
        grpo.run(grpo.DEFAULT_CONFIG, sys.argv[2:], analyse=False)
    except BaseException as exc:
        import torch
        cause = getattr(exc, "cause", None)
        out["error"] = {"type": type(exc).__name__, "is_oom": isinstance(exc, torch.OutOfMemoryError),
                        "cause_type": f"{type(cause).__module__}.{type(cause).__qualname__}", "cause": str(cause),
                        "trace": traceback.format_exc()[-3000:]}
    out["pids"], out["windows"] = pids, windows
    open(sys.argv[1], "w").write(json.dumps(out))
""")


@pytest.fixture(scope="module")
def oom_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grpo_oom")
    save, result = tmp / "prof", tmp / "driver.json"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-c", DRIVER, str(result), "grpo.iterations=4", f"grpo.oom_at={OOM_AT}",
                          "profiler_config.integrated.profile=false", f"profiler_config.integrated.profile_save_path={save}"],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and result.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    return save, json.loads(result.read_text())


def _stage_lines(save: Path) -> dict[str, list[dict]]:
    out = {}
    for p in (save / "metrics" / "memory").glob("*.stages.jsonl"):
        lines = [json.loads(x) for x in p.read_text().splitlines()]
        w = lines[0]
        out[f"{w['role']}:{w['rank']}"] = [x for x in lines if x["type"] == "stage"]
    return out


def test_the_run_fails_with_the_workers_own_out_of_memory_error(oom_run):
    _, driver = oom_run
    err = driver["error"]
    assert err is not None and err["is_oom"], err.get("trace") if err else err   # Ray's wrapper: a torch.OutOfMemoryError too
    assert err["cause_type"] == "torch.OutOfMemoryError"
    assert err["cause"].startswith("CUDA out of memory. Tried to allocate ") and f"oom_at={OOM_AT}" in err["cause"]


def test_the_analysis_shows_the_record_and_the_finding(oom_run):
    save, driver = oom_run
    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
    from mindspeed_profiler.analysis.results.facade import RunAnalysis

    summary, _ = analyse_directory(save, jobs=1, html=False, progress=False, write=False)
    ra = RunAnalysis.from_summary(summary)
    (rec,) = [r for r in ra.oom_records() if r["kind"] == "device_oom"]
    assert (rec["role"], rec["rank"], rec["stage"], rec["iteration"]) == ("reference", 0, "reference_compute_log_prob", OOM_AT)
    assert rec["exception"] == "torch.OutOfMemoryError" and rec["message"] == driver["error"]["cause"][:300]
    assert rec["tried_bytes"] and rec["host_rss_bytes"] > 0
    (f,) = [f for f in summary["findings"] if f["id"] == "out_of_memory"]
    assert f["title"].startswith(f"reference rank 0: out of device memory in reference_compute_log_prob, iteration {OOM_AT}")
    assert f is summary["findings"][0]
    # the stage x rank table: every worker's stages, their host peaks the lines' maxima
    lines = _stage_lines(save)
    table = {(f"{r['role']}:{r['rank']}", r["stage"]): r for r in ra.stage_memory()}
    for worker, calls in lines.items():
        for stage in {c["stage"] for c in calls}:
            assert table[(worker, stage)]["host_peak_bytes"] == max(c["host_peak"] for c in calls if c["stage"] == stage)
    assert table[("reference:0", "reference_compute_log_prob")]["failed_calls"] == 1
    assert {w for w, _ in table} >= {"actor:0", "actor:1", "reference:0"}


def test_host_peaks_per_rank_equal_the_workers_vmhwm_read_at_the_stage_s_end(oom_run):
    save, driver = oom_run
    lines = _stage_lines(save)
    compared = []
    for t0, t1, hwm in driver["windows"]:
        for worker, calls in lines.items():
            ended = [c for c in calls if t0 <= c["end_ns"] <= t1]   # the stage this wait waited for
            later = [c for c in calls if c["start_ns"] > (ended[-1]["end_ns"] if ended else t1)]
            if len(ended) != 1 or (later and later[0]["start_ns"] <= t1) or hwm.get(worker) is None:
                continue
            call = ended[0]
            compared.append((worker, call["stage"], call["iteration"], call["host_peak"], hwm[worker]))
    print("\n".join(f"{w} {s} it {it}: tracker {p / 2**20:.2f} MiB, VmHWM read {r / 2**20:.2f} MiB" for w, s, it, p, r in compared))
    workers = {c[0] for c in compared}
    assert {"actor:0", "actor:1", "reference:0"} <= workers, compared
    assert len(compared) >= 3 * (OOM_AT - 1)
    for worker, stage, it, peak, read in compared:
        assert peak <= read <= peak + HOST_TOLERANCE, (worker, stage, it, peak, read)


def test_the_timeline_counters_show_the_host_peaks(oom_run):
    save, _ = oom_run
    from mindspeed_profiler.analysis.timeline import memory_tracks
    from mindspeed_profiler.analysis.timeline.merge import merge_timeline_dir, read_timeline_file

    trace = read_timeline_file(str(merge_timeline_dir(str(save / "timeline"), pftrace=False).path))
    for worker, calls in _stage_lines(save).items():
        role, rank = worker.split(":")
        points = memory_tracks.counter_values(trace, role, int(rank))
        assert [a["host resident"] for _, a in points] == [c["host_peak"] / 2**30 for c in calls], worker
