"""SVG building blocks of report.html: time axis, row labels, horizontal stacked bars and a value per iteration.

Every fragment is a markupsafe.Markup made by tag() from a constant format string whose arguments
tag() escapes, so data (names, paths) can reach the page only escaped."""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Number
from typing import Callable, Iterable, NamedTuple

from markupsafe import Markup, escape

from mindspeed_profiler.analysis.models.display import short
from mindspeed_profiler.analysis.results.report.fmt import ms

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac"]
LABEL_CHAR_PX = 7.0   # width of one character of an 11px svg label (digits are ~6.1 px): used to space labels
MAX_LABEL_PX = 560    # the widest label column of a bar chart; a longer label is cut (its full text on hover)
MIN_PLOT_PX = 640     # a bar chart grows wider with its label column, keeping at least this much for the bars

# fragment templates: filled by tag(), which escapes every value
TICK = ('<line class="tick" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e4e4e4"/>'
        '<text x="{x:.1f}" y="{label_y}" text-anchor="middle" fill="#555">{label}</text>')
ROW_LABEL = '<text x="4" y="{}">{}<title>{}</title></text>'
BAR = ('<rect class="bar" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{h}" fill="{color}">'
       '<title>{label}: {part} {value} ms</title></rect>')
BAR_BREAK = '<line x1="{x1:.1f}" y1="{y1}" x2="{x2:.1f}" y2="{y2}" stroke="#fff" stroke-width="2"/>'
BAR_TOTAL = '<text x="{x:.1f}" y="{y:.1f}">{mark}{total} ms</text>'


@dataclass(frozen=True)
class Chart:
    """A finished SVG plot and the (name, colour) pairs of its legend, which the templates draw as HTML."""
    legend: list[tuple[str, str]]
    svg: Markup


def _escaped(v):
    """None shows as nothing (as in the templates); numbers stay numbers for the format spec (they
    cannot hold markup); anything else is escaped (Markup is kept as it is)."""
    if v is None:
        return ""
    return v if isinstance(v, Number) else escape(v)


def tag(template: str, *args, **kwargs) -> Markup:
    """template (a constant of this package, never data) filled with escaped arguments. The same as
    Markup(template).format(...), which runs a pure-Python formatter: 5x slower on a 4000-span Gantt."""
    return Markup(template.format(*map(_escaped, args), **{k: _escaped(v) for k, v in kwargs.items()}))


def join(parts: Iterable) -> Markup:
    """Concatenate fragments; anything that is not already Markup is escaped."""
    return Markup("").join(parts)


def label_width(text: str) -> float:
    """Estimated width of an svg label (11px font), with a small gap."""
    return LABEL_CHAR_PX * len(text) + 6


def nice_step(span_us: float, n: int = 8) -> float:
    """A 1 / 2 / 5 x 10^k tick step giving about n ticks over span_us."""
    raw = max(span_us, 1e-3) / n
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * (1 - 1e-9))


def fmt_tick(v_us: float, step_us: float) -> str:
    unit, name = (1e6, "s") if step_us >= 1e5 else (1e3, "ms") if step_us >= 1 else (1.0, "us")
    return f"{round(v_us / unit, 6):g} {name}"


def axis(lo_us: float, hi_us: float, origin_us: float, x: Callable[[float], float], y_top: float, y_axis: float,
         prefix: str = "") -> Markup:
    """Ticks every nice step of (t - origin) between lo and hi: a grid line down to y_axis and a label under it."""
    step = nice_step(hi_us - lo_us)
    out = []
    k = math.ceil((lo_us - origin_us) / step - 1e-9)
    while origin_us + k * step <= hi_us + 1e-6:
        out.append(tag(TICK, x=x(origin_us + k * step), top=y_top, bottom=y_axis + 4, label_y=y_axis + 16,
                       label=prefix + fmt_tick(k * step, step)))
        k += 1
    return join(out)


def row_label(y, text, n: int, title=None) -> Markup:
    """A row's name at the left, cut to n characters; the full name (or `title`) on hover."""
    return tag(ROW_LABEL, y, short(text, n), text if title is None else title)


class _Scale(NamedTuple):
    """What every bar of one stacked-bar plot shares."""
    parts: list[tuple]
    left: int       # label column (px)
    plot_w: float
    top: float      # the value at the plot's right end (us)
    row_h: int
    chars: int      # label length that fits the label column


def fit_left(labels: Iterable[str], lo: int = 90, hi: int = MAX_LABEL_PX) -> int:
    """A label column wide enough for the longest label (11px font), between lo and hi px."""
    return int(min(hi, max([lo] + [label_width(str(t)) + 8 for t in labels])))


