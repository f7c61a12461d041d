"""An out-of-memory error leaves its own diagnosis (issue 47): the error that escapes a stage is
recorded (rank, stage, iteration, what it tried to allocate, the allocator's statistics, the
per-stage peaks so far) and goes on unchanged: the very same exception object, its type, message and
traceback; with the allocator's history kept (`metrics.oom_snapshot`, or a `profile_with_memory`
window) the snapshot is dumped beside the record. CUDA and NPU through tests/fake_device_memory.py
(calls bound against the released signatures). Never a second failure: a snapshot or a record that
cannot be written is a warning."""
from __future__ import annotations

import json
import pickle
import traceback
from pathlib import Path

import pytest
import torch

from fake_device_memory import GIB, MIB, FakeAllocator, install_cuda, install_npu
from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.analysis.parsing.memory_snapshot import read_memory_snapshot
from mindspeed_profiler.backends.memory_snapshot import ALLOCATOR, HISTORY, MemorySnapshot
from mindspeed_profiler.metrics.oom import DEVICE_OOM, HOST_OOM, oom_kind, tried_bytes


def cfg_of(tmp_path: Path, **metrics):
    return load_config({"integrated": {"profile_save_path": str(tmp_path)},
                        "metrics": {"enable": True, "host_memory_watermark": None, **metrics}})


def records(tmp_path: Path) -> list[dict]:
    d = tmp_path / "metrics" / "memory"
    return [json.loads(p.read_text()) for p in sorted(d.glob("*.memory.json"))] if d.is_dir() else []


def train_until_oom(prof, alloc, oom_at: int = 2, nested: bool = False):
    """Iterations of generate (1 GiB held) + update; at `oom_at` the update asks for more than the
    device has. Returns the exception the test's own code raised, and the one that reached it."""
    prof.start()
    raised = []
    try:
        for it in range(1, 4):
            with prof.stage("actor_generate"):
                kv = alloc.alloc(GIB)
                alloc.free(kv)
            with prof.stage("actor_update"):
                grads = alloc.alloc(512 * MIB)
                if it == oom_at:
                    try:
                        if nested:
                            with prof.stage("actor_compute_log_prob"):
                                alloc.alloc(64 * GIB)
                        else:
                            alloc.alloc(64 * GIB)
                    except BaseException as exc:
                        raised.append((exc, traceback.format_tb(exc.__traceback__)))
                        raise
                alloc.free(grads)
            prof.step()
    except torch.OutOfMemoryError as caught:
        return raised[0], caught
    finally:
        prof.stop()
    raise AssertionError("no out-of-memory error")


@pytest.mark.parametrize("kind", ["cuda", "npu"])
def test_a_device_oom_is_recorded_and_goes_on_unchanged(tmp_path, clean_state, runtime_warnings, monkeypatch, kind):
    alloc = FakeAllocator(capacity=8 * GIB, kind=kind)
    (install_npu if kind == "npu" else install_cuda)(monkeypatch, alloc)
    prof = IntegratedProfiler(cfg_of(tmp_path), role="actor", rank=3, world_size=4)
    (exc, tb), caught = train_until_oom(prof, alloc, oom_at=2)
    assert caught is exc and type(caught) is torch.OutOfMemoryError       # the same object, as without us
    assert traceback.format_tb(caught.__traceback__)[:len(tb)] == tb      # its traceback as it was raised
    (rec,) = records(tmp_path)
    assert (rec["kind"], rec["role"], rec["rank"], rec["stage"], rec["iteration"]) == (DEVICE_OOM, "actor", 3, "actor_update", 2)
    assert rec["exception"]["type"] == "torch.OutOfMemoryError" and rec["exception"]["message"] == str(exc)
    assert rec["tried_bytes"] == 64 * GIB
    dev = rec["device"]
    assert dev["kind"] == kind and dev["capacity_bytes"] == 8 * GIB and dev["history"] is None
    assert dev["stats"]["allocated_bytes_current"] == 512 * MIB and dev["stats"]["num_ooms"] == 1
    assert dev["free_bytes"] + alloc.reserved == 8 * GIB
    peaks = rec["stage_peaks"]
    assert peaks["actor_generate"]["device_allocated_peak"] == GIB                 # iteration 1's and 2's
    assert peaks["actor_update"]["device_allocated_peak"] == 512 * MIB             # iteration 1's: the failed call adds none
    assert rec["host"]["rss_bytes"] > 0 and rec["host"]["limit_bytes"] > 0
    assert [c[:2] for c in rec["stage_calls"]][-1] == ["actor_update", 2]
    assert rec["snapshot"] is None     # no history kept: no snapshot
    (said,) = runtime_warnings("a device out-of-memory error in stage actor_update, iteration 2")
    assert "its record is" in said


