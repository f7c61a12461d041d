"""The second adversarial round (issue 18), the runtime side: what someone with write access to a
run directory or a config could do to the on-demand listener and the process-level launcher.
Each test reproduces one attack as reported; training keeps going, nothing is written outside the
run, every input is bounded. (The analysis side: tests/test_hostile_parsers.py.)"""
from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler import IntegratedProfiler, ProfilerConfigError
from mindspeed_profiler.core import formats
from mindspeed_profiler import load_config
from mindspeed_profiler.ondemand import listener as lst
from mindspeed_profiler.ondemand import requests as rq
from mindspeed_profiler.ondemand import transport as tp
from mindspeed_profiler.ondemand import trigger as tg
from mindspeed_profiler.system.finish import wait_for_reports
from mindspeed_profiler.runtime.system_settings import worker_runtime_env
from mindspeed_profiler.system.spec import WorkerSpec
from test_ondemand import Loop, dyn_config, states_of
from test_system_launch import WORKER, base_path, cfg, launch, write_fake_tools, write_script_tool


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(lst, "POLL_INTERVAL_S", 0.02)
    monkeypatch.setattr(tp, "SETTLE_S", 0.1)


# ------------------------------------------------------------------ 1-2. the launcher never stops a worker


@pytest.mark.parametrize("system, where", [
    ({"backend": "py_spy", "args": {"rate": "10\0"}}, "profiler_config.system.args.rate"),
    ({"backend": "py_spy", "flags": ["idle\0x"]}, "profiler_config.system.flags"),
    ({"backend": "nsight", "options": {"t\0": "cuda"}}, "profiler_config.system.options.t"),
    ({"backend": "py_spy", "env": {"A=B": "1"}}, "profiler_config.system.env.A=B"),
    ({"backend": "py_spy", "env": {"PATH": "/bin\0/evil"}}, "profiler_config.system.env.PATH"),
])
def test_values_exec_would_refuse_are_config_errors(tmp_path, system, where):
    with pytest.raises(ProfilerConfigError) as e:
        load_config({"integrated": {"profile_save_path": str(tmp_path)}, "system": {"worker_groups": ["actor"], **system}})
    assert any(p.startswith(where) for p, _ in e.value.problems), e.value.problems