def stacked_bars(rows: list[tuple[str, dict]], parts: list[tuple], width: int = 1100, left: int | None = None,
                 row_h: int = 20, label_key=None, svg_id: str = "", cap: float | None = None,
                 titles: list[str] | None = None) -> Chart | None:
    """Horizontal stacked bars, one per row label; values in us. The number after a bar is the sum of
    its parts, or v[label_key] when given. With cap, the scale ends at cap x the median bar, and
    longer bars are cut there (marked with a white break and a » before their number), their parts
    drawn in proportion across the plot so that each still shows, with its value on hover. The label
    column fits the longest label (up to MAX_LABEL_PX; a longer one is cut) unless `left` is given;
    a label's full text, or titles[i], shows on hover. Parts with no value in any row are left out
    of the legend."""
    if not rows:
        return None
    totals = [sum((v.get(k) or 0.0) for k, _, _ in parts) for _, v in rows]
    top = max(totals) or 1.0
    if cap and len(rows) >= 3:
        top = min(top, cap * (sorted(totals)[len(totals) // 2] or top))
    left = fit_left(label for label, _ in rows) if left is None else left
    width = max(width, left + MIN_PLOT_PX + 110)
    scale = _Scale(parts, left, width - left - 110, top, row_h, int((left - 8) / LABEL_CHAR_PX))
    ident = tag(' id="{}"', svg_id) if svg_id else ""
    out = [tag('<svg class="bars"{} xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img">',
               ident, width, row_h * len(rows) + 6)]
    for i, (label, v) in enumerate(rows):
        total = v.get(label_key) if label_key is not None else totals[i]
        out.append(_bar_row(scale, i * row_h + 3, label, v, total, cut=totals[i] > top * (1 + 1e-9),
                            title=titles[i] if titles else None, length=totals[i]))
    out.append(Markup("</svg>"))
    used = [(n, c) for k, n, c in parts if any((v.get(k) or 0.0) > 0 for _, v in rows)]
    return Chart(used, join(out))


def _bar_row(scale: _Scale, y: int, label: str, v: dict, total, cut: bool, title: str | None = None,
             length: float = 0.0) -> Markup:
    """One bar: its label, a segment per part, the break mark when cut, its number. A cut bar (its
    parts add up to `length`, past the scale's end) fills the plot with every part in proportion:
    clipped at the plot's end instead, the parts after the cut would not show at all."""
    ty = y + scale.row_h / 2 + 1
    out = [row_label(f"{ty:.1f}", label, scale.chars, title)]
    x0, x_end = scale.left, scale.left + scale.plot_w
    per_us = scale.plot_w / (length if cut and length > 0 else scale.top)
    for key, name, col in scale.parts:
        val = v.get(key) or 0.0
        wd = min(per_us * val, x_end - x0)
        if wd > 0:
            out.append(tag(BAR, x=x0, y=y, w=wd, h=scale.row_h - 5, color=col, label=label, part=name,
                           value=ms(val)))
            x0 += wd
    if cut:
        out.append(tag(BAR_BREAK, x1=x_end - 6, y1=y + scale.row_h - 4, x2=x_end - 2, y2=y - 1))
    out.append(tag(BAR_TOTAL, x=x0 + 4, y=ty, mark="» " if cut else "", total=ms(total)))
    return join(out)


# -- the rank x stage heat map (report.html at scale: thousands of ranks in one picture)

HEAT_CELL = ('<rect class="heat" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{color}"{stroke}>'
             '<title>{title}</title></rect>')
HEAT_HEAD = '<text x="{x:.1f}" y="{y}" text-anchor="middle" fill="#333">{text}<title>{title}</title></text>'
HEAT_NONE = "#f0f0f0"   # no sample for this rank and stage


def heat_color(ratio: float | None, threshold: float) -> str:
    """White at the median (ratio 1), red above it (full at 1 + 2 x (threshold - 1)), blue below."""
    if ratio is None or not math.isfinite(ratio):
        return HEAT_NONE
    span = 2 * max(threshold - 1, 0.05)
    t = max(-1.0, min(1.0, (ratio - 1) / span))
    end = (215, 48, 31) if t > 0 else (44, 123, 182)
    mix = [round(255 + (e - 255) * abs(t)) for e in end]
    return "#{:02x}{:02x}{:02x}".format(*mix)


class HeatCell(NamedTuple):
    ratio: float | None
    flagged: bool
    title: str


def heat_map(rows: list[str], cols: list[str], cells: dict[tuple[int, int], HeatCell], threshold: float,
             col_titles: list[str] | None = None, max_height: int = 1200) -> Markup:
    """One row per rank (or per bin of ranks), one column per stage; a cell's colour is its ratio to
    the stage's median, a flagged cell is outlined. Row labels are drawn where they fit (each on hover)."""
    row_h = max(2.0, min(16.0, max_height / max(1, len(rows))))
    every = max(1, math.ceil(12 / row_h))   # a label every `every` rows: 11px text does not overlap
    left = fit_left(rows[::every], lo=60, hi=240)
    chars = int((left - 8) / LABEL_CHAR_PX)
    col_w = max(48.0, min(140.0, 900 / max(1, len(cols))))
    head = 30
    width, height = left + col_w * len(cols) + 10, head + row_h * len(rows) + 4
    out = [tag('<svg class="heat" xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" role="img">',
               width, height)]
    for j, name in enumerate(cols):
        out.append(tag(HEAT_HEAD, x=left + col_w * (j + 0.5), y=head - 10, text=short(name, int(col_w / 6.5)),
                       title=(col_titles or cols)[j]))
    for i, name in enumerate(rows):
        y = head + i * row_h
        if i % every == 0:
            out.append(row_label(f"{y + min(row_h, 12) - 2:.1f}", name, chars))
        for j in range(len(cols)):
            c = cells.get((i, j))
            out.append(tag(HEAT_CELL, x=left + col_w * j, y=y, w=col_w - 1, h=max(1.0, row_h - (1 if row_h > 4 else 0)),
                           color=heat_color(c.ratio if c else None, threshold),
                           stroke=Markup(' stroke="#000" stroke-width="1"') if c and c.flagged else "",
                           title=c.title if c else f"{name} · {cols[j]}: no sample"))
    out.append(Markup("</svg>"))
    return join(out)


# -- a value per iteration (the tracker's tokens/s, MFU): one line per series

MAX_POINTS = 2000   # points drawn per series; a longer run is drawn every k-th iteration (the tables have each)
DOT = '<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"><title>{name}, iteration {it}: {text}</title></circle>'
LINE = '<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{points}"/>'
Y_TICK = ('<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#e4e4e4"/>'
          '<text x="{lx}" y="{ty:.1f}" text-anchor="end" fill="#555">{label}</text>')


def iteration_plot(series: list[tuple[str, dict[int, float]]], text: Callable[[float], str], width: int = 900,
                   height: int = 160, svg_id: str = "") -> Chart | None:
    """One line per (name, {iteration: value}) over the iterations, from 0 up; `text` writes a value
    (axis labels, hover). A dot per point (its value on hover) up to 200 points."""
    series = [(n, v) for n, v in series if v]
    if not series:
        return None
    its = sorted({i for _, v in series for i in v})
    top = max([max(v.values()) for _, v in series] + [0.0]) or 1.0   # a damaged file's negative values: no scale below 0
    left, right, y0, plot_h = 80, width - 10, 8, height - 30
    lo, hi = its[0], its[-1] if its[-1] > its[0] else its[0] + 1
    x = lambda i: left + (right - left) * (i - lo) / (hi - lo)   # noqa: E731
    y = lambda v: y0 + plot_h * (1 - v / top)                     # noqa: E731
    ident = tag(' id="{}"', svg_id) if svg_id else ""
    out = [tag('<svg class="plot"{} xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img">',
               ident, width, height)]
    step = nice_step(top, 4)
    for k in range(int(top / step + 1e-9) + 1):
        out.append(tag(Y_TICK, left=left, right=right, y=y(k * step), lx=left - 4, ty=y(k * step) + 4,
                       label=text(k * step)))
    xs = nice_step(hi - lo, 8)
    for k in range(math.ceil(lo / max(1.0, xs)), int(hi / max(1.0, xs)) + 1):
        it = k * max(1.0, xs)
        out.append(tag(TICK, x=x(it), top=y0, bottom=y0 + plot_h, label_y=y0 + plot_h + 16, label=f"{it:g}"))
    for n_, (name, values) in enumerate(series):
        color = PALETTE[n_ % len(PALETTE)]
        pts = sorted(values.items())
        pts = pts[::math.ceil(len(pts) / MAX_POINTS)]
        out.append(tag(LINE, color=color, points=" ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in pts)))
        if len(pts) <= 200:
            out += [tag(DOT, x=x(i), y=y(v), color=color, name=name, it=i, text=text(v)) for i, v in pts]
    out.append(Markup("</svg>"))
    return Chart([(name, PALETTE[k % len(PALETTE)]) for k, (name, _) in enumerate(series)], join(out))
