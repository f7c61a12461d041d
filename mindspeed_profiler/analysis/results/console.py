"""The terminal summary of a summary.json: what a person can act on, in the order they need it.

    captures (grouped by stage) -> per stage: top ops and ranges (per rank where there are few)
    -> communication per capture (device and host) -> RL timeline (stages, the slowest iterations)
    -> the rollout's long tail -> slow ranks -> findings -> warnings and failures -> the output files and how to open them

Every table hides its columns that have no data (device columns on CPU runs, ...), long tables are
capped and say how many rows they hide; `top_n` is the number of rows of each per-stage list.
Names from the data are never read as rich markup (`_t`).
"""
from __future__ import annotations

import math
import statistics
from array import array
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from mindspeed_profiler.core import formats

from mindspeed_profiler.analysis.models import display
from mindspeed_profiler.analysis.models import questions as q
from mindspeed_profiler.analysis.models.display import capture_worker as _worker, field, pct as _pct
from mindspeed_profiler.analysis.results.outputs import TotalsReader
from mindspeed_profiler.analysis.results import async_table, memory_table
from mindspeed_profiler.analysis.models.summary_fields import CAPTURE_BLOCKS, SUMMARY, TIMELINE

MAX_ROWS = 40            # rows of the captures and stage x worker tables before the rest is hidden
PER_RANK_COLUMNS = 4     # a stage with at most this many captures gets one column per capture
SLOWEST_ITERATIONS = 5   # the iteration table: the slowest few and the median (all when <= 2x this)
TRACE_KINDS = ("torch", "kineto", "ascend")
NAME_CHARS = 90          # op / kernel / range names longer than this are cut in the middle


def _t(v) -> str:
    """Text from the data (role, stage, worker names...) is never read as rich markup."""
    return escape(str(v))


def _name(v, n: int = NAME_CHARS) -> str:
    """A long name (C++ kernel signatures run to hundreds of characters) cut in the middle, escaped;
    report.html, summary.json and analysis.db have it whole."""
    return _t(display.short(v, n))


def _ms(us) -> str:
    return "" if us is None else f"{us / 1e3:,.2f}"


def _table(title: str, cols: list[tuple], rows: list[list], styles: list | None = None, caption: str | None = None):
    """A rich Table of the columns that hold data in at least one row. cols: (header, options)."""
    keep = [i for i in range(len(cols)) if any(r[i] not in (None, "") for r in rows)]
    # at least as wide as its title, so that a narrow table does not wrap the title over several lines
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left",
              min_width=Text.from_markup(title).cell_len + 4)
    for i in keep:
        h, opts = cols[i]
        t.add_column(h, **opts)
    for k, r in enumerate(rows):
        t.add_row(*[r[i] if r[i] is not None else "" for i in keep], style=(styles[k] if styles else None))
    return t


R = {"justify": "right", "no_wrap": True}
FOLD = {"overflow": "fold"}


def _rank_key(rank) -> tuple:
    """Ranks in numeric order (2 before 10), anything else after them by its text."""
    return (0, rank, "") if isinstance(rank, int) and not isinstance(rank, bool) else (1, 0, str(rank))


def _trace_caps(summary: dict) -> list[dict]:
    caps = [c for c in summary.get("captures", []) if c["status"] == "ok" and c["kind"] in TRACE_KINDS]
    return sorted(caps, key=lambda c: (str(c.get("stage") or ""), str(c.get("role") or ""), _rank_key(c.get("rank")),
                                       c["path"]))


def _comm_share(c: dict) -> str:
    """The capture's communication share: of the device's busy time, and of the host's wall time."""
    device, host = display.comm_shares(c)
    parts = [f"{_pct(device)} of device busy"] if device is not None else []
    if host is not None:
        parts.append(f"{_pct(host)} of wall (host)")
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------ sections


def _short_path(c: dict) -> str:
    """The capture's path under DIR without its stage directory when that is the stage column's name."""
    p = Path(c["path"])
    return p.name if c.get("stage") and len(p.parts) == 2 and p.parts[0] == str(c["stage"]) else c["path"]


