"""What each section of report.html shows, taken from summary.json: tables (rows of cells), charts and
the few numbers the templates print. The wording and the layout are in templates/sections/."""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import NamedTuple
from urllib.parse import quote

from mindspeed_profiler.core import formats

from mindspeed_profiler.analysis.models import display
from mindspeed_profiler.analysis.models import questions as q
from mindspeed_profiler.analysis.models.display import capture_label as label, field, pct
from mindspeed_profiler.analysis.models.rows import rank_number
from mindspeed_profiler.analysis.models.summary_fields import CAPTURE_BLOCKS, SUMMARY, TIMELINE
from mindspeed_profiler.analysis.results import async_table, memory_table
from mindspeed_profiler.analysis.results.report.fmt import ms
from mindspeed_profiler.analysis.results.report.rollout_svg import lengths_svg, occupancy_svg
from mindspeed_profiler.analysis.results.report.svg import (
    PALETTE,
    Chart,
    HeatCell,
    heat_map,
    iteration_plot,
    stacked_bars,
)
from mindspeed_profiler.analysis.results.report.timeline_svg import (
    gantt_layout,
    iteration_bars,
    overview,
    stage_colors,
    stage_order,
    zoom,
)

MAX_ITERATION_ROWS = 300   # iterations listed in the report's tables (a week-long run has thousands)
SCALE_CAPTURES = 64        # above this many trace captures: a rank x stage heat map and the outliers, no row per capture
MAX_HEAT_ROWS = 256        # heat map rows; more workers are binned (consecutive ranks), each bin showing its worst
MAX_OUTLIERS = 50          # slow-rank rows listed at scale (flagged first, then by ratio)
TRACE_KINDS = ("torch", "kineto", "ascend")
DEVICE_PARTS = [("compute_us", "compute", "#4e79a7"),
                ("communication_exposed_us", "communication (exposed)", "#e15759"),
                ("memcpy_exposed_us", "memory copy (exposed)", "#edc948"), ("idle_us", "idle", "#d3d3d3")]
CLUSTER_PARTS = [("computing_us", "computing", "#4e79a7"),
                 ("communication_exposed_us", "communication (not overlapped)", "#e15759"),
                 ("free_us", "free", "#d3d3d3")]


class Exact(NamedTuple):
    """A cell shown as text whose exact value goes to data-v (what the sort uses). Other cells are plain
    values, shown as they are and repeated in their title (a name cut by the column can be read in full)."""
    text: str
    value: object


class Link(NamedTuple):
    """A cell (or a name in a section) shown as text linking to a relative href (a capture under the
    run directory); the href is percent-encoded, so it can only be a relative path."""
    text: str
    href: str


def exact_ms(us) -> Exact:
    return Exact(ms(us), us)


class Links:
    """Relative hrefs from the directory of report.html to paths under the analysed directory."""

    def __init__(self, summary: dict, report_dir: str | Path | None):
        root = Path(str(field(SUMMARY, summary, "root") or "."))
        self.base = root.parent if root.is_file() else root
        self.report_dir = Path(report_dir) if report_dir is not None else None

    def href(self, path: str) -> str:
        if self.report_dir is None:   # report.html in DIR/analysis/ (where analyse writes it)
            rel = PurePosixPath("..", *PurePosixPath(str(path).replace(os.sep, "/")).parts)
        else:
            rel = PurePosixPath(*Path(os.path.relpath(self.base / path, self.report_dir)).parts)
        return quote(str(rel), safe="/")   # ':' too is encoded: never a scheme

    def __call__(self, path: str, text: str | None = None) -> Link:
        return Link(path if text is None else text, self.href(path))


@dataclass(frozen=True)
class Table:
    """A sortable table; the columns in left are left-aligned, the rows where flags is true highlighted."""
    headers: list[str]
    rows: list[list]
    left: frozenset[int] = frozenset({0})
    flags: list[bool] | None = None
    id: str = ""

    def without_empty_columns(self) -> "Table":
        """The columns that hold a value in at least one row (a CPU run's device columns go)."""
        keep = [i for i in range(len(self.headers))
                if any(not _empty(r[i]) for r in self.rows)] if self.rows else list(range(len(self.headers)))
        if len(keep) == len(self.headers):
            return self
        return replace(self, headers=[self.headers[i] for i in keep], rows=[[r[i] for i in keep] for r in self.rows],
                       left=frozenset(k for k, i in enumerate(keep) if i in self.left))


