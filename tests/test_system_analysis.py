"""The offline side of process-level capture: py-spy traces read, summarised per stage and placed on
the merged timeline under the worker's own process on the driver's clock, cut to the listed steps;
the `system` input kind (py-spy parsed, nsys / msprof summarised with their tools when present,
otherwise "unparsed: not parsed: needs <tool>")."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mindspeed_profiler.core import formats
from mindspeed_profiler.analysis.analyzers.pyspy_frames import clip, frame_times, stage_frame_times
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.pipeline.discover import discover
from mindspeed_profiler.analysis.timeline.merge import write_timeline
from mindspeed_profiler.analysis.parsing.pyspy import read_pyspy
from mindspeed_profiler.analysis.timeline.system_tracks import add_system_tracks, system_dir_of
from test_system_launch import write_fake_tools

MS = 1_000_000                 # ns
ORIGIN = 10**18                # the timeline's ts 0 (driver clock, ns)
OFFSET = 2 * MS                # the worker's clock is 2 ms behind the driver's
EXEC = ORIGIN + 500 * MS       # the launcher's exec, on the worker's clock
TRUE_T0 = EXEC + 7 * MS        # py-spy's ts 0: it started 7 ms after the exec
HOST, PID = "node-a", 4242
MAIN, OTHER = 1, 2


def pyspy_events(samples, tid=MAIN, pid=PID):
    """B/E events as py-spy writes them from [(t_ms, stack)] samples (stack: outermost first), with
    consecutive equal frames merged; the last sample's stack ends at `t_ms` of a final (t, ()) entry."""
    evs, open_ = [], []
    for t, stack in samples:
        keep = 0
        while keep < min(len(open_), len(stack)) and open_[keep] == stack[keep]:
            keep += 1
        for name in reversed(open_[keep:]):
            evs.append({"ph": "E", "name": name, "cat": "py-spy", "pid": pid, "tid": tid, "ts": t * 1000,
                        "args": {"filename": f"/src/{name}.py", "line": 1}})
        for name in stack[keep:]:
            evs.append({"ph": "B", "name": name, "cat": "py-spy", "pid": pid, "tid": tid, "ts": t * 1000,
                        "args": {"filename": f"/src/{name}.py", "line": 1}})
        open_ = list(stack)
    return evs


MARK = formats.CLOCK_MARK_FUNCTION
# the worker on py-spy's clock (ms): clock mark 95..148 (samples every 10 ms see it 100..150),
# then iteration 1 = [200, 400) with generate 210..300 and update 300..390, iteration 2 = [400, 600)
SAMPLES = [(0, ("main", "setup")), (100, ("main", MARK)), (150, ("main", "setup")), (200, ("main", "loop")),
           (210, ("main", "generate", "sample")), (300, ("main", "update", "all_reduce")), (390, ("main", "loop")),
           (410, ("main", "generate", "sample")), (500, ("main", "update", "backward")), (590, ("main", "loop")),
           (700, ())]