def _captures(con: Console, summary: dict) -> None:
    caps = summary.get("captures", [])
    if not caps:
        return
    order = sorted(caps, key=lambda c: (c["status"] == "ok", c["kind"] not in TRACE_KINDS, str(c.get("stage") or ""),
                                        str(c.get("role") or ""), _rank_key(c.get("rank")), c["path"]))
    shown = order[:MAX_ROWS]
    rows, styles = [], []
    for c in shown:
        d = (display.capture_rows(q.BREAKDOWN, c) or [dict.fromkeys(q.BREAKDOWN.names)])[0]
        w = d["window_us"] or 0.0
        pct = (lambda k: f"{100 * d[k] / w:.1f}%" if w and d[k] is not None else "")
        steps = display.capture_rows(q.STEPS, c)
        rows.append([_t(c.get("stage") or ""), _t(_worker(c)), _t(c["kind"]), _t(c["status"]) if c["status"] != "ok" else "",
                     str(len(steps)) if steps else "", _ms(c.get("wall_us")), _ms(d["busy_us"]),
                     pct("compute_us"), pct("communication_exposed_us"), pct("idle_us"), _comm_share(c),
                     _t(_short_path(c))])
        styles.append(None if c["status"] == "ok" else "red")
    found, ok, failed, unparsed = (field(SUMMARY, summary, f"counts_{n}") for n in ("found", "ok", "failed", "unparsed"))
    title = (f"Captures: {_t(len(caps) if found is None else found)} found, {_t(0 if ok is None else ok)} ok"
             + (f", {_t(failed)} failed" if failed else "")
             + (f", {_t(unparsed)} not parsed" if unparsed else ""))
    hidden = len(order) - len(shown)
    con.print(_table(title, [("stage", {}), ("worker", {}), ("kind", {}), ("status", {}), ("steps", R), ("wall ms", R),
                             ("busy ms", R), ("compute", R), ("comm exp.", R), ("idle", R), ("communication", {}),
                             ("capture (in DIR/<stage>/)", FOLD)], rows, styles,
                     caption=f"{hidden} more captures hidden (all in report.html / summary.json)" if hidden else None))


def _agg(caps: list[dict], rows_of, value) -> list[tuple[str, list]]:
    """[(name, values)] ranked by the sum over the captures: values = [value per capture or None] when
    there are few captures (one column each), else [sum, the values present, max, index of the max]
    (one stage of 10,000 ranks: no list of 10,000 per name)."""
    few = len(caps) <= PER_RANK_COLUMNS
    per: dict[str, list] = {}
    for k, c in enumerate(caps):
        got: dict[str, float] = {}
        for r in rows_of(c):
            got[r[0]] = got.get(r[0], 0.0) + value(r)
        for name, v in got.items():
            if few:
                per.setdefault(name, [None] * len(caps))[k] = v
                continue
            a = per.get(name)
            if a is None:
                a = per[name] = [0.0, array("d"), -math.inf, k]
            a[0] += v
            a[1].append(v)
            if v > a[2]:
                a[2], a[3] = v, k
    if few:
        return sorted(per.items(), key=lambda kv: (-sum(x or 0.0 for x in kv[1]), kv[0]))
    return sorted(per.items(), key=lambda kv: (-kv[1][0], kv[0]))


def _ops_of(c: dict, rd: TotalsReader) -> list:
    """[name, count, total, self, device] of every op (op_totals), else the top list."""
    ops = rd.get(c, "op_totals")
    if ops:
        return ops
    return [[o["name"], o["count"], o["total_us"], o["self_us"], o["device_us"]] for o in display.capture_rows(q.OPS, c)]


def _kernels_of(c: dict, rd: TotalsReader) -> list:
    """[name, count, total, ...] of every kernel (kernel_totals), else the top list."""
    return rd.get(c, "kernel_totals") or [[k["name"], k["count"], k["total_us"]] for k in display.capture_rows(q.KERNELS, c)]


def _cell(us, wall) -> str:
    if us is None:
        return ""
    return f"{us / 1e3:,.2f} ({100 * us / wall:.0f}%)" if wall else _ms(us)