def _empty(c) -> bool:
    if isinstance(c, Exact):
        return c.text in ("", None)
    return c is None or c == ""


def _positive(v) -> bool:
    """A count that is more than zero (a tampered summary may hold anything: only numbers count)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def header(summary: dict, links: Links) -> dict:
    cnt = {k: field(SUMMARY, summary, f"counts_{k}") for k in ("found", "ok", "failed", "unparsed")}
    tl = [c for c in summary.get("captures", []) if c.get("kind") == "timeline" and c.get("status") == "ok"]
    timeline = None
    if tl:   # the merged file when there is one (segments are merged in memory), else the directory
        merged = [f"{tl[0]['path']}/{n}" for n in formats.TIMELINE_FILES if (links.base / tl[0]["path"] / n).is_file()]
        timeline = links((field(CAPTURE_BLOCKS, tl[0], "files") or merged or [tl[0]["path"]])[0])
    return {"root": field(SUMMARY, summary, "root"), "created": field(SUMMARY, summary, "created"),
            **{k: 0 if v is None else v for k, v in cnt.items()},
            "failed_bad": _positive(cnt["failed"]), "unparsed_bad": _positive(cnt["unparsed"]),
            "timeline_file": timeline}


def problems(caps: list[dict], links: Links) -> Table | None:
    bad = [c for c in caps if c["status"] != "ok"]
    if not bad:
        return None
    return Table(["path", "kind", "status", "reason"],
                 [[links(c["path"]), c["kind"], c["status"], c.get("error")] for c in bad], frozenset({0, 3}))


def warnings(summary: dict, links: Links) -> Table | None:
    """What the reader should know before the numbers: the run-level warnings (e.g. several runs in
    one directory), the timeline's, and each capture's (the same text on several captures once)."""
    rows = [["all captures", str(w)] for w in summary.get("warnings") or []]
    tl_warning = field(TIMELINE, summary.get("timeline"), "warning")
    if tl_warning:
        rows.append(["timeline", str(tl_warning)])
    caps = summary.get("captures", [])
    grouped = display.by_text(caps, "warnings")
    for m, paths in display.by_text(caps, "missing").items():   # what a partial capture cannot answer
        grouped.setdefault(f"partial capture: cannot say {m}", []).extend(paths)
    for w, paths in grouped.items():
        rows.append([links(paths[0]) if len(paths) == 1 else f"{len(paths)} captures: " + ", ".join(paths[:5])
                     + (" ..." if len(paths) > 5 else ""), w])
    return Table(["where", "warning"], rows, frozenset({0, 1}), id="warnings") if rows else None


def findings(summary: dict, limit: int | None = None) -> Table | None:
    """The advisor's findings (advisor.py), largest impact first: shown at the top of the page (the
    first `limit` of them at scale, where rules that fire per capture give thousands)."""
    rows = q.FINDINGS.rows(summary)[:limit]
    return Table(["impact", "finding", "what to try", "rule"],
                 [[_share(f["impact"]), f["title"], f["action"], f["id"]] for f in rows],
                 frozenset({1, 2, 3}), id="findings") if rows else None


def runs(summary: dict) -> Table | None:
    """The runs found, when there are several (each analysed on its own)."""
    rs = summary.get("runs") or []
    if len(rs) < 2:
        return None
    n = {r: sum(1 for c in summary.get("captures", []) if c.get("run_id") == r and c.get("kind") != "timeline")
         for r in rs}
    shown = rs[-1] if summary.get("timeline") else None   # the timeline shown is the latest run's
    return Table(["run", "captures", "its timeline"],
                 [[r, n[r], "shown below" if r == shown else "in summary.json (timeline_runs)"] for r in rs],
                 frozenset({0, 2}))


def longest_iterations(its: list[dict]) -> list[dict]:
    """At most MAX_ITERATION_ROWS iterations: a long run keeps its longest ones, in order."""
    if len(its) <= MAX_ITERATION_ROWS:
        return its
    keep = set(sorted(range(len(its)), key=lambda k: -(its[k]["dur_us"] or 0.0))[:MAX_ITERATION_ROWS])
    return [it for k, it in enumerate(its) if k in keep]


def stage_pivot(tl: dict, its: list[dict]) -> Table:
    """One row per iteration, one column per stage (wall ms), and the iteration's duration; each
    cell's data-v holds the exact value in us (summary.json's stages[*].wall_us)."""
    stages = stage_order(tl)
    rows = [[it["iteration"], exact_ms(it["dur_us"])] +
            [exact_ms(it["stages"][s]["wall_us"]) if s in it["stages"] else Exact("", "") for s in stages]
            for it in its]
    return Table(["iteration", "iteration ms"] + [f"{s} ms" for s in stages], rows, frozenset(), id="pivot")


def _most_idle(idle_per_worker: dict) -> str:
    if not idle_per_worker:
        return ""
    worker = max(idle_per_worker, key=idle_per_worker.get)
    return f"{worker} ({ms(idle_per_worker[worker])} ms)"


def _tracker_cells(tracker: display.TrackerIterations, iteration) -> list:
    """The tracker's tokens/s and MFU of one iteration (display.tracker_iterations), exact in data-v."""
    return [Exact(m.text(v), v) if (v := m.values.get(iteration)) is not None else Exact("", "")
            for m in tracker.columns]


