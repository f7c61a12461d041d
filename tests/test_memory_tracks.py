"""The per-stage memory on the merged timeline (issue 47): a counter under each worker's process, one
point per stage call at the call's start, with the call's peaks as the stage-call lines say them, in
timeline.json and in timeline.pftrace; a worker without spans is a warning, not a failure."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import tracer_cfg
from memory_testutil import touch, traced_profiler
from mindspeed_profiler import load_config
from mindspeed_profiler.analysis.timeline import memory_tracks
from mindspeed_profiler.analysis.timeline.merge import merge_timeline_dir, read_timeline_file

MIB = 2**20


@pytest.fixture
def merged(tmp_path, clean_state):
    cfg = load_config({**tracer_cfg(tmp_path), "metrics": {"enable": True, "host_memory_watermark": None}})
    with traced_profiler(cfg) as prof:
        for mib in (48, 8, 96):
            with prof.stage("actor_generate"):
                held = touch(mib * MIB)
                del held
            with prof.stage("actor_update"):
                pass
            prof.step()
    result = merge_timeline_dir(str(tmp_path / "timeline"))
    return tmp_path, result


def test_the_counter_is_each_stage_call_s_peaks_at_its_start(merged):
    root, result = merged
    trace = read_timeline_file(str(result.path))
    lines = [json.loads(x) for x in (root / "metrics" / "memory" / "actor_rank0.stages.jsonl").read_text().splitlines()]
    calls = [x for x in lines if x["type"] == "stage"]
    points = memory_tracks.counter_values(trace, "actor", 0)
    assert [a["host resident"] for _, a in points] == [c["host_peak"] / 2**30 for c in calls]
    # each point at its call's start: the stage span of the same call starts within a millisecond of it
    spans = sorted(e["ts"] for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "stage")
    assert len(spans) == len(points) and all(abs(ts - s) < 1000 for (ts, _), s in zip(points, spans))
    generate = [a["host resident"] for (_, a), c in zip(points, calls) if c["stage"] == "actor_generate"]
    assert generate[2] - generate[1] > 80 / 1024 and generate[0] - generate[1] > 30 / 1024   # GiB: the per-call peaks


def test_the_pftrace_has_the_counter_track(merged):
    pytest.importorskip("perfetto")
    from pftrace_decode import decode

    root, result = merged
    d = decode(result.pftrace)
    names = {name for _, name in d.counters.values()}
    assert f"{memory_tracks.TRACK} host resident" in names
    values = [v for _, name, _, v in d.counter_values if name == f"{memory_tracks.TRACK} host resident"]
    points = memory_tracks.counter_values(read_timeline_file(str(result.path)), "actor", 0)
    assert values == pytest.approx([a["host resident"] for _, a in points])


def test_a_worker_without_spans_is_a_warning(tmp_path):
    mem = tmp_path / "metrics" / "memory"
    mem.mkdir(parents=True)
    (mem / "critic_rank3.stages.jsonl").write_text(
        '{"type":"worker","role":"critic","rank":3}\n{"type":"stage","stage":"critic_update","start_ns":1,'
        '"end_ns":2,"host_peak":1048576}\nnot json\n')
    trace = {"traceEvents": [], "otherData": {"processes": [], "warnings": []}}
    assert memory_tracks.add_memory_tracks(trace, mem) == 0
    assert "worker critic:3 has no spans on the timeline" in trace["otherData"]["warnings"][0]
    assert memory_tracks.add_memory_tracks(trace, tmp_path / "absent") == 0
    assert memory_tracks.memory_dir_of(tmp_path / "timeline") == mem
