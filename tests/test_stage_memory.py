"""Per-stage memory with the metrics tracker (issue 47): the host's resident peak per stage call
against the kernel's own VmHWM read independently, the device's peaks through the fakes of
torch.cuda / torch_npu.npu (tests/fake_device_memory.py: every call bound against the released
signatures), nested stages, offload / onload bytes, and what the tracker's row and the stage-call
lines say."""
from __future__ import annotations

import inspect
import json
import os
import resource
from pathlib import Path

import pytest

from fake_device_memory import GIB, MIB, FakeAllocator, install_cuda, install_npu, npu_snapshot
from fake_torch_npu import signature_of
from memory_testutil import touch
from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.config import ProfilerConfigError
from mindspeed_profiler.metrics import device_memory, stage_memory
from mindspeed_profiler.metrics.offload import offload, onload
from mindspeed_profiler.runtime.host_memory import HostPeak, status_field

PAGE = os.sysconf("SC_PAGE_SIZE")


def vmhwm() -> int:
    """VmHWM read here, without the library: the kernel's resident high-water mark, bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def cfg_of(tmp_path: Path, **metrics):
    return load_config({"integrated": {"profile_save_path": str(tmp_path)}, "metrics": {"enable": True, **metrics}})


def lines_of(tmp_path: Path, role: str = "actor", rank: int = 0) -> list[dict]:
    path = tmp_path / "metrics" / "memory" / f"{role}_rank{rank}.stages.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()]


# ------------------------------------------------------------------------------ the host side


def test_status_field_parses_the_kernel_s_lines():
    text = b"Name:\tpython\nVmPeak:\t  100 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1024 kB\n"
    assert status_field(text, b"VmHWM") == 2048 * 1024 and status_field(text, b"VmRSS") == 1024 * 1024
    assert status_field(text, b"Name") is None and status_field(text, b"VmSwap") is None
    assert status_field(b"VmHWM:\t 8 kB\n", b"VmHWM") == 8192


def test_host_peak_resets_and_equals_the_kernel_s_vmhwm():
    peak = HostPeak()
    assert peak.resettable, "this Linux lets a process reset its own VmHWM (clear_refs 5)"
    held = touch(96 * MIB)
    del held
    assert vmhwm() >= peak.rss_and_peak()[0] + 90 * MIB   # the peak stays after the memory went back
    peak.reset()
    after = vmhwm()
    assert after < peak.rss_and_peak()[0] + 16 * MIB       # ... and the reset brings it down to the resident size
    held = touch(40 * MIB)
    assert peak.peak_bytes() == vmhwm()                     # the library's reading is the kernel's, to the byte
    del held
    peak.close()


# ------------------------------------------------------------------------------ the fakes are the real API


def test_the_cuda_fake_takes_the_real_parameters_in_order():
    import torch

    for name in ("memory_stats_as_nested_dict", "reset_peak_memory_stats", "mem_get_info", "get_device_properties",
                 "memory_allocated", "max_memory_allocated"):
        real = list(inspect.signature(getattr(torch.cuda, name)).parameters)
        assert list(inspect.signature(getattr(FakeAllocator, name)).parameters)[1:] == real, name
    for name in ("_record_memory_history", "_snapshot"):
        real = list(inspect.signature(getattr(torch.cuda.memory, name)).parameters)
        assert list(inspect.signature(getattr(FakeAllocator, name)).parameters)[1:] == real, name


@pytest.mark.parametrize("version", ["2.14.0", "2.5.1"])
def test_the_npu_fake_is_bound_against_the_released_signatures(monkeypatch, version):
    snap = npu_snapshot(version)["functions"]
    for name in ("memory_stats_as_nested_dict", "reset_peak_memory_stats", "mem_get_info", "get_device_properties"):
        real = signature_of(snap[f"torch_npu.npu.{name}"])
        assert len(real.parameters) == len(inspect.signature(getattr(FakeAllocator, name)).parameters) - 1
    alloc = install_npu(monkeypatch, FakeAllocator(kind="npu"), version)
    import torch_npu

    torch_npu.npu.memory._record_memory_history(enabled="all", stacks="python", max_entries=10)
    assert alloc.calls[-1] == ("torch_npu.npu.memory._record_memory_history",
                               {"enabled": "all", "context": "all", "stacks": "python", "max_entries": 10, "device": None})
    with pytest.raises(TypeError):   # torch's clear_history is not torch_npu's: the real one fails as this does
        torch_npu.npu.memory._record_memory_history(enabled="all", clear_history=True)
    with pytest.raises(TypeError):
        torch_npu.npu.memory_stats_as_nested_dict(devce=0)


def test_a_wrong_keyword_fails_the_cuda_fake_as_it_fails_torch(monkeypatch):
    install_cuda(monkeypatch, FakeAllocator())
    import torch

    with pytest.raises(TypeError):
        torch.cuda.reset_peak_memory_stats(dev=0)
    assert torch.cuda.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["peak"] == 0


# ------------------------------------------------------------------------------ device peaks per stage


@pytest.mark.parametrize("kind", ["cuda", "npu"])
def test_device_peaks_per_stage_call_and_the_tracker_s_keys(tmp_path, clean_state, monkeypatch, kind):
    alloc = FakeAllocator(capacity=16 * GIB, kind=kind)
    (install_npu if kind == "npu" else install_cuda)(monkeypatch, alloc)
    prof = IntegratedProfiler(cfg_of(tmp_path), role="actor", rank=0, world_size=1)
    prof.start()
    base = alloc.alloc(1 * GIB)            # held across the stages (the model's weights)
    with prof.stage("actor_generate"):
        kv = alloc.alloc(3 * GIB)          # the engine's cache, freed at the stage's end
        alloc.free(kv)
    with prof.stage("actor_update"):
        act = alloc.alloc(512 * MIB)
        alloc.free(act)
    prof.step()
    row = prof.metrics()
    assert row["perf/max_memory_allocated_gb/actor_generate"] == 4.0
    assert row["perf/max_memory_allocated_gb/actor_update"] == 1.5    # the reset at the stage's entry: not 4
    assert row["perf/max_memory_reserved_gb/actor_generate"] == 4.0
    assert row["perf/max_memory_reserved_gb/actor_update"] == 4.0      # the cache keeps what it reserved
    assert row["perf/max_memory_allocated_gb"] == 4.0 and row["perf/memory_capacity_gb"] == 16.0
    assert "perf/max_host_memory_gb/actor_update" in row
    prof.stop()
    alloc.free(base)
    lines = lines_of(tmp_path)
    assert [x["type"] for x in lines[:2]] == ["worker", "device"] and lines[1]["kind"] == kind
    stages = [x for x in lines if x["type"] == "stage"]
    assert [(x["stage"], x["device_allocated_peak"]) for x in stages] == [("actor_generate", 4 * GIB), ("actor_update", 1.5 * GIB)]
    prefix = "torch_npu.npu" if kind == "npu" else "torch.cuda"
    names = {c[0] for c in alloc.calls}
    assert {f"{prefix}.reset_peak_memory_stats", f"{prefix}.memory_stats_as_nested_dict"} <= names


def test_a_nested_stage_keeps_the_outer_call_s_peak(tmp_path, clean_state, monkeypatch):
    alloc = install_cuda(monkeypatch, FakeAllocator())
    prof = IntegratedProfiler(cfg_of(tmp_path), role="actor", rank=0, world_size=1)
    prof.start()
    with prof.stage("actor_update"):
        big = alloc.alloc(2 * GIB)
        alloc.free(big)                   # the outer call's peak, before the inner stage resets the counters
        with prof.stage("actor_compute_log_prob"):
            small = alloc.alloc(GIB // 2)
            alloc.free(small)
    prof.step()
    row = prof.metrics()
    assert row["perf/max_memory_allocated_gb/actor_update"] == 2.0
    assert row["perf/max_memory_allocated_gb/actor_compute_log_prob"] == 0.5
    prof.stop()


def test_a_process_that_never_used_the_device_is_not_asked(tmp_path, clean_state, monkeypatch):
    alloc = install_cuda(monkeypatch, FakeAllocator(initialized=False))
    prof = IntegratedProfiler(cfg_of(tmp_path), role="actor", rank=0, world_size=1)
    prof.start()
    with prof.stage("actor_update"):
        pass
    prof.step()
    prof.stop()
    assert not any(k.startswith("perf/max_memory_allocated_gb") for k in prof.metrics())
    assert [c[0] for c in alloc.calls] == ["torch.cuda.is_available", "torch.cuda.is_initialized"] * len(
        [c for c in alloc.calls if c[0] == "torch.cuda.is_available"])


# ------------------------------------------------------------------------------ host peaks per stage


def test_host_peaks_per_stage_equal_vmhwm_read_at_each_stage_s_end(tmp_path, clean_state):
    """The tracker's host peak of each call against the kernel's VmHWM read by the test right after
    the call (the tracker's exit reads first: an observer added later is left earlier, so the test
    reads in a stage of its own around the profiler's; the two reads are microseconds apart)."""
    prof = IntegratedProfiler(cfg_of(tmp_path), role="actor", rank=0, world_size=1)
    seen = []
    prof.start()
    for it, mib in enumerate((64, 16, 128), start=1):
        with prof.stage("actor_generate"):
            held = touch(mib * MIB)
            del held
        seen.append(("actor_generate", it, vmhwm(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))
        with prof.stage("actor_update"):
            pass
        seen.append(("actor_update", it, vmhwm(), None))
        prof.step()
    prof.stop()
    stages = [x for x in lines_of(tmp_path) if x["type"] == "stage"]
    assert [(x["stage"], x["iteration"]) for x in stages] == [(s, it) for s, it, _, _ in seen]
    for line, (_, _, hwm, _) in zip(stages, seen):
        assert abs(line["host_peak"] - hwm) <= 4 * PAGE    # the same counter, read a few microseconds apart
    generate = [x["host_peak"] for x in stages if x["stage"] == "actor_generate"]
    update = [x["host_peak"] for x in stages if x["stage"] == "actor_update"]
    assert generate[2] - generate[1] >= 100 * MIB and generate[0] - generate[1] >= 40 * MIB   # reset per call
    assert max(update) < min(generate)


# ------------------------------------------------------------------------------ offload / onload


def test_offload_and_onload_bytes_go_to_the_open_stage(tmp_path, clean_state, monkeypatch):
    alloc = install_cuda(monkeypatch, FakeAllocator())
    prof = IntegratedProfiler(cfg_of(tmp_path), role="actor", rank=0, world_size=1)
    prof.start()
    weights = alloc.alloc(GIB)
    with prof.stage("actor_generate"):
        with offload(what="optimizer") as move:      # measured: what the allocator freed
            alloc.free(weights)
        with onload(nbytes=256 * MIB, what="kv_cache"):
            pass
    prof.step()
    prof.stop()
    assert move.nbytes == GIB
    row = prof.metrics()
    assert row["perf/offload_gb/actor_generate"] == 1.0 and row["perf/onload_gb/actor_generate"] == 0.25
    (line,) = [x for x in lines_of(tmp_path) if x["type"] == "stage"]
    assert (line["offload_bytes"], line["onload_bytes"]) == (GIB, 256 * MIB)
    with pytest.raises(ValueError, match=r"nbytes=-3: expected a non-negative integer"):
        offload(nbytes=-3)
    with pytest.raises(ValueError, match=r"nbytes=True"):
        onload(nbytes=True)


# ------------------------------------------------------------------------------ config


@pytest.mark.parametrize("field,value,says", [
    ("host_memory_watermark", 1.5, "expected a number from 1e-06 to 1.0"),
    ("host_memory_watermark", "90%", "expected a finite number"),
    ("oom_snapshot_entries", 0, "oom_snapshot_entries"),
    ("oom_snapshot_stacks", "cpp", "allowed: python, all"),
    ("oom_snapshot", "yes", "oom_snapshot"),
])
def test_bad_memory_settings_fail_at_load_naming_the_field(field, value, says):
    with pytest.raises(ProfilerConfigError) as err:
        load_config({"metrics": {"enable": True, field: value}}, check_paths=False)
    msg = str(err.value)
    assert f"metrics.{field}" in msg and says in msg and str(value) in msg, msg


def test_device_module_lookup_never_imports_torch_npu(monkeypatch):
    monkeypatch.delitem(__import__("sys").modules, "torch_npu", raising=False)
    assert device_memory.find_device() is None     # a CPU torch: no device, and torch_npu stays unimported
    assert "torch_npu" not in __import__("sys").modules
    assert stage_memory.OPEN == []


def test_a_stage_call_s_line_text_is_its_line_as_json():
    meter = stage_memory.StageMemory()
    quoted: dict = {}
    for name in ("actor_update", 'odd "name"\\ é\n', "x"):
        call = meter.exit(meter.enter(name, 7), failed="OutOfMemoryError" if name == "x" else None)
        call.offload_bytes = 123
        assert json.loads(call.line_text(quoted)) == call.line()
    bare = stage_memory.StageCall("s", None)
    assert json.loads(bare.line_text(quoted)) == bare.line()   # no end, no iteration, no peaks
    meter.close()


def test_two_trackers_in_one_process_keep_each_other_s_peaks(tmp_path, clean_state, monkeypatch):
    """Colocated roles (an actor and a reference profiler in one process) share the allocator's and the
    kernel's counters: a reference stage inside an actor stage must not lose the actor's peak."""
    alloc = install_cuda(monkeypatch, FakeAllocator())
    actor = IntegratedProfiler(cfg_of(tmp_path), role="actor", rank=0, world_size=1)
    ref = IntegratedProfiler(cfg_of(tmp_path), role="reference", rank=0, world_size=1)
    actor.start()
    ref.start()
    with actor.stage("actor_update"):
        big = alloc.alloc(3 * GIB)
        alloc.free(big)
        with ref.stage("reference_compute_log_prob"):
            small = alloc.alloc(GIB)
            alloc.free(small)
    actor.step()
    ref.step()
    assert actor.metrics()["perf/max_memory_allocated_gb/actor_update"] == 3.0
    assert ref.metrics()["perf/max_memory_allocated_gb/reference_compute_log_prob"] == 1.0
    actor.stop()
    ref.stop()
