"""profile_with_memory: a memory snapshot beside the capture (PyTorch's format, opens in
pytorch.org/memory_viz), and the analysis' peak and top allocation sites."""
from __future__ import annotations

import inspect
import pickle

import torch

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.backends.memory_snapshot import ALLOCATOR, MemorySnapshot
from profiler_testutil import capture_dirs, meta_of, train


def _cfg(tmp_path, **kw):
    return load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path), "backend": "torch",
                                       "profile_with_memory": True, "profile_step_start": 2, "profile_step_end": 3, **kw}})


def test_cpu_capture_writes_a_snapshot_and_the_analysis_finds_the_peak(tmp_path):
    train(IntegratedProfiler(_cfg(tmp_path, profile_level="level2"), role="actor", rank=0, world_size=1), 3)
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    snap_name = next(f for f in meta["trace_files"] if f.endswith(".memory_snapshot.pickle"))
    snap = pickle.loads((d / snap_name).read_bytes())
    # independent: the running total of the allocations and frees, and its maximum
    trace = snap["device_traces"][0]
    sizes, total, best = {}, 0, 0
    for e in trace:
        if e["action"] == "alloc":
            sizes[e["addr"]] = e["size"]
            total += e["size"]
            best = max(best, total)
        elif e["action"] == "free_completed" and e["addr"] in sizes:
            total -= sizes.pop(e["addr"])
    assert best > 0
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    (cap,) = summary["captures"]
    (dev,) = cap["memory"]["devices"]
    assert code == 0 and dev["peak_in_window_bytes"] == best and dev["n_allocs"] == sum(e["action"] == "alloc" for e in trace)
    assert "profiler_testutil.py" in dev["top_sites"][0]["site"]   # the user's line, not torch's
    assert cap["memory"]["snapshot"].endswith(snap_name)


def test_cpu_without_stacks_says_why_there_is_no_snapshot(tmp_path):
    train(IntegratedProfiler(_cfg(tmp_path), role="actor", rank=0, world_size=1), 3)
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert not any(f.endswith(".pickle") for f in meta["trace_files"])
    assert any("no memory snapshot" in n for n in meta["options"]["notes"])


class FakeAllocatorHistory:
    """torch.cuda.memory's history API on a GPU (this machine has none): the real functions'
    signatures, checked against the installed torch."""

    def __init__(self):
        self.calls = []

    def _record_memory_history(self, enabled="all", context="all", stacks="all", max_entries=2**63 - 1, device=None,
                               clear_history=False, compile_context=False, global_record_annotations=False,
                               skip_actions=None):
        self.calls.append(("record", enabled, max_entries))

    def _snapshot(self, device=None, augment_with_fx_traces=False):
        self.calls.append(("snapshot",))
        return {"segments": [{"device": 0, "blocks": [{"size": 4096, "state": "active_allocated"}]}],
                "device_traces": [[{"action": "alloc", "addr": 1, "size": 1024, "frames": [{"filename": "train.py", "line": 7, "name": "step"}]},
                                   {"action": "free_requested", "addr": 1, "size": 1024},
                                   {"action": "free_completed", "addr": 1, "size": 1024},
                                   {"action": "alloc", "addr": 2, "size": 4096, "frames": []}]]}


def test_the_fake_has_the_real_signatures():
    real = torch.cuda.memory
    for name in ("_record_memory_history", "_snapshot"):
        assert inspect.signature(getattr(FakeAllocatorHistory, name)).parameters.keys() - {"self"} == \
            inspect.signature(getattr(real, name)).parameters.keys()


def test_cuda_allocator_history_around_the_window(tmp_path, monkeypatch):
    fake = FakeAllocatorHistory()
    monkeypatch.setattr(torch.cuda, "memory", fake)
    snap = MemorySnapshot(ALLOCATOR, "cuda")
    snap.start()
    snap.stop()
    assert fake.calls == [("record", "all", 200_000), ("snapshot",), ("record", None, 2**63 - 1)]
    path = snap.write(tmp_path / "x.memory_snapshot.pickle")
    from mindspeed_profiler.analysis.analyzers.memory import memory_summary
    (dev,) = memory_summary(pickle.loads(path.read_bytes()), top_n=5)
    # in the window: 1024 then freed, then 4096 live at the end = peak 4096; 4096 active at the end, net 4096: baseline 0
    assert (dev["peak_in_window_bytes"], dev["baseline_bytes"], dev["peak_bytes"]) == (4096, 0, 4096)


def test_a_snapshot_that_would_run_code_is_refused(tmp_path):
    train(IntegratedProfiler(_cfg(tmp_path, profile_level="level2"), role="actor", rank=0, world_size=1), 3)
    (cap_dir,) = capture_dirs(tmp_path)
    snap = next(cap_dir.glob("*.memory_snapshot.pickle"))

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))
    snap.write_bytes(pickle.dumps({"device_traces": [Evil()]}))
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    (cap,) = summary["captures"]
    assert code == 0 and "memory" not in cap and any("refusing builtins.print" in w for w in cap["warnings"])
