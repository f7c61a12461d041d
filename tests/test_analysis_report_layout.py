"""report.html layout on an RL timeline shaped like a real GRPO run (40 iterations, a 4.5 s start-up
in iteration 1, 10 ms reference spans): iteration labels that do not overlap, time ticks, spans
wide enough to see, the zoomed median iteration, and the per-iteration pivot of stage walls; a very
long run lists only its longest iterations."""
from __future__ import annotations

from html.parser import HTMLParser

from analysis_testutil import stage_timeline
from mindspeed_profiler.analysis.results import report
from mindspeed_profiler.analysis.results.report.fmt import ms
from mindspeed_profiler.analysis.results.report.timeline_svg import GANTT_LEFT, MIN_SPAN_PX
from mindspeed_profiler.analysis.analyzers.stages import analyse_timeline

WORKERS = {2: ("actor", 0), 3: ("actor", 1), 4: ("reference", 0)}


def grpo_like(n_iter: int = 40) -> dict:
    """Iteration k starts at 4.5 s + 250 ms * (k - 1) (iteration 1 also holds the 4.5 s start-up);
    each has generate (~40 ms) and compute_log_prob on both actors, a 10 ms reference pass and the update."""
    ev, its = [], []
    t = 4_500_000
    for k in range(1, n_iter + 1):
        dur = 250_000 + (k % 7) * 3_000
        start = 0 if k == 1 else t
        its.append((k, start, t + dur - start))
        plan = [(2, "actor_generate", 0, 40_000 + k * 10), (3, "actor_generate", 500, 42_000),
                (2, "actor_compute_log_prob", 45_000, 8_000), (3, "actor_compute_log_prob", 45_500, 7_000),
                (4, "reference_compute_log_prob", 46_000, 10_000),
                (2, "actor_update", 60_000, 180_000), (3, "actor_update", 60_500, 181_000 + (k % 7) * 2_000)]
        for pid, stage, off, d in plan:
            role, rank = WORKERS[pid]
            ev.append({"ph": "X", "cat": "stage", "name": stage, "pid": pid, "tid": 1, "ts": t + off, "dur": d,
                       "args": {"role": role, "rank": rank, "stage": stage, "iteration": k}})
        t += dur
    ev += [{"ph": "X", "cat": "iteration", "name": f"iteration {k}", "pid": 1, "tid": 1, "ts": s, "dur": d,
            "args": {"iteration": k}} for k, s, d in its]
    return {"traceEvents": ev}


