"""Review fixes: odd-but-valid inputs, a killed worker, hostile names, exact figures worked out
by hand (each expected value is derived in the comment next to it)."""
from __future__ import annotations

import gzip
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mindspeed_profiler.analysis import driver, jsonscan
from mindspeed_profiler.analysis.compare import compare
from mindspeed_profiler.analysis.discover import Capture
from mindspeed_profiler.analysis.driver import analyse_directory
from mindspeed_profiler.analysis.timeline import analyse_timeline

DATA = Path("/work/shared/data")


def _write(p: Path, obj) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(obj))
    return p


def _one(root: Path, **kw) -> dict:
    summary, code = analyse_directory(root, jobs=1, progress=False, html=False, **kw)
    assert len(summary["captures"]) == 1, summary["captures"]
    return summary["captures"][0]


# -- trace formats ------------------------------------------------------------------------------

def test_begin_end_pairs_are_complete_events(tmp_path):
    # one thread: outer B@0..E@100 holds inner B@10..E@40; an E with no B is counted as bad
    ev = [{"ph": "B", "name": "outer", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 0},
          {"ph": "B", "name": "inner", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10},
          {"ph": "E", "pid": 1, "tid": 1, "ts": 40},
          {"ph": "E", "pid": 1, "tid": 1, "ts": 100},
          {"ph": "E", "pid": 1, "tid": 2, "ts": 5}]
    c = _one(_write(tmp_path / "be.json", {"traceEvents": ev}).parent)
    assert c["status"] == "ok", c.get("error")
    ops = {o["name"]: o for o in c["top_ops"]}
    assert (ops["outer"]["total_us"], ops["outer"]["self_us"]) == (100.0, 70.0)   # 100 - 30
    assert (ops["inner"]["total_us"], ops["inner"]["self_us"]) == (30.0, 30.0)
    assert c["wall_us"] == 100.0 and c["n_bad_events"] == 1


def test_string_timestamps_with_sign_and_exponent(tmp_path):
    # "-12.5" is -12.5 (not -12 + 0.5), "1.0e1" is 10; wall = (10 + 5) - (-12.5) = 27.5
    ev = [{"ph": "X", "name": "a", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": "-12.5", "dur": 2.5},
          {"ph": "X", "name": "b", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": "1.0e1", "dur": 5}]
    c = _one(_write(tmp_path / "s.json", {"traceEvents": ev}).parent)
    assert c["status"] == "ok" and c["start_us"] == -12.5 and c["wall_us"] == 27.5


def test_nan_timestamps_written_by_python_json(tmp_path):
    # json.dumps writes NaN (not JSON, but real writers produce it): that event is bad, the rest counts
    ev = [{"ph": "X", "name": "a", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": float("nan"), "dur": 1},
          {"ph": "X", "name": "b", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 100, "dur": 7}]
    c = _one(_write(tmp_path / "n.json", {"traceEvents": ev}).parent)
    assert c["status"] == "ok", c.get("error")
    assert (c["n_bad_events"], c["n_complete_events"], c["wall_us"]) == (1, 1, 7.0)


def test_kineto_base_time_makes_start_absolute(tmp_path):
    """Kineto (torch >= 2.x) writes ts relative to baseTimeNanoseconds: start_us must be epoch us."""
    from test_analysis_own_capture import capture
    before = time.time() * 1e6
    d = capture(tmp_path, 0)
    after = time.time() * 1e6
    raw = json.loads(gzip.decompress(next(d.glob("*.json.gz")).read_bytes()))
    if "baseTimeNanoseconds" not in raw:
        pytest.skip("this torch writes absolute timestamps")
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False)
    c = summary["captures"][0]
    assert before <= c["start_us"] <= after
    assert all(before <= s["start_us"] <= after for s in c["steps"])


def test_gzip_holding_a_large_json_is_streamed(tmp_path, monkeypatch):
    # the threshold is on the JSON size, not the (10x smaller) .gz size
    ev = [{"ph": "X", "name": f"op{i % 7}", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5}
          for i in range(40000)]
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"traceEvents": ev}).encode()))
    raw_size = len(json.dumps({"traceEvents": ev}))
    assert p.stat().st_size < raw_size // 5
    monkeypatch.setattr(jsonscan, "STREAM_THRESHOLD", p.stat().st_size + 1)   # below the JSON size
    monkeypatch.setattr(jsonscan, "CHUNK", 1 << 16)
    calls = []
    real = jsonscan._stream
    monkeypatch.setattr(jsonscan, "_stream", lambda path, cb: calls.append(path) or real(path, cb))
    got: list = []
    jsonscan.load_trace(p, got.extend)
    assert calls == [p] and got == ev