def write_system_dir(save: Path, run_id="run-1", steps=None, backend="py_spy", status="complete", report=True,
                     group="actor", rank=0):
    d = save / formats.SYSTEM_DIR
    d.mkdir(parents=True, exist_ok=True)
    base = formats.system_base_name(group, rank)
    name = formats.system_report_name(backend, group, rank)
    meta = {k: None for k in formats.SYSTEM_META_KEYS}
    meta.update(schema=1, run_id=run_id, backend=backend, tool={"py_spy": "py-spy", "nsight": "nsys", "msprof": "msprof",
                                                                 "rocprof_sys": "rocprof-sys-python"}[backend],
                group=group, rank=rank, host=HOST, steps=steps, report=name, status=status, launched_wall_ns=EXEC)
    (d / (base + formats.SYSTEM_META_SUFFIX)).write_text(json.dumps(meta))
    recs = [{"type": "worker", "pid": PID, "host": HOST, "run_id": run_id},
            {"type": "clock", "function": MARK, "begin_wall_ns": TRUE_T0 + 95 * MS, "end_wall_ns": TRUE_T0 + 148 * MS,
             "rate_hz": 100.0},
            {"type": "iteration", "iteration": 1, "begin_wall_ns": TRUE_T0 + 200 * MS, "end_wall_ns": TRUE_T0 + 400 * MS,
             "listed": bool(steps and 1 in steps)},
            {"type": "iteration", "iteration": 2, "begin_wall_ns": TRUE_T0 + 400 * MS, "end_wall_ns": TRUE_T0 + 600 * MS,
             "listed": bool(steps and 2 in steps)}]
    (d / (base + formats.SYSTEM_ITERATIONS_SUFFIX)).write_text("".join(json.dumps(r) + "\n" for r in recs))
    if report and backend == "py_spy":
        idle_thread = [(0, ("Thread.run", "wait")), (700, ())]
        (d / name).write_text(json.dumps(pyspy_events(SAMPLES) + pyspy_events(idle_thread, tid=OTHER)))
    elif report and backend in formats.SYSTEM_REPORT_DIRS:
        (d / name / "PROF_1").mkdir(parents=True)
        (d / name / "PROF_1" / "msprof_1.json").write_text("[]")   # a Chrome trace the kineto kind must not take
    elif report:
        (d / name).write_bytes(b"nsys report")
    return d


def timeline(run_id="run-1", with_worker=True):
    """A merged timeline: the driver and the worker (pid 2) with its stage spans (true times)."""
    def at(ms):  # true wall time of py-spy ms -> timeline us
        return (TRUE_T0 + ms * MS + OFFSET - ORIGIN) / 1000

    procs = [{"pid": 1, "name": "driver", "role": "driver", "rank": 0, "host": HOST, "os_pid": 1, "offset_ns": 0}]
    evs = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "driver"}}]
    if with_worker:
        procs.append({"pid": 2, "name": "actor:0", "role": "actor", "rank": 0, "host": HOST, "os_pid": PID, "offset_ns": OFFSET})
        evs.append({"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "actor:0"}})
        for it, (g0, g1, u0, u1) in ((1, (210, 300, 300, 390)), (2, (410, 500, 500, 590))):
            evs.append({"ph": "X", "name": "actor_generate", "cat": "stage", "ts": at(g0), "dur": at(g1) - at(g0), "pid": 2,
                        "tid": 1, "args": {"stage": "actor_generate", "iteration": it}})
            evs.append({"ph": "X", "name": "actor_update", "cat": "stage", "ts": at(u0), "dur": at(u1) - at(u0), "pid": 2,
                        "tid": 1, "args": {"stage": "actor_update", "iteration": it}})
    return {"traceEvents": evs, "otherData": {"time_origin_unix_ns": ORIGIN, "processes": procs, "warnings": [],
                                              formats.RUN_ID_KEY: run_id}}


# ------------------------------------------------------------------------------ parsing and frames

def test_read_pyspy_spans_and_segments(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(pyspy_events(SAMPLES) + [{"ph": "E", "name": "x", "pid": PID, "tid": 9, "ts": 5}]))
    spy = read_pyspy(p)
    assert spy.pids == {PID} and len(spy.threads) == 2
    names = {spy.frames[f][0] for f in range(len(spy.frames))}
    assert {"main", "generate", "sample", "update", "all_reduce", MARK} <= names
    total = sum(e - s for s, e, *_ in spy.segments)
    assert total == pytest.approx(700_000)   # every microsecond of the main thread, once
    assert spy.problems and "an end without a begin" in spy.problems[0]


def test_frame_times_self_total_and_stages(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(pyspy_events(SAMPLES)))
    spy = read_pyspy(p)
    ft = frame_times(spy, spy.segments)
    total = {r["function"]: r["ms"] for r in ft["top_total"]}
    self_ = {r["function"]: r["ms"] for r in ft["top_self"]}
    assert total["main"] == pytest.approx(700) and "main" not in self_
    assert total["generate"] == pytest.approx(180) and self_["sample"] == pytest.approx(180)
    assert total["update"] == pytest.approx(180) and self_["all_reduce"] == pytest.approx(90)
    stages = stage_frame_times(spy, spy.segments, [{"stage": "actor_update", "start_us": 300e3, "end_us": 390e3},
                                                   {"stage": "actor_update", "start_us": 500e3, "end_us": 590e3}])
    (row,) = stages
    assert row["spans"] == 2 and row["stage_ms"] == pytest.approx(180) and row["sampled_ms"] == pytest.approx(180)
    assert {r["function"] for r in row["top_self"]} == {"all_reduce", "backward"}
    cut = clip(spy.segments, [(400e3, 600e3)])
    assert sum(e - s for s, e, *_ in cut) == pytest.approx(200e3)


# ------------------------------------------------------------------------------ on the timeline

def frames_of(trace, name, pid=2):
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
                  if e.get("cat") == formats.CAT_PYSPY and e["name"] == name and e["pid"] == pid)


def true_us(ms):
    return (TRUE_T0 + ms * MS + OFFSET - ORIGIN) / 1000


def test_the_launcher_frames_are_left_out(tmp_path):
    """A wrapped worker's stacks start with runpy and our regroup wrapper (system/regroup.py): on
    every stack, they would fill the top of top_total and push the worker's functions out."""
    launch = ("_run_module_as_main", "_run_code", "regroup_main", "run_path")
    files = {"_run_module_as_main": "<frozen runpy>", "_run_code": "/usr/lib/python3.11/runpy.py",
             "regroup_main": "/site/mindspeed_profiler/system/regroup.py", "run_path": "<frozen runpy>"}
    evs = pyspy_events([(t, launch + stack if stack else ()) for t, stack in SAMPLES])
    for e in evs:
        if e["name"] in files:
            e["args"]["filename"] = files[e["name"]]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(evs))
    spy = read_pyspy(p)
    ft = frame_times(spy, spy.segments)
    total = {r["function"]: r["ms"] for r in ft["top_total"]}
    assert not set(launch) & set(total) and total["main"] == pytest.approx(700)
    assert total["update"] == pytest.approx(180) and ft["sampled_ms"] == pytest.approx(700)


