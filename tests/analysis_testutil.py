"""Helpers for the analysis tests: write a trace, analyse a directory holding one capture, build an
RL timeline from (worker, stage, iteration, ts, dur) tuples, and a run whose every name is hostile."""
from __future__ import annotations

import json
from pathlib import Path

from mindspeed_profiler.analysis.pipeline.batch import analyse_directory


def plain_union(intervals) -> float:
    """Covered length of [(start, end)] with a sort and a loop (exact with Decimal or int inputs):
    the tests' independent recomputation, no package code."""
    total, cur = 0, None
    for s, e in sorted(intervals):
        if cur is None or s > cur[1]:
            total += 0 if cur is None else cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (cur[1] - cur[0] if cur else 0)


def write_json(p: Path, obj) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(obj))
    return p


def analyse_one(root: Path, **kw) -> dict:
    """Analyse `root` (one process, no HTML) and return its only capture."""
    summary, code = analyse_directory(root, jobs=1, progress=False, html=False, **kw)
    assert len(summary["captures"]) == 1, summary["captures"]
    return summary["captures"][0]


def stage_timeline(spans, iters) -> dict:
    """A timeline trace: `spans` = [(worker, stage, iteration, ts, dur)] stage spans,
    `iters` = [(iteration, ts, dur)] iteration spans."""
    ev = [{"ph": "X", "cat": "stage", "name": st, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
           "args": {"role": w, "rank": 0, "stage": st, "iteration": it}} for (w, st, it, ts, dur) in spans]
    ev += [{"ph": "X", "cat": "iteration", "name": "it", "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"iteration": it}} for (it, ts, dur) in iters]
    return {"traceEvents": ev}


HOSTILE = ["<script>alert(1)</script>", "\"><img src=x onerror=alert(2)>", "'; alert(3); '&amp;", "[/bold]"]


def analyse_hostile_run(tmp_path: Path) -> dict:
    """A run under `tmp_path` whose op, kernel, annotation, process, role, stage and worker names are
    the HOSTILE strings (one capture and a timeline), analysed; returns the summary."""
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": HOSTILE[1]}}]
    for i, n in enumerate(HOSTILE):
        ev.append({"ph": "X", "name": n, "cat": "cpu_op", "pid": 1, "tid": 1, "ts": i * 100, "dur": 50})
        ev.append({"ph": "X", "name": n, "cat": "kernel", "pid": 2, "tid": 7, "ts": i * 100, "dur": 20})
        ev.append({"ph": "X", "name": n, "cat": "user_annotation", "pid": 1, "tid": 1, "ts": i * 100 + 60, "dur": 5})
    d = tmp_path / "stage" / f"{HOSTILE[0]}_rank0_step1-1_h_1_20260101000000000_pt"
    write_json(d / "t.json", {"traceEvents": ev})
    (d / "mindspeed_profiler_meta.json").write_text(json.dumps({"role": HOSTILE[2], "rank": 0, "stage": HOSTILE[3]}))
    write_json(tmp_path / "timeline" / "timeline.json",
               stage_timeline([(HOSTILE[0], HOSTILE[1], 1, 0, 50), (HOSTILE[2], HOSTILE[3], 1, 10, 50)], [(1, 0, 100)]))
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False)
    assert code == 0, [c.get("error") for c in summary["captures"]]
    return summary
