"""report.html: one self-contained page (inline SVG, CSS and a few lines of JS; no network).

Built only from summary.json, so `mindspeed-profiler report DIR` can regenerate it.
"""
from __future__ import annotations

import html
import math
from pathlib import Path

MAX_ITERATION_ROWS = 300   # iterations listed in the report's tables (a week-long run has thousands)
LONG_TABLE = 50            # tables longer than this are collapsed into a <details>
GANTT_LEFT, GANTT_ROW = 150, 22   # Gantt: worker label column and row height (px)
MIN_SPAN_PX = 2.0         # a span is drawn at least this wide
BAR_CAP = 2.5             # per-iteration bars: the scale ends at 2.5x the median bar (a long start-up is cut)
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac"]
PARTS = [("compute_us", "compute", "#4e79a7"), ("communication_exposed_us", "communication (exposed)", "#e15759"),
         ("memcpy_exposed_us", "memory copy (exposed)", "#edc948"), ("idle_us", "idle", "#d3d3d3")]
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 6px;text-align:right}
th{background:#f4f4f4;cursor:pointer}td.l,th.l{text-align:left;max-width:520px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.bad{color:#b00020}.flag{background:#ffe3e3}.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}svg text{font-size:11px}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
details.cap summary{font-weight:400;font-size:14px}details.cap summary .path{color:#888;font-size:12px}
.note{color:#555;font-size:13px;margin:4px 0}select{font-size:13px}
"""
JS = """
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0];
    var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    var asc = th.getAttribute('data-asc') !== '1';
    th.setAttribute('data-asc', asc ? '1' : '0');
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[idx].getAttribute('data-v') || a.cells[idx].textContent;
      var y = b.cells[idx].getAttribute('data-v') || b.cells[idx].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
(function () {   // zoom into any iteration: redraw #zoom from the overview's spans
  var sel = document.getElementById('zoomsel'), z = document.getElementById('zoom');
  if (!sel || !z) return;
  var NS = 'http://www.w3.org/2000/svg', L = +z.getAttribute('data-left'), W = +z.getAttribute('data-plotw'),
      RH = +z.getAttribute('data-rowh'), Y = RH * +z.getAttribute('data-rows') + 4;
  function el(tag, attrs, text) {
    var n = document.createElementNS(NS, tag);
    for (var k in attrs) n.setAttribute(k, attrs[k]);
    if (text !== undefined) n.textContent = text;
    return n;
  }
  function draw() {
    var o = sel.options[sel.selectedIndex], t0 = +o.getAttribute('data-s'), t1 = t0 + Math.max(+o.getAttribute('data-d'), 1);
    var g = z.querySelector('g.dyn'), x = function (t) { return L + W * (t - t0) / (t1 - t0); };
    while (g.firstChild) g.removeChild(g.firstChild);
    var raw = (t1 - t0) / 8, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = 10 * mag;
    [1, 2, 5].some(function (m) { if (m * mag >= raw * (1 - 1e-9)) { step = m * mag; return true; } return false; });
    var unit = step >= 1e5 ? [1e6, 's'] : step >= 1 ? [1e3, 'ms'] : [1, 'us'];
    for (var k = 0; k * step <= t1 - t0 + 1e-6; k++) {
      var xt = x(t0 + k * step).toFixed(1);
      g.appendChild(el('line', {'class': 'tick', x1: xt, y1: 0, x2: xt, y2: Y + 4, stroke: '#e4e4e4'}));
      g.appendChild(el('text', {x: xt, y: Y + 16, 'text-anchor': 'middle', fill: '#555'},
                       '+' + parseFloat((k * step / unit[0]).toFixed(6)) + ' ' + unit[1]));
    }
    document.querySelectorAll('#gantt rect.span').forEach(function (r) {
      var s = +r.getAttribute('data-s'), e = s + +r.getAttribute('data-d');
      if (!(s < t1 && e > t0)) return;
      var x0 = x(Math.max(s, t0)), x1 = x(Math.min(e, t1));
      var n = el('rect', {'class': 'zspan', x: x0.toFixed(1), y: r.getAttribute('y'), height: r.getAttribute('height'),
                          width: Math.max(2, x1 - x0).toFixed(1), fill: r.getAttribute('fill')});
      var t = r.querySelector('title');
      if (t) n.appendChild(t.cloneNode(true));
      g.appendChild(n);
    });
    document.getElementById('zoomcap').textContent = o.textContent;
  }
  sel.addEventListener('change', draw);
  var m = /^#iter=(.+)$/.exec(location.hash);   // report.html#iter=N opens the zoom on iteration N
  if (m) {
    for (var i = 0; i < sel.options.length; i++)
      if (sel.options[i].value === decodeURIComponent(m[1])) { sel.selectedIndex = i; draw(); }
  }
})();
document.body.setAttribute('data-ready', '1');
"""


def e(x) -> str:
    return html.escape("" if x is None else str(x))


def ms(us) -> str:
    return "" if us is None else f"{us / 1e3:,.3f}"


def _td(v, left: bool) -> str:
    """A cell; v may be (text, value): the value goes to data-v (exact, and what the sort uses)."""
    cls = ' class="l"' if left else ""
    if isinstance(v, tuple):
        text, val = v
        return f'<td{cls} data-v="{e(val)}">{e(text)}</td>'
    return f'<td{cls} title="{e(v)}">{e(v)}</td>'


def table(headers: list[str], rows: list[list], left: set[int] = frozenset({0}), flags: list[bool] | None = None,
          table_id: str = "") -> str:
    th = "".join(f'<th class="{"l" if i in left else ""}">{e(h)}</th>' for i, h in enumerate(headers))
    body = []
    for k, r in enumerate(rows):
        cls = ' class="flag"' if flags and flags[k] else ""
        body.append(f"<tr{cls}>{''.join(_td(v, i in left) for i, v in enumerate(r))}</tr>")
    ident = f' id="{e(table_id)}"' if table_id else ""
    return f'<table class="sortable"{ident}><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def legend(items: list[tuple[str, str]]) -> str:
    return '<div class="legend">' + "".join(f'<span><i style="background:{c}"></i>{e(n)}</span>' for n, c in items) + "</div>"


LABEL_CHAR_PX = 7.0   # width of one character of an 11px svg label (digits are ~6.1 px): used to space labels


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


def axis(lo_us: float, hi_us: float, origin_us: float, x, y_top: float, y_axis: float, prefix: str = "") -> list[str]:
    """Ticks every nice step of (t - origin) between lo and hi: a grid line down to y_axis and a label under it."""
    step = nice_step(hi_us - lo_us)
    out = []
    k = math.ceil((lo_us - origin_us) / step - 1e-9)
    while origin_us + k * step <= hi_us + 1e-6:
        t = origin_us + k * step
        xt = x(t)
        out.append(f'<line class="tick" x1="{xt:.1f}" y1="{y_top}" x2="{xt:.1f}" y2="{y_axis + 4}" stroke="#e4e4e4"/>'
                   f'<text x="{xt:.1f}" y="{y_axis + 16}" text-anchor="middle" fill="#555">'
                   f'{e(prefix + fmt_tick(k * step, step))}</text>')
        k += 1
    return out


def stage_order(tl: dict) -> list[str]:
    """Stages in the order they run within an iteration (mean start offset), then by name."""
    offs: dict[str, list[float]] = {}
    for it in tl.get("iterations", []):
        for name, v in it["stages"].items():
            offs.setdefault(name, []).append(v.get("first_start_us") or 0.0)
    for s in tl.get("gantt") or []:
        offs.setdefault(s["stage"], [math.inf])
    return sorted(offs, key=lambda n: (sum(offs[n]) / len(offs[n]), str(n)))


def stage_colors(tl: dict) -> dict:
    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(stage_order(tl))}


def median_iteration(its: list[dict]) -> dict | None:
    """The iteration of median duration (the lower one for an even count)."""
    if not its:
        return None
    return sorted(its, key=lambda it: (it["dur_us"], it["iteration"]))[(len(its) - 1) // 2]


def _span_rect(s: dict, x, y: float, h: float, color: str, cls: str, lo: float, hi: float, row: int) -> str:
    x0, x1 = x(max(s["start_us"], lo)), x(min(s["start_us"] + s["dur_us"], hi))
    wd = max(MIN_SPAN_PX, x1 - x0)      # a 10 ms span on a 10 s axis is still visible
    return (f'<rect class="{cls}" x="{x0:.1f}" y="{y}" width="{wd:.1f}" height="{h}" fill="{color}" data-w="{row}" '
            f'data-s="{s["start_us"]:.3f}" data-d="{s["dur_us"]:.3f}" data-i="{e(s["iteration"])}">'
            f'<title>{e(s["stage"])} on {e(s["worker"])} (iteration {e(s["iteration"])}): '
            f'{ms(s["dur_us"])} ms</title></rect>')


def gantt_svg(tl: dict, width: int = 1300) -> str:
    """Overview Gantt (all spans, one row per worker, iteration boundaries, time ticks) and a zoomed
    Gantt of one iteration (the median-duration one; a selector redraws it for any iteration)."""
    spans = tl.get("gantt") or []
    if not spans:
        return "<p>No stage spans in the timeline.</p>"
    workers = sorted({s["worker"] for s in spans}, key=str)
    row_of = {w: i for i, w in enumerate(workers)}
    color = stage_colors(tl)
    lo = min(s["start_us"] for s in spans)
    hi = max(s["start_us"] + s["dur_us"] for s in spans)
    its = [it for it in tl.get("iterations", []) if it["start_us"] < hi and it["start_us"] + it["dur_us"] > lo]
    if its:
        hi = max(hi, min(its[-1]["start_us"] + its[-1]["dur_us"], hi + (hi - lo)))
    hi = max(hi, lo + 1.0)
    plot_w = width - GANTT_LEFT - 20
    x = lambda t: GANTT_LEFT + plot_w * (t - lo) / (hi - lo)
    rows_h = GANTT_ROW * len(workers)
    y_it, y_axis = rows_h + 6, rows_h + 26
    h = y_axis + 24
    parts = [f'<svg id="gantt" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img">']
    parts += axis(lo, hi, 0.0, x, 0, y_axis)
    parts.append(f'<text x="4" y="{y_it + 12}" fill="#555">iteration</text>'
                 f'<text x="4" y="{y_axis + 16}" fill="#555">time</text>')
    last_end = -math.inf
    for it in its:
        xi = x(max(it["start_us"], lo))
        parts.append(f'<line x1="{xi:.1f}" y1="0" x2="{xi:.1f}" y2="{y_it}" stroke="#bbb" stroke-dasharray="2,3"/>')
        text = str(it["iteration"])
        wd = label_width(text)
        if xi >= last_end and xi + wd <= width:   # only the labels that fit: never overlapping
            parts.append(f'<text class="itlabel" x="{xi + 2:.1f}" y="{y_it + 12}">{e(text)}</text>')
            last_end = xi + wd
    for w in workers:
        y = row_of[w] * GANTT_ROW + 4
        parts.append(f'<text x="4" y="{y + 12}">{e(short(w, 20))}<title>{e(w)}</title></text>')
    for s in spans:
        parts.append(_span_rect(s, x, row_of[s["worker"]] * GANTT_ROW + 4, GANTT_ROW - 8, color[s["stage"]],
                                "span", lo, hi, row_of[s["worker"]]))
    parts.append("</svg>")
    out = [legend([(s, c) for s, c in color.items()]), "".join(parts)]
    if lo > 0.05 * (hi - lo):
        out.append(f'<p class="note">The axis starts at the first stage span ({ms(lo)} ms after the timeline '
                   "start): the time before it (start-up) is left out. Spans are drawn at least "
                   f"{MIN_SPAN_PX:g} px wide; hover a span for its duration.</p>")
    out.append(zoom_svg(tl, workers, color, width))
    return "".join(out)


def zoom_svg(tl: dict, workers: list, color: dict, width: int) -> str:
    spans = tl.get("gantt") or []
    lo = min(s["start_us"] for s in spans)
    hi = max(s["start_us"] + s["dur_us"] for s in spans)
    its = [it for it in tl.get("iterations", []) if it["start_us"] < hi and it["start_us"] + it["dur_us"] > lo]
    med = median_iteration(its)
    if med is None:
        return ""
    row_of = {w: i for i, w in enumerate(workers)}
    z0, z1 = med["start_us"], med["start_us"] + max(med["dur_us"], 1.0)
    plot_w = width - GANTT_LEFT - 20
    x = lambda t: GANTT_LEFT + plot_w * (t - z0) / (z1 - z0)
    rows_h = GANTT_ROW * len(workers)
    y_axis = rows_h + 4
    h = y_axis + 24
    opts = "".join(f'<option value="{e(it["iteration"])}" data-s="{it["start_us"]:.3f}" data-d="{it["dur_us"]:.3f}"'
                   f'{" selected" if it is med else ""}>iteration {e(it["iteration"])} ({ms(it["dur_us"])} ms)'
                   f'{" (median)" if it is med else ""}</option>' for it in its)
    head = (f'<h3>One iteration, zoomed: <span id="zoomcap">iteration {e(med["iteration"])} '
            f'({ms(med["dur_us"])} ms)</span></h3><p class="note">Shown by default: iteration {e(med["iteration"])}, the '
            f'median-duration one of {len(its)} iterations. <label>Zoom into <select id="zoomsel">{opts}</select></label>'
            "; the axis is time since the iteration start (report.html#iter=N opens it on iteration N).</p>")
    parts = [f'<svg id="zoom" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img" '
             f'data-left="{GANTT_LEFT}" data-plotw="{plot_w}" data-rowh="{GANTT_ROW}" data-rows="{len(workers)}">']
    for w in workers:
        y = row_of[w] * GANTT_ROW + 4
        parts.append(f'<text x="4" y="{y + 12}">{e(short(w, 20))}<title>{e(w)}</title></text>')
    parts.append('<g class="dyn">')
    parts += axis(z0, z1, z0, x, 0, y_axis, "+")
    for s in spans:
        if s["start_us"] < z1 and s["start_us"] + s["dur_us"] > z0:
            parts.append(_span_rect(s, x, row_of[s["worker"]] * GANTT_ROW + 4, GANTT_ROW - 8, color[s["stage"]],
                                    "zspan", z0, z1, row_of[s["worker"]]))
    parts.append("</g></svg>")
    return head + "".join(parts)


def short(text, n: int) -> str:
    """At most n characters, cutting the middle (both the start and the end of a name tell something)."""
    text = "" if text is None else str(text)
    return text if len(text) <= n else text[: n // 2 - 1] + "…" + text[-(n - n // 2):]


def stacked_bars(rows: list[tuple[str, dict]], parts: list[tuple], width: int = 1100, left: int = 260,
                 row_h: int = 20, label_key=None, svg_id: str = "", cap: float | None = None) -> str:
    """Horizontal stacked bars, one per row label; values in us. The number after a bar is the sum of
    its parts, or v[label_key] when given. With cap, the scale ends at cap x the median bar, and
    longer bars are cut there (marked with a white break and a » before their number)."""
    if not rows:
        return ""
    totals = [sum((v.get(k) or 0.0) for k, _, _ in parts) for _, v in rows]
    top = max(totals) or 1.0
    if cap and len(rows) >= 3:
        top = min(top, cap * (sorted(totals)[len(totals) // 2] or top))
    plot_w = width - left - 110
    h = row_h * len(rows) + 6
    ident = f' id="{svg_id}"' if svg_id else ""
    out = [f'<svg class="bars"{ident} xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img">']
    chars = int((left - 8) / 5.8)
    for i, (label, v) in enumerate(rows):
        y = i * row_h + 3
        ty = y + row_h / 2 + 1
        out.append(f'<text x="4" y="{ty:.1f}">{e(short(label, chars))}<title>{e(label)}</title></text>')
        x0, x_end = left, left + plot_w
        for key, name, col in parts:
            val = v.get(key) or 0.0
            wd = min(plot_w * val / top, x_end - x0)
            if wd > 0:
                out.append(f'<rect class="bar" x="{x0:.1f}" y="{y}" width="{wd:.1f}" height="{row_h - 5}" fill="{col}">'
                           f'<title>{e(label)}: {e(name)} {ms(val)} ms</title></rect>')
                x0 += wd
        cut = totals[i] > top * (1 + 1e-9)
        if cut:
            out.append(f'<line x1="{x_end - 6:.1f}" y1="{y + row_h - 4}" x2="{x_end - 2:.1f}" y2="{y - 1}" '
                       'stroke="#fff" stroke-width="2"/>')
        total = v.get(label_key) if label_key is not None else totals[i]
        out.append(f'<text x="{x0 + 4:.1f}" y="{ty:.1f}">{"» " if cut else ""}{ms(total)} ms</text>')
    out.append("</svg>")
    return legend([(n, c) for _, n, c in parts]) + "".join(out)


def collapsible(title: str, content: str, n_rows: int) -> str:
    """Long tables (more than LONG_TABLE rows) go into a closed <details>."""
    if n_rows <= LONG_TABLE:
        return content
    return f"<details><summary>{e(title)}: {n_rows} rows (click to show)</summary>{content}</details>"


def stage_pivot(tl: dict, its: list[dict]) -> str:
    """One row per iteration, one column per stage (wall ms), and the iteration's duration; each
    cell's data-v holds the exact value in us (summary.json's stages[*].wall_us)."""
    stages = stage_order(tl)
    head = ["iteration", "iteration ms"] + [f"{s} ms" for s in stages]
    rows = []
    for it in its:
        st = it["stages"]
        rows.append([it["iteration"], (ms(it["dur_us"]), it["dur_us"])] +
                    [(ms(st[s]["wall_us"]), st[s]["wall_us"]) if s in st else ("", "") for s in stages])
    return table(head, rows, set(), table_id="pivot")


def iteration_bars(tl: dict, its: list[dict]) -> str:
    color = stage_colors(tl)
    parts = [(("stage", s), s, c) for s, c in color.items()] + [(("none",), "no stage running", "#d3d3d3")]
    rows = []
    for it in its:
        v = {("stage", s): st["wall_us"] for s, st in it["stages"].items()}
        v[("none",)] = it.get("no_stage_us") or 0.0
        v["dur"] = it["dur_us"]
        rows.append((f"iter {it['iteration']}", v))
    return stacked_bars(rows, parts, left=90, row_h=13 if len(rows) > 20 else 20, label_key="dur", svg_id="iterbars",
                        cap=BAR_CAP)


def _label(c: dict) -> str:
    who = " ".join(str(x) for x in (c.get("role"), f"rank {c['rank']}" if c.get("rank") is not None else None,
                                    c.get("stage")) if x)
    return who or c["path"]


def _worker(r: dict) -> str:
    """A slow-rank row's worker: the timeline's "role:rank", or role:rank for a capture's rank."""
    rank = r.get("rank")
    if isinstance(rank, str) or not r.get("role"):
        return "" if rank is None else str(rank)
    return f"{r['role']}:{rank}"


def render(summary: dict) -> str:
    caps = summary.get("captures", [])
    cnt = summary.get("counts", {})
    body = [f"<h1>mindspeed-profiler analysis</h1><p>{e(summary.get('root'))} &middot; {e(summary.get('created'))} "
            f"&middot; captures: {e(cnt.get('found', 0))} found, {e(cnt.get('ok', 0))} ok, "
            f"<span class=\"bad\">{e(cnt.get('failed', 0))} failed</span>, {e(cnt.get('unparsed', 0))} not parsed</p>"]
    bad = [c for c in caps if c["status"] != "ok"]
    if bad:
        body.append("<h2>Problems</h2>" + table(["path", "kind", "status", "reason"],
                                                [[c["path"], c["kind"], c["status"], c.get("error")] for c in bad], {0, 3}))
    tl = summary.get("timeline")
    if tl:
        body.append("<h2>RL timeline: stages per worker</h2>" + gantt_svg(tl))
        if tl.get("gantt_truncated"):
            body.append(f"<p>The Gantt shows the first {len(tl.get('gantt') or [])} of {e(tl.get('n_stage_spans'))} "
                        "stage spans.</p>")
        its = tl["iterations"]
        if len(its) > MAX_ITERATION_ROWS:   # a long run: the longest iterations, in order
            keep = set(sorted(range(len(its)), key=lambda k: -its[k]["dur_us"])[:MAX_ITERATION_ROWS])
            its = [it for k, it in enumerate(its) if k in keep]
            body.append(f"<p>{len(tl['iterations'])} iterations: the bars and tables below show the {MAX_ITERATION_ROWS} "
                        "longest; all of them are in summary.json (and analysis.db with --export-type db).</p>")
        body.append("<h3>Time per stage per iteration</h3><p class=\"note\">Each bar stacks the wall time of "
                    "every stage (the union of its spans on all workers) and the time with no stage running; "
                    "the number is the iteration's duration (stages running at the same time make the bar "
                    f"longer than it). Bars longer than {BAR_CAP:g}x the median are cut (» before the number). "
                    "Hover a segment for its value.</p>" + iteration_bars(tl, its))
        body.append(collapsible("Wall time per stage and iteration (ms)",
                                '<p class="note">Wall ms per stage (the union of its spans) and iteration; the '
                                "summed span time per stage is in summary.json (total_us).</p>" +
                                stage_pivot(tl, its), len(its)))
        body.append("<h3>Iterations: overlap, idle and critical path</h3>" + collapsible(
            "Iterations", table(
                ["iteration", "duration ms", "stage overlap ms", "no stage ms", "most idle worker", "critical path"],
                [[it["iteration"], ms(it["dur_us"]), ms(it["overlap_us"]), ms(it["no_stage_us"]),
                  (lambda d: f"{max(d, key=d.get)} ({ms(max(d.values()))} ms)" if d else "")(it["idle_per_worker_us"]),
                  " → ".join(f"{p['stage']}@{p['worker']}" for p in it["critical_path"])] for it in its],
                {4, 5}), len(its)))
    devs = [(_label(c) + f" [{c['path']}]", c["device"]) for c in caps if c["status"] == "ok" and c.get("device")]
    if devs:
        body.append("<h2>Per-rank device time</h2>" + stacked_bars(devs, PARTS))
    else:   # no device activity (CPU runs): the host time per step of each rank's capture
        walls = [(f"{r['stage']} · {r.get('role') or ''} rank {r['rank']}", {("stage", r["stage"]): r["value_us"]})
                 for r in summary.get("stage_rank", []) if r["source"] == "capture"]
        if walls:   # one colour per stage (the Gantt's colours when there is a timeline)
            color = stage_colors(tl) if tl else {}
            names = sorted({k[1] for _, v in walls for k in v}, key=lambda n: (n not in color, list(color).index(n)
                                                                                if n in color else 0, str(n)))
            parts = [(("stage", n), n, color.get(n) or PALETTE[i % len(PALETTE)]) for i, n in enumerate(names)]
            order = {n: i for i, n in enumerate(names)}
            body.append("<h2>Per-rank time per step (no device activity: host wall per step)</h2>" + stacked_bars(
                sorted(walls, key=lambda x: (order[next(iter(x[1]))[1]], x[0])), parts))
    clusters = [c for c in caps if c["kind"] == "cluster" and c["status"] == "ok"]
    for c in clusters:
        body.append(f"<h2>Cluster step trace: {e(c['path'])}</h2>" + stacked_bars(
            [(f"rank {r['rank']}", r) for r in c["ranks"]],
            [("computing_us", "computing", "#4e79a7"), ("communication_exposed_us", "communication (not overlapped)", "#e15759"),
             ("free_us", "free", "#d3d3d3")]))
    if summary.get("slow_ranks"):
        sr = summary["slow_ranks"]
        body.append(f"<h2>Slow ranks (ratio to the median, flagged above {e((summary.get('options') or {}).get('threshold'))})</h2>" +
                    "<p class=\"note\">Highlighted rows are flagged. Sources: <i>capture</i> = a profiled "
                    "call's wall (or device busy) time per step; <i>timeline</i> = the median span of the stage on "
                    "the worker over all iterations; <i>cluster</i> = the step trace's computing time.</p>" +
                    collapsible("Slow ranks", table(
                        ["source", "stage", "metric", "worker", "value ms", "median ms", "ratio"],
                        [[r["source"], r["stage"], r["metric"], _worker(r), ms(r["value_us"]), ms(r["median_us"]),
                          f"{r['ratio']:.3f}"] for r in sr], {0, 1, 2, 3}, [r["flagged"] for r in sr]), len(sr)))
    per_cap = [c for c in caps if c["status"] == "ok" and c["kind"] not in ("timeline", "cluster")]
    if per_cap:
        body.append("<h2>Per capture: steps, top ops and kernels (click to open)</h2>")
    for c in per_cap:
        d = c.get("device") or {}
        parts = [f"<details class=\"cap\"><summary><b>{e(_label(c))}</b> &middot; wall {ms(c.get('wall_us'))} ms"
                 f"{' &middot; device busy ' + ms(d.get('busy_us')) + ' ms' if d else ''} "
                 f"<span class=\"path\">{e(c['path'])}</span></summary>"]
        if c.get("steps"):
            parts.append("<h4>Steps</h4>" + table(["step", "duration ms", "device busy ms"],
                                                  [[s["step"], ms(s["dur_us"]), ms(s.get("device_busy_us"))] for s in c["steps"]]))
        if c.get("top_ops"):
            parts.append("<h4>Top ops by self time</h4>" + table(
                ["op", "count", "total ms", "self ms", "device ms"],
                [[o["name"], o["count"], ms(o["total_us"]), ms(o["self_us"]), ms(o["device_us"])] for o in c["top_ops"]]))
        if c.get("top_kernels"):
            parts.append("<h4>Top kernels by device time</h4>" + table(
                ["kernel", "class", "count", "total ms"],
                [[k["name"], k.get("class"), k["count"], ms(k["total_us"])] for k in c["top_kernels"]], {0, 1}))
        if c.get("annotations"):
            parts.append("<h4>Annotations / mstx ranges</h4>" + table(
                ["range", "count", "total ms", "mean ms", "max ms"],
                [[a["name"], a["count"], ms(a["total_us"]), ms(a["mean_us"]), ms(a["max_us"])] for a in c["annotations"]]))
        parts.append("</details>")
        body.append("".join(parts))
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>mindspeed-profiler report</title>'
            f"<style>{CSS}</style></head><body>{''.join(body)}<script>{JS}</script></body></html>")


def write_report(path: Path, summary: dict) -> Path:
    path = Path(path)
    path.write_text(render(summary), encoding="utf-8")
    return path