def test_frames_land_under_the_worker_on_the_driver_clock(tmp_path):
    d = write_system_dir(tmp_path)
    trace = timeline()
    added = add_system_tracks(trace, d)
    assert added > 0
    info, = trace["otherData"]["system_tracks"]
    assert info["pid"] == 2 and info["on_worker_process"] and info["clock"] == "clock_mark"
    assert info["clock_uncertainty_us"] <= 6500
    # where py-spy saw `update` (300..390 and 500..590 ms of its clock), within half a sample period
    got = frames_of(trace, "update")
    for (a, b), (ta, tb) in zip(got, [(true_us(300), true_us(390)), (true_us(500), true_us(590))]):
        assert abs(a - ta) <= 5000 and abs(b - tb) <= 5000
    assert {e["tid"] for e in trace["traceEvents"] if e.get("cat") == formats.CAT_PYSPY} == {7_000_000, 7_000_001}
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name" and e["pid"] == 2}
    assert names == {"py-spy: thread 0 (main)", "py-spy: thread 1"}


def test_without_the_clock_mark_the_exec_time_anchors(tmp_path):
    d = write_system_dir(tmp_path)
    lines = [ln for ln in (d / "actor_rank0.iterations.jsonl").read_text().splitlines() if '"clock"' not in ln]
    (d / "actor_rank0.iterations.jsonl").write_text("\n".join(lines) + "\n")
    trace = timeline()
    add_system_tracks(trace, d)
    assert trace["otherData"]["system_tracks"][0]["clock"] == "exec"
    (a, _), _ = frames_of(trace, "update")
    assert a == pytest.approx(true_us(300) - 7000)   # py-spy started 7 ms after the exec: that much early


def test_steps_cut_the_frames_to_the_listed_iterations(tmp_path):
    d = write_system_dir(tmp_path, steps=[2])
    trace = timeline()
    add_system_tracks(trace, d)
    assert frames_of(trace, "generate") and all(a >= true_us(400) - 6000 for a, _ in frames_of(trace, "generate"))
    assert len(frames_of(trace, "generate")) == 1 and trace["otherData"]["system_tracks"][0]["cut_to_steps"] == [2]
    # an outer frame spanning both iterations keeps only iteration 2's piece
    (a, b), = frames_of(trace, "main")
    assert b - a == pytest.approx(200_000)


