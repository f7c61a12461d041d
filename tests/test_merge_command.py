"""`mindspeed-profiler merge` and `tracing.merge_timeline` honour the run's `tracer.gzip`."""
from __future__ import annotations

import json

import pytest

from mindspeed_profiler import load_config
from mindspeed_profiler.cli import main
from mindspeed_profiler.runtime.manifest import write_run_manifest
from mindspeed_profiler.tracing import merge_timeline


def _segment(timeline):
    timeline.mkdir(parents=True)
    lines = [{"type": "header", "schema": 1, "host": "h", "pid": 1, "role": "actor", "rank": 0,
              "clock": {"wall_ns": 10**18, "mono_ns": 0}, "offset_ns": 0},
             ["X", "actor_update", "stage", 10, 1000, 1, None]]
    (timeline / "actor_rank0_h_1.seg.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.mark.parametrize("configured, flag, expected", [
    (True, [], "timeline.json.gz"), (False, [], "timeline.json"), (None, [], "timeline.json"),
    (True, ["--no-gzip"], "timeline.json"), (False, ["--gzip"], "timeline.json.gz")])
def test_merge_follows_the_runs_tracer_gzip(tmp_path, capsys, configured, flag, expected):
    _segment(tmp_path / "timeline")
    if configured is not None:
        write_run_manifest(load_config({"integrated": {"profile_save_path": str(tmp_path)}, "tracer": {"gzip": configured}}))
    assert main(["merge", str(tmp_path), "-q", *flag]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "timeline" / expected)
    assert sorted(p.name for p in (tmp_path / "timeline").glob("timeline.json*")) == [expected]


def test_merge_timeline_writes_what_the_config_says(tmp_path):
    out = tmp_path / "elsewhere"
    _segment(out)
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path)},
                       "tracer": {"enable": True, "output_dir": str(out), "gzip": True}})
    assert merge_timeline(cfg) == out / "timeline.json.gz"
    assert merge_timeline(load_config({"tracer": {"enable": False}})) is None
