"""report.html escapes data everywhere: a summary whose every name-like field holds markup (a
hostile or tampered summary.json) renders with each name escaped, in text, SVG <title>s and
attributes alike, and so does the report of a run analysed from traces with hostile names; and the
report package builds markup only from constant templates."""
from __future__ import annotations

import ast
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markupsafe import Markup, escape

from analysis_testutil import analyse_hostile_run
from mindspeed_profiler.analysis.results import report
from mindspeed_profiler.analysis.results.report import svg

PACKAGE = Path(report.__file__).parent
OUR_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "p", "span", "table", "thead",
            "tbody", "tr", "th", "td", "div", "i", "svg", "line", "text", "rect", "details", "summary", "script", "b",
            "g", "select", "option", "label", "a"}


def bad(field: str) -> str:
    """A name that breaks out of text, of a quoted attribute (either quote) and of an entity."""
    return f"<script>alert('{field}')</script>\"><img src=x onerror=alert(1)>&amp;"


def hostile_timeline() -> dict:
    """A summary.json timeline (two iterations of two stages, one per worker), every stage and worker
    name hostile. Built by hand: the report reads only the summary, whatever produced it."""
    stages = [(bad("stage_a"), f"{bad('role0')}:0", 0.0), (bad("stage_b"), f"{bad('role1')}:1", 40.0)]
    gantt = [{"stage": st, "worker": w, "iteration": k, "start_us": k * 100 + off, "dur_us": 50.0}
             for k in (1, 2) for st, w, off in stages]
    gantt[0]["iteration"] = bad("span_iteration")      # tampered: only ever printed
    its = [{"iteration": k, "start_us": k * 100.0, "dur_us": 90.0, "overlap_us": 10.0, "no_stage_us": 0.0,
            "stages": {st: {"wall_us": 50.0, "first_start_us": off} for st, _, off in stages},
            "idle_per_worker_us": {w: 40.0 for _, w, _ in stages},
            "critical_path": [{"stage": st, "worker": w} for st, w, _ in stages]} for k in (1, 2)]
    for it in its:
        it.update(profiler_us=5.0, profiler_no_stage_us=0.0)
    return {"iterations": its, "gantt": gantt, "gantt_truncated": True, "n_stage_spans": bad("n_stage_spans"),
            "warning": bad("timeline_warning")}


def hostile_summary(device: bool = True) -> dict:
    ok = {"path": bad("path"), "kind": "kineto", "status": "ok", "role": bad("role"), "rank": bad("rank"),
          "stage": bad("cap_stage"), "wall_us": 10.0,
          "steps": [{"step": bad("step"), "dur_us": 5.0, "device_busy_us": 1.0}],
          "top_ops": [{"name": bad("op"), "count": 1, "total_us": 1.0, "self_us": 1.0, "device_us": 1.0}],
          "top_kernels": [{"name": bad("kernel"), "class": bad("kernel_class"), "count": 1, "total_us": 1.0}],
          "annotations": [{"name": bad("annotation"), "count": 1, "total_us": 1.0, "mean_us": 1.0, "max_us": 1.0}],
          "warnings": [bad("cap_warning")], "run_id": bad("cap_run"),
          "communication": {"device": {"total_us": 1.0, "exposed_us": 0.5, "overlapped_us": 0.5, "share_of_busy": 0.2},
                            "host": {"total_us": 2.0, "share_of_wall": 0.2},
                            "top": [{"name": bad("collective"), "where": bad("where"), "count": 1, "total_us": 1.0}]}}
    if device:
        ok["device"] = {"busy_us": 3.0, "compute_us": 2.0, "communication_exposed_us": 1.0, "idle_us": 1.0}
    return {
        "root": bad("root"), "created": bad("created"),
        "counts": {"found": bad("found"), "ok": 2, "failed": 1, "unparsed": 0},
        "options": {"threshold": bad("threshold")},
        "warnings": [bad("warning")], "runs": [bad("run_a"), bad("run_b")],
        "captures": [
            {"path": bad("failed_path"), "kind": bad("kind"), "status": "failed", "error": bad("error")},
            ok,
            {"path": bad("cluster"), "kind": "cluster", "status": "ok",
             "ranks": [{"rank": bad("cluster_rank"), "computing_us": 1.0, "communication_exposed_us": 1.0,
                        "free_us": 1.0}]}],
        "stage_rank": [{"source": "capture", "stage": bad("wall_stage"), "role": bad("wall_role"),
                        "rank": bad("wall_rank"), "value_us": 5.0}],
        "slow_ranks": [{"source": bad("source"), "stage": bad("slow_stage"), "metric": bad("metric"),
                        "role": bad("slow_role"), "rank": 0, "value_us": 2.0, "median_us": 1.0, "ratio": 2.0,
                        "flagged": True, "n": 3, "reason": bad("reason"), "run_id": bad("slow_run")}],
        "timeline": hostile_timeline(),
    }


class Tags(HTMLParser):
    """The tags and attribute names a browser would see, and the link targets."""

    def __init__(self):
        super().__init__()
        self.tags, self.attrs, self.hrefs = set(), set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs.update(a for a, _ in attrs)
        self.hrefs += [v for a, v in attrs if a == "href"]


def assert_links_are_relative_paths(t: Tags) -> None:
    """Links (to captures) are percent-encoded relative paths: no scheme (javascript:, http:), no
    quote, bracket or space that could end the attribute or the tag."""
    for h in t.hrefs:
        assert h and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", h) and not h.startswith("//"), h
        assert not set(h) & set("<>\"' :&"), h