def test_other_runs_reports_are_left_out_and_a_missing_worker_gets_its_own_process(tmp_path):
    d = write_system_dir(tmp_path, run_id="run-0")
    trace = timeline(run_id="run-1")
    assert add_system_tracks(trace, d) == 0 and "system_tracks" not in trace["otherData"]
    trace = timeline(run_id="run-0", with_worker=False)
    assert add_system_tracks(trace, d) > 0
    assert any("is not on the timeline" in w for w in trace["otherData"]["warnings"])
    names = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"]
    assert "actor:0 (py-spy)" in names


def test_a_broken_report_is_a_warning_not_a_failed_merge(tmp_path):
    d = write_system_dir(tmp_path)
    (d / "actor_rank0.py-spy.json").write_text("{not json")
    trace = timeline()
    assert add_system_tracks(trace, d) == 0
    assert any("not placed" in w for w in trace["otherData"]["warnings"])


def test_write_timeline_adds_the_tracks(tmp_path):
    """merge.write_timeline: segments -> timeline.json, with the py-spy frames of the same run."""
    save = tmp_path / "prof"
    tl = save / formats.TIMELINE_DIR
    tl.mkdir(parents=True)
    header = {"type": "header", "schema": 1, "host": HOST, "pid": PID, "role": "actor", "rank": 0, "run_id": "run-1",
              "clock": {"wall_ns": TRUE_T0, "mono_ns": 0}, "offset_ns": OFFSET}
    lines = [header, ["X", "actor_update", "stage", 300 * MS, 90 * MS, 1, {"iteration": 1, "stage": "actor_update"}]]
    (tl / formats.segment_name("actor", 0, HOST, PID)).write_text("".join(json.dumps(x) + "\n" for x in lines))
    write_system_dir(save)
    assert system_dir_of(tl) == save / formats.SYSTEM_DIR
    out = json.loads(write_timeline(str(tl)).read_text())
    spy = [e for e in out["traceEvents"] if e.get("cat") == formats.CAT_PYSPY]
    stage = next(e for e in out["traceEvents"] if e.get("cat") == "stage")
    assert spy and {e["pid"] for e in spy} == {stage["pid"]}
    upd = min(e["ts"] for e in spy if e["name"] == "update")
    assert abs(upd - stage["ts"]) <= 5000   # same instant on both tracks, within half a sample period


# ------------------------------------------------------------------------------ the `system` input kind

def test_the_system_directory_is_one_capture_and_its_json_is_not_a_kineto_trace(tmp_path):
    write_system_dir(tmp_path)
    write_system_dir(tmp_path, backend="msprof", group="reference")
    caps = discover(tmp_path)
    assert [(c.kind, c.path) for c in caps] == [("system", "system")]
    assert sorted(Path(f).name for f in caps[0].files) == ["actor_rank0.system.json", "reference_rank0.system.json"]


def test_pyspy_summary_per_stage(tmp_path):
    write_system_dir(tmp_path)
    tl = tmp_path / formats.TIMELINE_DIR
    tl.mkdir()
    (tl / formats.TIMELINE_FILE).write_text(json.dumps(timeline()))
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False, write=False)
    cap = next(c for c in summary["captures"] if c["kind"] == "system")
    assert cap["status"] == "ok" and code == 0
    w, = cap["system"]["workers"]
    assert (w["group"], w["rank"], w["parsed"], w["pid"]) == ("actor", 0, "ok", PID)
    p = w["py_spy"]
    assert p["main_thread"] == 0 and p["timeline_process"] == "actor:0" and p["clock"] == "clock_mark"
    assert p["sampled_ms"] == pytest.approx(700) and p["samples_est"] == 70
    stages = {s["stage"]: s for s in p["stages"]}
    assert set(stages) == {"actor_generate", "actor_update"}
    upd = {r["function"]: r["ms"] for r in stages["actor_update"]["top_self"]}
    assert upd["all_reduce"] == pytest.approx(90, abs=10) and upd["backward"] == pytest.approx(90, abs=10)


