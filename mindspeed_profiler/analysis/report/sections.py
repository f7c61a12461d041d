"""What each section of report.html shows, taken from summary.json: tables (rows of cells), charts and
the few numbers the templates print. The wording and the layout are in templates/sections/."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .fmt import ms
from .svg import PALETTE, Chart, stacked_bars
from .timeline_svg import gantt_layout, iteration_bars, overview, stage_colors, stage_order, zoom

MAX_ITERATION_ROWS = 300   # iterations listed in the report's tables (a week-long run has thousands)
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


def exact_ms(us) -> Exact:
    return Exact(ms(us), us)


@dataclass(frozen=True)
class Table:
    """A sortable table; the columns in left are left-aligned, the rows where flags is true highlighted."""
    headers: list[str]
    rows: list[list]
    left: frozenset[int] = frozenset({0})
    flags: list[bool] | None = None
    id: str = ""


def header(summary: dict) -> dict:
    cnt = summary.get("counts", {})
    return {"root": summary.get("root"), "created": summary.get("created"),
            **{k: cnt.get(k, 0) for k in ("found", "ok", "failed", "unparsed")}}


def problems(caps: list[dict]) -> Table | None:
    bad = [c for c in caps if c["status"] != "ok"]
    if not bad:
        return None
    return Table(["path", "kind", "status", "reason"],
                 [[c["path"], c["kind"], c["status"], c.get("error")] for c in bad], frozenset({0, 3}))


def longest_iterations(its: list[dict]) -> list[dict]:
    """At most MAX_ITERATION_ROWS iterations: a long run keeps its longest ones, in order."""
    if len(its) <= MAX_ITERATION_ROWS:
        return its
    keep = set(sorted(range(len(its)), key=lambda k: -its[k]["dur_us"])[:MAX_ITERATION_ROWS])
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


def iteration_table(its: list[dict]) -> Table:
    return Table(["iteration", "duration ms", "stage overlap ms", "no stage ms", "most idle worker", "critical path"],
                 [[it["iteration"], ms(it["dur_us"]), ms(it["overlap_us"]), ms(it["no_stage_us"]),
                   _most_idle(it["idle_per_worker_us"]),
                   " → ".join(f"{p['stage']}@{p['worker']}" for p in it["critical_path"])] for it in its],
                 frozenset({4, 5}))


def timeline(tl: dict | None) -> dict | None:
    """The Gantt (overview and zoomed median iteration) and the per-iteration bars and tables."""
    if not tl:
        return None
    its = longest_iterations(tl["iterations"])
    g = gantt_layout(tl)
    return {"gantt": g, "overview": overview(g) if g else None,
            "zoom": zoom(g) if g and g.median else None,
            "truncated": tl.get("gantt_truncated"), "n_drawn": len(tl.get("gantt") or []),
            "n_stage_spans": tl.get("n_stage_spans"), "n_iterations": len(tl["iterations"]), "n_rows": len(its),
            "bars": iteration_bars(tl, its), "pivot": stage_pivot(tl, its), "iterations": iteration_table(its)}


def label(c: dict) -> str:
    """A capture's name: its role, rank and stage, or its path."""
    who = " ".join(str(x) for x in (c.get("role"), f"rank {c['rank']}" if c.get("rank") is not None else None,
                                    c.get("stage")) if x)
    return who or c["path"]


def _host_walls(summary: dict, tl: dict | None) -> Chart | None:
    """Without device activity (CPU runs): the host time per step of each rank's capture, one colour
    per stage (the Gantt's colours when there is a timeline), grouped by stage."""
    rows = [(f"{r['stage']} · {r.get('role') or ''} rank {r['rank']}", r["stage"], r["value_us"])
            for r in summary.get("stage_rank", []) if r["source"] == "capture"]
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
    """Per-rank device time (compute, exposed communication and copies, idle), or the host walls per step."""
    devs = [(label(c) + f" [{c['path']}]", c["device"]) for c in summary.get("captures", [])
            if c["status"] == "ok" and c.get("device")]
    if devs:
        return {"host": False, "chart": stacked_bars(devs, DEVICE_PARTS)}
    walls = _host_walls(summary, tl)
    return {"host": True, "chart": walls} if walls else None


def clusters(caps: list[dict]) -> list[dict]:
    return [{"path": c["path"], "chart": stacked_bars([(f"rank {r['rank']}", r) for r in c["ranks"]], CLUSTER_PARTS)}
            for c in caps if c["kind"] == "cluster" and c["status"] == "ok"]


def _worker(r: dict) -> str:
    """A slow-rank row's worker: the timeline's "role:rank", or role:rank for a capture's rank."""
    rank = r.get("rank")
    if isinstance(rank, str) or not r.get("role"):
        return "" if rank is None else str(rank)
    return f"{r['role']}:{rank}"


def slow_ranks(summary: dict) -> dict | None:
    sr = summary.get("slow_ranks")
    if not sr:
        return None
    return {"threshold": (summary.get("options") or {}).get("threshold"), "table": Table(
        ["source", "stage", "metric", "worker", "value ms", "median ms", "ratio"],
        [[r["source"], r["stage"], r["metric"], _worker(r), ms(r["value_us"]), ms(r["median_us"]), f"{r['ratio']:.3f}"]
         for r in sr], frozenset({0, 1, 2, 3}), [r["flagged"] for r in sr])}


def _table(rows: list | None, headers: list[str], cells, left: frozenset[int] = frozenset({0})) -> Table | None:
    return Table(headers, [cells(r) for r in rows], left) if rows else None


def capture(c: dict) -> dict:
    """One capture's steps, top ops, top kernels and annotations (each None when the capture has none)."""
    d = c.get("device") or {}
    return {
        "label": label(c), "path": c["path"], "wall_us": c.get("wall_us"),
        "device": bool(d), "busy_us": d.get("busy_us"),
        "steps": _table(c.get("steps"), ["step", "duration ms", "device busy ms"],
                        lambda s: [s["step"], ms(s["dur_us"]), ms(s.get("device_busy_us"))]),
        "top_ops": _table(c.get("top_ops"), ["op", "count", "total ms", "self ms", "device ms"],
                          lambda o: [o["name"], o["count"], ms(o["total_us"]), ms(o["self_us"]), ms(o["device_us"])]),
        "top_kernels": _table(c.get("top_kernels"), ["kernel", "class", "count", "total ms"],
                              lambda k: [k["name"], k.get("class"), k["count"], ms(k["total_us"])], frozenset({0, 1})),
        "annotations": _table(c.get("annotations"), ["range", "count", "total ms", "mean ms", "max ms"],
                              lambda a: [a["name"], a["count"], ms(a["total_us"]), ms(a["mean_us"]), ms(a["max_us"])]),
    }


def context(summary: dict) -> dict:
    """Everything report.html.j2 and its sections read."""
    caps = summary.get("captures", [])
    tl = summary.get("timeline")
    return {"header": header(summary), "problems": problems(caps), "timeline": timeline(tl),
            "device_time": device_time(summary, tl), "clusters": clusters(caps), "slow_ranks": slow_ranks(summary),
            "captures": [capture(c) for c in caps if c["status"] == "ok" and c["kind"] not in ("timeline", "cluster")]}
