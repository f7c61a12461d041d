"""Process-level capture under real Ray: the GRPO example trains on a local cluster with chosen
worker groups wrapped, by real py-spy (this machine has it) and by fake nsys / rocprof-sys-python /
msprof executables (test_system_launch.FAKE_TOOL: they record argv and environment, run the worker,
and write their report only after it exited normally). Slow: run with `-m slow`."""
from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler.core import formats
from mindspeed_profiler.system.regroup import MODULE as REGROUP
from test_system_launch import tool_logs, write_fake_tools

pytestmark = pytest.mark.slow
GRPO_YAML = REPO_ROOT / "examples" / "grpo" / "grpo.yaml"
QUICK = ["grpo.update_epochs=1", "profiler_config.integrated.profile=false"]
LOG_PROB_MS = 60


@pytest.fixture
def clean_env(monkeypatch):
    """No Ray address and no run id left over: each run starts its own local cluster."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv(formats.RUN_ID_ENV, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    return monkeypatch


def grpo(save: Path, *overrides: str, analyse: bool = False) -> dict:
    from examples.grpo.train_grpo import run

    return run(GRPO_YAML, [f"profiler_config.integrated.profile_save_path={save}", *overrides], analyse=analyse)


def system(backend: str, groups: str, *more: str) -> list[str]:
    return ["profiler_config.system.enabled=true", f"profiler_config.system.backend={backend}",
            f"profiler_config.system.worker_groups={groups}", *more]


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def events(path: Path) -> list[dict]:
    return json.loads(path.read_text())


def test_grpo_with_py_spy_on_the_actor_group(tmp_path, clean_env):
    save = tmp_path / "prof"
    # the test asserts that each stage's own function was sampled, and the log-prob pass lasts a few ms
    # on a fast machine: at py-spy's 100 Hz its 3 calls could all fall between samples (they did once
    # in CI). LOG_PROB_MS makes each call last several sample periods (1000 Hz instead kept py-spy
    # behind on 2 cores, ~6 ms between samples, and doubled the run)
    out = grpo(save, "grpo.iterations=3", f"grpo.log_prob_delay_ms={LOG_PROB_MS}", *system("py_spy", "[actor]"),
               analyse=True)
    assert len(out["history"]) == 3 and out["analyse_rc"] == 0
    sysdir = save / formats.SYSTEM_DIR
    # one report per actor rank, named by group and rank; the reference worker ran unwrapped
    assert sorted(p.name for p in sysdir.iterdir()) == [
        f"actor_rank{r}{suffix}" for r in (0, 1)
        for suffix in (formats.SYSTEM_ITERATIONS_SUFFIX, formats.SYSTEM_REPORTS["py_spy"], formats.SYSTEM_META_SUFFIX)]
    tl = json.loads((save / formats.TIMELINE_DIR / formats.TIMELINE_FILE).read_text())
    procs = {p["name"]: p for p in tl["otherData"]["processes"]}
    for rank in (0, 1):
        meta = json.loads((sysdir / f"actor_rank{rank}.system.json").read_text())
        # complete after the normal shutdown: the watcher saw py-spy exit with its report written
        assert meta["status"] == "complete" and meta["version"].startswith("py-spy") and meta["ended_wall_ns"]
        assert meta["run_id"] == tl["otherData"]["run_id"]
        worker_pid = records(sysdir / f"actor_rank{rank}.iterations.jsonl")[0]["pid"]
        evs = events(sysdir / f"actor_rank{rank}.py-spy.json")
        assert {e["pid"] for e in evs} == {worker_pid} == {procs[f"actor:{rank}"]["os_pid"]}
        own = {e["name"] for e in evs if e["args"]["filename"].endswith("examples/common/workers.py")}
        assert {"ActorWorker.generate", "ActorWorker._sample", "GRPOActorWorker.update",
                "PolicyWorker.compute_log_prob"} <= own
    # run.json: both workers complete, no failure
    run = json.loads((save / formats.RUN_FILE).read_text())["system"]
    assert [(w["group"], w["rank"], w["status"]) for w in run["workers"]] == [("actor", 0, "complete"), ("actor", 1, "complete")]
    assert run["failures"] == []
    # the timeline: py-spy frames under each actor's own process, nowhere else
    by_pid = {}
    for e in tl["traceEvents"]:
        if e.get("cat") == formats.CAT_PYSPY:
            by_pid[e["pid"]] = by_pid.get(e["pid"], 0) + 1
    assert set(by_pid) == {procs["actor:0"]["pid"], procs["actor:1"]["pid"]}
    assert all(t["clock"] == "clock_mark" and t["on_worker_process"] for t in tl["otherData"]["system_tracks"])
    # the analysis: where each actor's time goes, per stage
    summary = json.loads((save / formats.ANALYSIS_DIR / formats.SUMMARY_FILE).read_text())
    cap = next(c for c in summary["captures"] if c["kind"] == "system")
    assert cap["status"] == "ok"
    for w in cap["system"]["workers"]:
        stages = {s["stage"]: s for s in w["py_spy"]["stages"]}
        assert {"actor_generate", "actor_compute_log_prob", "actor_update"} <= set(stages)
        assert "GRPOActorWorker.update" in {r["function"] for r in stages["actor_update"]["top_total"]}
        assert w["py_spy"]["rate_hz"] == 100 and w["py_spy"]["samples_est"] > 100
        # the delay knob's sleep, sampled: 3 calls of at least LOG_PROB_MS each (half of it, for the
        # clock alignment's edges and py-spy's late samples on a busy box)
        assert stages["actor_compute_log_prob"]["sampled_ms"] >= 3 * LOG_PROB_MS / 2, stages["actor_compute_log_prob"]


def test_grpo_with_fake_nsys_and_steps(tmp_path, clean_env):
    bin_dir = write_fake_tools(tmp_path / "bin")
    clean_env.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    clean_env.setenv("FAKE_TOOL_LOG", str(tmp_path / "log"))
    save = tmp_path / "prof"
    out = grpo(save, "grpo.iterations=4", *QUICK, *system("nsight", "[actor]", "profiler_config.system.steps=[2,4]",
                                                            "profiler_config.system.options.t=cuda,nvtx"))
    assert len(out["history"]) == 4
    sysdir = save / formats.SYSTEM_DIR
    logs = sorted(tool_logs(tmp_path / "log", "nsys"), key=lambda r: r["argv"][-1])
    assert len(logs) == 2                      # the two actor ranks; the reference is not wrapped
    for rank in (0, 1):
        rec = next(r for r in logs if f"--output={sysdir}/actor_rank{rank}" in r["argv"])
        assert rec["argv"][:6] == [str(bin_dir / "nsys"), "profile", "-t", "cuda,nvtx", "--capture-range=cudaProfilerApi",
                                   "--capture-range-end=repeat:2"]
        assert rec["argv"][6] == f"--output={sysdir}/actor_rank{rank}" and rec["argv"][7] == sys.executable
        # the worker's script runs through regroup (a process group of its own: system/regroup.py)
        assert rec["argv"][8:10] == ["-m", REGROUP] and rec["argv"][10].endswith("default_worker.py")
        assert formats.SYSTEM_ENV in rec["env"]
        meta = json.loads((sysdir / f"actor_rank{rank}.system.json").read_text())
        assert meta["status"] == "complete" and meta["steps"] == [2, 4] and meta["version"] == "nsys fake 1.0"
        assert (sysdir / f"actor_rank{rank}.nsys-rep").exists()
        # the CUDA profiler range, through the seam on this CPU machine: exactly around iterations 2 and 4
        recs = records(sysdir / f"actor_rank{rank}.iterations.jsonl")
        ranges = [r for r in recs if r["type"] == "range"]
        assert [(r["call"], r["iteration"], r["mode"]) for r in ranges] == [
            ("start", 2, "recorded"), ("stop", 2, "recorded"), ("start", 4, "recorded"), ("stop", 4, "recorded")]
        its = {r["iteration"]: r for r in recs if r["type"] == "iteration"}
        assert {i for i, r in its.items() if r["listed"]} == {2, 4}
        for start, stop in zip(ranges[::2], ranges[1::2]):
            it = its[start["iteration"]]
            assert it["begin_wall_ns"] <= start["wall_ns"] <= stop["wall_ns"] <= it["end_wall_ns"]
    # every stage span of a listed iteration lies inside that worker's range; no other iteration's does
    tl = json.loads((save / formats.TIMELINE_DIR / formats.TIMELINE_FILE).read_text())
    origin = tl["otherData"]["time_origin_unix_ns"]
    for p in tl["otherData"]["processes"]:
        if p["role"] != "actor":
            continue
        recs = records(sysdir / f"actor_rank{p['rank']}.iterations.jsonl")
        windows = [(a["wall_ns"], b["wall_ns"]) for a, b in zip(*[iter([r for r in recs if r["type"] == "range"])] * 2)]
        for e in tl["traceEvents"]:
            if e.get("pid") == p["pid"] and e.get("cat") == "stage":
                t0 = e["ts"] * 1000 + origin - p["offset_ns"]
                inside = any(a <= t0 and t0 + e["dur"] * 1000 <= b + 1000 for a, b in windows)
                assert inside == (e["args"]["iteration"] in (2, 4)), e


def test_grpo_with_fake_rocprof_sys_on_all_groups(tmp_path, clean_env):
    bin_dir = write_fake_tools(tmp_path / "bin")
    clean_env.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    clean_env.setenv("FAKE_TOOL_LOG", str(tmp_path / "log"))
    save = tmp_path / "prof"
    grpo(save, "grpo.iterations=2", *QUICK, *system("rocprof_sys", "all", "profiler_config.system.args={T: hip}",
                                                     "profiler_config.system.env={ROCPROFSYS_OUTPUT_PREFIX: mine_}"))
    sysdir = save / formats.SYSTEM_DIR
    logs = tool_logs(tmp_path / "log", "rocprof-sys-python")
    workers = sorted(r["env"]["ROCPROFSYS_OUTPUT_PATH"] for r in logs)
    assert workers == [str(sysdir / f"{n}.rocprof-sys") for n in ("actor_rank0", "actor_rank1", "reference_rank0")]
    for rec in logs:
        assert rec["argv"][1:4] == ["-T", "hip", "--"] and rec["argv"][4] == sys.executable
        assert rec["env"]["ROCPROFSYS_OUTPUT_PREFIX"] == "mine_"        # the user's env wins
    for name in ("actor_rank0", "actor_rank1", "reference_rank0"):
        assert json.loads((sysdir / f"{name}.system.json").read_text())["status"] == "complete"
        assert (sysdir / f"{name}.rocprof-sys" / "mine_wall_clock.json").exists()


def test_grpo_with_fake_msprof_on_the_class_style_group_name(tmp_path, clean_env):
    bin_dir = write_fake_tools(tmp_path / "bin")
    clean_env.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    clean_env.setenv("FAKE_TOOL_LOG", str(tmp_path / "log"))
    save = tmp_path / "prof"
    grpo(save, "grpo.iterations=2", *QUICK, *system("msprof", "[ReferenceGroup]",
                                                     "profiler_config.system.options={aic-metrics: PipeUtilization}"))
    sysdir = save / formats.SYSTEM_DIR
    rec, = tool_logs(tmp_path / "log", "msprof")
    assert rec["argv"][1:4] == [f"--output={sysdir}/reference_rank0.msprof", "--aic-metrics=PipeUtilization", sys.executable]
    meta = json.loads((sysdir / "reference_rank0.system.json").read_text())
    assert meta["status"] == "complete" and meta["group"] == "reference"
    assert list((sysdir / "reference_rank0.msprof").glob("PROF_*/data.json"))
    assert not list(sysdir.glob("actor_rank*"))


def test_missing_tool_training_completes_and_run_json_says_so(tmp_path, clean_env, caplog):
    clean_env.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                              if not (Path(p) / "nsys").exists()))
    caplog.set_level(logging.WARNING, logger="mindspeed_profiler")
    save = tmp_path / "prof"
    out = grpo(save, "grpo.iterations=2", *QUICK, *system("nsight", "[actor]"))
    assert len(out["history"]) == 2                       # trained, unwrapped
    run = json.loads((save / formats.RUN_FILE).read_text())["system"]
    assert [(w["group"], w["rank"], w["status"]) for w in run["workers"]] == [("actor", 0, "unwrapped"), ("actor", 1, "unwrapped")]
    host = socket.gethostname()
    assert len(run["failures"]) == 2
    for line in run["failures"]:
        assert line.startswith("nsys for group actor rank ") and "nsys not found on PATH" in line and f"on node {host}" in line
    said = [r.getMessage() for r in caplog.records if "process-level capture" in r.getMessage()]
    assert len(said) == 2 and all("unwrapped" in m for m in said)   # once per worker, not again at shutdown
    assert not list((save / formats.SYSTEM_DIR).glob("*.nsys-rep"))


def test_command_line_as_the_docs_say(tmp_path):
    save = tmp_path / "prof"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("RAY_ADDRESS", None)
    env.pop(formats.RUN_ID_ENV, None)
    cmd = [sys.executable, "-m", "examples.grpo.train_grpo", "--config", "examples/grpo/grpo.yaml",
           "profiler_config.system.enabled=true", "profiler_config.system.backend=py_spy",
           "profiler_config.system.worker_groups=[actor]",
           "grpo.iterations=2", f"profiler_config.integrated.profile_save_path={save}"]
    out = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    sysdir = save / formats.SYSTEM_DIR
    assert sorted(p.name for p in sysdir.glob("*.py-spy.json")) == ["actor_rank0.py-spy.json", "actor_rank1.py-spy.json"]
    tl = json.loads((save / formats.TIMELINE_DIR / formats.TIMELINE_FILE).read_text())
    assert len(tl["otherData"]["system_tracks"]) == 2
    summary = json.loads((save / formats.ANALYSIS_DIR / formats.SUMMARY_FILE).read_text())
    assert [c["status"] for c in summary["captures"] if c["kind"] == "system"] == ["ok"]


# its own temp dir: other Ray sessions on this machine (ray.init() joins the cluster it finds under
# /tmp/ray) never run into this one
HEAD = """import sys, ray
from mindspeed_profiler.core.ray_local import init_local_ray
init_local_ray(ray, dict(num_cpus=3, include_dashboard=False, _temp_dir=sys.argv[1]),
               log=lambda m: print(m, file=sys.stderr, flush=True))   # stdout: the address alone
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()   # holds the cluster until the test closes stdin
ray.shutdown()
"""


def test_with_ray_address(tmp_path):
    """A cluster started elsewhere (RAY_ADDRESS): the checkout travels as the job's working_dir, the
    per-actor runtime_env keeps it, and the launcher imports from it on the worker's node."""
    env = dict(os.environ, RAY_AUTH_MODE="disabled")   # a local test cluster: no token to hand around
    env.pop("RAY_ADDRESS", None)
    env.pop(formats.RUN_ID_ENV, None)
    ray_tmp = tempfile.mkdtemp(prefix="msp-ray-", dir="/tmp")   # short: Ray's socket paths live under it
    head = subprocess.Popen([sys.executable, "-c", HEAD, ray_tmp], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=dict(env, PYTHONPATH=""), cwd=tmp_path)
    try:
        address = head.stdout.readline().strip()
        assert address, "the head did not start"
        save = tmp_path / "prof"
        cmd = [sys.executable, "-m", "examples.grpo.train_grpo", "--no-analyse", "grpo.iterations=2", *QUICK,
               f"profiler_config.integrated.profile_save_path={save}", *system("py_spy", "[actor]")]
        out = subprocess.run(cmd, cwd=REPO_ROOT, env=dict(env, RAY_ADDRESS=address, PYTHONPATH=str(REPO_ROOT)),
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        for rank in (0, 1):
            meta = json.loads((save / formats.SYSTEM_DIR / f"actor_rank{rank}.system.json").read_text())
            assert meta["status"] == "complete", meta
        run = json.loads((save / formats.RUN_FILE).read_text())["system"]
        assert [w["status"] for w in run["workers"]] == ["complete", "complete"]
    finally:
        head.stdin.close()
        head.wait(timeout=120)
        shutil.rmtree(ray_tmp, ignore_errors=True)