# -- timeline -------------------------------------------------------------------------------------

def _tl(spans, iters):
    ev = [{"ph": "X", "cat": "stage", "name": st, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
           "args": {"role": w, "rank": 0, "stage": st, "iteration": it}} for (w, st, it, ts, dur) in spans]
    ev += [{"ph": "X", "cat": "iteration", "name": "it", "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"iteration": it}} for (it, ts, dur) in iters]
    return {"traceEvents": ev}


def test_overlap_is_time_with_two_or_more_stages():
    # three stages all running over [0, 100]: 100 us with >= 2 stages (sum of walls - union = 200)
    # plus stage d alone over [200, 300]; a and d touch nothing
    t = analyse_timeline(_tl([("w1", "a", 1, 0, 100), ("w2", "b", 1, 0, 100), ("w3", "c", 1, 0, 100),
                              ("w1", "d", 1, 200, 100)], [(1, 0, 400)]))
    it = t["iterations"][0]
    assert it["overlap_us"] == 100.0 and it["stage_covered_us"] == 200.0


def test_idle_lists_a_worker_without_spans_in_the_iteration():
    # w2 works only in iteration 1, so in iteration 2 (100 us) it is idle all the time
    t = analyse_timeline(_tl([("w1", "a", 1, 0, 50), ("w2", "b", 1, 0, 80), ("w1", "a", 2, 100, 30)],
                             [(1, 0, 100), (2, 100, 100)]))
    assert t["iterations"][1]["idle_per_worker_us"] == {"w1:0": 70.0, "w2:0": 100.0}


# -- a worker process that dies -------------------------------------------------------------------

def die_on_victim(root, cap, top_n, want_events):
    """Worker function for the test: SIGKILL itself (as the OOM killer would) on one capture."""
    if "victim" in cap["path"]:
        os.kill(os.getpid(), signal.SIGKILL)
    from mindspeed_profiler.analysis.capture import analyse_capture
    return analyse_capture(root, cap, top_n, want_events)


def test_killed_worker_fails_only_its_capture(tmp_path, monkeypatch):
    src = DATA / "kineto" / "gpu_rank0.json.gz"
    if not src.exists():
        pytest.skip("sample data missing")
    names = ["a_rank0.json.gz", "b_rank0.json.gz", "victim.json.gz", "c_rank0.json.gz", "d_rank0.json.gz"]
    for n in names:
        (tmp_path / n).write_bytes(src.read_bytes())
    caps = [Capture(path=n, kind="kineto", files=[n]) for n in names]
    monkeypatch.setattr(driver, "POOL_MIN_BYTES", 0)
    t = time.monotonic()
    res = driver.run_captures(tmp_path, caps, jobs=2, top_n=5, want_events=False, progress=False,
                              fn=die_on_victim)
    assert time.monotonic() - t < 120   # reported, not hung
    by = {r["capture"]["path"]: r["capture"] for r in res}
    assert by["victim.json.gz"]["status"] == "failed"
    assert "SIGKILL" in by["victim.json.gz"]["error"]
    assert all(by[n]["status"] == "ok" for n in names if n != "victim.json.gz"), by


# -- discovery ----------------------------------------------------------------------------------

def test_damaged_metadata_does_not_take_the_run_down(tmp_path):
    src = DATA / "kineto" / "gpu_rank0.json.gz"
    if not src.exists():
        pytest.skip("sample data missing")
    d = tmp_path / "actor_update" / "actor_rank0_step1-1_h_1_20260101000000000_pt"
    d.mkdir(parents=True)
    (d / "t.pt.trace.json.gz").write_bytes(src.read_bytes())
    (d / "mindspeed_profiler_meta.json").write_text(json.dumps(
        {"role": "actor", "rank": 0, "stage": ["a", "b"], "steps": "1-1", "trace_files": [None]}))
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False)
    c = summary["captures"][0]
    assert code == 0 and c["status"] == "ok" and c["files"] == [str(Path(d.relative_to(tmp_path)) / "t.pt.trace.json.gz")]
    assert isinstance(c["stage"], str) and c["step_range"] == [1, 1]


def test_fifo_broken_link_and_linked_capture_dir(tmp_path):
    src = DATA / "kineto" / "gpu_rank0.json.gz"
    if not src.exists():
        pytest.skip("sample data missing")
    root = tmp_path / "run"
    root.mkdir()
    os.mkfifo(root / "cluster_step_trace_time.csv")     # opening it for reading would block forever
    os.symlink(tmp_path / "gone.json", root / "gone.json")
    elsewhere = tmp_path / "elsewhere" / "actor_rank1_step1-1_h_1_20260101000000000_pt"
    elsewhere.mkdir(parents=True)
    (elsewhere / "t.pt.trace.json.gz").write_bytes(src.read_bytes())
    os.symlink(elsewhere, root / "linked_pt")
    os.symlink(root, root / "loop")                      # a link cycle must not loop
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.analyse", str(root), "-q", "-j", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    caps = {c["path"]: c for c in json.loads((root / "analysis" / "summary.json").read_text())["captures"]}
    assert caps["cluster_step_trace_time.csv"]["status"] == "failed"
    assert "not a regular file" in caps["cluster_step_trace_time.csv"]["error"]
    assert "broken symbolic link" in caps["gone.json"]["error"]
    assert caps["linked_pt"]["status"] == "ok" and caps["linked_pt"]["rank"] == 0   # distributedInfo.rank


# -- outputs ----------------------------------------------------------------------------------------

HOSTILE = ["<script>alert(1)</script>", "\"><img src=x onerror=alert(2)>", "'; alert(3); '&amp;", "[/bold]"]


def _hostile_summary(tmp_path: Path) -> dict:
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": HOSTILE[1]}}]
    for i, n in enumerate(HOSTILE):
        ev.append({"ph": "X", "name": n, "cat": "cpu_op", "pid": 1, "tid": 1, "ts": i * 100, "dur": 50})
        ev.append({"ph": "X", "name": n, "cat": "kernel", "pid": 2, "tid": 7, "ts": i * 100, "dur": 20})
        ev.append({"ph": "X", "name": n, "cat": "user_annotation", "pid": 1, "tid": 1, "ts": i * 100 + 60, "dur": 5})
    d = tmp_path / "stage" / f"{HOSTILE[0]}_rank0_step1-1_h_1_20260101000000000_pt"
    _write(d / "t.json", {"traceEvents": ev})
    (d / "mindspeed_profiler_meta.json").write_text(json.dumps({"role": HOSTILE[2], "rank": 0, "stage": HOSTILE[3]}))
    _write(tmp_path / "timeline" / "timeline.json",
           _tl([(HOSTILE[0], HOSTILE[1], 1, 0, 50), (HOSTILE[2], HOSTILE[3], 1, 10, 50)], [(1, 0, 100)]))
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False)
    assert code == 0, [c.get("error") for c in summary["captures"]]
    return summary


