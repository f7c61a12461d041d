"""On-demand capture, third hostile round (issue 31, item 3).

- A job that never calls start_run (torchrun, one process, MindSpeed-RL's own driver through our
  drop-in), with the documented leave-it-on config (`profile: false`, `dynamic: true`), wrote no
  run.json: `trigger RUN_DIR` answered "no run.json here" while the worker listened. The first
  listener now writes run.json (manifest.claim_run), with one run id for every rank.
- One worker state file of the wrong shape in requests/workers/ ended `status` and `trigger` in a
  traceback, blocking capture for the whole job: it is now named, with the field and value, and
  skipped.

The jobs run as real subprocesses driven by the real CLI (`python -m mindspeed_profiler.cli`), each
wait bounded."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler import IntegratedProfiler, load_config, start_run
from mindspeed_profiler.cli import main as cli_main
from mindspeed_profiler.runtime.manifest import LISTENER_SOURCE, read_run_manifest
from mindspeed_profiler.ondemand import listener as lst
from mindspeed_profiler.ondemand import transport as tp
from profiler_testutil import capture_dirs, meta_of

# the processes of these tests must not take a run id from the environment of the test run
RUN_ID_VARS = ("MINDSPEED_PROFILER_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")

JOB = textwrap.dedent('''
    """A training job that never calls start_run: {kind}."""
    import sys, time
    from pathlib import Path
    import torch
    from mindspeed_profiler.ondemand import listener
    listener.POLL_INTERVAL_S = 0.05   # a fast listener: the test's waits stay short
    save, kind = Path(sys.argv[1]), sys.argv[2]
    integrated = {{"profile": False, "dynamic": True, "profile_save_path": str(save), "backend": "torch",
                   "stage": "actor_update"}}
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 8), torch.randn(16, 1)

    def update():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    deadline = time.monotonic() + 120   # never outlives the test
    if kind == "plain":
        from mindspeed_profiler import IntegratedProfiler, load_config
        prof = IntegratedProfiler(load_config({{"integrated": integrated}}), role="actor")
        prof.start()
        while not (save / "stop").exists() and time.monotonic() < deadline:
            with prof.stage("actor_update"):
                update()
            time.sleep(0.1)
            prof.step()
        prof.stop()
    else:   # MindSpeed-RL's ActorHybridWorker calls, with only the import line changed
        from mindspeed_profiler.integrations.mindspeed_rl import profiler_start, profiler_step
        actor_profiler = profiler_start(integrated, "integrated")
        prof_iteration = 1
        while not (save / "stop").exists() and time.monotonic() < deadline:
            stage_profiler = profiler_start(integrated, role="actor_update", profiler_iteration=prof_iteration)
            update()
            profiler_step(stage_profiler)
            time.sleep(0.1)
            prof_iteration += 1
            profiler_step(actor_profiler)
        actor_profiler.stop()
''')


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in RUN_ID_VARS + ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return env


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=clean_env(), cwd=REPO_ROOT)


def wait_for(what, timeout: float, message: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {message}")


def heartbeat_with_period(save: Path):
    states = tp.read_worker_states(save)
    return [k for k, st in states.items() if (st.get("heartbeat") or {}).get("iteration_period_s")]


@pytest.mark.parametrize("kind, worker", [("plain", "actor_rank0"), ("mindspeed_rl", "integrated_rank0")])
def test_a_job_without_start_run_is_captured_by_the_trigger_cli(tmp_path, kind, worker):
    save = tmp_path / "run"
    script = tmp_path / "job.py"
    script.write_text(JOB.format(kind=kind))
    job = subprocess.Popen([sys.executable, str(script), str(save), kind], env=clean_env(), cwd=REPO_ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_for(lambda: heartbeat_with_period(save), 90, "the job's listener reports an iteration period") == [worker]
        run = read_run_manifest(save)
        assert run and run["run_id"] and run["run_id_source"] == LISTENER_SOURCE
        done = cli("trigger", str(save), "--steps", "2", "--wait", "90")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 worker(s) listening" in done.stdout and " done " in done.stdout, done.stdout + done.stderr
        assert cli("status", str(save)).returncode == 0
    finally:
        save.mkdir(parents=True, exist_ok=True)
        (save / "stop").touch()
        try:
            out, _ = job.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
            out, _ = job.communicate()
    assert job.returncode == 0, out
    (request,) = read_run_manifest(save)["requests"]
    first, last = request["iterations"]
    caps = capture_dirs(save)
    # the job's stage (a named one): one capture per call, one call per iteration
    assert [meta_of(d)["steps"] for d in caps] == [[i, i] for i in range(first, last + 1)], caps
    for d in caps:
        meta = meta_of(d)
        assert meta["status"] == "ok" and meta["stage"] == "actor_update" and meta["request_id"] == request["id"]
        assert meta["run_id"] == run["run_id"] and meta["role"] + "_rank0" == worker
        assert meta["trace_files"] and all((d / f).stat().st_size > 0 for f in meta["trace_files"])


CLAIM = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from mindspeed_profiler import IntegratedProfiler, load_config
    save, rank = sys.argv[1], int(sys.argv[2])
    cfg = load_config({"integrated": {"profile": False, "dynamic": True, "profile_save_path": save}})
    prof = IntegratedProfiler(cfg, role="actor", rank=rank, world_size=4)
    prof.start()
    print(prof._ondemand.run_id)
    deadline = time.monotonic() + 60   # a job's ranks run on together: stop once all four have started
    while len(list(Path(save, "requests", "workers").glob("*.json"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    prof.stop()
''')


def test_ranks_starting_together_agree_on_one_run_id(tmp_path):
    """Four ranks of one job without any run id in their environment: one run.json, one id."""
    procs = [subprocess.Popen([sys.executable, "-c", CLAIM, str(tmp_path), str(r)], env=clean_env(), cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    ids = {o.strip() for o, _ in outs}
    run = read_run_manifest(tmp_path)
    assert ids == {run["run_id"]} and run["run_id_source"] == LISTENER_SOURCE
    states = tp.read_worker_states(tmp_path)
    assert sorted(states) == [f"actor_rank{r}" for r in range(4)] and {s["run_id"] for s in states.values()} == ids


@pytest.fixture
def no_env_run_id(monkeypatch):
    for var in RUN_ID_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(lst, "POLL_INTERVAL_S", 0.02)


def listening(save: Path, rank: int = 0) -> IntegratedProfiler:
    cfg = load_config({"integrated": {"profile": False, "dynamic": True, "profile_save_path": str(save)}})
    prof = IntegratedProfiler(cfg, role="actor", rank=rank, world_size=1)
    prof.start()
    return prof


def test_an_ended_listeners_run_json_is_replaced_and_start_runs_is_adopted(tmp_path, no_env_run_id):
    old = tmp_path / "old"
    prof = listening(old)
    first = prof._ondemand.run_id
    prof.stop()
    hour_ago = time.time() - 3600
    os.utime(old / "run.json", (hour_ago, hour_ago))
    (old / tp.REQUESTS_DIR / tp.WORKERS_DIR / "actor_rank0.json").unlink()   # that job's workers are gone
    prof = listening(old)
    assert prof._ondemand.run_id not in (None, first) and read_run_manifest(old)["run_id"] == prof._ondemand.run_id
    prof.stop()
    # a run announced by start_run on the driver (its workers got no run id: another node's environment)
    announced = tmp_path / "announced"
    driver = start_run(load_config({"integrated": {"profile": False, "dynamic": True, "profile_save_path": str(announced)}}))
    del os.environ["MINDSPEED_PROFILER_RUN_ID"]   # start_run set it (the fixture restores the environment)
    os.utime(announced / "run.json", (hour_ago, hour_ago))
    prof = listening(announced)
    assert prof._ondemand.run_id == driver.run_id and read_run_manifest(announced)["run_id_source"] == "config"
    prof.stop()


def test_a_run_json_that_cannot_be_written_leaves_training_going(tmp_path, no_env_run_id, caplog):
    save = tmp_path / "run"
    save.mkdir()
    (save / "run.json").mkdir()   # not a file: the write fails
    prof = listening(save)
    for _ in range(3):
        prof.step()
    prof.stop()
    assert "could not write run.json" in caplog.text and prof.iteration is None


# ----------------------------------------------------------------------------- malformed worker states

BAD_STATES = {
    "heartbeat_list": ('{"heartbeat": [1, 2]}', "heartbeat is [1, 2]; expected an object"),
    "time_text": ('{"heartbeat": {"time": "soon"}}', "heartbeat.time is 'soon'; expected a finite number"),
    "period_nan": ('{"heartbeat": {"time": %NOW%, "iteration": 3, "iteration_period_s": NaN}}',
                   "heartbeat.iteration_period_s is nan; expected a finite number"),
    "iteration_huge": ('{"heartbeat": {"time": %NOW%, "iteration": 1%ZEROS%, "iteration_period_s": 0.1}}',
                       "heartbeat.iteration is 1000"),
    "listening_text": ('{"heartbeat": {"time": %NOW%, "listening": "yes"}}', "heartbeat.listening is 'yes'; expected true or false"),
    "requests_list": ('{"requests": [1]}', "requests is [1]; expected an object"),
    "entry_text": ('{"requests": {"r1": "done"}}', "requests.'r1' is 'done'; expected an object"),
    "iterations_text": ('{"requests": {"r1": {"state": "done", "iterations": "1-2"}}}',
                        "requests.'r1'.iterations is '1-2'; expected [first, last]"),
    "captures_ints": ('{"requests": {"r1": {"captures": [1]}}}', "requests.'r1'.captures is [1]; expected a list of objects"),
    "stages_dict": ('{"stages": {"a": 1}}', "stages is {'a': 1}; expected a list of stage names"),
    "not_object": ("[1, 2]", "the file holds list [1, 2]; expected a JSON object"),
    "garbage": ("\x00\xff garbage", "not valid JSON"),
}


def write_states(save: Path) -> None:
    """One good, listening worker with an iteration period, and every bad state beside it."""
    folder = save / tp.REQUESTS_DIR / tp.WORKERS_DIR
    folder.mkdir(parents=True)
    now = time.time()
    good = {"schema": 1, "worker": "actor_rank0", "role": "actor", "rank": 0, "run_id": read_run_manifest(save)["run_id"],
            "heartbeat": {"time": now, "iteration": 7, "iteration_period_s": 0.5, "fastest_period_s": 0.5,
                          "poll_interval_s": 1.0, "state_every": 2, "listening": True},
            "stages": ["actor_update"], "requests": {}}
    (folder / "actor_rank0.json").write_text(json.dumps(good))
    for name, (text, _) in BAD_STATES.items():
        (folder / f"{name}.json").write_text(text.replace("%NOW%", repr(now)).replace("%ZEROS%", "0" * 400))


@pytest.fixture
def run_with_bad_states(tmp_path, no_env_run_id):
    start_run(load_config({"integrated": {"profile": False, "dynamic": True, "profile_save_path": str(tmp_path)}}))
    write_states(tmp_path)
    return tmp_path


def assert_each_bad_state_named(err: str, save: Path) -> None:
    for name, (_, said) in BAD_STATES.items():
        line = next((ln for ln in err.splitlines() if f"{name}.json" in ln), "")
        assert str(save / tp.REQUESTS_DIR / tp.WORKERS_DIR / f"{name}.json") in line and said in line, (name, err)
        assert line.endswith("skipped") and len(line) < 600, line


def test_status_names_and_skips_malformed_worker_states(run_with_bad_states, capsys):
    save = run_with_bad_states
    assert cli_main(["status", str(save)]) == 0
    out, err = capsys.readouterr()
    assert "1 of 1 worker(s) listening" in out and "actor_rank0" in out, out
    assert_each_bad_state_named(err, save)
    assert "Traceback" not in err


def test_trigger_names_and_skips_malformed_worker_states(run_with_bad_states, capsys):
    save = run_with_bad_states
    assert cli_main(["trigger", str(save), "--steps", "2", "--json"]) == 0
    out, err = capsys.readouterr()
    req = json.loads(out)
    # resolved from the good worker's heartbeat alone: iteration 7 at 0.5 s, plus the poll cycle and slack
    assert req["workers_listening"] == 1 and req["iterations"][0] >= 8 and req["iterations"][1] == req["iterations"][0] + 1
    assert len(req["skipped_states"]) == len(BAD_STATES)
    assert_each_bad_state_named(err, save)
    assert (save / tp.REQUESTS_DIR / f"{req['id']}.json").is_file()


def test_malformed_states_in_the_ray_mailbox_are_named_and_skipped(tmp_path, monkeypatch):
    """The same check for the states a Ray mailbox holds (anyone on the cluster can report one)."""
    from mindspeed_profiler.ondemand import trigger as tg

    class Box:   # the mailbox's one method gather_states calls, without a cluster
        class worker_states:
            @staticmethod
            def remote():
                return {"actor_rank1": {"heartbeat": {"time": math.inf}}, "actor_rank2": {"heartbeat": {"time": time.time()}}}

    class FakeRay:
        @staticmethod
        def get(value, timeout=None):
            return value

    problems: list[str] = []
    monkeypatch.setitem(sys.modules, "ray", FakeRay)   # gather_states imports ray only to wait on the call
    states = tg.gather_states(tmp_path / "absent", Box, problems)
    assert list(states) == ["actor_rank2"]
    (line,) = problems
    assert "actor_rank1" in line and "heartbeat.time is inf" in line and "Ray mailbox" in line


def test_a_worker_without_an_iteration_yet_never_breaks_trigger_iterations(tmp_path, no_env_run_id, capsys):
    """null is a valid iteration in a state (a worker that has not reported one): `--iterations`
    compared it with a number and ended in a TypeError."""
    start_run(load_config({"integrated": {"profile": False, "dynamic": True, "profile_save_path": str(tmp_path)}}))
    folder = tmp_path / tp.REQUESTS_DIR / tp.WORKERS_DIR
    folder.mkdir(parents=True)
    (folder / "actor_rank0.json").write_text(json.dumps({"heartbeat": {"time": time.time(), "iteration": None}}))
    assert cli_main(["trigger", str(tmp_path), "--iterations", "100-101", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["iterations"] == [100, 101]
