"""Lightweight mode where the vendor has none (torch): no torch.profiler session at all; the
window's mstx ranges, stage ranges and ProfilerStep ranges come from our own recorder, written as
a Chrome trace the analysis reads like any capture."""
from __future__ import annotations

import gzip
import json

import torch

from mindspeed_profiler import IntegratedProfiler, load_config, mstx_range
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from profiler_testutil import capture_dirs, meta_of


def test_level_none_on_torch_opens_no_vendor_session(tmp_path, monkeypatch, clean_state):
    def no_session(*a, **k):
        raise AssertionError("a torch.profiler session was opened")
    monkeypatch.setattr(torch.profiler, "profile", no_session)
    cfg = load_config({"integrated": {"profile": True, "mstx": True, "profile_level": "level_none",
                                      "profile_save_path": str(tmp_path), "backend": "torch",
                                      "profile_step_start": 2, "profile_step_end": 4}})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    model = torch.nn.Linear(8, 8)
    prof.start()
    for _ in range(5):
        with prof.stage("actor_update"):
            with mstx_range("forward"):
                model(torch.randn(4, 8)).sum().backward()
        prof.step()
    prof.stop()
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["backend"] == "markers" and meta["status"] == "ok" and meta["steps"] == [2, 3]
    trace = json.load(gzip.open(d / meta["trace_files"][0]))
    names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
    assert sorted(n for n in names if n.startswith("ProfilerStep")) == ["ProfilerStep#2", "ProfilerStep#3"]
    assert names.count("actor_update") == 2 and names.count("forward") == 2   # the window only
    steps = {e["name"]: e for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep")}
    inner = [e for e in trace["traceEvents"] if e["name"] == "forward"]
    assert all(steps["ProfilerStep#2"]["ts"] <= e["ts"] for e in inner)       # absolute us, ordered
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    (cap,) = summary["captures"]
    assert code == 0 and [s["step"] for s in cap["steps"]] == [2, 3]
    assert {a["name"]: a["count"] for a in cap["annotations"]} == {"actor_update": 2, "forward": 2}
