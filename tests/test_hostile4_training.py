"""Issue 45, items 7, 8 and 9 on the training side: what a worker writes stays true when its export
is interrupted, when two processes share a role and rank, and when a run resumes after a crash.

- 7: an export interrupted after compression, during the memory-snapshot step (13 s on the issue's
  run): the metadata still listed the deleted raw trace.
- 8: two processes with the same role and rank (the rank defaults to 0: separate rollout actors)
  shared `samples/<role>_rank0.jsonl`; the later one's first write emptied it.
- 9: after a crash and a resume with the same run id (an elastic restart), the re-run iterations'
  samples mixed both attempts: a generation window spanning the restart gap.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.backends import memory_snapshot
from mindspeed_profiler.core import formats

# ------------------------------------------------------------------------------ 7. an interrupted export


def test_a_capture_interrupted_during_its_snapshot_step_lists_only_whole_files(clean_state, tmp_path, monkeypatch):
    """The background writer compresses the raw trace, then writes the memory snapshot (held here,
    as a slow one is): while it is in that step the metadata on disk lists the .gz, which is there,
    never the removed raw trace; a process killed then leaves a capture the analysis reads."""
    entered, release = threading.Event(), threading.Event()
    real = memory_snapshot.MemorySnapshot.write

    def slow_write(self, path):
        entered.set()
        release.wait(60)
        return real(self, path)
    monkeypatch.setattr(memory_snapshot.MemorySnapshot, "write", slow_write)
    cfg = load_config({"integrated": {"profile": True, "profile_level": "level1", "profile_with_memory": True,
                                      "profile_record_shapes": True, "profile_with_stack": True,
                                      "profile_save_path": str(tmp_path)}})   # the CPU snapshot: all three
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    torch.mm(torch.randn(8, 8), torch.randn(8, 8))
    prof.step()   # the window (iteration 1) closes: the export goes to the writer
    try:
        assert entered.wait(60), "the snapshot step never began"
        [meta] = prof.captures
        directory = Path(meta["directory"])
        on_disk = json.loads((directory / formats.META_FILE).read_text())
        assert on_disk["status"] == "exporting" and on_disk["trace_files"], on_disk
        for name in on_disk["trace_files"]:
            assert (directory / name).is_file(), (name, sorted(p.name for p in directory.iterdir()))
        assert all(name.endswith(".gz") for name in on_disk["trace_files"] if ".pt.trace." in name)
    finally:
        release.set()
        prof.stop()
    final = json.loads((directory / formats.META_FILE).read_text())
    assert final["status"] == "ok" and any(n.endswith(formats.MEMORY_SNAPSHOT_SUFFIX) for n in final["trace_files"])


# ------------------------------------------------------------------------------ 8 and 9. who writes a samples file

# a worker recording one sample per iteration (its id: "<tag>-<iteration>", its times around a 20 ms
# generation); it waits for `wait_for` (a file) before it starts and touches `then` after its
# `pause_after`-th iteration (a file), and either stops or dies at its end (os._exit: a crash)
WORKER = """
import os, sys, time
from pathlib import Path
from mindspeed_profiler import IntegratedProfiler, load_config

save, tag, first, last, wait_for, then, pause_after, resume, end = sys.argv[1:10]
first, last, pause_after = int(first), int(last), int(pause_after)

def wait(path):
    deadline = time.monotonic() + 120
    while path != "-" and not os.path.exists(path):
        assert time.monotonic() < deadline, path
        time.sleep(0.02)

wait(wait_for)
cfg = load_config({"integrated": {"profile": True, "profile_step_start": 100000, "profile_step_end": 100001,
                                  "profile_save_path": save}, "metrics": {"enable": True}})