def test_report_escapes_hostile_names_and_is_self_contained(tmp_path):
    from mindspeed_profiler.analysis.report_html import render
    summary = _hostile_summary(tmp_path)
    summary["options"]["threshold"] = "<b id=inj>1.2</b>"       # a tampered summary.json
    summary["counts"]["found"] = "<i id=inj2>"
    page = render(summary)
    for bad in ("<script>alert", "<img", "<b id=inj>", "<i id=inj2>", "onerror=alert(2)>"):
        assert bad not in page, bad
    assert page.count("<script>") == 1 and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&#x27;; alert(3); &#x27;&amp;amp;" in page             # ' and & escaped too
    # the tags and attributes a browser sees: only ours, nothing that loads or runs anything
    from html.parser import HTMLParser

    class Tags(HTMLParser):
        tags: set = set()
        attrs: set = set()

        def handle_starttag(self, tag, attrs):
            self.tags.add(tag)
            self.attrs.update(a for a, _ in attrs)
    t = Tags()
    t.feed(page)
    assert t.tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "p", "span", "table",
                      "thead", "tbody", "tr", "th", "td", "div", "i", "svg", "line", "text", "rect", "details",
                      "summary", "script", "b", "g", "select", "option", "label"}, t.tags
    assert not any(a.startswith("on") or a in ("src", "href") for a in t.attrs), t.attrs
    assert "@import" not in page and "url(" not in page