FIELDS = {"stage_a", "stage_b", "role0", "role1", "span_iteration", "n_stage_spans", "path", "role", "rank",
          "cap_stage", "step", "op", "kernel", "kernel_class", "annotation", "root", "created", "found", "threshold",
          "failed_path", "kind", "error", "cluster", "cluster_rank", "source", "slow_stage", "metric", "slow_role",
          "warning", "cap_warning", "collective", "where", "reason", "run_a", "run_b", "slow_run", "timeline_warning"}
HOST_FIELDS = {"wall_stage", "wall_role", "wall_rank"}   # shown only without device time


@pytest.mark.parametrize("device", [True, False], ids=["device", "host-walls"])
def test_every_name_is_escaped(device):
    page = report.render(hostile_summary(device))
    assert page.count("<script") == 1                  # ours, at the end
    assert "<img" not in page and "onerror=alert(1)>" not in page
    p = Tags()
    p.feed(page)
    assert p.tags <= OUR_TAGS, p.tags - OUR_TAGS
    assert not any(a.startswith("on") or a == "src" for a in p.attrs), p.attrs
    assert len(p.hrefs) >= 2      # the hostile capture paths are links
    assert_links_are_relative_paths(p)
    shown = {f for f in FIELDS | HOST_FIELDS if str(escape(bad(f))) in page}
    assert shown == FIELDS | (set() if device else HOST_FIELDS)


def test_names_in_svg_titles_and_attributes_are_escaped():
    page = report.render(hostile_summary())
    stage, worker = escape(bad("stage_a")), escape(f"{bad('role0')}:0")
    assert f"<title>{stage} on {worker} (iteration 2)" in page              # Gantt span title
    assert f'data-i="{escape(bad("span_iteration"))}"' in page              # an attribute
    assert f"<title>{worker}</title>" in page                              # worker row label
    assert f"<title>iter 1: {stage} " in page                               # per-iteration bar segment
    assert f'<th class="">{stage} ms</th>' in page                          # pivot header


def test_report_escapes_hostile_names_and_is_self_contained(tmp_path):
    """The same from the traces up: a run whose op, kernel, process, role, stage and worker names are
    hostile is analysed, its summary tampered with, and rendered."""
    summary = analyse_hostile_run(tmp_path)
    summary["options"]["threshold"] = "<b id=inj>1.2</b>"       # a tampered summary.json
    summary["counts"]["found"] = "<i id=inj2>"
    page = report.render(summary)
    for bad_markup in ("<script>alert", "<img", "<b id=inj>", "<i id=inj2>", "onerror=alert(2)>"):
        assert bad_markup not in page, bad_markup
    assert page.count("<script>") == 1 and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&#39;; alert(3); &#39;&amp;amp;" in page             # ' and & escaped too
    # the tags and attributes a browser sees: only ours, nothing that loads or runs anything
    t = Tags()
    t.feed(page)
    assert t.tags <= OUR_TAGS, t.tags
    assert not any(a.startswith("on") or a == "src" for a in t.attrs), t.attrs
    assert_links_are_relative_paths(t)
    assert "@import" not in page and "url(" not in page


def test_tag_escapes_data_and_keeps_numbers_and_fragments():
    frag = svg.tag("<b>{}</b>", "<i>")
    assert frag == "<b>&lt;i&gt;</b>" and isinstance(frag, Markup)
    assert svg.tag('<x a="{:.1f}" b="{}" c="{}">{}</x>', 2, None, "\"'&", frag) == \
        '<x a="2.0" b="" c="&#34;&#39;&amp;"><b>&lt;i&gt;</b></x>'


def _markup_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("Markup", "tag"):
            yield node


def _string_constants(tree: ast.Module) -> set[str]:
    return {t.id for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str) for t in n.targets if isinstance(t, ast.Name)}


@pytest.mark.parametrize("module", sorted(p.name for p in PACKAGE.glob("*.py")))
def test_markup_is_made_only_from_constant_templates(module):
    """Markup(...) and svg.tag(...) take a literal or a module-level string constant, never data:
    the data goes in their escaping format arguments."""
    tree = ast.parse((PACKAGE / module).read_text())
    constants = _string_constants(tree)
    for n in tree.body:   # a constant template imported from a sibling module of the report is one too
        if isinstance(n, ast.ImportFrom) and n.module and (PACKAGE / (n.module.rsplit(".", 1)[-1] + ".py")).exists():
            theirs = _string_constants(ast.parse((PACKAGE / (n.module.rsplit(".", 1)[-1] + ".py")).read_text()))
            constants |= {a.asname or a.name for a in n.names if a.name in theirs}
    tag_def = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "tag"), None)
    inside_tag = set(map(id, ast.walk(tag_def))) if tag_def else set()
    for call in _markup_calls(tree):
        if id(call) in inside_tag:      # tag() itself wraps its (constant) template
            continue
        arg = call.args[0] if call.args else None
        literal = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
        assert literal or (isinstance(arg, ast.Name) and arg.id in constants), \
            f"{module}:{call.lineno}: {ast.unparse(call)[:80]}"


def test_templates_never_turn_escaping_off():
    templates = list(PACKAGE.glob("templates/**/*.j2"))
    assert len(templates) > 2
    for t in templates:
        text = t.read_text()
        for off in ("|safe", "| safe", "autoescape false", "Markup"):
            assert off not in text, (t.name, off)
