"""report.html on a real CPU run with gloo collectives (tests/test_db_queries.gloo_run): the failed
count is red only when some failed; the profiler's export has its own labelled part in the
per-iteration bars, equal to profiler_us; capture links resolve, relative to report.html; no
column is empty in every row (a CPU run has no device columns); per-rank labels are not cut;
warnings, runs, communication and slow-rank reasons are shown."""
from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from urllib.parse import unquote

import pytest

from mindspeed_profiler.analysis.results import report
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.report.fmt import ms
from mindspeed_profiler.analysis.results.report.timeline_svg import NO_STAGE_PART, PROFILER_PART
from test_db_queries import gloo_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = gloo_run(tmp_path_factory.mktemp("gloo"))
    summary, code = analyse_directory(root, jobs=1, progress=False)
    assert code == 0, [c.get("error") for c in summary["captures"]]
    return root, summary


class Page(HTMLParser):
    """Tables (headers, rows of cell texts), link hrefs, bar titles and svg row labels (text, title)."""

    def __init__(self):
        super().__init__()
        self.tables, self.hrefs, self.titles, self.labels, self.legend = [], [], [], [], []
        self.stack, self.cell, self.text = [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.tables.append({"headers": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th") and self.tables:
            self.cell = [tag, ""]
        elif tag == "a":
            self.hrefs.append(a.get("href"))
        elif tag == "title":
            self.titles.append("")
        elif tag == "text":
            self.text = ["", None]
        if tag not in ("line", "rect", "meta", "option", "i"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            t = self.tables[-1]
            if self.cell[0] == "th":
                t["headers"].append(self.cell[1])
            else:
                t["rows"][-1].append(self.cell[1])
            self.cell = None
        if tag == "text" and self.text is not None:
            self.labels.append(tuple(self.text))
            self.text = None
        while self.stack and self.stack.pop() != tag:
            pass

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[1] += data
        if self.stack and self.stack[-1] == "title":
            self.titles[-1] += data
            if self.text is not None:
                self.text[1] = (self.text[1] or "") + data
        elif self.text is not None:
            self.text[0] += data
        if self.stack and self.stack[-1] == "span" and "legend" in str(self.stack):
            self.legend.append(data)


def parse(page: str) -> Page:
    p = Page()
    p.feed(page)
    for t in p.tables:
        t["rows"] = [r for r in t["rows"] if r]
    return p


def test_failed_is_red_only_when_some_failed():
    base = {"captures": [], "options": {}, "timeline": None}
    ok = report.render(dict(base, counts={"found": 3, "ok": 3, "failed": 0, "unparsed": 0}))
    assert "0 failed" in ok and not re.search(r'class="bad">\s*0 failed', ok)
    assert 'class="bad"' not in ok.split("</p>")[0]
    bad = report.render(dict(base, counts={"found": 3, "ok": 1, "failed": 2, "unparsed": 0}))
    assert '<span class="bad">2 failed</span>' in bad and "0 not parsed" in bad
    assert '<span class="bad">0 not parsed' not in bad


def test_the_profiler_export_is_its_own_part_of_the_iteration_bars(run):
    root, summary = run
    its = summary["timeline"]["iterations"]
    prof = [it for it in its if it["profiler_us"] > 0]
    assert [it["iteration"] for it in prof] == [2]      # the stages are captured (and exported) at iteration 2
    page = report.render(summary)
    bars = page[page.index('id="iterbars"'):].split("</svg>")[0]
    for it in its:
        titles = re.findall(rf"<title>iter {it['iteration']}: {re.escape(PROFILER_PART)} ([\d,.]+) ms</title>", bars)
        assert titles == ([ms(it["profiler_us"])] if it["profiler_us"] else []), it["iteration"]
        rest = it["no_stage_us"] - it["profiler_no_stage_us"]
        grey = re.findall(rf"<title>iter {it['iteration']}: {re.escape(NO_STAGE_PART)} ([\d,.]+) ms</title>", bars)
        # every part shows, in a bar cut at BAR_CAP x the median too (CI once lost the export part of
        # iteration 2 there: it was cut before the export, which comes after the stages)
        assert grey == ([ms(rest)] if rest > 0 else []), (it["iteration"], grey)
        assert 0 <= it["profiler_no_stage_us"] <= min(it["profiler_us"], it["no_stage_us"]) + 1e-6
    legend = page[page.index("Time per stage per iteration"):page.index('id="iterbars"')]
    assert f"</i>{PROFILER_PART}</span>" in legend
    # the export's part of the step (since issue 34 only torch's stop and raw write: the compression
    # runs on the background writer) is inside the time with no stage, and the timeline says so; its
    # share is not asserted: on this tiny model it is milliseconds against a loaded box's noise
    it2 = prof[0]
    assert 0 < it2["profiler_no_stage_us"] <= it2["no_stage_us"]


def test_capture_links_resolve_relative_to_the_report(run, tmp_path):
    root, summary = run
    for html in (root / "analysis" / "report.html",):
        p = parse(html.read_text())
        hrefs = [h for h in p.hrefs if h]
        assert hrefs and all(not re.match(r"^[a-z][a-z0-9+.-]*:", h) for h in hrefs), hrefs
        targets = {(html.parent / unquote(h)).resolve() for h in hrefs}
        assert all(t.exists() for t in targets), targets
        caps = {(root / c["path"]).resolve() for c in summary["captures"] if c["kind"] == "torch"}
        assert caps <= targets
        assert (root / "timeline" / "timeline.json").resolve() in targets
    # a report written elsewhere (-o) links to the same captures
    out = tmp_path / "elsewhere" / "deeper"
    analyse_directory(root, jobs=1, progress=False, out_dir=out)
    p = parse((out / "report.html").read_text())
    targets = {(out / unquote(h)).resolve() for h in p.hrefs if h}
    assert caps <= targets and all(t.exists() for t in targets)


def test_no_column_is_empty_on_a_cpu_run(run):
    _, summary = run
    assert all(c.get("device") is None for c in summary["captures"])
    p = parse(report.render(summary))
    assert len(p.tables) >= 6
    for t in p.tables:
        for k, h in enumerate(t["headers"]):
            assert any(r[k].strip() for r in t["rows"] if k < len(r)), (h, t["headers"])
        assert not {"device ms", "device busy ms", "exposed ms", "exposed % of busy"} & set(t["headers"]), t["headers"]


def test_communication_warnings_runs_and_slow_rank_reasons(run):
    _, summary = run
    s = copy.deepcopy(summary)
    s["warnings"] = ["this directory holds 2 runs (a, b): each is analysed on its own"]
    s["runs"] = ["a", "b"]
    s["captures"][0]["warnings"] = ["3 event(s) without a usable time were left out"]
    page = report.render(s)
    warn = page[page.index("<h2>Warnings</h2>"):page.index("<h2>Runs</h2>")]
    assert "this directory holds 2 runs" in warn and "3 event(s) without a usable time" in warn
    assert page.index("<h2>Warnings</h2>") < page.index("RL timeline")       # near the top
    assert "<h2>Runs</h2>" in page
    p = parse(page)
    comm = next(t for t in p.tables if t["headers"][:1] == ["capture"] and "host % of wall" in t["headers"])
    k = comm["headers"].index("host % of wall")
    for c in summary["captures"]:
        if c.get("communication"):
            share = f"{100 * c['communication']['host']['share_of_wall']:.1f}%"
            assert any(r[k] == share for r in comm["rows"]), share
    sr = next(t for t in p.tables if "reason" in t["headers"])
    assert "samples" in sr["headers"] and "run" not in sr["headers"]   # the rows carry no run_id: no run column
    assert {r[sr["headers"].index("reason")] for r in sr["rows"]} == {r["reason"] for r in summary["slow_ranks"]}


def test_per_rank_labels_are_not_cut(run):
    _, summary = run
    s = copy.deepcopy(summary)
    long_role = "a_rather_long_role_name_for_the_policy_model_workers"
    for r in s["stage_rank"]:
        r["role"] = long_role
    p = parse(report.render(s))
    bars = [(txt, title) for txt, title in p.labels if title and long_role in title]
    assert bars and all(txt == title for txt, title in bars), bars[:2]
    # a label longer than the widest column is cut, its full text on hover
    from mindspeed_profiler.analysis.results.report.svg import MAX_LABEL_PX, stacked_bars
    chart = stacked_bars([("x" * 200, {"a": 1.0})], [("a", "a", "#000")])
    q = parse(str(chart.svg))
    (txt, title), = [lb for lb in q.labels if lb[1]]
    assert title == "x" * 200 and len(txt) < 200 and "…" in txt
    assert f'x="{MAX_LABEL_PX}' in str(chart.svg)


def test_a_cut_bar_shows_every_part_in_proportion():
    from mindspeed_profiler.analysis.results.report.svg import stacked_bars
    parts = [("a", "a", "#111"), ("b", "b", "#222")]
    rows = [("r1", {"a": 1000.0, "b": 1000.0}), ("r2", {"a": 1000.0, "b": 1000.0}),
            ("long", {"a": 30000.0, "b": 10000.0})]   # 20x the median: cut at 2.5x
    svg = str(stacked_bars(rows, parts, width=1100, left=100, cap=2.5).svg)
    rects = re.findall(r'<rect class="bar" x="([\d.]+)" y="\d+" width="([\d.]+)"[^>]*><title>(\w+): (\w) ([\d,.]+) ms</title>', svg)
    long = [(float(x), float(w), part, value) for x, w, label, part, value in rects if label == "long"]
    assert [p for _, _, p, _ in long] == ["a", "b"] and [v for *_, v in long] == ["30.000", "10.000"]
    plot_w = 1100 - 100 - 110
    assert abs(sum(w for _, w, _, _ in long) - plot_w) < 0.2          # the whole plot, no more
    assert abs(long[0][1] / long[1][1] - 3.0) < 0.01                  # a : b as 30 : 10
    assert "» 40.000 ms" in svg
    short = [float(w) for x, w, label, part, value in rects if label == "r1"]
    assert abs(sum(short) - plot_w / 2.5) < 0.2                        # the median bar at 1 / cap of the plot
