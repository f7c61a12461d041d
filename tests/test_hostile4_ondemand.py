"""Issue 45, items 2, 3 and 10: on-demand requests bound to the run that was live when they were made.

- 2: torchrun's static rendezvous (`--master-port`, what Megatron and MindSpeed launch with) sets
  TORCHELASTIC_RUN_ID=none for every job: every such job got the run id `torchelastic-none`, and a
  relaunched job in the same save path adopted the old job's run and captured the request it left.
- 3: a job with no run id at all (profile: true, no start_run, no launcher id) took the previous
  run's `auto-*.json` requests.
- 10: a backward step of the wall clock made the listener write a negative `fastest_period_s`,
  which its own state check rejects (`status`: no worker listening; `trigger --steps`: no alignment).

Real listeners (IntegratedProfiler with `dynamic: true`) polling a real requests directory."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.core import formats
from mindspeed_profiler.ondemand import listener as lst
from mindspeed_profiler.ondemand import states
from mindspeed_profiler.ondemand import transport as tp
from mindspeed_profiler.ondemand.trigger import trigger
from mindspeed_profiler.runtime.manifest import read_run_manifest, resolve_run_id

RUN_ID_VARS = ("MINDSPEED_PROFILER_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")
HOUR_AGO = time.time() - 3600


@pytest.fixture
def no_env_run_id(monkeypatch):
    for var in RUN_ID_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(lst, "POLL_INTERVAL_S", 0.02)


def _job(save: Path, **integrated) -> IntegratedProfiler:
    cfg = load_config({"integrated": {"profile": False, "dynamic": True, "profile_save_path": str(save), **integrated}})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    return prof


def _polled(prof: IntegratedProfiler, polls: int = 4) -> None:
    """Let the listener's thread poll a few times, then take what it found at an iteration boundary."""
    listener = prof._ondemand
    deadline = time.monotonic() + 30
    start = listener.polls_done
    while listener.polls_done < start + polls:
        assert time.monotonic() < deadline, "the listener did not poll"
        time.sleep(0.02)
    prof.step()


def _over(save: Path) -> None:
    """The job that wrote `save` ended an hour ago: run.json and its requests that old."""
    for path in [save / formats.RUN_FILE, *tp.requests_dir(save).glob("*.json")]:
        os.utime(path, (HOUR_AGO, HOUR_AGO))


# ------------------------------------------------------------------------------ 2. TORCHELASTIC_RUN_ID=none


@pytest.mark.parametrize("value", ["none", "", "None"])
def test_a_launcher_value_every_job_shares_is_no_run_id(no_env_run_id, monkeypatch, value):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", value)
    assert resolve_run_id(None) == (None, "none")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "a1b2c3")   # torchrun --rdzv-id a1b2c3: the job's own
    assert resolve_run_id(None) == ("torchelastic-a1b2c3", "TORCHELASTIC_RUN_ID")


def test_a_relaunched_torchrun_job_never_takes_the_old_jobs_run_or_request(tmp_path, no_env_run_id, monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")   # torchrun --master-port ... (static rendezvous)
    save = tmp_path / "run"
    old = _job(save)
    _polled(old)
    left = trigger(save, iterations=(50, 51))   # the old job stops before iteration 50
    _polled(old)
    old_id = old._ondemand.run_id
    old.stop()
    _over(save)
    new = _job(save)
    try:
        assert new._ondemand.run_id != old_id and read_run_manifest(save)["run_id"] == new._ondemand.run_id
        _polled(new)
        assert left["id"] not in new._ondemand.entries, new._ondemand.entries
    finally:
        new.stop()


# ------------------------------------------------------------------------------ 3. no run id at all


def _request(save: Path, rid: str, first: int, *, made: float, **extra) -> None:
    raw = {"schema": 1, "id": rid, "run_id": None, "created": "2026-01-01T00:00:00Z", "source": "auto",
           "iterations": [first, first + 1], "steps": None, "roles": ["actor"], "integrated": {}, **extra}
    path = tp.safe_dir(save) / f"{rid}.json"
    path.write_text(json.dumps(raw))
    os.utime(path, (made, made))


def test_a_run_without_any_run_id_never_takes_the_previous_runs_requests(tmp_path, no_env_run_id):
    """The previous run (same save path, no run id either) left an automatic request for its
    iterations 5-6; the new run must not capture them (it would use up max_captures on an iteration
    that is not slow). A request made while the new run goes on is taken."""
    save = tmp_path / "run"
    _request(save, "auto-actor-it4", 5, made=HOUR_AGO, auto={"slow_iteration": 4})
    job = _job(save, profile=True, profile_step_start=1000, profile_step_end=1001)   # a static window far away
    try:
        assert job._ondemand.run_id is None   # nothing names this run
        _polled(job)
        assert "auto-actor-it4" not in job._ondemand.entries, job._ondemand.entries
        _request(save, "r-now", 30, made=time.time())
        _polled(job)
        assert job._ondemand.entries["r-now"].state == "requested"
    finally:
        job.stop()


def test_a_previous_profiling_runs_run_json_without_an_id_is_not_adopted(tmp_path, no_env_run_id):
    """A listener without a run id adopts another run's run.json only when it names a run: one a
    profiling job wrote with no id (run_id null) is replaced by a fresh id."""
    save = tmp_path / "run"
    save.mkdir()
    (save / formats.RUN_FILE).write_text(json.dumps({"schema": 1, "run_id": None, "run_id_source": "none"}))
    os.utime(save / formats.RUN_FILE, (HOUR_AGO, HOUR_AGO))
    job = _job(save)
    try:
        assert job._ondemand.run_id and read_run_manifest(save)["run_id"] == job._ondemand.run_id
    finally:
        job.stop()


# ------------------------------------------------------------------------------ 10. the wall clock steps back


def test_a_backward_wall_clock_step_never_makes_a_state_the_listener_itself_rejects(tmp_path, no_env_run_id,
                                                                                     monkeypatch):
    job = _job(tmp_path / "run")
    try:
        real = time.time
        for i in range(4):
            job.step()
            time.sleep(0.01)
        monkeypatch.setattr(time, "time", lambda: real() - 3600)   # NTP steps the clock back an hour
        job.step()
        job.step()
        monkeypatch.setattr(time, "time", real)
        state = job._ondemand.state()
        hb = state["heartbeat"]
        assert hb["fastest_period_s"] is not None and hb["fastest_period_s"] >= 0, hb
        assert hb["iteration_period_s"] >= 0 and states.problem(state) is None
    finally:
        job.stop()