def iteration_table(its: list[dict], tracker: display.TrackerIterations | None = None) -> Table:
    tracker = tracker or display.TrackerIterations([], {})
    return Table(["iteration", "duration ms", "stage overlap ms", "no stage ms", "profiler ms", "most idle worker",
                  "critical path"] + [m.header for m in tracker.columns],
                 [[it["iteration"], ms(it["dur_us"]), ms(it.get("overlap_us")), ms(it.get("no_stage_us")),
                   ms(it.get("profiler_us")) if it.get("profiler_us") else "",
                   _most_idle(it.get("idle_per_worker_us") or {}),
                   display.path_text(it.get("critical_path") or [], " → ")] + _tracker_cells(tracker, it["iteration"])
                  for it in its],
                 frozenset({5, 6})).without_empty_columns()


def throughput(tl: dict | None, tracker: display.TrackerIterations) -> dict | None:
    """The tracker's tokens/s and MFU per iteration: a plot of each, and, without a timeline (whose
    iteration table has them as columns), their own table; None when the tracker has neither."""
    if not tracker.columns:
        return None
    plots = [iteration_plot([(m.header, m.values) for m in tracker.columns if m.kind == kind],
                            next(m.text for m in tracker.columns if m.kind == kind), svg_id=f"plot-{kind[:3].lower()}")
             for kind in ("tokens/s", "MFU") if any(m.kind == kind for m in tracker.columns)]
    table = None
    if not (tl and tl.get("iterations")):
        its = [{"iteration": i, "dur_us": tracker.wall_us.get(i)}
               for i in sorted({i for m in tracker.columns for i in m.values})]
        table = iteration_table(longest_iterations(its), tracker)
    return {"plots": plots, "table": table, "n_iterations": len({i for m in tracker.columns for i in m.values})}


def timeline(tl: dict | None, tracker: display.TrackerIterations | None = None) -> dict | None:
    """The Gantt (overview and zoomed median iteration) and the per-iteration bars and tables."""
    if not tl:
        return None
    its = longest_iterations(tl["iterations"])
    g = gantt_layout(tl)
    return {"gantt": g, "overview": overview(g) if g else None,
            "zoom": zoom(g) if g and g.median else None,
            "profiler": any(it.get("profiler_us") for it in its),
            "truncated": field(TIMELINE, tl, "gantt_truncated"), "n_drawn": len(tl.get("gantt") or []),
            "n_stage_spans": field(TIMELINE, tl, "n_stage_spans"), "n_iterations": len(tl["iterations"]), "n_rows": len(its),
            "bars": iteration_bars(tl, its), "pivot": stage_pivot(tl, its), "iterations": iteration_table(its, tracker)}


