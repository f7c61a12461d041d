"""Issue 34: `integrated.export_after_run`, one torch.profiler session held across capture windows
(backends/held_session.py). Real torch.profiler captures on the CPU: each window's trace holds
exactly what ran inside it, torch's stop and write happen once when the run ends, and a process
killed before then leaves captures that say so."""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.console import held_export_line
from mindspeed_profiler.backends import held_session
from mindspeed_profiler.core import formats

pytestmark = pytest.mark.filterwarnings("ignore")
REPO = Path(__file__).resolve().parents[1]


def _profiler(tmp_path: Path, role: str = "actor", **integrated) -> IntegratedProfiler:
    # (no profile_with_memory: a capture recording memory is not held, issue 45; test_hostile4_held_session.py)
    cfg = load_config({"integrated": {"profile": True, "profile_level": "level1", "profile_record_shapes": True,
                                      "profile_save_path": str(tmp_path),
                                      "profile_step_start": 2, "profile_step_end": 4,
                                      "stage": ["actor_generate", "actor_update"], "export_after_run": True,
                                      **integrated}})
    return IntegratedProfiler(cfg, role=role, rank=0, world_size=1)


def _iteration(prof: IntegratedProfiler, i: int) -> None:
    """Each stage and iteration runs ops of its own shape, so a trace shows which it recorded."""
    a = torch.randn(3, 5 + i)
    with prof.stage("actor_generate"):
        torch.mm(a, a.T)
    with prof.stage("actor_update"):
        torch.add(a, 1.0)
    torch.mul(a, 2.0)   # outside every stage: in no capture


def _trace(meta: dict) -> dict:
    directory = Path(meta["directory"])
    [name] = meta["trace_files"]
    with gzip.open(directory / name, "rt") as fh:
        return json.load(fh)


def _ops(trace: dict) -> list[tuple[str, list]]:
    return [(e["name"], e.get("args", {}).get("Input Dims")) for e in trace["traceEvents"]
            if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::add", "aten::mul")]


def _meta_on_disk(meta: dict) -> dict:
    return json.loads((Path(meta["directory"]) / formats.META_FILE).read_text())


def test_each_window_holds_what_ran_inside_it_and_the_session_is_written_once_at_stop(tmp_path):
    prof = _profiler(tmp_path)
    prof.start()
    for i in range(1, 6):
        _iteration(prof, i)
        prof.step()
    # the run goes on: iterations 2 and 3 were captured, nothing written yet
    assert held_session.current() is not None
    assert [_meta_on_disk(m)["status"] for m in prof.captures] == ["held"] * 4
    assert all(not _meta_on_disk(m)["trace_files"] for m in prof.captures)
    prof.stop()
    assert held_session.current() is None
    metas = [_meta_on_disk(m) for m in prof.captures]
    assert [m["status"] for m in metas] == ["ok"] * 4
    by_window = {(m["stage"], m["steps"][0]): _trace({**m, "directory": c["directory"]})
                 for m, c in zip(metas, prof.captures)}
    for (stage, step), trace in by_window.items():
        op = "aten::mm" if stage == "actor_generate" else "aten::add"
        # exactly the one op of that stage in that iteration: nothing of the other windows, of the
        # iterations between or after, nor the mul outside the stages
        assert _ops(trace) == [(op, _ops(trace)[0][1])], (stage, step, _ops(trace))
        dims = _ops(trace)[0][1][0]
        assert dims == [3, 5 + step]
        steps = {e["name"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")}
        assert steps == {f"ProfilerStep#{step}"}
        assert not [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith(held_session.WINDOW_PREFIX)]
        windows = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation" and e["name"] == stage]
        assert len(windows) == 1
    for m in metas:
        assert {"toggle", "session_stop", "session_write", "session_cut", "compress"} <= set(m["export_phases"])
        assert "stop" not in m["export_phases"] and "write" not in m["export_phases"]   # nothing in the step
    assert not list(tmp_path.rglob("held_session.*.json")), "the session's whole trace is removed once cut"
    # the analysis reads the cut captures as any others
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False)
    assert code == 0 and [c["status"] for c in summary["captures"]] == ["ok"] * 4, summary["captures"]
    # the terminal's highlights say what moved to the run's end (one session: counted once)
    line = held_export_line(summary["captures"])
    phases = metas[0]["export_phases"]
    total = phases["session_stop"] + phases["session_write"] + phases["session_cut"]
    assert line.startswith(f"profiler export at the run's end (export_after_run): {total:.2f} s for 4 captures")
    assert held_export_line([{"meta": {"export_phases": {"stop": 1.0, "write": 0.5}}}]) is None


def test_the_flush_at_stop_is_a_profiler_export_span_on_the_timeline(tmp_path):
    """With the tracer on, the held session's stop and write at `stop()` are a profiler_export span
    (args held_session, why) after the last iteration, as a window's own export is one."""
    from mindspeed_profiler import tracing
    from mindspeed_profiler.analysis.timeline import merge

    cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path / "prof"),
                                      "profile_step_start": 2, "profile_step_end": 3,
                                      "stage": ["actor_update"], "export_after_run": True},
                       "tracer": {"enable": True, "output_dir": str(tmp_path / "timeline")}})
    tracing.init_tracer(cfg, role="actor", rank=0)
    try:
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        prof.start()
        for i in range(1, 5):
            _iteration(prof, i)
            prof.step()
        prof.stop()
    finally:
        tracing.shutdown_tracer()
    events = [e for e in merge.build_timeline(str(tmp_path / "timeline"))["traceEvents"] if e.get("ph") == "X"]
    (flush,) = [e for e in events if e["name"] == formats.SPAN_PROFILER_EXPORT and e["args"].get("held_session")]
    assert flush["cat"] == formats.CAT_PROFILER and flush["args"]["why"] == "the profiler stopped"
    last = max(e["ts"] + e["dur"] for e in events if e.get("cat") == "iteration")
    assert flush["ts"] >= last - 1 and flush["dur"] > 0
    assert [_meta_on_disk(m)["status"] for m in prof.captures] == ["ok"]   # (steps 2-3: one capture)


