"""One observer protocol (observers.py: started / stage / step / stopped) for everything that follows
an IntegratedProfiler: a user's own observer, the on-demand listener (per profiler) and the
system-capture follower (process-wide). Real profilers on CPU torch."""
from __future__ import annotations

import contextlib
import json
from pathlib import Path


from mindspeed_profiler import IntegratedProfiler
from mindspeed_profiler.core import formats
from mindspeed_profiler import load_config
from mindspeed_profiler.capture import observers
from mindspeed_profiler.runtime import profiler as profiler_module
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.ondemand.listener import Listener
from mindspeed_profiler.system import worker
from mindspeed_profiler.system.spec import WorkerSpec
from profiler_testutil import capture_dirs, meta_of, profile_config, train


class Recorder(observers.Observer):
    """Remembers every call, with whether a capture was recording at that moment."""

    def __init__(self, log: list, tag: str = ""):
        self.log, self.tag = log, tag

    def started(self, profiler, iteration):
        self.log.append((self.tag + "started", iteration, STATE.capture_active))

    def stage(self, profiler, name):
        @contextlib.contextmanager
        def around():
            self.log.append((self.tag + "stage", name, profiler.iteration, STATE.capture_active))
            yield
            self.log.append((self.tag + "stage-end", name, profiler.iteration, STATE.capture_active))
        return around()

    def step(self, profiler, iteration):
        self.log.append((self.tag + "step", iteration, STATE.capture_active))

    def stopped(self, profiler, iteration):
        self.log.append((self.tag + "stopped", iteration, STATE.capture_active))


def test_an_observer_hears_every_boundary_and_stage_in_order(tmp_path, clean_state, listeners):
    prof = IntegratedProfiler(profile_config(tmp_path, profile_steps=[2]), role="actor", rank=0, world_size=1)
    log: list = []
    prof.add_observer(Recorder(log))
    prof.add_observer(prof.observers[0])   # once per observer
    train(prof, 3, stages=("actor_generate", "actor_update"))
    names = [e[:2] if e[0] in ("started", "step", "stopped") else e[:3] for e in log]
    per_iteration = lambda it: [("stage", "actor_generate", it), ("stage-end", "actor_generate", it),
                                ("stage", "actor_update", it), ("stage-end", "actor_update", it)]
    assert names == [("started", 1), *per_iteration(1), ("step", 2), *per_iteration(2), ("step", 3),
                     *per_iteration(3), ("step", 4), ("stopped", 4)]
    # a profiler's own observers hear a boundary after its capture opened, see the capture in the stage
    assert ("step", 2, True) in log and ("stage", "actor_update", 2, True) in log and ("step", 3, False) in log
    assert [meta_of(d)["steps"] for d in capture_dirs(tmp_path)] == [[2, 2]]


def test_process_wide_observers_hear_a_boundary_before_the_profiler_acts_on_it(tmp_path, clean_state, listeners):
    log: list = []
    observers.subscribe(Recorder(log, "process-"))
    legacy: list = []
    observers.subscribe(lambda prof, event, it: legacy.append((event, it)))   # the older hook
    prof = IntegratedProfiler(profile_config(tmp_path, profile_steps=[1, 2]), role="actor", rank=0, world_size=1)
    prof.add_observer(Recorder(log, "own-"))
    prof.start()
    with prof.stage("actor_update"):
        pass
    prof.step()
    prof.stop()                     # in iteration 2: its capture is still recording
    assert log == [("process-started", 1, False), ("own-started", 1, True),
                   ("process-stage", "actor_update", 1, True), ("own-stage", "actor_update", 1, True),
                   ("own-stage-end", "actor_update", 1, True), ("process-stage-end", "actor_update", 1, True),
                   ("process-step", 2, True), ("own-step", 2, True),
                   ("process-stopped", 2, True), ("own-stopped", 2, True)]
    assert legacy == [("start", 1), ("step", 2), ("stop", 2)]
    assert [meta_of(d)["steps"] for d in capture_dirs(tmp_path)] == [[1, 2]]


