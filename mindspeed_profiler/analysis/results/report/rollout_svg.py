"""SVG of the rollout's long tail (report.html, "Rollout: the long tail"): one batch's occupancy
curve (a step line of samples running / the batch over time, with t50 and t90 marked) and its
response-length histogram (truncated samples stacked in red). Built from svg.py's escaped
fragments: data reaches the page only escaped."""
from __future__ import annotations

from markupsafe import Markup

from mindspeed_profiler.analysis.results.report.svg import TICK, Y_TICK, fmt_tick, join, nice_step, tag

WIDTH, HEIGHT = 440, 150
LEFT, RIGHT, TOP, BOTTOM = 44, 26, 8, 24     # margins of the plot area (px)
FILL, LINE, CUT, MARK = "#c6dbef", "#4e79a7", "#e15759", "#888"

OPEN = '<svg class="{cls}" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img"><title>{title}</title>'
STEP = '<polygon fill="{fill}" stroke="none" points="{area}"/><polyline fill="none" stroke="{line}" stroke-width="1.5" points="{points}"/>'
VMARK = ('<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="{color}" stroke-dasharray="3,3"/>'
         '<text x="{tx:.1f}" y="{ty}" fill="{color}">{label}</text>')
HBAR = '<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{color}"><title>{title}</title></rect>'


def _frame(cls: str, title: str) -> tuple[Markup, float, float]:
    """The svg's opening tag and the plot's width and height."""
    return tag(OPEN, cls=cls, w=WIDTH, h=HEIGHT, title=title), WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM


def _x_ticks(span: float, x, plot_h: float, label) -> list[Markup]:
    step = nice_step(span, 5)
    return [tag(TICK, x=x(k * step), top=TOP, bottom=TOP + plot_h, label_y=TOP + plot_h + 16, label=label(k * step, step))
            for k in range(int(span / step + 1e-9) + 1)]


def occupancy_svg(points: list[tuple[float, float]], marks: list[tuple[str, float | None]], title: str) -> Markup | None:
    """points: (t_s since the batch's first start, occupancy 0..1) where it changes, the last at the
    window's end; marks: (label, t_s) drawn as dashed lines (t50, t90)."""
    if len(points) < 2:
        return None
    window = max(points[-1][0], 1e-9)
    head, pw, ph = _frame("occupancy", title)
    x = lambda t: LEFT + pw * t / window        # noqa: E731
    y = lambda v: TOP + ph * (1 - v)            # noqa: E731
    out = [head]
    out += [tag(Y_TICK, left=LEFT, right=LEFT + pw, y=y(v), lx=LEFT - 4, ty=y(v) + 4, label=f"{v:.0%}")
            for v in (0.0, 0.5, 1.0)]
    out += _x_ticks(window * 1e6, lambda us: x(us / 1e6), ph, lambda v, step: fmt_tick(v, step))
    line, prev = [], None
    for t, v in points:
        if prev is not None:
            line.append(f"{x(t):.1f},{y(prev):.1f}")
        line.append(f"{x(t):.1f},{y(v):.1f}")
        prev = v
    area = [f"{x(0):.1f},{y(0):.1f}", *line, f"{x(window):.1f},{y(0):.1f}"]
    out.append(tag(STEP, fill=FILL, line=LINE, area=" ".join(area), points=" ".join(line)))
    for k, (label, t) in enumerate(marks):
        if t is not None:
            out.append(tag(VMARK, x=x(t), top=TOP, bottom=TOP + ph, color=MARK, tx=min(x(t) + 3, LEFT + pw - 20),
                           ty=TOP + 10 + 12 * k, label=label))
    out.append(Markup("</svg>"))
    return join(out)


def lengths_svg(bins: list[dict], title: str) -> Markup | None:
    """bins: {lo_tokens, hi_tokens, count, truncated} in order; bar height = count, the truncated part red."""
    if not bins:
        return None
    top = max(b["count"] for b in bins) or 1
    head, pw, ph = _frame("lengths", title)
    lo, hi = bins[0]["lo_tokens"], bins[-1]["hi_tokens"]
    x = lambda tok: LEFT + pw * (tok - lo) / max(hi - lo, 1)    # noqa: E731
    y = lambda n: TOP + ph * (1 - n / top)                       # noqa: E731
    out = [head]
    step = max(1, round(nice_step(top, 3)))
    out += [tag(Y_TICK, left=LEFT, right=LEFT + pw, y=y(v), lx=LEFT - 4, ty=y(v) + 4, label=str(v))
            for v in range(0, top + 1, step)]
    out += _x_ticks(hi - lo, lambda tok: x(lo + tok), ph, lambda v, _: f"{lo + v:g}")
    for b in bins:
        x0, w = x(b["lo_tokens"]) + 0.5, max(x(b["hi_tokens"]) - x(b["lo_tokens"]) - 1, 1)
        kept = b["count"] - b["truncated"]
        what = f"{b['lo_tokens']}-{b['hi_tokens'] - 1} tokens: {b['count']} samples"
        if kept:
            out.append(tag(HBAR, x=x0, y=y(kept), w=w, h=y(0) - y(kept), color=LINE, title=what))
        if b["truncated"]:
            out.append(tag(HBAR, x=x0, y=y(b["count"]), w=w, h=y(kept) - y(b["count"]), color=CUT,
                           title=f"{what}, {b['truncated']} truncated"))
    out.append(Markup("</svg>"))
    return join(out)