def test_an_oom_leaving_nested_stages_is_recorded_once_at_the_innermost(tmp_path, clean_state, monkeypatch):
    alloc = install_cuda(monkeypatch, FakeAllocator(capacity=8 * GIB))
    prof = IntegratedProfiler(cfg_of(tmp_path), role="actor", rank=0, world_size=1)
    train_until_oom(prof, alloc, oom_at=1, nested=True)
    (rec,) = records(tmp_path)
    assert (rec["stage"], rec["iteration"]) == ("actor_compute_log_prob", 1)
    lines = [json.loads(x) for x in (tmp_path / "metrics" / "memory" / "actor_rank0.stages.jsonl").read_text().splitlines()]
    failed = [(x["stage"], x.get("failed")) for x in lines if x["type"] == "stage" and x.get("failed")]
    assert failed == [("actor_compute_log_prob", "OutOfMemoryError"), ("actor_update", "OutOfMemoryError")]


@pytest.mark.parametrize("kind", ["cuda", "npu"])
def test_oom_snapshot_keeps_a_bounded_history_and_dumps_it_beside_the_record(tmp_path, clean_state, monkeypatch, kind):
    alloc = FakeAllocator(capacity=8 * GIB, kind=kind)
    (install_npu if kind == "npu" else install_cuda)(monkeypatch, alloc)
    prof = IntegratedProfiler(cfg_of(tmp_path, oom_snapshot=True, oom_snapshot_entries=50), role="actor", rank=0,
                              world_size=1)
    _, caught = train_until_oom(prof, alloc, oom_at=3)
    prefix = "torch_npu.npu.memory" if kind == "npu" else "torch.cuda.memory"
    recorded = [c[1] for c in alloc.calls if c[0] == f"{prefix}._record_memory_history"]
    assert recorded[0]["enabled"] == "all" and recorded[0]["stacks"] == "python" and recorded[0]["max_entries"] == 50
    assert recorded[-1]["enabled"] is None and kind not in HISTORY.standing   # released at stop()
    (rec,) = records(tmp_path)
    assert rec["device"]["history"] == {"by": "oom_snapshot", "max_entries": 50, "stacks": "python"}
    snap = rec["snapshot"]
    path = tmp_path / "metrics" / "memory" / snap["file"]
    assert path.name.endswith(".memory_snapshot.pickle") and snap["bytes"] == path.stat().st_size
    data = read_memory_snapshot(path)                          # the analysis's own reader takes it
    (trace,) = data["device_traces"]
    assert len(trace) == snap["entries"] <= 50                 # the ring's bound
    assert trace[-1]["action"] == "oom" and trace[-1]["size"] == 64 * GIB
    live = [b for s in data["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    assert [b["size"] for b in live] == [512 * MIB]            # the update's gradients, alive at the failure
    assert any(f["name"] == "train_until_oom" for f in live[0]["frames"])
    assert isinstance(caught, torch.OutOfMemoryError)


def test_a_profile_with_memory_window_keeps_the_history_and_gives_it_back(monkeypatch):
    alloc = install_cuda(monkeypatch, FakeAllocator())
    mem = torch.cuda.memory
    HISTORY.keep("cuda", 100, "python", mem)
    try:
        cap = MemorySnapshot(ALLOCATOR, "cuda")
        cap.start()
        assert HISTORY.recording("cuda")["by"] == "profile_with_memory"
        cap.stop()
        # the capture's stop gives the history back to the standing request instead of turning it off
        last = [c[1] for c in alloc.calls if c[0] == "torch.cuda.memory._record_memory_history"][-1]
        assert (last["enabled"], last["max_entries"], last["stacks"]) == ("all", 100, "python")
        assert HISTORY.recording("cuda")["by"] == "oom_snapshot"
    finally:
        HISTORY.release("cuda", mem)
    assert [c[1].get("enabled", "all") for c in alloc.calls if c[0].endswith("_record_memory_history")][-1] is None
    assert HISTORY.recording("cuda") is None


def test_a_snapshot_or_record_that_cannot_be_written_is_a_warning_never_a_second_failure(
        tmp_path, clean_state, runtime_warnings, monkeypatch):
    alloc = FakeAllocator(capacity=8 * GIB)
    boom = RuntimeError("the allocator's snapshot failed")
    alloc._snapshot = lambda device=None, augment_with_fx_traces=False: (_ for _ in ()).throw(boom)
    install_cuda(monkeypatch, alloc)
    prof = IntegratedProfiler(cfg_of(tmp_path, oom_snapshot=True), role="actor", rank=0, world_size=1)
    (exc, _), caught = train_until_oom(prof, alloc, oom_at=1)
    assert caught is exc
    (rec,) = records(tmp_path)
    assert rec["snapshot"] is None and any("the allocator's snapshot failed" in n for n in rec["notes"])
    assert runtime_warnings("memory snapshot not written")
    # the memory directory unwritable: the record is a warning, the error still the training's own
    alloc2 = install_cuda(monkeypatch, FakeAllocator(capacity=8 * GIB))
    blocked = tmp_path / "blocked"
    (blocked / "metrics").mkdir(parents=True)
    (blocked / "metrics" / "memory").write_text("a file where the directory should be")
    prof = IntegratedProfiler(cfg_of(blocked), role="actor", rank=0, world_size=1)
    (exc, _), caught = train_until_oom(prof, alloc2, oom_at=1)
    assert caught is exc and runtime_warnings("device_oom")


def test_other_errors_leave_no_record_and_a_host_oom_its_own(tmp_path, clean_state, monkeypatch):
    prof = IntegratedProfiler(cfg_of(tmp_path), role="reference", rank=1, world_size=2)
    prof.start()
    with pytest.raises(ValueError):
        with prof.stage("reference_compute_log_prob"):
            raise ValueError("not a memory problem")
    assert records(tmp_path) == []
    with pytest.raises(MemoryError):
        with prof.stage("reference_compute_log_prob"):
            raise MemoryError()
    prof.stop()
    (rec,) = records(tmp_path)
    assert (rec["kind"], rec["stage"], rec["rank"], rec["device"]) == (HOST_OOM, "reference_compute_log_prob", 1, None)


def test_which_errors_are_out_of_memory_and_what_they_tried_to_allocate():
    assert oom_kind(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")) == DEVICE_OOM
    # torch_npu before it raised c10::OutOfMemoryError: a RuntimeError with the allocator's message
    old_npu = RuntimeError("NPU out of memory. Tried to allocate 20.00 MiB (NPU 0; 60.97 GiB total capacity)")
    assert oom_kind(old_npu) == DEVICE_OOM and tried_bytes(str(old_npu)) == 20 * MIB
    cpu = RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
                       "you tried to allocate 123456 bytes. Error code 12 (Cannot allocate memory)")
    assert oom_kind(cpu) == HOST_OOM and tried_bytes(str(cpu)) == 123456
    assert oom_kind(RuntimeError("shape mismatch")) is None and oom_kind(KeyError("x")) is None and oom_kind(None) is None
    assert tried_bytes("CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has") == int(1.5 * GIB)
    assert tried_bytes("Tried to allocate 512 bytes") == 512 and tried_bytes("no size here") is None


def test_the_example_s_error_is_a_real_out_of_memory_error_with_what_it_asked():
    from examples.common.workers import out_of_memory

    err = out_of_memory(torch.zeros(4, 16, dtype=torch.long), 3)
    assert type(err) is torch.OutOfMemoryError and oom_kind(err) == DEVICE_OOM and tried_bytes(str(err)) > 0