def test_cut_windows_keeps_device_events_until_the_next_window_and_host_events_inside_it():
    trace = {"schemaVersion": 1, "traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "host"}},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": 0, "dur": 1000},
        {"ph": "X", "cat": "user_annotation", "name": held_session.WINDOW_PREFIX + "1:a", "ts": 10, "dur": 40},
        {"ph": "X", "cat": "cpu_op", "name": "in_a", "ts": 20, "dur": 5},
        {"ph": "X", "cat": "kernel", "name": "k_a_late", "ts": 60, "dur": 5},      # launched in a, ran after
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 70, "s": "t"},   # between windows
        {"ph": "X", "cat": "user_annotation", "name": held_session.WINDOW_PREFIX + "2:b", "ts": 100, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "in_b", "ts": 110, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "after_b", "ts": 400, "dur": 5},
    ]}
    parts = held_session.cut_windows(trace)
    assert set(parts) == {"1:a", "2:b"}
    names = {w: [e["name"] for e in p["traceEvents"]] for w, p in parts.items()}
    assert names["1:a"] == ["process_name", "PyTorch Profiler (0)", "in_a", "k_a_late"]
    assert names["2:b"] == ["process_name", "PyTorch Profiler (0)", "in_b"]
    clipped = parts["2:b"]["traceEvents"][1]
    assert (clipped["ts"], clipped["dur"]) == (100, 50)
    assert parts["1:a"]["schemaVersion"] == 1
    assert held_session.cut_windows({"traceEvents": []}) == {}


def test_a_capture_of_other_options_flushes_the_held_session_first(tmp_path, caplog):
    actor = _profiler(tmp_path / "a", profile_step_start=1, profile_step_end=2)
    ref = _profiler(tmp_path / "r", role="ref", profile_level="level0", profile_record_shapes=False,
                    profile_step_start=3, profile_step_end=4, stage="all")
    actor.start()
    ref.start()
    for i in range(1, 5):
        _iteration(actor, i)
        actor.step()
        ref.step()
    # the ref capture (level0) could not join the actor's held session (level1 + shapes)
    assert "stopped and written now" in caplog.text and "other options" in caplog.text
    ref.stop()
    actor.stop()
    for m in actor.captures:
        assert _meta_on_disk(m)["status"] == "ok"
        assert _ops(_trace(_meta_on_disk(m) | {"directory": m["directory"]}))