prof = IntegratedProfiler(cfg, role="rollout", rank=0, world_size=1)
prof.start(first)
for it in range(first, last + 1):
    t0 = time.time()
    time.sleep(0.02)
    prof.record_samples([{"id": f"{tag}-{it}-{k}", "start": t0 + k * 0.001, "end": time.time(), "response_tokens": 8}
                         for k in range(4)], "actor_generate")
    prof.step()
    if it == pause_after:
        Path(then).touch()
        wait(resume)
if end == "crash":
    os._exit(0)
prof.stop()
"""


def _workers(tmp_path: Path, *argvs: list[str]) -> None:
    """Run the WORKER processes together; each must end as it was told."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    for var in ("MINDSPEED_PROFILER_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        env.pop(var, None)
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), *argv], env=env, cwd=str(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv in argvs]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]


def _sample_ids(tmp_path: Path) -> dict[str, list[str]]:
    out = {}
    for path in sorted((tmp_path / formats.SAMPLES_DIR).iterdir()):
        lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        out[path.name] = [x["id"] for x in lines if x["type"] == "sample"]
    return out


def test_two_processes_of_one_role_and_rank_never_lose_each_others_samples(tmp_path):
    """Item 8: rollout actor A records iterations 1-2, B (same role, rank 0) starts and records its
    1-2 while A still runs, then A records 3. Every sample of both is on disk (B's first write used to
    empty A's file), one file per writer, and the analysis counts them all."""
    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

    a_paused, b_done = str(tmp_path / "a_paused"), str(tmp_path / "b_done")
    _workers(tmp_path, ["A", "1", "3", "-", a_paused, "2", b_done, "stop"],
             ["B", "1", "2", a_paused, b_done, "2", "-", "stop"])
    ids = _sample_ids(tmp_path)
    every = sorted(i for v in ids.values() for i in v)
    want = sorted([f"A-{it}-{k}" for it in (1, 2, 3) for k in range(4)] + [f"B-{it}-{k}" for it in (1, 2) for k in range(4)])
    assert every == want, ids
    assert len(ids) == 2 and all(len({i[0] for i in v}) == 1 for v in ids.values()), ids   # one writer per file
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False)
    [cap] = [c for c in summary["captures"] if c["kind"] == "samples"]
    assert cap["status"] == "ok" and cap["rollout"]["n_samples"] == len(want), cap


def test_a_resumed_run_keeps_the_last_attempt_of_each_iteration(tmp_path):
    """Item 9: attempt 1 runs iterations 1-5 and crashes; 1 s later attempt 2 resumes from the
    checkpoint of iteration 3 (start(4)) with the same save path and run, and runs 4-6. Iterations 4
    and 5 were recorded twice: each batch holds the last attempt's samples only (said in a warning),
    so no generation window spans the restart (it did: seconds of "lost" capacity, occupancy ~1%)."""
    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

    crashed = str(tmp_path / "crashed")
    _workers(tmp_path, ["first", "1", "5", "-", crashed, "5", "-", "crash"])
    import time

    time.sleep(1.0)
    _workers(tmp_path, ["second", "4", "6", crashed, "-", "0", "-", "stop"])
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False)
    [cap] = [c for c in summary["captures"] if c["kind"] == "samples"]
    batches = {b["iteration"]: b for b in cap["rollout"]["batches"]}
    assert sorted(batches) == [1, 2, 3, 4, 5, 6]
    for it in (4, 5):
        assert batches[it]["samples"] == 4 and batches[it]["window_s"] < 0.5, batches[it]
    assert any("earlier attempt" in w for w in cap.get("warnings") or []), cap.get("warnings")
    # the metrics tracker's rows too: one per iteration, the last attempt's (said)
    [tracker] = [c for c in summary["captures"] if c["kind"] == "tracker"]
    times = [r for r in tracker["tracker"]["rows"] if r["metric"] == "timing_s/iteration"]
    assert sorted(r["iteration"] for r in times) == [1, 2, 3, 4, 5, 6], times
    assert any("more than one attempt" in w for w in tracker.get("warnings") or []), tracker.get("warnings")
