"""Issue 34: the export off the training thread. Real torch.profiler captures; the background
writer is held back by queueing a job before the capture's own (its public `submit`), which is how
a slow export looks from the training thread, without sleeping in the code under test."""
from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path

import pytest
import torch

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.analysis.inputs.record import state_warnings
from mindspeed_profiler.core import formats
from mindspeed_profiler.runtime import export_writer
from mindspeed_profiler.runtime.export_writer import ExportWriter

pytestmark = pytest.mark.filterwarnings("ignore")


def _train(prof: IntegratedProfiler, iterations: int) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    x = torch.randn(4, 16)
    prof.start()
    for _ in range(iterations):
        with prof.stage("actor_update"):
            model(x).sum().backward()
        prof.step()


def _profiler(tmp_path: Path, **integrated) -> IntegratedProfiler:
    cfg = load_config({"integrated": {"profile": True, "profile_level": "level1", "profile_save_path": str(tmp_path),
                                      "profile_step_start": 2, "profile_step_end": 3, **integrated}})
    return IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)


def _meta_on_disk(prof: IntegratedProfiler) -> dict:
    return json.loads((Path(prof.captures[0]["directory"]) / formats.META_FILE).read_text())


def _hold_writer() -> threading.Event:
    """Queue a job that waits: the captures' exports queue behind it until the event is set."""
    gate = threading.Event()
    export_writer.WRITER.submit("test gate", lambda: gate.wait(30))
    return gate


def test_a_capture_is_compressed_off_the_step_and_its_phases_recorded(tmp_path):
    prof = _profiler(tmp_path)
    gate = _hold_writer()
    try:
        _train(prof, 3)
        # the capture closed at the end of iteration 2; its export waits behind the gate
        meta = _meta_on_disk(prof)
        assert meta["status"] == "exporting"
        raw = Path(prof.captures[0]["directory"]) / meta["trace_files"][0]
        assert raw.name.endswith(".pt.trace.json")
        assert json.loads(raw.read_text())["traceEvents"]   # whole, already readable
        assert set(meta["export_phases"]) >= {"stop", "write"}
        assert state_warnings(meta) and "export not finished" in state_warnings(meta)[0]
    finally:
        gate.set()
    prof.stop()
    meta = _meta_on_disk(prof)
    assert meta["status"] == "ok"
    [name] = meta["trace_files"]
    assert name.endswith(".pt.trace.json.gz")
    directory = Path(prof.captures[0]["directory"])
    with gzip.open(directory / name, "rt") as fh:
        assert json.load(fh)["traceEvents"]
    assert not list(directory.glob("*.pt.trace.json")), "the raw trace is removed once compressed"
    assert not [p for p in directory.iterdir() if p.name.startswith(".")], "no temporary file left"
    assert {"stop", "write", "compress"} <= set(meta["export_phases"])
    assert all(v >= 0 for v in meta["export_phases"].values())


def test_stop_waits_within_its_bound_and_says_what_was_not_finished(tmp_path, caplog):
    prof = _profiler(tmp_path, export_wait_s=0.3)
    gate = _hold_writer()
    try:
        _train(prof, 3)
        t0 = time.perf_counter()
        prof.stop()
        waited = time.perf_counter() - t0
        meta = _meta_on_disk(prof)
        # the capture is whole as listed: the analysis reads it, with the warning
        from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

        summary, _ = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    finally:
        gate.set()
    assert waited < 10
    assert meta["status"] == "exporting"
    assert any(n.startswith("export not finished when the profiler stopped (waited 0.3 s): compress")
               for n in meta["notes"]), meta["notes"]
    assert "not finished" in caplog.text
    [cap] = [c for c in summary["captures"] if c["kind"] == "torch"]
    assert cap["status"] == "ok"
    assert any("export not finished" in w for w in cap["warnings"])
    export_writer.WRITER.wait(timeout=30)
    assert _meta_on_disk(prof)["status"] == "ok", "the late export still finishes and says so"


def test_inline_export_when_background_export_is_off(tmp_path):
    prof = _profiler(tmp_path, background_export=False)
    gate = _hold_writer()
    try:
        _train(prof, 3)
        meta = _meta_on_disk(prof)   # written before the step returned, with the writer held
    finally:
        gate.set()
    prof.stop()
    assert meta["status"] == "ok" and meta["trace_files"][0].endswith(".json.gz")
    assert "compress" in meta["export_phases"]


def test_exports_in_flight_are_all_finished_by_stop(tmp_path):
    # profile_steps_continuous: false makes each recorded iteration its own capture
    # (two: the writer's queue holds two behind the one it writes; a third would wait for room)
    prof = _profiler(tmp_path, profile_step_start=1, profile_step_end=3, profile_steps_continuous=False)
    gate = _hold_writer()
    try:
        _train(prof, 3)
        assert [c["status"] for c in prof.captures] == ["exporting", "exporting"]
    finally:
        gate.set()
    prof.stop()
    assert [c["status"] for c in prof.captures] == ["ok"] * 2
    for c in prof.captures:
        with gzip.open(Path(c["directory"]) / c["trace_files"][0], "rt") as fh:
            assert json.load(fh)["traceEvents"]


def test_the_writer_queue_is_bounded():
    writer = ExportWriter(max_in_flight=1)
    gate = threading.Event()
    writer.submit("first", lambda: gate.wait(30))   # taken by the thread, running
    time.sleep(0.05)
    writer.submit("second", lambda: None)            # waits in the queue
    third_done = threading.Event()

    def third():
        writer.submit("third", lambda: None)         # no room: blocks until the first is done
        third_done.set()
    threading.Thread(target=third, daemon=True).start()
    assert not third_done.wait(0.3)
    gate.set()
    assert third_done.wait(10)
    assert writer.wait(timeout=10) == []


def test_a_failing_job_is_kept_on_the_job_and_the_writer_goes_on():
    writer = ExportWriter()

    def boom():
        raise OSError("disk gone")
    job, _ = writer.submit("bad", boom)
    ok, _ = writer.submit("good", lambda: None)
    assert writer.wait(timeout=10) == []
    assert isinstance(job.error, OSError) and ok.error is None


def test_an_on_demand_childs_export_never_waits_in_the_step_and_the_owners_stop_waits_for_it(tmp_path):
    cfg = load_config({"integrated": {"profile": True, "profile_level": "level1", "profile_save_path": str(tmp_path),
                                      "profile_step_start": 1, "profile_step_end": 2}})
    owner = IntegratedProfiler(load_config({"integrated": {"profile": False, "profile_save_path": str(tmp_path)}}),
                               role="actor", rank=0, world_size=1)
    child = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1, iteration_spans=False, request_id="r-test")
    owner.start()
    gate = _hold_writer()
    try:
        _train(child, 1)
        t0 = time.perf_counter()
        child.stop()   # the listener stops its child mid-run, on the training thread
        assert time.perf_counter() - t0 < 5
        assert child.captures[0]["status"] == "exporting"
    finally:
        gate.set()
    owner.stop()   # the end of the run: waits for every export of the process
    assert child.captures[0]["status"] == "ok"
    assert _meta_on_disk(child)["trace_files"][0].endswith(".json.gz")