def test_the_memory_budget_flushes_a_held_session_that_grew_past_it(tmp_path, caplog):
    prof = _profiler(tmp_path, capture_memory_budget_mb=16, profile_step_start=1, profile_step_end=4)
    prof.start()
    keep = []
    for i in range(1, 5):
        _iteration(prof, i)
        keep.append(torch.ones(64 * 2**20 // 4))   # 64 MB more resident each iteration, touched
        prof.step()
    assert "over capture_memory_budget_mb=16" in caplog.text
    prof.stop()
    assert all(_meta_on_disk(m)["status"] == "ok" for m in prof.captures)


def _child(tmp_path: Path, end: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        import os, signal, sys, torch
        sys.path.insert(0, {str(REPO)!r})
        from mindspeed_profiler import IntegratedProfiler, load_config
        cfg = load_config({{"integrated": {{"profile": True, "profile_level": "level1", "profile_save_path": {str(tmp_path)!r},
                                            "profile_step_start": 2, "profile_step_end": 3, "export_after_run": True}}}})
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        prof.start()
        x = torch.randn(8, 8)
        for _ in range(4):
            with prof.stage("actor_update"):
                (x @ x).sum()
            prof.step()
        os.kill(os.getpid(), signal.{end})
        import time; time.sleep(30)
    """)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})


def _capture_meta(tmp_path: Path) -> tuple[Path, dict]:
    [meta_path] = list(tmp_path.rglob(formats.META_FILE))
    return meta_path.parent, json.loads(meta_path.read_text())


def test_sigterm_writes_the_held_session(tmp_path):
    out = _child(tmp_path, "SIGTERM")
    assert out.returncode != 0   # ended by the signal, after the profiler's handler wrote the captures
    directory, meta = _capture_meta(tmp_path)
    assert meta["status"] == "ok", (meta, out.stderr[-2000:])
    with gzip.open(directory / meta["trace_files"][0], "rt") as fh:
        assert json.load(fh)["traceEvents"]


def test_a_process_killed_before_the_end_of_its_run_leaves_held_captures_the_analysis_reports(tmp_path):
    out = _child(tmp_path, "SIGKILL")
    assert out.returncode == -signal.SIGKILL
    directory, meta = _capture_meta(tmp_path)
    assert meta["status"] == "held" and meta["trace_files"] == []
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False)
    [cap] = summary["captures"]
    assert code != 0 and cap["status"] == "failed", cap
    assert "recorded but never written" in cap["error"] and "export_after_run" in cap["error"]


def test_a_held_window_records_the_allocator_history_as_the_default_does(tmp_path, monkeypatch):
    """The wiring, on the CPU: the CUDA allocator's history (memory_snapshot.ALLOCATOR) is started at
    each held window's start and taken at its end, as outside a held session (on the H200 it was not
    started in a held session once). torch.cuda's allocator cannot run here, so MemorySnapshot's
    start / stop are observed, not replaced: they still run (and note that CUDA is absent)."""
    from mindspeed_profiler.backends import memory_snapshot
    from mindspeed_profiler.backends.base import CaptureSpec
    from mindspeed_profiler.backends.torch import TorchCapture, profile_options

    calls = []
    for name in ("start", "stop"):
        real = getattr(memory_snapshot.MemorySnapshot, name)
        monkeypatch.setattr(memory_snapshot.MemorySnapshot, name,
                            lambda self, *a, _n=name, _r=real: (calls.append(_n), _r(self, *a))[1])
    cfg = load_config({"integrated": {"profile": True, "profile_level": "level1", "profile_with_memory": True,
                                      "export_after_run": True}}).integrated
    for held in (True, False):
        opts = {**profile_options(cfg, cuda=False), "memory_snapshot": memory_snapshot.ALLOCATOR, "export_after_run": held}
        spec = CaptureSpec(save_dir=str(tmp_path / str(held)), worker_name="actor_rank0_step1-1_h", trace_basename="actor_rank0",
                           first=1, last=1, warmup=0, cfg=cfg)
        cap = TorchCapture(spec, opts)
        cap.start()
        torch.mm(torch.randn(2, 2), torch.randn(2, 2))
        cap.stop()
        assert calls == ["start", "stop"], (held, calls)
        calls.clear()
    held_session.current().flush(lambda name, run: run())
    held_session.set_current(None)


def test_a_session_trace_that_cannot_be_cut_is_kept_whole_and_named(tmp_path):
    """Real torch session, one window; its whole trace is damaged before the writer cuts it (the
    test's `submit` does it): the window fails with a note naming where the whole trace was kept."""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU])
    prof.prepare_trace()
    held = held_session.HeldSession(("k",), prof, [ProfilerActivity.CPU])
    window = held.open_window("w")
    torch.mm(torch.randn(2, 2), torch.randn(2, 2))
    held.close_window()
    done = []
    raw = tmp_path / "actor_rank0.1.pt.trace.json"
    held.hold(held_session.HeldWindow(window, raw, lambda files, note, phases: done.append((files, note)), lambda job: None))
    whole = raw.with_name(f"held_session.{os.getpid()}.json")

    def submit(name, run):
        whole.write_bytes(whole.read_bytes()[:-10])   # cut off, as a full disk would leave it
        run()
    held.flush(submit)
    [(files, note)] = done
    assert files == [] and "could not be cut" in note and str(whole) in note
    assert whole.is_file() and not raw.exists()
    with pytest.raises(Exception):
        held_session.cut_session(b'{"traceEvents": [{"ph": "X", "ts": NaN}]}')