def _host_walls(summary: dict, tl: dict | None) -> Chart | None:
    """Without device activity (CPU runs): the host time per step of each rank's capture, one colour
    per stage (the Gantt's colours when there is a timeline), grouped by stage."""
    rows = [(f"{r['stage']} · {r['role'] or ''} rank {r['rank']}", r["stage"], r["value_us"])
            for r in q.STAGE_RANK.rows(summary) if r["source"] == "capture"]
    if not rows:
        return None
    color = stage_colors(tl) if tl else {}
    in_gantt = {n: i for i, n in enumerate(color)}
    names = sorted({stage for _, stage, _ in rows}, key=lambda n: (n not in in_gantt, in_gantt.get(n, 0), str(n)))
    parts = [(("stage", n), n, color.get(n) or PALETTE[i % len(PALETTE)]) for i, n in enumerate(names)]
    order = {n: i for i, n in enumerate(names)}
    rows.sort(key=lambda r: (order[r[1]], r[0]))
    return stacked_bars([(text, {("stage", stage): us}) for text, stage, us in rows], parts)


def device_time(summary: dict, tl: dict | None) -> dict | None:
    """Per-rank device time (compute, exposed communication and copies, idle), or the host walls per
    step. Labels name the rank; the capture's path is in the hover text."""
    caps, device = [], []
    for c in summary.get("captures", []):
        d = display.capture_rows(q.BREAKDOWN, c) if c["status"] == "ok" else []
        if d:
            caps.append(c)
            device.append(d[0])
    if caps:
        labels = [label(c) for c in caps]
        dup = {t for t in labels if labels.count(t) > 1}   # two captures of one rank and stage: tell them apart
        devs = [(f"{t} ({k + 1})" if t in dup else t, d) for k, (t, d) in enumerate(zip(labels, device))]
        return {"host": False, "chart": stacked_bars(devs, DEVICE_PARTS, titles=[f"{t} [{c['path']}]"
                                                                                 for t, c in zip(labels, caps)])}
    walls = _host_walls(summary, tl)
    return {"host": True, "chart": walls} if walls else None


def clusters(caps: list[dict]) -> list[dict]:
    return [{"path": c["path"], "chart": stacked_bars([(f"rank {r['rank']}", r) for r in c["ranks"]], CLUSTER_PARTS)}
            for c in caps if c["kind"] == "cluster" and c["status"] == "ok"]


def step_breakdown(summary: dict, links: Links) -> Table | None:
    """Per capture and step, msprof-analyze's breakdown (from whichever file gave it), and the rows
    of msprof-analyze's own cluster files (the step_breakdown rows)."""
    rows = []
    for _, c, r in display.step_breakdown(summary):
        cluster = r["source"] == "cluster"
        rows.append([links(c["path"], f"rank {r['rank']}" if cluster else label(c)), r["device_id"], r["step"],
                     *(exact_ms(r[k]) for k in display.BREAKDOWN_CELLS),
                     f"msprof-analyze: {c['path']}" if cluster else r["source"]])
    if not rows:
        return None
    return Table(["capture", "device", "step", "computing ms", "comm. not overlapped ms", "overlapped ms", "free ms",
                  "bubble ms", "preparing ms", "step (stage) ms", "from"], rows, frozenset({0, 10})).without_empty_columns()


def slow_ranks(summary: dict) -> dict | None:
    sr = display.slow_ranks(summary)
    if not sr:
        return None
    several = len(summary.get("runs") or []) > 1
    return {"threshold": field(SUMMARY, summary, "options_threshold"),
            "n_flagged": sum(1 for r in sr if r["flagged"]), "table": Table(
        ["run", "source", "stage", "metric", "worker", "value ms", "median ms", "ratio", "samples", "reason"],
        [[r.get("run_id") if several else "", r["source"], r["stage"], r["metric"], r["worker"] or "", ms(r["value_us"]),
          ms(r["median_us"]), f"{r['ratio']:.3f}", r.get("n"), r.get("reason")]
         for r in sr], frozenset({0, 1, 2, 3, 4, 9}), [r["flagged"] for r in sr]).without_empty_columns()}


