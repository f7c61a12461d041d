"""SVG of the RL timeline: stage order and colours, the Gantt overview (one row per worker), the zoomed
Gantt of one iteration and the stacked bar of stage walls per iteration. Same escaping rule as svg.py."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

from markupsafe import Markup

from mindspeed_profiler.analysis.results.report.fmt import ms
from mindspeed_profiler.analysis.results.report.svg import (
    PALETTE,
    Chart,
    axis,
    fit_left,
    join,
    label_width,
    row_label,
    stacked_bars,
    tag,
)

GANTT_WIDTH = 1300
GANTT_LEFT, GANTT_ROW = 150, 22   # Gantt: worker label column (at least; wider for long names) and row height (px)
GANTT_LEFT_MAX = 360
MIN_SPAN_PX = 2.0         # a span is drawn at least this wide
BAR_CAP = 2.5             # per-iteration bars: the scale ends at 2.5x the median bar (a long start-up is cut)
PROFILER_PART = "profiler (capture export)"   # the per-iteration bars' part for the profiler's own spans
PROFILER_COLOR = "#5f5f5f"
NO_STAGE_PART = "no stage running"

# fragment templates: filled by svg.tag(), which escapes every value
SPAN = ('<rect class="{cls}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{h}" fill="{color}" data-w="{row}" '
        'data-s="{start:.3f}" data-d="{dur:.3f}" data-i="{it}">'
        '<title>{stage} on {worker} (iteration {it}): {dur_ms} ms</title></rect>')
ITERATION_LINE = '<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{y}" stroke="#bbb" stroke-dasharray="2,3"/>'
ITERATION_LABEL = '<text class="itlabel" x="{x:.1f}" y="{y}">{text}</text>'


def stage_order(tl: dict) -> list[str]:
    """Stages in the order they run within an iteration (mean start offset), then by name."""
    offs: dict[str, list[float]] = {}
    for it in tl.get("iterations", []):
        for name, v in it["stages"].items():
            offs.setdefault(name, []).append(v.get("first_start_us") or 0.0)
    for s in tl.get("gantt") or []:
        offs.setdefault(s["stage"], [math.inf])
    return sorted(offs, key=lambda n: (sum(offs[n]) / len(offs[n]), str(n)))


def stage_colors(tl: dict) -> dict[str, str]:
    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(stage_order(tl))}


def median_iteration(its: list[dict]) -> dict | None:
    """The iteration of median duration (the lower one for an even count)."""
    if not its:
        return None
    return sorted(its, key=lambda it: (it["dur_us"], it["iteration"]))[(len(its) - 1) // 2]


@dataclass(frozen=True)
class Gantt:
    """What the overview and the zoom share: the spans, one row per worker, the stage colours, the
    time range [lo, hi] of the overview's axis and the iterations that overlap the spans."""
    spans: list[dict]
    workers: list
    colors: dict[str, str]
    lo: float
    hi: float
    iterations: list[dict]
    width: int = GANTT_WIDTH
    left: int = GANTT_LEFT   # the worker label column, wide enough for the longest worker name

    @property
    def plot_w(self) -> int:
        return self.width - self.left - 20

    @cached_property
    def row_of(self) -> dict:
        return {w: i for i, w in enumerate(self.workers)}

    @cached_property
    def median(self) -> dict | None:
        return median_iteration(self.iterations)

    @property
    def starts_late(self) -> bool:
        """The first span comes long after the timeline start (a start-up), which the axis leaves out."""
        return self.lo > 0.05 * (self.hi - self.lo)


def gantt_layout(tl: dict) -> Gantt | None:
    """The axis runs from the first span to the last one, extended to the end of the last iteration
    (at most doubling it); None without spans."""
    spans = tl.get("gantt") or []
    if not spans:
        return None
    lo = min(s["start_us"] for s in spans)
    hi = max(s["start_us"] + s["dur_us"] for s in spans)
    its = [it for it in tl.get("iterations", []) if it["start_us"] < hi and it["start_us"] + it["dur_us"] > lo]
    if its:
        hi = max(hi, min(its[-1]["start_us"] + its[-1]["dur_us"], hi + (hi - lo)))
    workers = sorted({s["worker"] for s in spans}, key=str)
    return Gantt(spans, workers, stage_colors(tl), lo, max(hi, lo + 1.0), its,
                 left=fit_left(workers, GANTT_LEFT, GANTT_LEFT_MAX))


def _scale(left: int, t0: float, t1: float, plot_w: float) -> Callable[[float], float]:
    return lambda t: left + plot_w * (t - t0) / (t1 - t0)


