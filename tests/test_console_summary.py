"""The terminal summary on a real CPU run with gloo collectives (a small model captured in-process,
tests/test_db_queries.gloo_run): per stage the top ops and ranges and the communication share;
no column that is empty in every row; `--top` changes the lists; long iteration tables capped with
a count of what is hidden; warnings, failures and slow ranks with their reason; and the output
ends with the files and how to open them."""
from __future__ import annotations

import copy
import io
import re

import pytest
from rich.console import Console

from mindspeed_profiler.analysis.analyzers.stages import analyse_timeline
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.console import print_summary
from mindspeed_profiler.commands import analyse as analyse_cmd
from test_analysis_report_layout import grpo_like
from test_db_queries import STAGES, gloo_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = gloo_run(tmp_path_factory.mktemp("gloo"))
    summary, code = analyse_directory(root, jobs=1, progress=False, export_type="db")
    assert code == 0, [c.get("error") for c in summary["captures"]]
    return root, summary


def text_of(summary: dict, width: int = 200, **kw) -> str:
    buf = io.StringIO()
    print_summary(summary, console=Console(file=buf, width=width, color_system=None), **kw)
    return buf.getvalue()


def tables(text: str) -> list[dict]:
    """The rich tables printed: {title, headers, rows (cells per column)}; a cell folded over several
    lines is joined."""
    lines = text.splitlines()
    out = []
    for i, ln in enumerate(lines):
        if not ln.startswith("┏"):
            continue
        title = lines[i - 1].strip() if i else ""
        j = i + 1
        head, body, cur = [], [], None
        while not lines[j].startswith("└"):
            ln2 = lines[j]
            if ln2.startswith("┃"):
                head.append([c.strip() for c in ln2.strip("┃").split("┃")])
            elif ln2.startswith("│"):
                cells = [c.strip() for c in ln2.strip("│").split("│")]
                if cur is not None and cells[0] == "" and any(cells):   # a folded continuation line
                    cur = [(a + " " + b).strip() for a, b in zip(cur, cells)]
                    body[-1] = cur
                else:
                    cur = cells
                    body.append(cur)
            j += 1
        headers = [" ".join(p for p in col if p) for col in zip(*head)]
        out.append({"title": title, "headers": headers, "rows": body})
    return out


def test_top_ops_and_ranges_per_stage_and_the_communication_share(run):
    root, summary = run
    text = text_of(summary, out_dir=root / "analysis")
    for stage in STAGES:
        assert re.search(rf"^{stage}: 2 captures \(actor 0, actor 1\)", text, re.M), stage
        ops = next(t for t in tables(text) if t["title"].startswith(f"{stage}: top ops"))
        assert ops["headers"] == ["op", "actor 0 ms", "actor 1 ms"]
        names = [r[0] for r in ops["rows"]]
        assert "c10d::allreduce_" in names and len(names) == 10
        ranges = next(t for t in tables(text) if t["title"].startswith(f"{stage}: top ranges"))
        assert {stage, "gloo:all_reduce"} <= {r[0] for r in ranges["rows"]}
    comm = next(t for t in tables(text) if t["title"].startswith("Communication per capture"))
    assert comm["headers"][:4] == ["stage", "worker", "host ms", "host % of wall"]
    for c in summary["captures"]:
        if c["kind"] == "torch":
            share = f"{100 * c['communication']['host']['share_of_wall']:.1f}%"
            row = next(r for r in comm["rows"] if r[:2] == [c["stage"], f"actor {c['rank']}"])
            assert row[3] == share and "c10d::allreduce_" in row[4]
            assert f"actor {c['rank']} {share} of wall (host)" in text   # in the stage's header too


def test_no_column_is_empty_in_every_row(run):
    root, summary = run
    text = text_of(summary, out_dir=root / "analysis")
    found = tables(text)
    assert len(found) >= 8
    for t in found:
        for k, h in enumerate(t["headers"]):
            assert any(r[k] for r in t["rows"]), (t["title"], h)
    # a CPU run has no device: none of the device columns is printed
    for h in ("busy ms", "compute", "comm exp.", "idle", "device ms", "exposed ms", "exposed % of busy"):
        assert all(h not in t["headers"] for t in found), h


def test_top_changes_what_is_listed(run, capsys):
    root, _ = run

    def listed(n: int) -> dict:
        assert analyse_cmd.main([str(root), "-j", "1", "--top", str(n), "--export-type", "db"]) == 0
        out = capsys.readouterr().out
        return {t["title"]: len(t["rows"]) for t in tables(out) if ": top " in t["title"]}

    two, five = listed(2), listed(5)
    assert two.keys() == five.keys() and len(two) >= 2 * len(STAGES)
    assert all(n <= 2 for n in two.values()) and max(five.values()) > 2
    assert two != five