def test_console_tables_do_not_read_names_as_markup(tmp_path):
    from rich.console import Console

    from mindspeed_profiler.analysis.console import print_summary
    summary = _hostile_summary(tmp_path)
    buf = io.StringIO()
    print_summary(summary, console=Console(file=buf, width=300, color_system=None))
    assert "[/bold]" in buf.getvalue()


def test_db_has_indices_and_iteration_table(tmp_path):
    _hostile_summary(tmp_path)
    analyse_directory(tmp_path, jobs=1, progress=False, html=False, export_type="db")
    db = sqlite3.connect(tmp_path / "analysis" / "analysis.db")
    idx = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"events_capture_ts", "events_name", "events_cat_name"} <= idx
    plan = " ".join(str(r) for r in db.execute("EXPLAIN QUERY PLAN SELECT sum(dur_us) FROM events WHERE name = ?", ("x",)))
    assert "events_name" in plan
    # iteration 1 = [0, 100]; spans [0, 50] and [10, 60] of two stages: overlap 40, no stage 40
    assert db.execute("SELECT iteration, dur_us, overlap_us, no_stage_us FROM timeline_iterations").fetchall() == \
        [(1, 100.0, 40.0, 40.0)]
    assert not (tmp_path / "analysis" / "analysis.db.tmp").exists()


def test_compare_op_below_top_n_is_unknown_not_zero():
    def s(ops):
        return {"root": "x", "options": {"top": 2}, "stage_rank": [], "timeline": None,
                "captures": [{"status": "ok", "steps": [], "top_kernels": [],
                              "top_ops": [{"name": n, "self_us": v} for n, v in ops]}]}
    # y fell below B's top-2 cut (B lists x and z): its B value is unknown, not 0
    res = compare(s([("x", 100.0), ("y", 50.0)]), s([("x", 110.0), ("z", 60.0)]))
    rows = {r["key"]: r for r in res["ops"]}
    assert rows["y"]["delta_us"] is None and rows["z"]["delta_us"] is None
    assert rows["x"]["delta_us"] == 10.0
    assert res["ops"][0]["key"] == "x"        # known deltas first, by |delta|


def test_kernel_details_blank_duration_is_not_nan(tmp_path):
    d = tmp_path / "ASCEND_PROFILER_OUTPUT"
    d.mkdir()
    # kernels [0, 10] and [20, 25]; the row without a duration is counted, not summed: busy = 15
    (d / "kernel_details.csv").write_text(
        "Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
        "MatMul,MatMul,AI_CORE,\"1000.0\t\",10\n"
        "Add,Add,AI_VECTOR_CORE,\"1020.0\t\",5\n"
        "Cast,Cast,AI_VECTOR_CORE,\"1030.0\t\",\n")
    c = _one(tmp_path)
    assert c["status"] == "ok" and c["device"]["busy_us"] == 15.0 and c["device"]["window_us"] == 25.0
    assert c["n_bad_kernels"] == 1


