"""report.html: one self-contained page (inline SVG, CSS and a few lines of JS; no network).

Built only from summary.json, so `mindspeed-profiler report DIR` can regenerate it.
"""
from __future__ import annotations

import html
from pathlib import Path

MAX_ITERATION_ROWS = 300   # iterations listed in the report's tables (a week-long run has thousands)
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
document.body.setAttribute('data-ready', '1');
"""


def e(x) -> str:
    return html.escape("" if x is None else str(x))


def ms(us) -> str:
    return "" if us is None else f"{us / 1e3:,.3f}"


def table(headers: list[str], rows: list[list], left: set[int] = frozenset({0}), flags: list[bool] | None = None) -> str:
    th = "".join(f'<th class="{"l" if i in left else ""}">{e(h)}</th>' for i, h in enumerate(headers))
    body = []
    for k, r in enumerate(rows):
        cls = ' class="flag"' if flags and flags[k] else ""
        tds = "".join(f'<td class="{"l" if i in left else ""}" title="{e(v)}">{e(v)}</td>' for i, v in enumerate(r))
        body.append(f"<tr{cls}>{tds}</tr>")
    return f'<table class="sortable"><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def legend(items: list[tuple[str, str]]) -> str:
    return '<div class="legend">' + "".join(f'<span><i style="background:{c}"></i>{e(n)}</span>' for n, c in items) + "</div>"


def gantt_svg(tl: dict, width: int = 1300) -> str:
    spans = tl.get("gantt") or []
    if not spans:
        return "<p>No stage spans in the timeline.</p>"
    workers = sorted({s["worker"] for s in spans})
    stages = sorted({s["stage"] for s in spans})
    color = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(stages)}
    t_end = max(s["start_us"] + s["dur_us"] for s in spans) or 1.0
    left, row_h = 150, 22
    plot_w = width - left - 10
    h = row_h * len(workers) + 40
    x = lambda t: left + plot_w * t / t_end
    parts = [f'<svg id="gantt" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img">']
    for it in tl.get("iterations", []):
        xi = x(it["start_us"])
        parts.append(f'<line x1="{xi:.1f}" y1="0" x2="{xi:.1f}" y2="{h - 30}" stroke="#999" stroke-dasharray="3,3"/>'
                     f'<text x="{xi + 2:.1f}" y="{h - 18}">iter {e(it["iteration"])}</text>')
    for r, w in enumerate(workers):
        y = r * row_h + 4
        parts.append(f'<text x="4" y="{y + 14}">{e(w)}</text>')
        for s in (s for s in spans if s["worker"] == w):
            x0 = x(s["start_us"])
            wd = max(1.0, x(s["start_us"] + s["dur_us"]) - x0)
            parts.append(f'<rect class="span" x="{x0:.1f}" y="{y}" width="{wd:.1f}" height="{row_h - 6}" '
                         f'fill="{color[s["stage"]]}"><title>{e(s["stage"])} on {e(w)} (iteration '
                         f'{e(s["iteration"])}): {ms(s["dur_us"])} ms</title></rect>')
    parts.append(f'<text x="{left}" y="{h - 4}">0 ms</text><text x="{width - 90}" y="{h - 4}">{ms(t_end)} ms</text>')
    parts.append("</svg>")
    return legend([(s, color[s]) for s in stages]) + "".join(parts)


def stacked_bars(rows: list[tuple[str, dict]], parts: list[tuple[str, str, str]], width: int = 1100) -> str:
    """Horizontal stacked bars, one per row label; values in us."""
    if not rows:
        return ""
    left, row_h = 260, 20
    top = max(sum((v.get(k) or 0.0) for k, _, _ in parts) for _, v in rows) or 1.0
    plot_w = width - left - 120
    h = row_h * len(rows) + 10
    out = [f'<svg class="bars" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img">']
    for i, (label, v) in enumerate(rows):
        y = i * row_h + 4
        out.append(f'<text x="4" y="{y + 12}">{e(label[-40:])}</text>')
        x0 = left
        for key, name, col in parts:
            val = v.get(key) or 0.0
            wd = plot_w * val / top
            if wd > 0:
                out.append(f'<rect class="bar" x="{x0:.1f}" y="{y}" width="{wd:.1f}" height="{row_h - 6}" fill="{col}">'
                           f'<title>{e(label)}: {e(name)} {ms(val)} ms</title></rect>')
            x0 += wd
        total = sum((v.get(k) or 0.0) for k, _, _ in parts)
        out.append(f'<text x="{x0 + 4:.1f}" y="{y + 12}">{ms(total)} ms</text>')
    out.append("</svg>")
    return legend([(n, c) for _, n, c in parts]) + "".join(out)


def _label(c: dict) -> str:
    who = " ".join(str(x) for x in (c.get("role"), f"rank {c['rank']}" if c.get("rank") is not None else None,
                                    c.get("stage")) if x)
    return who or c["path"]


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
            body.append(f"<p>{len(tl['iterations'])} iterations: the tables below show the {MAX_ITERATION_ROWS} "
                        "longest; all of them are in summary.json (and analysis.db with --export-type db).</p>")
        rows = []
        for it in its:
            for name, v in it["stages"].items():
                rows.append([it["iteration"], name, ms(v["total_us"]), ms(v["wall_us"]), v["count"]])
        body.append("<h3>Time per stage per iteration (ms)</h3>" +
                    table(["iteration", "stage", "total", "wall", "spans"], rows, {1}))
        body.append("<h3>Iterations: overlap, idle and critical path</h3>" + table(
            ["iteration", "duration ms", "stage overlap ms", "no stage ms", "most idle worker", "critical path"],
            [[it["iteration"], ms(it["dur_us"]), ms(it["overlap_us"]), ms(it["no_stage_us"]),
              (lambda d: f"{max(d, key=d.get)} ({ms(max(d.values()))} ms)" if d else "")(it["idle_per_worker_us"]),
              " → ".join(f"{p['stage']}@{p['worker']}" for p in it["critical_path"])] for it in its],
            {4, 5}))
    devs = [(_label(c) + f" [{c['path'][-30:]}]", c["device"]) for c in caps if c["status"] == "ok" and c.get("device")]
    if devs:
        body.append("<h2>Per-rank device time</h2>" + stacked_bars(devs, PARTS))
    else:   # no device activity (CPU runs): the host time per step of each rank's capture
        walls = [(f"{r['stage']} · {r.get('role') or ''} rank {r['rank']}", {"value_us": r["value_us"]})
                 for r in summary.get("stage_rank", []) if r["source"] == "capture"]
        if walls:
            body.append("<h2>Per-rank time per step (no device activity: host wall per step)</h2>" + stacked_bars(
                sorted(walls, key=lambda x: x[0]), [("value_us", "wall per step", "#4e79a7")]))
    clusters = [c for c in caps if c["kind"] == "cluster" and c["status"] == "ok"]
    for c in clusters:
        body.append(f"<h2>Cluster step trace: {e(c['path'])}</h2>" + stacked_bars(
            [(f"rank {r['rank']}", r) for r in c["ranks"]],
            [("computing_us", "computing", "#4e79a7"), ("communication_exposed_us", "communication (not overlapped)", "#e15759"),
             ("free_us", "free", "#d3d3d3")]))
    if summary.get("slow_ranks"):
        sr = summary["slow_ranks"]
        body.append(f"<h2>Slow ranks (ratio to the median, flagged above {e((summary.get('options') or {}).get('threshold'))})</h2>" +
                    table(["source", "stage", "metric", "rank", "value ms", "median ms", "ratio"],
                          [[r["source"], r["stage"], r["metric"], r["rank"], ms(r["value_us"]), ms(r["median_us"]),
                            f"{r['ratio']:.3f}"] for r in sr], {0, 1, 2}, [r["flagged"] for r in sr]))
    for c in caps:
        if c["status"] != "ok" or c["kind"] in ("timeline", "cluster"):
            continue
        d = c.get("device") or {}
        parts = [f"<details><summary>{e(_label(c))} &middot; {e(c['path'])} &middot; wall {ms(c.get('wall_us'))} ms"
                 f"{' &middot; device busy ' + ms(d.get('busy_us')) + ' ms' if d else ''}</summary>"]
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
