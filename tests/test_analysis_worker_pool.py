"""The analysis worker pool: a worker process that dies (as under the OOM killer) fails only the
capture it was analysing, is reported rather than hanging the run, and the others are analysed."""
from __future__ import annotations

import os
import signal
import time

from mindspeed_profiler.analysis.pipeline import collect
from mindspeed_profiler.analysis.pipeline.discover import Capture


def die_on_victim(root, cap, top_n, want_events):
    """Worker function for the test: SIGKILL itself (as the OOM killer would) on one capture."""
    if "victim" in cap["path"]:
        os.kill(os.getpid(), signal.SIGKILL)
    from mindspeed_profiler.analysis.pipeline.capture import analyse_capture
    return analyse_capture(root, cap, top_n, want_events)


def test_killed_worker_fails_only_its_capture(tmp_path, monkeypatch, shared_data):
    src = shared_data / "kineto" / "gpu_rank0.json.gz"
    names = ["a_rank0.json.gz", "b_rank0.json.gz", "victim.json.gz", "c_rank0.json.gz", "d_rank0.json.gz"]
    for n in names:
        (tmp_path / n).write_bytes(src.read_bytes())
    caps = [Capture(path=n, kind="kineto", files=[n]) for n in names]
    monkeypatch.setattr(collect, "POOL_MIN_BYTES", 0)
    t = time.monotonic()
    res = collect.run_captures(tmp_path, caps, jobs=2, top_n=5, want_events=False, progress=False,
                                fn=die_on_victim)
    assert time.monotonic() - t < 120   # reported, not hung
    by = {r["capture"]["path"]: r["capture"] for r in res}
    assert by["victim.json.gz"]["status"] == "failed"
    assert "SIGKILL" in by["victim.json.gz"]["error"]
    assert all(by[n]["status"] == "ok" for n in names if n != "victim.json.gz"), by