def test_cli_bad_threshold_and_unwritable_output(tmp_path):
    src = DATA / "kineto" / "gpu_rank0.json.gz"
    if not src.exists():
        pytest.skip("sample data missing")
    (tmp_path / "weird.json").mkdir()            # a directory named *.json is walked, not read
    (tmp_path / "weird.json" / "r0.json.gz").write_bytes(src.read_bytes())
    run = lambda *a: subprocess.run([sys.executable, "-m", "mindspeed_profiler.analyse", str(tmp_path), "-q", *a],
                                    capture_output=True, text=True, timeout=120)
    p = run("--threshold", "0")
    assert p.returncode == 2 and "--threshold" in p.stderr
    p = run("-o", "/dev/null/out")               # cannot be created: a message, not a traceback
    assert p.returncode == 2 and "cannot write the outputs" in p.stderr and "Traceback" not in p.stderr
    p = run()
    assert p.returncode == 0, p.stderr
    caps = json.loads((tmp_path / "analysis" / "summary.json").read_text())["captures"]
    assert [(c["path"], c["status"]) for c in caps] == [("weird.json/r0.json.gz", "ok")]


def test_timeline_index_keeps_spans_without_iteration_number():
    # spans are found per iteration through an index (a scan per iteration was quadratic in long
    # runs); a span without args.iteration that starts long before a window still counts in it:
    # "sync" runs [50, 350] and covers iteration 2 = [100, 200] and 3 = [200, 300] (clipped: 100 each)
    spans = [("w1", "a", 1, 0, 80), ("w1", "a", 2, 100, 30), ("w1", "a", 3, 200, 30)]
    tr = _tl(spans, [(1, 0, 100), (2, 100, 100), (3, 200, 100)])
    tr["traceEvents"].append({"ph": "X", "cat": "stage", "name": "sync", "pid": 1, "tid": 1, "ts": 50, "dur": 300,
                              "args": {"role": "w2", "rank": 0, "stage": "sync"}})
    its = analyse_timeline(tr)["iterations"]
    assert [it["stages"]["sync"]["total_us"] for it in its] == [50.0, 100.0, 100.0]
    assert [it["stages"]["a"]["total_us"] for it in its] == [80.0, 30.0, 30.0]
    assert [it["overlap_us"] for it in its] == [30.0, 30.0, 30.0]   # a and sync together


def test_report_lists_at_most_the_longest_iterations():
    from mindspeed_profiler.analysis import report_html
    # 400 iterations of 100 us, except iteration 7 (1000 us): the tables keep 300 rows and iteration 7
    n = report_html.MAX_ITERATION_ROWS + 100
    spans = [("w", "a", k, k * 1000, 1000 if k == 7 else 100) for k in range(1, n + 1)]
    tl = analyse_timeline(_tl(spans, []))
    page = report_html.render({"captures": [], "counts": {}, "timeline": tl, "options": {}})
    body = page.split("Iterations: overlap, idle and critical path")[1].split("</table>")[0]
    assert body.count("<tr") == report_html.MAX_ITERATION_ROWS + 1        # + the header row
    assert ">7</td><td" in body and f"{n} iterations: the bars and tables below show the" in page


def test_every_summary_field_is_documented(tmp_path):
    """summary.json vs docs/analysis.md: each key the analysis writes (top level, captures of every
    kind on the real data, cluster rows, steps, kernels, the timeline) is named in the doc."""
    import re
    import shutil
    if not DATA.is_dir():
        pytest.skip("sample data missing")
    shutil.copytree(DATA, tmp_path / "data")
    _write(tmp_path / "data" / "timeline" / "timeline.json",
           _tl([("w1", "a", 1, 0, 50), ("w2", "b", 1, 10, 50)], [(1, 0, 100)]))
    summary, code = analyse_directory(tmp_path / "data", jobs=1, progress=False, html=False)
    doc = (Path(__file__).resolve().parents[1] / "docs" / "analysis.md").read_text()
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", doc)) | set(re.findall(r"[{ ,]([a-z_]+)[,}]", doc))
    keys = set(summary)
    for c in summary["captures"]:
        keys |= set(c)
        for k in ("ranks", "stages", "steps", "top_kernels", "top_ops", "annotations"):
            for row in c.get(k) or []:
                keys |= set(row)
    tl = summary["timeline"]
    keys |= set(tl) | set(tl["iterations"][0]) | set(tl["stage_worker"][0]) | set(tl["gantt"][0])
    assert keys - named == set()