def test_pyspy_summary_cut_to_steps(tmp_path):
    write_system_dir(tmp_path, steps=[1])
    summary, _ = analyse_directory(tmp_path, jobs=1, progress=False, html=False, write=False)
    p = summary["captures"][0]["system"]["workers"][0]["py_spy"]
    assert p["cut_to_steps"] == [1] and p["sampled_ms"] == pytest.approx(200, abs=6)
    assert "backward" not in {r["function"] for r in p["top_self"]}   # iteration 2's


@pytest.mark.parametrize("backend,tool", [("nsight", "nsys"), ("msprof", "msprof-analyze")])
def test_vendor_reports_unparsed_without_their_tool(tmp_path, monkeypatch, backend, tool):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    write_system_dir(tmp_path, backend=backend)
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False, write=False)
    cap, = summary["captures"]
    assert cap["status"] == "unparsed" and cap["error"] == f"not parsed: needs {tool}"
    assert summary["counts"]["failed"] == 0 and summary["counts"]["unparsed"] == 1


def test_vendor_reports_summarised_with_their_tool(tmp_path, monkeypatch):
    bin_dir = write_fake_tools(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    save = tmp_path / "run"
    write_system_dir(save, backend="nsight")
    write_system_dir(save, backend="msprof", group="reference")
    write_system_dir(save, backend="rocprof_sys", group="rollout")
    summary, code = analyse_directory(save, jobs=1, progress=False, html=False, write=False)
    cap, = summary["captures"]
    assert cap["status"] == "ok"
    rows = {w["backend"]: w for w in cap["system"]["workers"]}
    kern = rows["nsight"]["nsys_stats"]["reports"]["cuda_gpu_kern_sum"]
    assert [r["Name"] for r in kern] == ["gemm_kernel", "softmax"]
    assert rows["msprof"]["msprof_analyze"]["step_trace"][0]["Computing"] == "10"
    assert rows["rocprof_sys"]["parsed"] == "unparsed" and "needs rocprof-sys" in rows["rocprof_sys"]["unparsed_reason"]


def test_only_unwrapped_workers_is_a_failed_capture(tmp_path):
    write_system_dir(tmp_path, backend="nsight", status="unwrapped", report=False)
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False, write=False)
    cap, = summary["captures"]
    assert cap["status"] == "failed" and "unwrapped" in cap["error"] and code == 1


def test_the_analysis_of_a_system_directory_loads_no_runtime(tmp_path):
    """As for every input kind (test_architecture.py): reading system reports and placing py-spy
    tracks imports neither the runtime nor torch."""
    from test_architecture import loaded_forbidden

    write_system_dir(tmp_path)
    (tmp_path / formats.TIMELINE_DIR).mkdir()
    (tmp_path / formats.TIMELINE_DIR / formats.TIMELINE_FILE).write_text(json.dumps(timeline()))
    assert loaded_forbidden(f"""
        from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
        from mindspeed_profiler.analysis.timeline.system_tracks import add_system_tracks
        summary, code = analyse_directory({str(tmp_path)!r}, jobs=1, progress=False, html=False, write=False)
        assert code == 0, summary
        assert add_system_tracks({json.dumps(timeline())}, {str(tmp_path / formats.SYSTEM_DIR)!r}) > 0
    """) == []


def test_steps_without_iteration_records_say_so(tmp_path):
    d = write_system_dir(tmp_path, steps=[5])          # the worker never reached iteration 5
    trace = timeline()
    assert add_system_tracks(trace, d) == 0
    assert any("recorded none of them" in w for w in trace["otherData"]["warnings"])
    summary, _ = analyse_directory(tmp_path, jobs=1, progress=False, html=False, write=False)
    p = summary["captures"][0]["system"]["workers"][0]["py_spy"]
    assert p["sampled_ms"] == 0 and "recorded none of them" in p["note"]