def communication(summary: dict, links: Links) -> Table | None:
    """Per capture: communication on the device (collective kernels: total, exposed, overlapped, exposed
    share of the busy time) and on the host (collective calls: time covered, share of the wall)."""
    rows = []
    for c, r, top in display.communication(summary):
        names = ", ".join(f"{t['name']} ({t.get('where')}, x{t.get('count')}, {ms(t.get('total_us'))} ms)" for t in top[:3])
        rows.append([links(c["path"], label(c)), exact_ms(r["device_total_us"]), exact_ms(r["device_exposed_us"]),
                     exact_ms(r["device_overlapped_us"]), _share(r["device_share_of_busy"]),
                     _share(r["collectives_wait_share"]), exact_ms(r["host_total_us"]), _share(r["host_share_of_wall"]),
                     names])
    if not rows:
        return None
    return Table(["capture", "device ms", "exposed ms", "overlapped ms", "exposed % of busy", "waiting % of collectives",
                  "host ms", "host % of wall", "top collectives"], rows, frozenset({0, 8})).without_empty_columns()


def _share(x) -> Exact:
    return Exact(pct(x), x)


def _table(rows: list | None, headers: list[str], cells, left: frozenset[int] = frozenset({0})) -> Table | None:
    return Table(headers, [cells(r) for r in rows], left).without_empty_columns() if rows else None


def capture(c: dict, links: Links) -> dict:
    """One capture's steps, top ops, top kernels and annotations (each None when the capture has none)."""
    d = display.capture_rows(q.BREAKDOWN, c)
    rows = display.capture_rows
    return {
        "label": label(c), "path": links(c["path"]), "wall_us": field(q.CAPTURES, c, "wall_us"),
        "device": bool(d), "busy_us": d[0]["busy_us"] if d else None, "communication": _comm_note(c),
        "steps": _table(rows(q.STEPS, c), ["step", "duration ms", "device busy ms"],
                        lambda s: [s["step"], ms(s["dur_us"]), ms(s["device_busy_us"])]),
        "top_ops": _table(rows(q.OPS, c), ["op", "count", "total ms", "self ms", "device ms"],
                          lambda o: [o["name"], o["count"], ms(o["total_us"]), ms(o["self_us"]),
                                     ms(o["device_us"]) if d else ""]),
        "top_kernels": _table(rows(q.KERNELS, c), ["kernel", "class", "count", "total ms"],
                              lambda k: [k["name"], k["class"], k["count"], ms(k["total_us"])], frozenset({0, 1})),
        "annotations": _table(rows(q.ANNOTATIONS, c), ["range", "count", "total ms", "mean ms", "max ms"],
                              lambda a: [a["name"], a["count"], ms(a["total_us"]), ms(a["mean_us"]), ms(a["max_us"])]),
    }


def _comm_note(c: dict) -> str:
    device, host = display.comm_shares(c)
    parts = [f"communication {pct(device)} of device busy"] if device is not None else []
    if host is not None:
        parts.append(f"host collectives {pct(host)} of wall")
    return ", ".join(parts)


def n_trace_captures(summary: dict) -> int:
    return sum(1 for c in summary.get("captures", []) if c.get("status") == "ok" and c.get("kind") in TRACE_KINDS)


def _rank_order(worker: str | None, role, rank) -> tuple:
    n = rank_number(rank)
    return (str(role or ""), n is None, n if n is not None else 0, str(worker or rank))