class Page(HTMLParser):
    """Collects the svg elements (tag, attrs, text) per svg id, and the rows of table#pivot."""

    def __init__(self):
        super().__init__()
        self.svg, self.stack, self.pivot, self.in_pivot, self.cell = {}, [], [], False, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.cur = self.svg.setdefault(a.get("id") or a.get("class"), [])
        elif self.stack and "svg" in self.stack:
            self.cur.append([tag, a, ""])
        if tag == "table" and a.get("id") == "pivot":
            self.in_pivot = True
        if self.in_pivot and tag == "tr":
            self.pivot.append([])
        if self.in_pivot and tag in ("td", "th"):
            self.cell = [a.get("data-v"), ""]
            self.pivot[-1].append(self.cell)
        if tag not in ("line", "rect", "option", "meta"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag == "table":
            self.in_pivot = False
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()

    def handle_data(self, data):
        if self.in_pivot and self.cell is not None:
            self.cell[1] += data
        if "svg" in self.stack and self.stack[-1] == "text" and self.cur:
            self.cur[-1][2] += data


def render(tl: dict) -> Page:
    p = Page()
    p.feed(report.render({"captures": [], "counts": {}, "timeline": tl, "options": {}}))
    return p


def test_iteration_labels_do_not_overlap_and_the_axis_has_ticks():
    tl = analyse_timeline(grpo_like(150))
    g = render(tl).svg["gantt"]
    labels = [(float(a["x"]), txt) for tag, a, txt in g if tag == "text" and a.get("class") == "itlabel"]
    assert labels[0][1] == "1" and len(labels) >= 20           # some labels, not just the first
    assert len(labels) < 100                                    # ... but not all 150 on 1130 px
    for (x0, t0), (x1, _) in zip(labels, labels[1:]):
        assert x1 - x0 >= 6.2 * len(t0) + 2, (t0, x0, x1)       # 11px digits are ~6.1 px wide
    assert max(x + 6.2 * len(t) for x, t in labels) <= 1300
    ticks = [txt for tag, a, txt in g if tag == "text" and txt.endswith(" s")]
    assert len(ticks) >= 4                                       # a time axis in seconds
    spans = [a for tag, a, _ in g if tag == "rect" and a.get("class") == "span"]
    assert len(spans) == 7 * 150 and min(float(a["width"]) for a in spans) >= MIN_SPAN_PX
    # the 4.5 s start-up before the first span is not drawn: the axis starts at the first span
    assert min(float(a["x"]) for a in spans) == GANTT_LEFT


def test_zoom_shows_the_median_iteration():
    tl = analyse_timeline(grpo_like(40))
    med = sorted(tl["iterations"], key=lambda it: (it["dur_us"], it["iteration"]))[19]
    page = report.render({"captures": [], "counts": {}, "timeline": tl, "options": {}})
    assert f'iteration {med["iteration"]}, the median-duration one of 40 iterations' in page
    z = render(tl).svg["zoom"]
    zs = [a for tag, a, _ in z if tag == "rect" and a.get("class") == "zspan"]
    assert {a["data-i"] for a in zs} == {str(med["iteration"])} and len(zs) == 7
    assert any(txt.startswith("+") and txt.endswith(" ms") for tag, _, txt in z if tag == "text")


def test_pivot_has_one_row_per_iteration_and_one_column_per_stage():
    tl = analyse_timeline(grpo_like(40))
    rows = render(tl).pivot
    head = [txt for _, txt in rows[0]]
    stages = ["actor_generate", "actor_compute_log_prob", "reference_compute_log_prob", "actor_update"]
    assert head == ["iteration", "iteration ms"] + [f"{s} ms" for s in stages]   # in running order
    body = rows[1:]
    assert [int(r[0][1]) for r in body] == [it["iteration"] for it in tl["iterations"]]
    for r, it in zip(body, tl["iterations"]):
        assert float(r[1][0]) == it["dur_us"]
        assert [float(c[0]) for c in r[2:]] == [it["stages"][s]["wall_us"] for s in stages]
        assert r[2][1] == ms(it["stages"]["actor_generate"]["wall_us"])


def test_pivot_leaves_a_missing_stage_empty_and_long_tables_collapse():
    tl = analyse_timeline(grpo_like(60))
    del tl["iterations"][3]["stages"]["reference_compute_log_prob"]
    page = report.render({"captures": [], "counts": {}, "timeline": tl, "options": {}})
    p = Page()
    p.feed(page)
    assert len(p.pivot) == 61 and p.pivot[4][4] == ["", ""]
    assert "<details><summary>Wall time per stage and iteration (ms): 60 rows" in page
    assert len([a for tag, a, _ in p.svg["iterbars"] if tag == "text" and _.startswith("iter ")]) == 60
    # the start-up iteration's bar is cut at BAR_CAP x the median, and says so
    assert "» 4,7" in page


def test_report_lists_at_most_the_longest_iterations():
    from mindspeed_profiler.analysis.results.report.sections import MAX_ITERATION_ROWS
    # 400 iterations of 100 us, except iteration 7 (1000 us): the tables keep 300 rows and iteration 7
    n = MAX_ITERATION_ROWS + 100
    spans = [("w", "a", k, k * 1000, 1000 if k == 7 else 100) for k in range(1, n + 1)]
    tl = analyse_timeline(stage_timeline(spans, []))
    page = report.render({"captures": [], "counts": {}, "timeline": tl, "options": {}})
    body = page.split("Iterations: overlap, idle and critical path")[1].split("</table>")[0]
    assert body.count("<tr") == MAX_ITERATION_ROWS + 1        # + the header row
    assert ">7</td><td" in body and f"{n} iterations: the bars and tables below show the" in page