def _ranked(title: str, caps: list[dict], ranked: list[tuple[str, list]], top_n: int, what: str) -> Table | None:
    """One row per name, the top_n by the stage's total: one column per capture (ms and share of its
    wall time) when there are few, else the median, the max and where the max is."""
    if not ranked:
        return None
    shown = ranked[:top_n]
    if len(caps) <= PER_RANK_COLUMNS:
        cols = [(what, FOLD)] + [(f"{_t(_worker(c) or c['path'])} ms", R) for c in caps]
        rows = [[_name(name)] + [_cell(v, c.get("wall_us")) for v, c in zip(vals, caps)] for name, vals in shown]
    else:
        cols = [(what, FOLD), ("median ms", R), ("max ms", R), ("max on", {}), ("captures", R)]
        rows = []
        for name, (_, have, vmax, kmax) in shown:
            cmax = caps[kmax]
            rows.append([_name(name), _ms(statistics.median(have)), _ms(vmax), _t(_worker(cmax) or cmax["path"]),
                         f"{len(have)}/{len(caps)}"])
    hidden = len(ranked) - len(shown)
    return _table(title, cols, rows, caption=f"{hidden} more (--top N shows more)" if hidden else None)


def _stages(con: Console, summary: dict, top_n: int) -> None:
    caps = _trace_caps(summary)
    by_stage: dict[str, list[dict]] = {}
    for c in caps:
        by_stage.setdefault(str(c.get("stage") or "(no stage)"), []).append(c)
    for stage, cs in by_stage.items():
        walls = " / ".join(_ms(c.get("wall_us")) for c in cs[:PER_RANK_COLUMNS])
        comm = [(c, _comm_share(c)) for c in cs if _comm_share(c)]
        head = f"[bold]{_t(stage)}[/bold]: {len(cs)} capture{'s' if len(cs) > 1 else ''}"
        if len(cs) <= PER_RANK_COLUMNS:
            head += f" ({_t(', '.join(_worker(c) or c['path'] for c in cs))}), wall {walls} ms"
        con.print()
        con.rule(head, align="left")
        if comm:
            con.print("communication: " + "; ".join(f"{_t(_worker(c) or c['path'])} {s}" for c, s in comm[:PER_RANK_COLUMNS])
                      + (f"; {len(comm) - PER_RANK_COLUMNS} more captures in the table below" if len(comm) > PER_RANK_COLUMNS else ""),
                      highlight=False)
        with TotalsReader(summary) as rd:
            tables = (
                _ranked(f"{_t(stage)}: top ops (self time)", cs, _agg(cs, lambda c: _ops_of(c, rd), lambda r: r[3]),
                        top_n, "op"),
                _ranked(f"{_t(stage)}: top ranges (total time)", cs,
                        _agg(cs, lambda c: [(a["name"], a["total_us"]) for a in display.capture_rows(q.ANNOTATIONS, c)],
                             lambda r: r[1]),
                        top_n, "range"),
                _ranked(f"{_t(stage)}: top kernels (device time)", cs,
                        _agg(cs, lambda c: _kernels_of(c, rd), lambda r: r[2]), top_n, "kernel"))
        for tbl in tables:
            if tbl is not None:
                con.print(tbl)


def _communication(con: Console, summary: dict) -> None:
    caps = _trace_caps(summary)
    order = {id(c): k for k, c in enumerate(caps)}
    recs = sorted((rec for rec in display.communication(summary) if id(rec[0]) in order), key=lambda rec: order[id(rec[0])])
    if not recs:
        if caps:
            con.print("Communication: none in the captures (no collective calls on the host, no collective kernels).",
                      highlight=False)
        return
    rows = []
    for c, r, top in recs[:MAX_ROWS]:
        names = ", ".join(f"{_name(t['name'], 60)} ({_t(t.get('where'))}) x{_t(t.get('count'))} {_ms(t.get('total_us'))} ms"
                          for t in top[:2])
        rows.append([_t(c.get("stage") or ""), _t(_worker(c) or c["path"]), _ms(r["host_total_us"]),
                     _pct(r["host_share_of_wall"]), _ms(r["device_total_us"]), _ms(r["device_exposed_us"]),
                     _ms(r["device_overlapped_us"]), _pct(r["device_share_of_busy"]), _pct(r["collectives_wait_share"]),
                     names])
    hidden = len(recs) - len(rows)
    note = ("host: the time covered by collective calls (gloo, nccl, c10d; nested ones once), % of the capture's "
            "wall; device: collective kernels / ops, the exposed part (not hidden under compute) as % of the busy time; "
            "waiting: the collectives' wait time for other ranks (Ascend communication.json)")
    con.print(_table("Communication per capture",
                     [("stage", {}), ("worker", {}), ("host ms", R), ("host % of wall", R), ("device ms", R),
                      ("exposed ms", R), ("overlapped ms", R), ("exposed % of busy", R), ("waiting % of collectives", R),
                      ("top collectives", FOLD)],
                     rows, caption=note + (f". {hidden} more captures hidden" if hidden else "")))


