"""The training side under hostile or broken conditions (issue 11, runtime): each case reproduces
what was seen, and training is never affected."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import REPO_ROOT, tracer_cfg
from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.analysis.merge import build_timeline
from mindspeed_profiler.tracing import flush_tracer, init_tracer, shutdown_tracer, trace_span
from profiler_testutil import capture_dirs, meta_of, train


def test_an_unencodable_span_argument_never_drops_the_batch(clean_state, tmp_path):
    init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)
    for i in range(20):
        with trace_span("actor_update", cat="stage", args={"loss_per_rank": {0: 1.5, 1: 2.5}, "big": 2**70 + i,
                                                          "odd_key": {(1, 2): "x"}}):
            pass
    shutdown_tracer()
    spans = [e for e in build_timeline(str(tmp_path / "timeline"))["traceEvents"] if e.get("cat") == "stage"]
    assert len(spans) == 20
    assert spans[0]["args"]["loss_per_rank"] == {"0": 1.5, "1": 2.5} and spans[0]["args"]["big"] == str(2**70)


def test_a_300_character_role_still_captures(tmp_path):
    cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path), "backend": "torch",
                                      "profile_with_memory": True, "profile_level": "level2"}})
    role = "a" * 300
    train(IntegratedProfiler(cfg, role=role, rank=0, world_size=1), 2)
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["status"] == "ok" and len(meta["trace_files"]) == 2
    assert all(len(name.encode()) <= 255 for name in [d.name] + meta["trace_files"])
    assert all((d / f).is_file() for f in meta["trace_files"])


def test_timeline_directory_removed_mid_run_starts_a_new_segment(clean_state, tmp_path, runtime_warnings):
    import shutil

    init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)
    with trace_span("before", cat="stage"):
        pass
    flush_tracer()
    shutil.rmtree(tmp_path / "timeline")          # someone cleans the output directory mid-run
    for _ in range(3):
        with trace_span("after", cat="stage"):
            pass
        flush_tracer()
    shutdown_tracer()
    names = [e["name"] for e in build_timeline(str(tmp_path / "timeline"))["traceEvents"] if e.get("cat") == "stage"]
    assert names == ["after"] * 3
    assert len(runtime_warnings("was removed while the run was writing it")) == 1


def test_disk_full_during_export_leaves_no_partial_trace(tmp_path, monkeypatch):
    import torch

    real = torch.profiler.profile.export_chrome_trace

    def full_disk(self, path):
        with open(path, "wb") as fh:
            fh.write(b'{"traceEvents": [')           # what was written before the disk filled up
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", full_disk)
    cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path), "backend": "torch"}})
    losses = train(IntegratedProfiler(cfg, role="a", rank=0, world_size=1), 2)
    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", real)
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["status"] == "failed" and meta["errors"][0]["phase"] == "export" and "No space" in meta["errors"][0]["error"]
    assert sorted(p.name for p in d.iterdir()) == ["mindspeed_profiler_meta.json"]   # no half trace left
    assert len(losses) == 2


def test_outputs_get_the_usual_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path), "backend": "torch"}})
        train(IntegratedProfiler(cfg, role="a", rank=0, world_size=1), 2)
    finally:
        os.umask(old)
    (d,) = capture_dirs(tmp_path)
    trace = next(d.glob("*.pt.trace.json.gz"))
    for f in (tmp_path / "run.json", d / "mindspeed_profiler_meta.json", trace):
        assert f.stat().st_mode & 0o777 == 0o644, f


CHILD = textwrap.dedent("""
    import sys, time, torch
    sys.path.insert(0, {tests!r})
    from mindspeed_profiler import IntegratedProfiler, load_config
    from mindspeed_profiler.tracing import init_tracer
    cfg = load_config({{"integrated": {{"profile": True, "profile_save_path": {save!r}, "backend": "torch",
                                        "profile_step_start": 1, "profile_step_end": 100}},
                        "tracer": {{"enable": True, "flush_interval_s": 60.0}}}})
    init_tracer(cfg, role="actor", rank=0)
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    model = torch.nn.Linear(8, 8)
    for it in range(1, 10**6):
        with prof.stage("actor_update"):
            model(torch.randn(4, 8)).sum().backward()
        prof.step()
        if it == 3:
            print("ready", flush=True)
        time.sleep(0.01)
""")


def test_sigterm_exports_the_open_capture_and_closes_the_segment(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(tests=str(REPO_ROOT / "tests"), save=str(tmp_path))],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGTERM            # it still ends by SIGTERM, as it would have
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["status"] == "ok" and meta["trace_files"] and any("stopped early" in n for n in meta["notes"])
    (seg,) = (tmp_path / "timeline").glob("*.seg.jsonl")
    records = [json.loads(line) for line in seg.read_text().splitlines()]
    assert any(isinstance(r, dict) and r.get("type") == "close" for r in records)
    assert sum(isinstance(r, list) and r[2] == "stage" for r in records) >= 3