def _launch_spec(tmp_path: Path, spec: WorkerSpec, path_dirs) -> tuple[dict | None, subprocess.CompletedProcess, dict]:
    """The launcher as Ray runs it, with a spec made by hand (what no config would let through)."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    marker = tmp_path / "ran.json"
    cmd = [sys.executable, "-m", "mindspeed_profiler.system.launch", spec.encode(), "--", sys.executable, str(script), str(marker)]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PATH=os.pathsep.join(map(str, path_dirs)))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    meta, = wait_for_reports([spec.meta_path], timeout_s=60)
    return (json.loads(marker.read_text()) if marker.exists() else None), out, meta


def test_a_nul_byte_that_reaches_exec_still_starts_the_worker(tmp_path):
    """exec raises ValueError for a NUL in argv (not OSError): the worker starts unwrapped."""
    bin_dir = write_fake_tools(tmp_path / "bin")
    spec = WorkerSpec(**{**dataclasses.asdict(WorkerSpec.decode(worker_runtime_env(
        cfg(tmp_path, backend="nsight"), "actor", 0)["env_vars"][formats.SYSTEM_ENV])), "flags": ("bad\0flag",)})
    ran, out, meta = _launch_spec(tmp_path, spec, [bin_dir, *base_path()])
    assert out.returncode == 0 and ran is not None, out.stderr
    assert json.loads(ran["status"])["status"] == "unwrapped"
    assert meta["status"] == "unwrapped" and "could not start" in meta["reason"] and "ValueError" in meta["reason"]


def test_py_spy_with_an_unknown_flag_falls_back_to_the_plain_worker(tmp_path):
    c = cfg(tmp_path, backend="py_spy", flags=["no-such-flag-at-all"])
    ran, out, meta = launch(tmp_path, c, base_path())
    assert out.returncode == 0 and ran is not None, out.stderr
    assert json.loads(ran["status"])["status"] == "unwrapped"
    assert meta["status"] == "unwrapped" and "without running the worker" in meta["reason"], meta["reason"]
    assert "exit status" in meta["reason"] and "py-spy" in meta["reason"]
    assert out.stderr.count("process-level capture:") == 1


def test_a_tool_that_exits_at_once_falls_back(tmp_path):
    bin_dir = write_script_tool(tmp_path / "bin", "nsys", "#!/bin/sh\necho 'nsys: unknown option --bogus' >&2\nexit 1\n")
    ran, out, meta = launch(tmp_path, cfg(tmp_path, backend="nsight"), [bin_dir, *base_path()])
    assert out.returncode == 0 and ran is not None
    assert meta["status"] == "unwrapped" and "ended (exit status 1) without running the worker" in meta["reason"]


def test_a_tool_that_ran_the_worker_keeps_its_exit_status(tmp_path):
    """Not a fallback: the worker ran under the tool and failed; its status is the launcher's. (The
    worker runs 2 s: one that ends before the launcher's next look, under a tool that ends too, is
    taken for never started, system/supervise.py; a loaded machine can delay that look.)"""
    bin_dir = write_fake_tools(tmp_path / "bin")
    ran, out, meta = launch(tmp_path, cfg(tmp_path, backend="nsight"), [bin_dir, *base_path()], "5", worker_s=2.0)
    assert out.returncode == 5 and json.loads(ran["status"])["status"] == "wrapped"
    assert meta["status"] == "incomplete"


def test_a_signal_to_the_launcher_reaches_the_tool_and_the_worker(tmp_path):
    """SIGTERM to the process Ray started (the launcher, now the tool's parent) is passed on: the
    fake nsys forwards it to the worker, which ends; the launcher ends as the tool did."""
    bin_dir = write_fake_tools(tmp_path / "bin")
    c = cfg(tmp_path, backend="nsight")
    env_cfg = worker_runtime_env(c, "actor", 0)
    script = tmp_path / "sleeper.py"
    script.write_text("import sys, time\nopen(sys.argv[1], 'w').close()\ntime.sleep(60)\n")
    started = tmp_path / "started"
    env = dict(os.environ, **env_cfg["env_vars"], PYTHONPATH=str(REPO_ROOT), PATH=os.pathsep.join(map(str, [bin_dir, *base_path()])))
    p = subprocess.Popen(shlex.split(env_cfg["py_executable"]) + [str(script), str(started)], env=env)
    deadline = time.time() + 30
    while not started.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert started.exists()
    p.terminate()
    assert p.wait(timeout=30) != 0
    spec = WorkerSpec.decode(env_cfg["env_vars"][formats.SYSTEM_ENV])
    meta, = wait_for_reports([spec.meta_path], timeout_s=30)
    assert meta["status"] == "incomplete"


# ------------------------------------------------------------------ 3-4. step() and the listener never stall


def _huge_request(n_keys: int) -> dict:
    """A request whose integrated block has n_keys unknown fields (each once cost a difflib hint on
    the training thread)."""
    return {"id": "huge", "steps": 1, "integrated": {f"no_such_field_{i:05d}_{'x' * 20}": i for i in range(n_keys)}}


def test_a_huge_request_never_stalls_a_training_step(tmp_path):
    """A 0.5 MB request of 15,000 unknown keys (7 s of difflib hints on the training thread once):
    validated on the listener thread, bounded there too; no step() takes long."""
    prof = IntegratedProfiler(dyn_config(tmp_path), role="actor", rank=0, world_size=1)
    loop = Loop(prof)
    loop.iteration()
    raw = _huge_request(15000)
    assert len(json.dumps(raw)) > 500_000
    tp.submit_file(tmp_path, raw)
    t0 = time.perf_counter()
    steps = []
    deadline = time.monotonic() + 20
    while "huge" not in prof._ondemand.entries and time.monotonic() < deadline:
        t = time.perf_counter()
        prof.step()
        steps.append(time.perf_counter() - t)
        time.sleep(0.01)
    prof.stop()
    assert max(steps) < 0.25, f"a step took {max(steps):.2f} s"
    st = states_of(tmp_path)["actor_rank0"]["requests"]["huge"]
    assert st["state"] == "rejected" and "at most 64 fields" in st["reason"]
    assert len(st["reason"]) <= rq.MAX_REASON_CHARS + 40 and time.perf_counter() - t0 < 20


def test_request_validation_is_bounded_in_time(tmp_path):
    """The job's own validator on a 15,000-key integrated block (what the listener calls): lists
    10 unknown keys and counts the rest, in well under a second."""
    from mindspeed_profiler.config import validate

    block = {"integrated": {f"no_such_field_{i:05d}": i for i in range(15000)}}
    t = time.perf_counter()
    with pytest.raises(ProfilerConfigError) as e:
        validate(block, check_paths=False)
    took = time.perf_counter() - t
    assert took < 1.0 and len(e.value.problems) == 11 and "14990 more unknown key(s)" in e.value.problems[-1][1]
    with pytest.raises(rq.RequestError, match="at most 64 fields"):
        rq.parse_request({"id": "x", "steps": 1, "integrated": block["integrated"]})


def test_a_fifo_in_requests_never_blocks_the_listener(tmp_path):
    prof = IntegratedProfiler(dyn_config(tmp_path), role="actor", rank=0, world_size=1)
    loop = Loop(prof)
    loop.iteration()
    os.mkfifo(tmp_path / "requests" / "evil.json")
    polls = prof._ondemand.polls_done
    for _ in range(5):
        loop.iteration()
    assert prof._ondemand.polls_done > polls + 3   # still polling
    t = time.perf_counter()
    prof.stop()
    assert time.perf_counter() - t < 2.0
    st = states_of(tmp_path)["actor_rank0"]
    assert st["requests"]["evil"]["state"] == "rejected" and "not a regular file" in st["requests"]["evil"]["reason"]


# ------------------------------------------------------------------ 5-6. nothing outside the run, limits kept


def test_a_symlinked_workers_directory_gets_nothing_written_through_it(tmp_path, caplog):
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "requests").mkdir(parents=True)
    (run / "requests" / "workers").symlink_to(elsewhere)
    prof = IntegratedProfiler(dyn_config(run), role="actor", rank=0, world_size=1)
    loop = Loop(prof)
    loop.run(3)
    prof.stop()
    assert list(elsewhere.iterdir()) == []
    assert any("symbolic link" in r.getMessage() for r in caplog.records)
    assert loop.losses and len(loop.losses) == 3   # trained on


def test_a_save_path_that_is_a_link_still_works(tmp_path):
    real = tmp_path / "big_disk"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    prof = IntegratedProfiler(dyn_config(tmp_path / "link"), role="actor", rank=0, world_size=1)
    Loop(prof).run(3)
    prof.stop()
    assert (real / "requests" / "workers" / "actor_rank0.json").is_file()


def test_requests_stay_within_the_jobs_limits(tmp_path):
    job = load_config({"integrated": {"profile_save_path": str(tmp_path), "trace_size_budget_mb": 100}}).integrated
    with pytest.raises(rq.RequestError, match="warmup_steps: got 1000000000"):
        rq.check_limits({"warmup_steps": 10**9}, job)
    with pytest.raises(rq.RequestError, match="may only lower it"):
        rq.check_limits({"trace_size_budget_mb": None}, job)
    with pytest.raises(rq.RequestError, match="may only lower it"):
        rq.check_limits({"trace_size_budget_mb": 1e6}, job)
    rq.check_limits({"warmup_steps": 3, "trace_size_budget_mb": 50}, job)
    prof = IntegratedProfiler(dyn_config(tmp_path), role="actor", rank=0, world_size=1)
    loop = Loop(prof)
    loop.iteration()
    for i in range(20):   # 20 requests booking 20,000 iterations at level2 with memory and stack
        tp.submit_file(tmp_path, {"id": f"r{i:02d}", "iterations": [100 + 1000 * i, 100 + 1000 * i + 999],
                                  "integrated": {"profile_level": "level2", "profile_with_memory": True, "profile_with_stack": True}})
    tp.submit_file(tmp_path, {"id": "warm", "steps": 1, "integrated": {"warmup_steps": 10**9}})
    loop.iteration()
    loop.iteration()
    prof.stop()
    reqs = states_of(tmp_path)["actor_rank0"]["requests"]
    mine = {k: r for k, r in reqs.items() if k.startswith("r")}
    queued = [k for k, r in mine.items() if "the worker stopped" in (r["reason"] or "")]   # accepted, then the job ended
    refused = [k for k, r in mine.items() if "at most 4" in (r["reason"] or "")]
    assert len(queued) == rq.MAX_QUEUED and len(refused) == 20 - rq.MAX_QUEUED
    assert reqs["warm"]["state"] == "rejected" and "warmup_steps" in reqs["warm"]["reason"]


# ------------------------------------------------------------------ 12-15. never lost, never blinded


def test_rejections_keep_the_state_file_small(tmp_path):
    prof = IntegratedProfiler(dyn_config(tmp_path), role="actor", rank=0, world_size=1)
    loop = Loop(prof)
    loop.iteration()
    for i in range(3):   # 600 KB requests whose keys were echoed in full: two made the state file pass 1 MiB
        raw = {"id": f"big{i}", "steps": 1, **{f"k{i}_{j:05d}_" + "z" * 30: 1 for j in range(12000)}}
        tp.submit_file(tmp_path, raw)
    for i in range(80):  # and rejected entries were never pruned
        tp.submit_file(tmp_path, {"id": f"bad{i:02d}", "steps": 1, "unknown_key": i})
    deadline = time.monotonic() + 30
    while "bad79" not in prof._ondemand.entries and time.monotonic() < deadline:
        loop.iteration()
    prof.stop()
    path = tmp_path / "requests" / "workers" / "actor_rank0.json"
    assert path.stat().st_size < 64 * 1024
    state = tp.read_worker_states(tmp_path)["actor_rank0"]   # what status / trigger read: a live worker, not "never started"
    assert "error" not in state and len(state["requests"]) == lst.MAX_FINAL_ENTRIES and "bad79" in state["requests"]


def test_final_entries_are_pruned_to_the_newest():
    class Owner:
        role = "actor"
    integ = load_config({"integrated": {"dynamic": True, "profile_save_path": "/tmp/unused"}}, check_paths=False)
    li = lst.Listener(Owner(), integ, integ.integrated, rank=0, world_size=1)
    for i in range(200):
        li._reject(f"r{i:03d}", "file", "x" * 5000)
    assert len(li.entries) == lst.MAX_FINAL_ENTRIES and "r199" in li.entries and "r000" not in li.entries
    assert all(len(e["reason"]) < rq.MAX_REASON_CHARS + 40 for e in li.state()["requests"].values())


def test_a_request_in_the_same_second_on_a_one_second_mtime_filesystem(tmp_path):
    """The directory's time stamp has whole seconds (ext3, NFS, Lustre): a request written in the
    same second as the last poll leaves it unchanged, and is still seen."""
    d = tmp_path / "requests"
    d.mkdir()
    whole = int(time.time()) * 10**9
    os.utime(d, ns=(whole, whole))
    now = [whole / 1e9 + 0.3]
    src = tp.RequestDirSource(tmp_path, clock=lambda: now[0])
    assert src.poll() == []
    tp.submit_file(tmp_path, {"id": "same-second", "steps": 1})
    os.utime(d, ns=(whole, whole))   # what a 1-second file system keeps
    now[0] = whole / 1e9 + 0.8
    got = src.poll()
    assert [rid for rid, _ in got] == ["same-second"]
    now[0] = whole / 1e9 + 10   # long after: one stat, nothing listed
    assert src.poll() == []


def test_a_half_written_request_is_read_once_complete(tmp_path):
    (tmp_path / "requests").mkdir()
    now = [1000.0]
    src = tp.RequestDirSource(tmp_path, clock=lambda: now[0])
    f = tmp_path / "requests" / "slow.json"
    f.write_text('{"id": "slow", "steps":')
    assert src.poll() == []            # not yet: it may still be being written
    now[0] += 0.5
    with open(f, "a") as fh:
        fh.write(" 2}")
    got = src.poll()
    assert got == [("slow", {"id": "slow", "steps": 2})]
    g = tmp_path / "requests" / "broken.json"
    g.write_text('{"id": "broken",')
    now[0] += 0.1
    assert src.poll() == []
    now[0] += tp.SETTLE_S + 0.1      # unchanged since: malformed, reported once
    (rid, exc), = src.poll()
    assert rid == "broken" and isinstance(exc, ValueError) and "not valid JSON" in str(exc)
    assert src.poll() == []


def _trigger_many(run_dir: str, worker: int, n: int) -> None:
    for k in range(n):
        tg._record_in_run(Path(run_dir), {"id": f"w{worker}-{k}", "created": None, "iterations": [1, 1], "steps": None,
                                          "roles": None, "integrated": {}, "source": "trigger"})


def test_concurrent_triggers_lose_no_request(tmp_path):
    (tmp_path / formats.RUN_FILE).write_text(json.dumps({"schema": 1, "run_id": "r"}))
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_trigger_many, args=(str(tmp_path), w, 4)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    run = json.loads((tmp_path / formats.RUN_FILE).read_text())
    assert sorted(r["id"] for r in run["requests"]) == sorted(f"w{w}-{k}" for w in range(8) for k in range(4))
    assert run["run_id"] == "r"


def test_a_symlinked_request_file_is_not_followed(tmp_path):
    (tmp_path / "requests").mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"id": "stolen", "steps": 1}))
    (tmp_path / "requests" / "link.json").symlink_to(secret)
    (rid, exc), = tp.RequestDirSource(tmp_path).poll()
    assert rid == "link" and isinstance(exc, ValueError) and "symbolic link" in str(exc)


def test_a_huge_listener_thread_workload_still_heartbeats(tmp_path):
    """While the poller validates a big request, the training thread's step() only reads a list."""
    prof = IntegratedProfiler(dyn_config(tmp_path), role="actor", rank=0, world_size=1)
    loop = Loop(prof)
    loop.iteration()
    stop = threading.Event()
    times: list[float] = []

    def train():
        while not stop.is_set():
            t = time.perf_counter()
            prof.step()
            times.append(time.perf_counter() - t)
            time.sleep(0.005)
    th = threading.Thread(target=train)
    th.start()
    for i in range(5):
        tp.submit_file(tmp_path, _huge_request(6000) | {"id": f"h{i}"})
    deadline = time.monotonic() + 30
    while sum(1 for k in prof._ondemand.entries if k.startswith("h")) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    th.join(10)
    prof.stop()
    assert times and max(times) < 0.25