def _breakdown(con: Console, summary: dict) -> None:
    """Per capture (rank) and step: msprof-analyze's breakdown, from whichever file gave it; and
    msprof-analyze's own cluster rows (the step_breakdown rows)."""
    order = {id(c): k for k, c in enumerate(_trace_caps(summary))}
    recs = list(display.step_breakdown(summary))
    own = sorted((rec for rec in recs if id(rec[1]) in order), key=lambda rec: order[id(rec[1])])   # stable: steps in order
    cluster = sorted((rec for rec in recs if rec[2]["source"] == "cluster"),
                     key=lambda rec: (rec[0], _rank_key(rec[2]["rank"]), str(rec[2]["step"])))
    rows = []
    for _, c, r in own + cluster:
        is_cluster = r["source"] == "cluster"
        rows.append(["" if is_cluster else _t(c.get("stage") or ""),
                     _t(r["rank"]) if is_cluster else _t(_worker(c) or c["path"]),
                     "" if is_cluster else _t(r["device_id"]), _t(r["step"]),
                     *(_ms(r[k]) for k in display.BREAKDOWN_CELLS),
                     _t(f"msprof-analyze: {c['path']}" if is_cluster else r["source"])])
    if not rows:
        return
    hidden = len(rows) - MAX_ROWS
    con.print(_table("Step breakdown (ms; msprof-analyze's definition)",
                     [("stage", {}), ("worker", {}), ("device", R), ("step", R), ("computing", R), ("comm not overlapped", R),
                      ("overlapped", R), ("free", R), ("bubble", R), ("preparing", R), ("step (stage)", R), ("from", FOLD)],
                     rows[:MAX_ROWS], caption=f"{hidden} more rows (all in summary.json)" if hidden > 0 else None))
    con.print()


