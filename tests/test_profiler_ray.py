"""Ray integration on a real local Ray cluster: profilers built inside actors, group start/stop."""
from __future__ import annotations

import json
import time

import pytest

ray = pytest.importorskip("ray")

from mindspeed_profiler import load_config  # noqa: E402
from mindspeed_profiler.integrations.ray import ProfilerWorkerMixin, start_profilers, step_profilers, stop_profilers  # noqa: E402
from profiler_testutil import rel_names  # noqa: E402

pytestmark = pytest.mark.slow


@ray.remote(num_cpus=0.1)
class Worker(ProfilerWorkerMixin):
    def __init__(self, cfg, role, rank, world_size):
        import torch

        self.torch = torch
        self.model = torch.nn.Linear(8, 8)
        self.info = self.init_profiler(cfg, role=role, rank=rank, world_size=world_size)

    def identity(self):
        return self.info

    def iteration(self):
        with self.profiler.stage("actor_generate"):
            with self.torch.no_grad():
                self.model(self.torch.randn(4, 8))
        with self.profiler.stage("actor_update"):
            self.model(self.torch.randn(4, 8)).sum().backward()
        return self.profiler.iteration

    def slow_stop(self, seconds):
        time.sleep(seconds)
        return self.profiler_stop()


def run_group(cfg, role, world, iters):
    workers = [Worker.remote(cfg, role, r, world) for r in range(world)]
    assert [s["status"] for s in start_profilers(workers, timeout_s=60)] == ["ok"] * world
    for _ in range(iters):
        ray.get([w.iteration.remote() for w in workers], timeout=60)
        assert [s["status"] for s in step_profilers(workers, timeout_s=60)] == ["ok"] * world
    stops = stop_profilers(workers, timeout_s=120)
    assert [s["status"] for s in stops] == ["ok"] * world
    return workers, stops


def test_actor_group_rank_and_stage_gating(ray_cluster, tmp_path):
    cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path), "backend": "torch",
                                      "profile_ranks": [1, 2], "profile_step_start": 2, "profile_step_end": 4}})
    workers, stops = run_group(cfg, "actor", 3, 4)
    captured = {s["index"]: [m["steps"] for m in s["result"]] for s in stops}
    assert captured == {0: [], 1: [[2, 3]], 2: [[2, 3]]}
    names = sorted(p.name.split("_step")[0] for p in (tmp_path / "all").iterdir())
    assert names == ["actor_rank1", "actor_rank2"]
    run = json.loads((tmp_path / "run.json").read_text())  # written once, by rank 0
    assert run["writer"]["rank"] == 0 and run["writer"]["role"] == "actor"
    for w in workers:
        ray.kill(w)

    stage_cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path / "s"), "backend": "torch",
                                            "stage": "actor_update", "profile_steps": [1, 3]}})
    workers, stops = run_group(stage_cfg, "ref", 2, 3)
    assert rel_names(tmp_path / "s") == sorted(f"actor_update/ref_rank{r}_step{s}-{s}" for r in (0, 1) for s in (1, 3))
    for w in workers:
        ray.kill(w)


def test_group_helpers_report_timeouts_and_errors(ray_cluster, tmp_path):
    cfg = load_config({"integrated": {"profile": False}})
    workers = [Worker.remote(cfg, "critic", r, 2) for r in range(2)]
    ray.get([w.identity.remote() for w in workers], timeout=60)
    t0 = time.monotonic()
    from mindspeed_profiler.integrations.ray import call_group

    res = call_group(workers, "slow_stop", 30, timeout_s=2)
    assert time.monotonic() - t0 < 20
    assert [r["status"] for r in res] == ["timeout", "timeout"]
    res = call_group(workers, "no_such_method", timeout_s=5)
    assert [r["status"] for r in res] == ["error", "error"]
    for w in workers:
        ray.kill(w)
