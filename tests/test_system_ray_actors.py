"""Process-level capture for a user's own Ray actors (not the examples' trainer): the documented
driver API (`SystemCapture`) with ProfilerWorkerMixin actors, fake nsys given through the section's
`env`, steps driven by the actors' IntegratedProfiler, and the wait for reports run as a Ray task
pinned to the workers' node (as for a node other than the driver's). Slow: `-m slow`."""
from __future__ import annotations

import json
import os
import time

import pytest

ray = pytest.importorskip("ray")

from mindspeed_profiler.core import formats
from mindspeed_profiler import load_config  # noqa: E402
from mindspeed_profiler.integrations import ray as ray_integration  # noqa: E402
from mindspeed_profiler.integrations.ray import (ProfilerWorkerMixin, SystemCapture, start_profilers,  # noqa: E402
                                                 step_profilers, stop_profilers)
from test_system_launch import tool_logs, write_fake_tools  # noqa: E402

pytestmark = pytest.mark.slow


@ray.remote(num_cpus=0.1)
class Learner(ProfilerWorkerMixin):
    def __init__(self, cfg: dict, rank: int):
        self.init_profiler(load_config(cfg, check_paths=False), role="learner", rank=rank, world_size=2)

    def work(self) -> int:
        end = time.time() + 0.03
        while time.time() < end:
            pass
        return os.getpid()


def test_user_actors_wrapped_with_steps_and_finished_on_their_node(ray_cluster, tmp_path, monkeypatch):
    bin_dir = write_fake_tools(tmp_path / "bin")
    sysdir = tmp_path / "sys"
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path / "prof")},
                       "system": {"backend": "nsight", "worker_groups": ["learner"], "steps": [2, 3],
                                  "output_dir": str(sysdir),
                                  "env": {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                                          "FAKE_TOOL_LOG": str(tmp_path / "log"),
                                          # as the real nsys: the report is written after the worker ended,
                                          # while Ray's raylet kills the worker's process group (test_system_regroup)
                                          "FAKE_REPORT_DELAY_S": "2"}}})
    capture = SystemCapture(cfg)
    envs = [capture.runtime_env("learner", r) for r in range(2)]
    actors = [Learner.options(runtime_env=env).remote(cfg.to_dict(), r) for r, env in enumerate(envs)]
    capture.add("learner", actors)
    statuses = capture.check()
    assert [(s["group"], s["rank"], s["status"], s["tool"]) for s in statuses] == [
        ("learner", 0, "wrapped", "nsys"), ("learner", 1, "wrapped", "nsys")]
    start_profilers(actors)
    pids = []
    for _ in range(4):
        pids = ray.get([a.work.remote() for a in actors], timeout=60)
        step_profilers(actors)
    stop_profilers(actors)
    # as if the workers ran on another node: the wait runs there, as a zero-CPU task
    monkeypatch.setattr(ray_integration, "_driver_node_id", lambda: "another-node")
    done = capture.finish(timeout_s=60)
    exits = {p.name: p.read_text() for p in (tmp_path / "log").glob("nsys.*.exit")}   # the worker's exit status, per fake
    assert [(d["rank"], d["status"]) for d in done] == [(0, "complete"), (1, "complete")], (done, exits)
    logs = tool_logs(tmp_path / "log", "nsys")
    assert sorted(r["argv"][2:5] for r in logs) == [
        ["--capture-range=cudaProfilerApi", "--capture-range-end=repeat:2", f"--output={sysdir}/learner_rank{r}"]
        for r in (0, 1)]
    for rank in (0, 1):
        recs = [json.loads(x) for x in (sysdir / f"learner_rank{rank}.iterations.jsonl").read_text().splitlines()]
        assert recs[0]["pid"] == pids[rank]
        assert [(r["call"], r["iteration"]) for r in recs if r["type"] == "range"] == [
            ("start", 2), ("stop", 2), ("start", 3), ("stop", 3)]
        assert (sysdir / f"learner_rank{rank}.nsys-rep").exists()
    run = json.loads((tmp_path / "prof" / formats.RUN_FILE).read_text())["system"]
    assert [w["status"] for w in run["workers"]] == ["complete", "complete"] and run["failures"] == []


def test_a_failing_tool_never_stops_a_ray_actor(ray_cluster, tmp_path):
    """issue 18, items 1-2: py-spy given a flag it does not know exits at once; the actor is Ray's
    worker process all the same (the launcher runs it unwrapped) and trains, and the reason is
    recorded where the driver sees it."""
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path / "prof")},
                       "system": {"backend": "py_spy", "worker_groups": ["learner"], "flags": ["no-such-py-spy-flag"],
                                  "output_dir": str(tmp_path / "sys")}})
    capture = SystemCapture(cfg)
    actor = Learner.options(runtime_env=capture.runtime_env("learner", 0)).remote(cfg.to_dict(), 0)
    capture.add("learner", [actor])
    (st,) = capture.check()
    assert st["status"] == "unwrapped" and "without running the worker" in st["reason"], st
    start_profilers([actor])
    pids = [ray.get(actor.work.remote(), timeout=60) for _ in range(3)]
    step_profilers([actor])
    stop_profilers([actor])
    assert len(set(pids)) == 1
    capture.finish(timeout_s=60)
    run = json.loads((tmp_path / "prof" / formats.RUN_FILE).read_text())["system"]
    assert run["workers"][0]["status"] == "unwrapped" and "py-spy" in run["failures"][0]
    ray.kill(actor)