def _span_rect(g: Gantt, s: dict, x: Callable[[float], float], cls: str, lo: float, hi: float) -> Markup:
    """A span clipped to [lo, hi]; its exact start and duration go to data-s / data-d (the zoom redraws from them)."""
    x0, x1 = x(max(s["start_us"], lo)), x(min(s["start_us"] + s["dur_us"], hi))
    row = g.row_of[s["worker"]]
    return tag(SPAN, cls=cls, x=x0, y=row * GANTT_ROW + 4, w=max(MIN_SPAN_PX, x1 - x0),  # 10 ms on 10 s: visible
               h=GANTT_ROW - 8, color=g.colors[s["stage"]], row=row, start=s["start_us"], dur=s["dur_us"],
               it=s["iteration"], stage=s["stage"], worker=s["worker"], dur_ms=ms(s["dur_us"]))


def _worker_labels(g: Gantt) -> Markup:
    return join(row_label(i * GANTT_ROW + 16, w, int((g.left - 8) / 7)) for i, w in enumerate(g.workers))


def _iteration_marks(g: Gantt, x: Callable[[float], float], y_it: int) -> Markup:
    """A dashed line at each iteration start, and its number where it fits (labels never overlap)."""
    out, last_end = [], -math.inf
    for it in g.iterations:
        xi = x(max(it["start_us"], g.lo))
        out.append(tag(ITERATION_LINE, x=xi, y=y_it))
        text = str(it["iteration"])
        wd = label_width(text)
        if xi >= last_end and xi + wd <= g.width:
            out.append(tag(ITERATION_LABEL, x=xi + 2, y=y_it + 12, text=text))
            last_end = xi + wd
    return join(out)


def overview(g: Gantt) -> Chart:
    """All spans, one row per worker, iteration boundaries and time ticks."""
    x = _scale(g.left, g.lo, g.hi, g.plot_w)
    rows_h = GANTT_ROW * len(g.workers)
    y_it, y_axis = rows_h + 6, rows_h + 26
    svg = join([
        tag('<svg id="gantt" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img">',
            g.width, y_axis + 24),
        axis(g.lo, g.hi, 0.0, x, 0, y_axis),
        tag('<text x="4" y="{}" fill="#555">iteration</text><text x="4" y="{}" fill="#555">time</text>',
            y_it + 12, y_axis + 16),
        _iteration_marks(g, x, y_it),
        _worker_labels(g),
        join(_span_rect(g, s, x, "span", g.lo, g.hi) for s in g.spans),
        Markup("</svg>")])
    return Chart(list(g.colors.items()), svg)


def zoom(g: Gantt) -> Markup:
    """The median iteration on its own axis (time since its start). The page's script redraws the
    dynamic group <g class="dyn"> for another iteration from the overview's spans, with data-left,
    data-plotw, data-rowh and data-rows."""
    med = g.median
    z0, z1 = med["start_us"], med["start_us"] + max(med["dur_us"], 1.0)
    x = _scale(g.left, z0, z1, g.plot_w)
    y_axis = GANTT_ROW * len(g.workers) + 4
    inside = (s for s in g.spans if s["start_us"] < z1 and s["start_us"] + s["dur_us"] > z0)
    return join([
        tag('<svg id="zoom" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img" '
            'data-left="{}" data-plotw="{}" data-rowh="{}" data-rows="{}">',
            g.width, y_axis + 24, g.left, g.plot_w, GANTT_ROW, len(g.workers)),
        _worker_labels(g),
        Markup('<g class="dyn">'),
        axis(z0, z1, z0, x, 0, y_axis, "+"),
        join(_span_rect(g, s, x, "zspan", z0, z1) for s in inside),
        Markup("</g></svg>")])


def iteration_bars(tl: dict, its: list[dict]) -> Chart | None:
    """One bar per iteration stacking each stage's wall, the profiler's own time (capture export:
    profiler_us) and the rest of the time with no stage running (no_stage_us less the profiler's
    part of it, profiler_no_stage_us)."""
    parts = [(("stage", s), s, c) for s, c in stage_colors(tl).items()] + [
        (("profiler",), PROFILER_PART, PROFILER_COLOR), (("none",), NO_STAGE_PART, "#d3d3d3")]
    rows = []
    for it in its:
        v = {("stage", s): st["wall_us"] for s, st in it["stages"].items()}
        v[("profiler",)] = it.get("profiler_us") or 0.0
        v[("none",)] = max(0.0, (it.get("no_stage_us") or 0.0) - (it.get("profiler_no_stage_us") or 0.0))
        v["dur"] = it["dur_us"]
        rows.append((f"iter {it['iteration']}", v))
    return stacked_bars(rows, parts, left=90, row_h=13 if len(rows) > 20 else 20, label_key="dur", svg_id="iterbars",
                        cap=BAR_CAP)