def _iterations_shown(its: list[dict]) -> tuple[list[dict], dict | None]:
    """All iterations of a short run; of a long one the SLOWEST_ITERATIONS slowest and the median."""
    med = sorted(its, key=lambda it: (it["dur_us"], it["iteration"]))[(len(its) - 1) // 2] if its else None
    if len(its) <= 2 * SLOWEST_ITERATIONS:
        return its, med
    keep = {id(it) for it in sorted(its, key=lambda it: -it["dur_us"])[:SLOWEST_ITERATIONS]} | {id(med)}
    return [it for it in its if id(it) in keep], med


def _timeline(con: Console, summary: dict) -> None:
    tl = summary.get("timeline")
    if not tl or field(TIMELINE, tl, "warning"):   # a timeline's warning is said with the warnings
        _iterations(con, [], display.tracker_iterations(summary))
        return
    sw = sorted(q.STAGE_WORKER.rows(summary), key=lambda r: -r["total_us"])
    if sw:
        run = sum(r["dur_us"] for r in q.ITERATIONS.rows(summary))
        rows = [[_t(r["stage"]), _t(r["worker"]), str(r["count"]), _ms(r["median_us"]), _ms(r["mean_us"]),
                 _ms(r["total_us"]), _pct(r["total_us"] / run) if run else ""] for r in sw[:MAX_ROWS]]
        hidden = len(sw) - len(rows)
        con.print()
        con.print(_table(f"RL timeline: stages per worker over {field(TIMELINE, tl, 'n_iterations') or 0} iterations (by total time)",
                         [("stage", {}), ("worker", {}), ("calls", R), ("median ms", R), ("mean ms", R),
                          ("total ms", R), ("of the iterations", R)], rows,
                         caption=f"{hidden} more rows hidden (all in summary.json)" if hidden else None))
    _iterations(con, q.ITERATIONS.rows(summary), display.tracker_iterations(summary))


def _iterations(con: Console, its: list[dict], tracker: display.TrackerIterations) -> None:
    """The timeline's iterations, with the tracker's tokens/s and MFU where it has them; without a
    timeline, the tracker's iterations (the slowest worker's wall time)."""
    if not its:
        its = [{"iteration": i, "dur_us": us} for i, us in sorted(tracker.wall_us.items())]
    if not its:
        return
    shown, med = _iterations_shown(its)
    rows = []
    for it in shown:
        note = "median" if it is med else ("slowest" if len(shown) < len(its) else "")
        rows.append([str(it["iteration"]), _ms(it["dur_us"]), note, _ms(it.get("overlap_us")),
                     _ms(it.get("no_stage_us")),
                     _ms(it.get("profiler_us")) if it.get("profiler_us") else "",
                     _t(it.get("critical_path") or "")]   # the model's text of the chain (path_text)
                    + [m.text(m.values.get(it["iteration"])) for m in tracker.columns])
    hidden = len(its) - len(shown)
    title = "RL iterations" + (f": the {SLOWEST_ITERATIONS} slowest and the median of {len(its)}" if hidden else "")
    con.print(_table(title, [("iter", R), ("ms", R), ("", {}), ("overlap ms", R), ("no stage ms", R),
                             ("profiler ms", R), ("critical path", FOLD)] + [(_t(m.header), R) for m in tracker.columns],
                     rows, caption=(f"{hidden} iterations hidden (all in report.html, summary.json and analysis.db)"
                                    if hidden else None)))


def _rollout(con: Console, summary: dict) -> None:
    """The long tail of each rollout batch (docs/rollout.md "The long tail: definitions")."""
    rs = q.ROLLOUT_BATCHES.rows(summary)
    if not rs:
        return
    runs = len({r["run_id"] for r in rs}) > 1
    rows = [[_t(r["run_id"]) if runs else "", str(r["iteration"]), _t(r["stage"]), str(r["timed"]),
             str(r["untimed"]) if r["untimed"] else "", *(_ms(r[k] * 1e6) if r[k] is not None else "" for k in
                                               ("t50_s", "t90_s", "t100_s")),
             _pct(r["mean_occupancy"]), _ms(r["tail_lost_s"] * 1e6) if r["tail_lost_s"] is not None else "",
             "/".join(str(r[k]) for k in ("tokens_p50", "tokens_p90", "tokens_max")) if r["known_lengths"] else "",
             _pct(r["truncated_share"])] for r in rs[:MAX_ROWS]]
    hidden = len(rs) - len(rows)
    con.print(_table("Rollout: the long tail per iteration and stage (docs/rollout.md)",
                     [("run", {}), ("iter", R), ("stage", {}), ("timed", R), ("untimed", R), ("t50 ms", R),
                      ("t90 ms", R), ("t100 ms", R), ("occupancy", R), ("lost to the tail ms", R),
                      ("tokens p50/p90/max", R), ("truncated", R)], rows,
                     caption=f"{hidden} more batches (all in summary.json)" if hidden > 0 else None))


def _slow_ranks(con: Console, summary: dict) -> None:
    sr = display.slow_ranks(summary)
    thr = field(SUMMARY, summary, "options_threshold")
    flagged = [r for r in sr if r["flagged"]]
    con.print()
    if not sr:
        con.print("Slow ranks: nothing to compare (no stage ran on two or more ranks / workers).", highlight=False)
        return
    if not flagged:
        top = max(sr, key=lambda r: r["ratio"])
        con.print(f"Slow ranks: none flagged ({len(sr)} ranks / workers compared with their stage's median, threshold "
                  f"{_t(thr)}); highest: {_t(top['source'])} {_t(top['stage'])} {_t(top['worker'] or '')} ratio {top['ratio']:.2f} "
                  f"({_t(top.get('reason') or '')})", highlight=False)
        return
    several_runs = len(summary.get("runs") or []) > 1
    rows = [[_t(r.get("run_id") or "") if several_runs else "", _t(r["source"]), _t(r["stage"]), _t(r["metric"]),
             _t(r['worker'] or ''), _ms(r["value_us"]), _ms(r["median_us"]), f"{r['ratio']:.2f}",
             "" if r.get("n") is None else str(r["n"]), _t(r.get("reason") or "")] for r in flagged[:MAX_ROWS]]
    hidden = len(flagged) - len(rows)
    con.print(_table(f"Slow ranks: {len(flagged)} flagged (ratio to the stage's median > {_t(thr)})",
                     [("run", {}), ("source", {}), ("stage", {}), ("metric", {}), ("worker", {}), ("value ms", R),
                      ("median ms", R), ("ratio", R), ("n", R), ("reason", FOLD)], rows, ["red"] * len(rows),
                     caption=f"{hidden} more flagged (all in report.html / summary.json)" if hidden else None))


ADVICE_LINES = 5


def _advice(con: Console, summary: dict) -> None:
    """The advisor's top findings (advisor.py), first: impact, who and where, what to try."""
    found = q.FINDINGS.rows(summary)
    if not found:
        return
    con.print(f"[bold]Findings[/bold] ({len(found)}; the first {min(len(found), ADVICE_LINES)} by impact, all in "
              "report.html / summary.json):")
    for f in found[:ADVICE_LINES]:
        con.print(f"  {_pct(f['impact'] or 0.0):>5}  {_t(f['title'])}", highlight=False)
        con.print(f"         try: {_t(f['action'])}", style="dim", highlight=False)
    con.print()


def _findings(con: Console, summary: dict) -> None:
    """A few lines: where the most time goes, communication that dominates, the profiler's own cost."""
    lines = []
    its = q.ITERATIONS.rows(summary)
    sw = q.STAGE_WORKER.rows(summary)
    if sw and its:
        r = max(sw, key=lambda r: r["total_us"])
        run = sum(it["dur_us"] for it in its)
        lines.append(f"most time in the timeline: {_t(r['stage'])} on {_t(r['worker'])}, {_ms(r['total_us'])} ms over "
                     f"{r['count']} calls ({_pct(r['total_us'] / run) if run else ''} of the iterations)")
    comm = []
    for c in _trace_caps(summary):
        share = max([x for x in display.comm_shares(c) if x is not None], default=None)
        if share is not None:
            comm.append((share, c))
    if comm:
        share, c = max(comm, key=lambda sc: sc[0])
        top = ((c["communication"].get("top") or [{}])[0]).get("name")
        lines.append(f"largest communication share: {_pct(share)} in {_t(c.get('stage') or c['path'])} on "
                     f"{_t(_worker(c) or c['path'])}" + (f" (top collective: {_t(top)})" if top else ""))
    prof = [it for it in its if it["profiler_us"]]
    if prof:
        tot = sum(it["profiler_us"] for it in prof)
        lines.append(f"profiler capture export: {_ms(tot)} ms in iteration{'s' if len(prof) > 1 else ''} "
                     f"{', '.join(str(it['iteration']) for it in prof[:8])}{' ...' if len(prof) > 8 else ''} "
                     "(the profiler's own cost, not training time)")
    held = held_export_line(summary.get("captures") or [])
    if held:
        lines.append(held)
    if lines:
        con.print()
        con.print("[bold]Highlights[/bold]")
        for ln in lines:
            con.print(f"  - {ln}", highlight=False)


def held_export_line(captures: list[dict]) -> str | None:
    """Pure: the export that export_after_run moved to the run's end (torch's stop, write and the
    cut of each held session, from the captures' export_phases), which no iteration shows."""
    sessions, n = set(), 0
    for c in captures:
        got = tuple(display.field(q.CAPTURES, c, f"export_session_{k}_s") for k in ("stop", "write", "cut"))
        if isinstance(got[0], (int, float)):
            n += 1
            sessions.add(tuple(float(v) if isinstance(v, (int, float)) else 0.0 for v in got))
    if not sessions:
        return None
    stop, write, cut = (sum(s[i] for s in sessions) for i in range(3))
    return (f"profiler export at the run's end (export_after_run): {stop + write + cut:.2f} s for {n} capture"
            f"{'s' if n > 1 else ''} (torch's stop {stop:.2f} s, write {write:.2f} s, cut {cut:.2f} s), paid at "
            "stop(), after the last iteration")


def _where(paths: list[str]) -> str:
    """The captures a line is about: one path, or how many and the first three."""
    return paths[0] if len(paths) == 1 else f"{len(paths)} captures: {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''}"


def _warnings(con: Console, summary: dict) -> None:
    out = [f"[yellow]warning:[/yellow] {_t(w)}" for w in summary.get("warnings") or []]
    tl_warning = field(TIMELINE, summary.get("timeline"), "warning")
    if tl_warning:
        out.append(f"[yellow]timeline:[/yellow] {_t(tl_warning)}")
    for w, paths in display.by_text(summary.get("captures", []), "warnings").items():
        out.append(f"[yellow]warning[/yellow] ({_t(_where(paths))}): {_t(w)}")
    for m, paths in display.by_text(summary.get("captures", []), "missing").items():
        out.append(f"[cyan]partial[/cyan] ({_t(_where(paths))}): cannot say {_t(m)}")
    for c in summary.get("captures", []):
        if c["status"] != "ok":
            out.append(f"[red]{_t(c['status'])}[/red] {_t(c['path'])}: {_t(c.get('error'))}")
    if out:
        con.print()
        con.print(f"[bold]Warnings, partial captures and failures[/bold] ({len(out)})")
        for ln in out:
            con.print("  " + ln, highlight=False)


def _timeline_file(summary: dict) -> Path | None:
    """timeline/timeline.json[.gz] of the analysed directory, when there is one."""
    root = Path(field(SUMMARY, summary, "root") or ".")
    base = root if root.is_dir() else root.parent
    dirs = [base / c["path"] for c in summary.get("captures", []) if c["kind"] == "timeline"] + [base / formats.TIMELINE_DIR]
    for c in summary.get("captures", []):
        files = field(CAPTURE_BLOCKS, c, "files")
        if c["kind"] == "timeline" and files:
            return base / files[0]
    for d in dirs:
        for name in formats.TIMELINE_FILES:
            if (d / name).is_file():
                return d / name
    return None


def _outputs(con: Console, summary: dict, out_dir: Path | None, html: bool, db: bool | None) -> None:
    """The files to open next and how: the last lines printed."""
    root = Path(field(SUMMARY, summary, "root") or ".")
    base = root if root.is_dir() else root.parent
    out = Path(formats.analysis_dir(base, out_dir, is_dir=True)).absolute()
    db = field(SUMMARY, summary, "options_export_type") == "db" if db is None else db
    lines = []
    report = out / formats.REPORT_FILE
    if html and report.is_file():
        lines.append(("report", report, f"open in a browser: {report.resolve().as_uri()}"))
    tlf = _timeline_file(summary)
    if tlf is not None:
        lines.append(("timeline", tlf, "Perfetto: https://ui.perfetto.dev > Open trace file (or chrome://tracing)"))
        pft = tlf.with_name(formats.pftrace_name(tlf.name))
        if pft.is_file():
            lines.append(("Perfetto trace", pft, "the same timeline as Perfetto's protobuf trace: https://ui.perfetto.dev > Open "
                          "trace file (opens at any size, where a browser cannot hold a JSON over ~1 GB)"))
    dbf = out / formats.DB_FILE
    if db and dbf.is_file():
        lines.append(("analysis.db", dbf, f"sqlite3 {dbf} (tables and example queries: docs/analysis.md)"))
    if (out / formats.SUMMARY_FILE).is_file():
        lines.append(("summary.json", out / formats.SUMMARY_FILE, "JSON: every number above (fields: docs/analysis.md)"))
    ok = [c for c in summary.get("captures", []) if c["status"] == "ok"]
    wall: dict[str, float] = {}   # the stage directories of *_pt captures, the one with the most wall time first
    for c in ok:
        if c["kind"] == "torch" and c["path"].endswith("_pt") and not c["path"].endswith("_ascend_pt"):
            d = str(Path(c["path"]).parent)
            wall[d] = wall.get(d, 0.0) + (c.get("wall_us") or 0.0)
    torch_dirs = sorted(wall, key=lambda d: (-wall[d], d))
    if torch_dirs:
        more = f" (and {len(torch_dirs) - 1} more stage directories)" if len(torch_dirs) > 1 else ""
        lines.append(("*_pt captures", f"{base / torch_dirs[0]}{more}",
                      f"TensorBoard (pip install torch-tb-profiler): tensorboard --logdir {base / torch_dirs[0]}; "
                      "or open a *.pt.trace.json.gz in Perfetto"))
    kineto = sorted(c["path"] for c in ok if c["kind"] == "kineto")
    if kineto:
        lines.append(("Kineto traces", f"{base / kineto[0]}" + (f" (and {len(kineto) - 1} more)" if len(kineto) > 1 else ""),
                      "Perfetto (https://ui.perfetto.dev), or TensorBoard with torch-tb-profiler (*.pt.trace.json[.gz] "
                      "under its --logdir)"))
    ascend = sorted({c["path"] for c in summary.get("captures", []) if c["kind"] in ("ascend", "ascend_raw")})
    if ascend:
        lines.append(("Ascend", f"{base / ascend[0]}" + (f" (and {len(ascend) - 1} more)" if len(ascend) > 1 else ""),
                      "MindStudio Insight: File > Import Data > a *_ascend_pt directory (or the stage directory holding "
                      "several)"))
    if not lines:
        return
    con.print()
    con.print("[bold]Open the results[/bold]")
    for name, path, how in lines:   # a path is never wrapped (copy it whole); the how-to wraps
        con.print(f"  {name:<14} {_t(path)}", highlight=False, soft_wrap=True)
        con.print(Padding(Text(how), (0, 0, 0, 17), expand=False), highlight=False)


def print_summary(summary: dict, top_n: int = 10, console: Console | None = None, out_dir: str | Path | None = None,
                  html: bool = True, db: bool | None = None, before_outputs: Callable[[], None] | None = None) -> None:
    """The terminal summary of `summary`; `top_n` rows per per-stage list. Ends with the output files
    (report.html when `html` and written, timeline.json, analysis.db when `db` and written; `db`
    defaults to the summary's export type) and how to open each. `before_outputs` is called before
    they are listed (the analyse command's report.html, written meanwhile by a forked child)."""
    con = console or Console()
    if not con.is_terminal and con.width < 160:  # logs and pipes: do not squeeze the tables to 80 columns
        con.width = 160
    _advice(con, summary)
    _captures(con, summary)
    _stages(con, summary, max(1, top_n))
    con.print()
    _breakdown(con, summary)
    _communication(con, summary)
    _timeline(con, summary)
    _rollout(con, summary)
    _print_async(con, summary)
    for title, headers, rows in ((memory_table.STAGES_TITLE, memory_table.STAGE_HEADERS, memory_table.stage_rows(summary)),
                                 (memory_table.RECORDS_TITLE, memory_table.RECORD_HEADERS, memory_table.record_rows(summary))):
        _print_rows(con, title, headers, rows)   # memory (docs/memory.md): nothing without its files
    _slow_ranks(con, summary)
    _findings(con, summary)
    _warnings(con, summary)
    if before_outputs is not None:
        before_outputs()
    _outputs(con, summary, Path(out_dir) if out_dir else None, html, db)


def _print_rows(con: Console, title: str, headers: tuple, rows: list[list[str]]) -> None:
    if rows:
        t = Table(*headers, title=title, title_justify="left")
        for row in rows:
            t.add_row(*map(escape, row))
        con.print(t)


def _print_async(con: Console, summary: dict) -> None:
    """An asynchronous run's table (results/async_table.py); nothing without one."""
    rows = async_table.table_rows(summary)
    if not rows:
        return
    t = Table(title=async_table.TITLE, title_justify="left")
    for name in async_table.HEADERS:
        t.add_column(name, justify="left" if name == "tracker" else "right",
                     no_wrap=name in ("tracker", "sync s gather/transfer/load"))
    for row in rows:
        t.add_row(*row)
    con.print(t)