def scale(summary: dict) -> dict | None:
    """At scale (more than SCALE_CAPTURES trace captures): the slow-rank rows as a heat map (a row per
    worker, binned beyond MAX_HEAT_ROWS, a column per stage and source; the colour is the ratio to the
    stage's median) and the outliers (flagged first, then by ratio; MAX_OUTLIERS of them)."""
    sr = display.slow_ranks(summary)
    if not sr:
        return None
    threshold = field(SUMMARY, summary, "options_threshold") or 1.2
    col_keys = sorted({(r["stage"], r["source"], r["metric"]) for r in sr}, key=lambda k: tuple(map(str, k)))
    stages = [k[0] for k in col_keys]
    cols = [str(st) if stages.count(st) == 1 else f"{st} · {src}" for st, src, _ in col_keys]
    workers = sorted({(r["worker"], r.get("role"), r["rank"]) for r in sr}, key=lambda w: _rank_order(*w))
    per = max(1, -(-len(workers) // MAX_HEAT_ROWS))   # workers per heat map row
    row_of = {w[0]: i // per for i, w in enumerate(workers)}
    names = [str(w[0]) for w in workers]
    rows = [names[i] if per == 1 else f"{names[i]} - {names[min(i + per, len(names)) - 1]}"
            for i in range(0, len(names), per)]
    col_of = {k: j for j, k in enumerate(col_keys)}
    worst: dict[tuple[int, int], dict] = {}
    for r in sr:   # a bin shows its worst worker (the highest ratio)
        cell = (row_of[r["worker"]], col_of[(r["stage"], r["source"], r["metric"])])
        if cell not in worst or r["ratio"] > worst[cell]["ratio"]:
            worst[cell] = r
    cells = {}
    for (i, j), r in worst.items():
        who = r["worker"] if per == 1 else f"{rows[i]}: the worst is {r['worker']}"
        cells[(i, j)] = HeatCell(r["ratio"], bool(r["flagged"]),
                                 f"{who} · {cols[j]}: {r['ratio']:.3f}x the median ({ms(r['value_us'])} ms vs "
                                 f"{ms(r['median_us'])} ms){' FLAGGED' if r['flagged'] else ''}")
    shown = sr[:MAX_OUTLIERS]   # slow_ranks are sorted flagged first, then by ratio
    several = len(summary.get("runs") or []) > 1
    return {"n_captures": n_trace_captures(summary), "n_workers": len(workers), "per_row": per,
            "threshold": threshold, "n_flagged": sum(1 for r in sr if r["flagged"]), "n_rows": len(sr),
            "svg": heat_map(rows, cols, cells, threshold,
                            col_titles=[f"{st} ({src}: {m})" for st, src, m in col_keys]),
            "outliers": Table(
                ["run", "source", "stage", "metric", "worker", "value ms", "median ms", "ratio", "samples", "reason"],
                [[r.get("run_id") if several else "", r["source"], r["stage"], r["metric"], r["worker"] or "",
                  ms(r["value_us"]), ms(r["median_us"]), f"{r['ratio']:.3f}", r.get("n"), r.get("reason")]
                 for r in shown], frozenset({0, 1, 2, 3, 4, 9}), [r["flagged"] for r in shown]).without_empty_columns()}


MAX_ROLLOUT_CHARTS = 12   # batches drawn (occupancy + lengths); more: those that lost most to the tail


def rollout(summary: dict, top_n: int = 10) -> dict | None:
    """The long tail of the rollout (docs/rollout.md): a table of the batches, the occupancy curve
    and the length histogram of each (the MAX_ROLLOUT_CHARTS that lost most, in order), the slowest
    samples. None without per-sample records."""
    batches = q.ROLLOUT_BATCHES.rows(summary)
    if not batches:
        return None
    key = lambda r: (r["path"], r["run_id"], r["iteration"], r["stage"])   # noqa: E731
    curves: dict[tuple, list] = {}
    bins: dict[tuple, list] = {}
    for r in q.ROLLOUT_OCCUPANCY.rows(summary):
        curves.setdefault(key(r), []).append((r["t_s"], r["occupancy"]))
    for r in q.ROLLOUT_LENGTHS.rows(summary):
        bins.setdefault(key(r), []).append(r)
    drawn = sorted(sorted(batches, key=lambda r: -(r["tail_lost_s"] or 0.0))[:MAX_ROLLOUT_CHARTS],
                   key=lambda r: (str(r["run_id"]), r["iteration"], r["stage"]))
    charts = []
    for r in drawn:
        name = f"iteration {r['iteration']} · {r['stage']}" + (f" · run {r['run_id']}" if r["run_id"] else "")
        charts.append({"title": name, "note": f"{r['timed']} samples, mean occupancy {pct(r['mean_occupancy'])}, "
                       f"lost to the tail {ms((r['tail_lost_s'] or 0.0) * 1e6)} ms",
                       "occupancy": occupancy_svg(curves.get(key(r), []), [("t50", r["t50_s"]), ("t90", r["t90_s"])],
                                                  f"occupancy, {name}"),
                       "lengths": lengths_svg(bins.get(key(r), []), f"response lengths, {name}")})
    table = Table(["run", "iteration", "stage", "workers", "timed", "untimed", "t50 ms", "t90 ms", "t100 ms",
                   "mean occupancy", "lost to the tail ms", "tokens p50", "p90", "p99", "max", "truncated",
                   "queue share"],
                  [[r["run_id"], r["iteration"], r["stage"], r["workers"], r["timed"], r["untimed"],
                    *(exact_ms(r[k] * 1e6 if r[k] is not None else None) for k in ("t50_s", "t90_s", "t100_s")),
                    _share(r["mean_occupancy"]), exact_ms(r["tail_lost_s"] * 1e6 if r["tail_lost_s"] is not None else None),
                    r["tokens_p50"], r["tokens_p90"], r["tokens_p99"], r["tokens_max"], _share(r["truncated_share"]),
                    _share(r["queue_share"])] for r in batches[:MAX_ITERATION_ROWS]],
                  frozenset({0, 2}), id="rollout-batches").without_empty_columns()
    slow = [r for r in q.ROLLOUT_SLOWEST.rows(summary) if r["position"] < top_n]
    slowest = _table(slow, ["iteration", "stage", "worker", "sample", "latency ms", "start ms", "first token ms",
                            "tokens", "finish"],
                     lambda r: [r["iteration"], r["stage"], r["worker"], r["sample_id"], exact_ms(r["latency_s"] * 1e6),
                                exact_ms(r["start_s"] * 1e6),
                                exact_ms(r["ttft_s"] * 1e6 if r["ttft_s"] is not None else None),
                                r["response_tokens"], r["finish_reason"]], frozenset({1, 2, 3, 8}))
    return {"charts": charts, "n_batches": len(batches), "table": table, "slowest": slowest}


def async_rl(summary: dict) -> Table | None:
    """An asynchronous run's table (results/async_table.py, docs/async.md); None without one."""
    rows = async_table.table_rows(summary)
    return Table(list(async_table.HEADERS), rows, frozenset({0}), id="async-rl-table") if rows else None


def memory(summary: dict) -> dict | None:
    """The memory tables (results/memory_table.py, docs/memory.md); None without memory files."""
    stages, records = memory_table.stage_rows(summary), memory_table.record_rows(summary)
    if not stages and not records:
        return None
    return {"stages": Table(list(memory_table.STAGE_HEADERS), stages, frozenset({0, 1}), id="stage-memory").without_empty_columns()
            if stages else None,
            "records": Table(list(memory_table.RECORD_HEADERS), records, frozenset({0, 1, 2, 7, 8, 9}), id="oom-records")
            if records else None}


def context(summary: dict, report_dir: str | Path | None = None) -> dict:
    """Everything report.html.j2 and its sections read. `report_dir`: where report.html is written
    (capture links are relative to it); default: DIR/analysis/. Above SCALE_CAPTURES trace captures
    the per-capture sections (device bars, communication, step breakdown, slow-rank rows, each
    capture's tables) give way to the heat map and the outliers (`scale`)."""
    caps = summary.get("captures", [])
    tl = summary.get("timeline")
    links = Links(summary, report_dir)
    big = n_trace_captures(summary) > SCALE_CAPTURES
    tracker = display.tracker_iterations(summary)
    return {"header": header(summary, links), "findings": findings(summary, MAX_OUTLIERS if big else None),
            "n_findings": len(summary.get("findings") or []), "warnings": warnings(summary, links),
            "runs": runs(summary),
            "problems": problems(caps, links), "timeline": timeline(tl, tracker),
            "throughput": throughput(tl, tracker),
            "rollout": rollout(summary),
            "async_rl": async_rl(summary),
            "memory": memory(summary),
            "scale": scale(summary) if big else None,
            "device_time": None if big else device_time(summary, tl), "clusters": clusters(caps),
            "slow_ranks": None if big else slow_ranks(summary),
            "communication": None if big else communication(summary, links),
            "step_breakdown": None if big else step_breakdown(summary, links),
            "captures": [] if big else [capture(c, links) for c in caps
                                        if c["status"] == "ok" and c["kind"] not in ("timeline", "cluster", "samples", "memory")]}