def test_a_failing_observer_warns_once_and_training_goes_on(tmp_path, clean_state, listeners, runtime_warnings):
    class Broken(observers.Observer):
        def started(self, profiler, iteration):
            raise RuntimeError("boom")

        step = stopped = started

        def stage(self, profiler, name):
            raise ValueError("no stage for you")

    seen: list = []
    base = train(IntegratedProfiler(profile_config(tmp_path / "a", profile_steps=[2]), role="actor", rank=0, world_size=1), 3)
    prof = IntegratedProfiler(profile_config(tmp_path / "b", profile_steps=[2]), role="actor", rank=0, world_size=1)
    prof.add_observer(Broken())
    prof.add_observer(Recorder(seen))   # the next observer is still told
    assert train(prof, 3) == base
    assert len(runtime_warnings("iteration listener")) == 2   # one per kind of failure, not per boundary
    assert [e[:2] for e in seen if e[0] in ("started", "step", "stopped")] == [("started", 1), ("step", 2), ("step", 3),
                                                                                ("step", 4), ("stopped", 4)]
    assert [meta_of(d)["status"] for d in capture_dirs(tmp_path / "b")] == ["ok"]


def test_a_stage_with_nobody_listening_costs_nothing(tmp_path, clean_state, listeners):
    prof = IntegratedProfiler(load_config({"integrated": {}}).integrated, role="actor", rank=0, world_size=1)
    prof.start()
    assert prof.stage("actor_update") is prof.stage("actor_generate")   # the one shared null context
    log: list = []
    prof.add_observer(Recorder(log))
    with prof.stage("actor_update"):
        pass
    prof.stop()
    assert [e[0] for e in log] == ["stage", "stage-end", "stopped"]


def test_the_on_demand_listener_is_one_of_the_profilers_observers(tmp_path, clean_state, listeners):
    cfg = load_config({"integrated": {"profile": False, "dynamic": True, "profile_save_path": str(tmp_path), "backend": "torch"}})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    (listener,) = prof.observers
    assert isinstance(listener, Listener) and isinstance(listener, observers.Observer)
    prof.observers.clear()          # not special-cased: without it in the list, nothing listens
    prof.start()
    prof.step()
    prof.stop()
    assert listener._thread is None and not (tmp_path / "requests").exists()
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    prof.step()
    prof.stop()
    state = json.loads((tmp_path / "requests" / "workers" / "actor_rank0.json").read_text())
    assert state["heartbeat"]["iteration"] == 2 and state["heartbeat"]["listening"] is False
    source = Path(profiler_module.__file__).read_text()
    assert "_ondemand." not in source and "notify_iteration" not in source


def test_a_forked_process_forgets_the_listener(tmp_path, clean_state, listeners):
    from mindspeed_profiler.runtime import session

    cfg = load_config({"integrated": {"profile": False, "dynamic": True, "profile_save_path": str(tmp_path), "backend": "torch"}})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    listener = prof.observers[0]
    prof.forget_after_fork()    # what session's after-fork hook calls
    session.RUNNING.discard(prof)
    try:
        assert prof.observers == [] and prof._ondemand is None
        prof.step()                 # not running any more: nothing happens
        assert prof.iteration == 1 and listener._iteration == 1
    finally:
        listener.stopped(prof, 1)   # this test's process is no fork: end the poller it started


def test_the_system_follower_is_a_process_wide_observer(tmp_path, clean_state, listeners, monkeypatch):
    spec = WorkerSpec(backend="nsight", group="actor", rank=0, output_dir=str(tmp_path), steps=(2,), run_id="r1")
    monkeypatch.setenv(formats.SYSTEM_ENV, spec.encode())
    monkeypatch.setenv(formats.SYSTEM_STATUS_ENV, json.dumps({"status": "wrapped"}))
    monkeypatch.setattr(worker, "_FOLLOWER", None)
    assert worker.install()
    (follower,) = listeners
    assert isinstance(follower, worker.IterationFollower) and isinstance(follower, observers.Observer)
    prof = IntegratedProfiler(load_config({"integrated": {}}).integrated, role="actor", rank=0, world_size=1)
    prof.start()
    prof.step()
    prof.stop()
    lines = [json.loads(x) for x in spec.iterations_path.read_text().splitlines()]
    assert [(x["type"], x.get("iteration")) for x in lines[1:]] == [("iteration", 1), ("range", 2), ("range", 2), ("iteration", 2)]
    observers.unsubscribe(follower)
    assert listeners == []