def test_the_last_lines_are_the_files_and_how_to_open_them(run, capsys):
    root, _ = run
    assert analyse_cmd.main([str(root), "-j", "1", "--export-type", "db"]) == 0
    out = capsys.readouterr().out.rstrip().splitlines()
    start = max(i for i, ln in enumerate(out) if ln.strip() == "Open the results")
    tail = "\n".join(out[start:])
    paths = {"report": root / "analysis" / "report.html", "timeline": root / "timeline" / "timeline.json",
             "analysis.db": root / "analysis" / "analysis.db",
             "Perfetto trace": root / "timeline" / "timeline.pftrace"}   # the merge writes it beside the JSON
    for name, p in paths.items():
        assert re.search(rf"^  {re.escape(name)}\s+{re.escape(str(p))}$", tail, re.M), (name, tail)
        assert p.is_file()
    assert "open in a browser: file://" in tail and "https://ui.perfetto.dev" in tail and "sqlite3 " in tail
    assert "TensorBoard (pip install torch-tb-profiler): tensorboard --logdir" in tail
    # nothing but the files after the heading: each entry is a path line, then its how-to (indented)
    body = out[start + 1:]
    assert all(re.match(r"^  \S", ln) or re.match(r"^ {17}\S", ln) for ln in body), body
    kinds = [bool(re.match(r"^  \S", ln)) for ln in body]
    assert kinds[0] and not kinds[-1] and all(a or b for a, b in zip(kinds, kinds[1:]) if a)
    assert "TensorBoard" in "\n".join(out[-2:])


def test_without_html_or_db_those_files_are_not_offered(run):
    root, summary = run
    text = text_of(summary, out_dir=root / "analysis", html=False, db=False)
    tail = text[text.index("Open the results"):]
    assert "report.html" not in tail and "analysis.db" not in tail and "timeline.json" in tail


def test_long_iteration_tables_show_the_slowest_and_the_median():
    tl = analyse_timeline(grpo_like(40))
    summary = {"captures": [], "counts": {}, "options": {"threshold": 1.2}, "timeline": tl, "slow_ranks": []}
    text = text_of(summary)
    t = next(t for t in tables(text) if t["title"].startswith("RL iterations"))
    assert t["title"] == "RL iterations: the 5 slowest and the median of 40"
    assert len(t["rows"]) == 6 and "34 iterations hidden" in text
    its = sorted(tl["iterations"], key=lambda it: -it["dur_us"])
    shown = {int(r[0]) for r in t["rows"]}
    assert {it["iteration"] for it in its[:5]} <= shown
    med = sorted(tl["iterations"], key=lambda it: (it["dur_us"], it["iteration"]))[19]
    assert [r for r in t["rows"] if int(r[0]) == med["iteration"]][0][2] == "median"
    # a short run lists every iteration
    short = dict(summary, timeline=analyse_timeline(grpo_like(8)))
    t = next(t for t in tables(text_of(short)) if t["title"].startswith("RL iterations"))
    assert len(t["rows"]) == 8


def test_warnings_failures_and_slow_ranks(run):
    root, summary = run
    s = copy.deepcopy(summary)
    s["warnings"] = ["this directory holds 2 runs (a, b): each is analysed on its own"]
    s["captures"][0]["warnings"] = ["3 event(s) without a usable time were left out"]
    s["captures"].append({"path": "x/broken.json", "kind": "kineto", "status": "failed",
                          "error": "TraceFormatError: truncated"})
    text = text_of(s)
    assert "warning: this directory holds 2 runs" in text
    assert f"warning ({s['captures'][0]['path']}): 3 event(s) without a usable time were left out" in text
    assert "failed x/broken.json: TraceFormatError: truncated" in text
    # none flagged: one line, with the highest ratio and its reason
    assert sum(1 for ln in text.splitlines() if ln.startswith("Slow ranks")) == 1
    assert re.search(r"^Slow ranks: none flagged \(\d+ ranks / workers compared", text, re.M)
    r = s["slow_ranks"][0]
    r.update(flagged=True, ratio=3.0, reason="ratio 3.00 > 1.2 over 5 samples, above noise (10 us)")
    text = text_of(s)
    t = next(t for t in tables(text) if t["title"].startswith("Slow ranks: 1 flagged"))
    assert t["rows"][0][-1] == r["reason"] and t["headers"][-1] == "reason"


def test_names_in_every_new_field_are_printed_as_text(run):
    root, summary = run
    s = copy.deepcopy(summary)
    bad = "[bold red]x[/bold red][link=file:///etc]y[/link]"
    c = next(c for c in s["captures"] if c.get("communication"))
    c["communication"]["top"][0]["name"] = bad + "coll"
    c["warnings"] = [bad + "warn"]
    s["warnings"] = [bad + "run"]
    s["slow_ranks"][0].update(flagged=True, reason=bad + "reason", stage=bad + "stage")
    c["stage"] = bad + "capstage"
    text = text_of(s, width=500)
    for what in ("coll", "warn", "run", "reason", "capstage"):
        assert bad + what in text, what
