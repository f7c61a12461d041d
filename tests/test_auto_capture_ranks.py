"""Automatic capture of the slow iteration across ranks (issue 34): two real torch.distributed (gloo)
ranks, each a process with its own IntegratedProfiler (`profile: false`, `auto_capture` on), sharing
one run directory and the file transport. Rank 0 sleeps before the gradient all-reduce of chosen
iterations; rank 1 waits for it in the all-reduce.

- the whole iteration timed: both ranks see iteration 8 slow, each decides for itself at the same
  boundary and captures 9-10 (the same absolute iterations, the same request id), once; iteration
  14, slow too, is beyond max_captures 1; the analysis of the run directory shows the finding.
- actor_generate timed, slow on rank 0 only (rank 1's generate is not slow): rank 0 posts its
  request and rank 1's listener picks it up, in time thanks to lead_iterations: both capture the
  same iterations, 14-15, with rank 0's reason.
- two Ray actors with run directories of their own: the request reaches the other through the
  run's mailbox."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from gloo_job import INIT, run_two_ranks  # noqa: E402
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory  # noqa: E402
from mindspeed_profiler.core import auto_reason  # noqa: E402
from profiler_testutil import capture_dirs, meta_of  # noqa: E402

ITERATIONS = 18

WORKER = f'''
import json, os, sys, time
import torch, torch.distributed as dist
rank = int(os.environ["RANK"])
{INIT}
from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.ondemand import listener
listener.POLL_INTERVAL_S = 0.05   # the test's iterations are short: poll as often, relative to them, as a job's do
out, slow_in, auto = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
slow = {{int(i) for i in sys.argv[4].split(",")}}
cfg = load_config({{"integrated": {{"profile": False, "profile_save_path": out, "backend": "torch", "auto_capture": auto}}}})
torch.manual_seed(0)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
prof = IntegratedProfiler(cfg, role="actor")
prof.start()
for it in range(1, {ITERATIONS} + 1):
    x = torch.randn(16, 32)
    with prof.stage("actor_generate"):
        with torch.no_grad():
            model(x)
        time.sleep(0.4 if (rank == 0 and it in slow and slow_in == "actor_generate") else 0.01)
    with prof.stage("actor_update"):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        if rank == 0 and it in slow and slow_in == "actor_update":
            time.sleep(0.4)
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        time.sleep(0.02)
    prof.step()
prof.stop()
dist.barrier()
dist.destroy_process_group()
'''


def run_job(tmp_path: Path, name: str, slow_in: str, auto: dict, slow: str) -> Path:
    script = tmp_path / f"{name}.py"
    script.write_text(WORKER)
    save = tmp_path / name
    # min_time_s: a loaded box's stall of an ordinary iteration (~40 ms) never fires
    env_run = {"factor": 4, "iterations": 2, "max_captures": 1, "min_history": 5, "min_time_s": 0.25, **auto}
    assert run_two_ranks(script, str(save), slow_in, json.dumps(env_run), slow, timeout_s=240) == [0, 0]
    return save


def captures_by_rank(save: Path) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for d in capture_dirs(save):
        m = meta_of(d)
        out.setdefault(m["rank"], []).append((m["stage"], m["steps"], m["request_id"], m["status"],
                                              auto_reason.reason_of(m["notes"])))
    return out


@pytest.fixture(autouse=True)
def same_run_id(monkeypatch):
    monkeypatch.setenv("MINDSPEED_PROFILER_RUN_ID", "auto-capture-test")


@pytest.mark.slow
def test_two_ranks_capture_the_iterations_after_the_slow_one_once_and_the_analysis_says_so(tmp_path):
    save = run_job(tmp_path, "whole", "actor_update", {}, "8,14")
    caps = captures_by_rank(save)
    assert sorted(caps) == [0, 1]
    for rank, got in caps.items():
        assert len(got) == 1, got   # once: iteration 14, slow too, is beyond max_captures 1
        stage, steps, rid, status, why = got[0]
        assert (stage, steps, rid, status) == ("all", [9, 10], "auto-actor-i8", "ok")
        # each rank saw the slowness itself (rank 1 waited in the all-reduce) and says so with its own times
        assert why["slow_iteration"] == 8 and why["rank"] == rank and why["stage"] is None and why["iterations"] == [9, 10]
        assert why["time_s"] > 4 * why["median_s"] and why["time_s"] >= 0.4
    for rank in (0, 1):
        state = json.loads((save / "requests" / "workers" / f"actor_rank{rank}.json").read_text())
        assert list(state["requests"]) == ["auto-actor-i8"] and state["requests"]["auto-actor-i8"]["state"] == "done"
    summary, code = analyse_directory(save, jobs=1, progress=False, html=False, write=False)
    assert code == 0
    (f,) = [f for f in summary["findings"] if f["id"] == "slow_iteration_captured"]
    assert f["title"].startswith("iteration 8 of actor was slow: the iteration took ")
    assert f["evidence"]["ranks"] == [0, 1] and f["evidence"]["iterations"] == [9, 10]
    assert sorted(f["evidence"]["capture_dirs"]) == sorted(c["path"] for c in summary["captures"] if c["kind"] == "torch")
    # shown like the other findings: the terminal's Findings and report.html's
    import io

    from rich.console import Console

    from mindspeed_profiler.analysis.results.console import print_summary
    from mindspeed_profiler.analysis.results.report import render

    out = io.StringIO()
    print_summary(summary, console=Console(file=out, width=400), html=False, db=False)
    assert "iteration 8 of actor was slow" in out.getvalue()
    assert "iteration 8 of actor was slow" in render(summary)


@pytest.mark.slow
def test_a_rank_that_did_not_see_the_slowness_picks_up_the_posted_request(tmp_path):
    save = run_job(tmp_path, "stage", "actor_generate", {"stage": "actor_generate", "lead_iterations": 5}, "8")
    caps = captures_by_rank(save)
    assert sorted(caps) == [0, 1]
    for rank, got in caps.items():
        ((stage, steps, rid, status, why),) = got
        assert (stage, steps, rid, status) == ("all", [14, 15], "auto-actor-i8", "ok")
        assert why["rank"] == 0 and why["stage"] == "actor_generate" and why["slow_iteration"] == 8
    st1 = json.loads((save / "requests" / "workers" / "actor_rank1.json").read_text())["requests"]["auto-actor-i8"]
    assert st1["source"] == "file" and st1["state"] == "done"   # rank 1 got it from rank 0's posted file


@pytest.mark.slow
def test_ray_workers_without_a_shared_run_dir_get_the_request_through_the_mailbox(tmp_path, ray_cluster):
    """Two Ray actors, each writing under a directory of its own (nodes that share no RUN_DIR),
    stepped in lockstep by the driver: actor 0's actor_generate is slow at iteration 6, actor 1's
    is not; actor 1 gets actor 0's request from the run's mailbox and both capture 10-11
    (lead_iterations 3)."""
    import ray

    @ray.remote(num_cpus=0.25)
    class Worker:
        def setup(self, save: str, rank: int) -> None:
            os.environ["MINDSPEED_PROFILER_RUN_ID"] = "auto-capture-ray"
            from mindspeed_profiler import IntegratedProfiler, load_config
            from mindspeed_profiler.ondemand import listener

            listener.POLL_INTERVAL_S = 0.05
            cfg = load_config({"integrated": {"profile": False, "profile_save_path": save, "backend": "torch",
                                              "auto_capture": {"factor": 4, "iterations": 2, "max_captures": 1,
                                                               "min_history": 4, "min_time_s": 0.25,
                                                               "stage": "actor_generate", "lead_iterations": 3}}})
            self.rank = rank
            self.prof = IntegratedProfiler(cfg, role="actor", rank=rank, world_size=2)
            self.prof.start()

        def iteration(self, slow: bool) -> int:
            import torch

            with self.prof.stage("actor_generate"):
                torch.randn(16, 16).sum()
                time.sleep(0.4 if slow and self.rank == 0 else 0.02)
            self.prof.step()
            return self.prof.iteration

        def stop(self) -> None:
            self.prof.stop()

    workers = [Worker.remote() for _ in range(2)]
    ray.get([w.setup.remote(str(tmp_path / f"node{r}"), r) for r, w in enumerate(workers)], timeout=120)
    for it in range(1, 15):
        ray.get([w.iteration.remote(it == 6) for w in workers], timeout=60)
        time.sleep(0.1)   # the driver's own work between iterations: time for a poll of the mailbox
    ray.get([w.stop.remote() for w in workers], timeout=120)
    for r in (0, 1):
        ((stage, steps, rid, status, why),) = captures_by_rank(tmp_path / f"node{r}")[r]
        assert (stage, steps, rid, status) == ("all", [10, 11], "auto-actor-i6", "ok")
        assert why["rank"] == 0 and why["slow_iteration"] == 6
    assert not (tmp_path / "node1" / "requests" / "auto-actor-i6.json").exists()   # not from a file: the mailbox
