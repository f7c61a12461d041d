"""Rich tables on the terminal (summary of a summary.json)."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _t(v) -> str:
    """Text from the data (role, stage, worker names...) is never read as rich markup."""
    return escape(str(v))


def _ms(us) -> str:
    return "" if us is None else f"{us / 1e3:,.2f}"


def print_summary(summary: dict, top_n: int = 10, console: Console | None = None) -> None:
    con = console or Console()
    if not con.is_terminal and con.width < 160:  # logs and pipes: do not squeeze the tables to 80 columns
        con.width = 160
    t = Table(title="Captures", show_lines=False)
    for h in ("path", "kind", "status", "role", "rank", "stage", "steps", "wall ms", "busy ms", "compute", "comm exp.", "idle"):
        t.add_column(h, overflow="fold" if h == "path" else "ellipsis", no_wrap=h != "path",
                     max_width=48 if h == "path" else None)
    for c in summary["captures"]:
        d = c.get("device") or {}
        w = d.get("window_us") or 0.0
        pct = lambda k: f"{100 * d[k] / w:.1f}%" if w and d.get(k) is not None else ""
        style = None if c["status"] == "ok" else "red"
        t.add_row(escape(c["path"]), c["kind"], c["status"], _t(c.get("role") or ""), _t(c.get("rank") if c.get("rank") is not None else ""),
                  _t(c.get("stage") or ""), str(len(c.get("steps") or [])) if c.get("steps") else "",
                  _ms(c.get("wall_us")), _ms(d.get("busy_us")), pct("compute_us"), pct("communication_exposed_us"),
                  pct("idle_us"), style=style)
    con.print(t)
    for c in summary["captures"]:
        if c["status"] != "ok":
            con.print(f"[red]{c['status']}[/red] {escape(c['path'])}: {escape(str(c.get('error')))}", highlight=False)
    flagged = [r for r in summary.get("slow_ranks", []) if r["flagged"]]
    if summary.get("slow_ranks"):
        t = Table(title=f"Slow ranks (ratio to median > {summary['options']['threshold']})" if flagged else
                  "Slow ranks: none flagged (top ratios)")
        for h in ("source", "stage", "metric", "rank", "value ms", "median ms", "ratio"):
            t.add_column(h)
        for r in (flagged or summary["slow_ranks"])[:top_n]:
            t.add_row(_t(r["source"]), _t(r["stage"]), _t(r["metric"]), _t(r["rank"]), _ms(r["value_us"]), _ms(r["median_us"]),
                      f"{r['ratio']:.3f}", style="red" if r["flagged"] else None)
        con.print(t)
    tl = summary.get("timeline")
    if tl and tl.get("warning"):
        con.print(f"[yellow]timeline:[/yellow] {escape(tl['warning'])}", highlight=False)
    if tl and tl.get("iterations"):
        t = Table(title="RL iterations (timeline)")
        for h in ("iter", "ms", "overlap ms", "no stage ms", "critical path"):
            t.add_column(h, overflow="fold")
        for it in tl["iterations"]:
            t.add_row(str(it["iteration"]), _ms(it["dur_us"]), _ms(it["overlap_us"]), _ms(it["no_stage_us"]),
                      _t(" -> ".join(f"{p['stage']}@{p['worker']}" for p in it["critical_path"])))
        con.print(t)
