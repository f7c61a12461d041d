"""`analysis.db`: the events of every capture and the summaries, for SQL queries.

Tables (docs/analysis.md "Outputs" lists the columns and useful queries):
  runs, captures, warnings, communication, collectives, events, ops / kernels (each capture's top
  lists), op_totals / kernel_totals (every name), annotations, steps, step_breakdown (msprof-analyze's
  per-step fields of Ascend captures and of msprof-analyze's cluster files), stage_rank, slow_ranks,
  spans (every stage span of the timeline, not only the Gantt's), timeline_iterations,
  timeline_stages, timeline_idle, stage_worker.
Types: times are REAL microseconds, counts and ranks INTEGER, flags INTEGER 0 / 1; `steps.step` is
INTEGER for a numbered step (a label that is not a number is kept as TEXT in the same column).
Indices on events(capture_id, ts_us), events(name), events(cat, name), the capture_id of the
per-capture tables and spans(iteration). Written to a temporary file and renamed into place.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from mindspeed_profiler.fileio import atomic_path

from .analyzers.step_breakdown import BREAKDOWN_FIELDS

SCHEMA = """
CREATE TABLE runs(run_id TEXT PRIMARY KEY, position INTEGER);
CREATE TABLE captures(id INTEGER PRIMARY KEY, path TEXT, kind TEXT, status TEXT, error TEXT, run_id TEXT,
  role TEXT, rank INTEGER, stage TEXT, step_first INTEGER, step_last INTEGER, start_us REAL, wall_us REAL,
  busy_us REAL, compute_us REAL, communication_us REAL, communication_exposed_us REAL, memcpy_exposed_us REAL,
  idle_us REAL, n_steps INTEGER, n_events INTEGER, n_bad_events INTEGER, n_warnings INTEGER, analyse_s REAL);
CREATE TABLE warnings(capture_id INTEGER, path TEXT, message TEXT);
CREATE TABLE communication(capture_id INTEGER PRIMARY KEY, device_total_us REAL, device_exposed_us REAL,
  device_overlapped_us REAL, device_share_of_busy REAL, host_total_us REAL, host_share_of_wall REAL);
CREATE TABLE collectives(capture_id INTEGER, name TEXT, location TEXT, count INTEGER, total_us REAL);
CREATE TABLE events(capture_id INTEGER, name TEXT, cat TEXT, pid TEXT, tid TEXT, ts_us REAL, dur_us REAL);
CREATE TABLE ops(capture_id INTEGER, name TEXT, count INTEGER, total_us REAL, self_us REAL, device_us REAL);
CREATE TABLE kernels(capture_id INTEGER, name TEXT, count INTEGER, total_us REAL, class TEXT);
CREATE TABLE op_totals(capture_id INTEGER, name TEXT, count INTEGER, total_us REAL, self_us REAL, device_us REAL);
CREATE TABLE kernel_totals(capture_id INTEGER, name TEXT, count INTEGER, total_us REAL, class TEXT);
CREATE TABLE annotations(capture_id INTEGER, name TEXT, count INTEGER, total_us REAL, mean_us REAL, max_us REAL,
  device_us REAL);
CREATE TABLE steps(capture_id INTEGER, step INTEGER, start_us REAL, dur_us REAL, device_busy_us REAL,
  device_range_us REAL);
CREATE TABLE step_breakdown(capture_id INTEGER, rank INTEGER, device_id INTEGER, step INTEGER, computing_us REAL,
  communication_exposed_us REAL, overlapped_us REAL, communication_us REAL, free_us REAL, stage_us REAL, bubble_us REAL,
  communication_exposed_exclude_receive_us REAL, preparing_us REAL, memcpy_exposed_us REAL, source TEXT);
CREATE TABLE stage_rank(run_id TEXT, source TEXT, stage TEXT, role TEXT, rank INTEGER, worker TEXT, metric TEXT,
  value_us REAL, spread_us REAL, n INTEGER, n_captures INTEGER, path TEXT);
CREATE TABLE slow_ranks(run_id TEXT, source TEXT, stage TEXT, metric TEXT, role TEXT, rank INTEGER, worker TEXT,
  value_us REAL, median_us REAL, ratio REAL, n INTEGER, flagged INTEGER, reason TEXT);
CREATE TABLE spans(run_id TEXT, iteration INTEGER, stage TEXT, worker TEXT, role TEXT, rank INTEGER,
  start_us REAL, dur_us REAL);
CREATE TABLE timeline_stages(iteration INTEGER, stage TEXT, total_us REAL, wall_us REAL, count INTEGER);
CREATE TABLE timeline_iterations(iteration INTEGER PRIMARY KEY, start_us REAL, dur_us REAL, stage_covered_us REAL,
  overlap_us REAL, no_stage_us REAL, profiler_us REAL, profiler_no_stage_us REAL, critical_path TEXT);
CREATE TABLE timeline_idle(iteration INTEGER, worker TEXT, idle_us REAL);
CREATE TABLE stage_worker(stage TEXT, worker TEXT, role TEXT, rank INTEGER, count INTEGER, total_us REAL,
  mean_us REAL, median_us REAL, spread_us REAL);
"""
# built after the bulk insert (faster than maintaining them row by row)
INDICES = """
CREATE INDEX events_capture_ts ON events(capture_id, ts_us);
CREATE INDEX events_name ON events(name);
CREATE INDEX events_cat_name ON events(cat, name);
CREATE INDEX ops_capture ON ops(capture_id);
CREATE INDEX kernels_capture ON kernels(capture_id);
CREATE INDEX op_totals_capture ON op_totals(capture_id);
CREATE INDEX kernel_totals_capture ON kernel_totals(capture_id);
CREATE INDEX annotations_capture ON annotations(capture_id);
CREATE INDEX steps_capture ON steps(capture_id);
CREATE INDEX step_breakdown_capture ON step_breakdown(capture_id);
CREATE INDEX spans_iteration ON spans(iteration, start_us);
CREATE INDEX timeline_stages_iteration ON timeline_stages(iteration, stage);
"""


BREAKDOWN_COLUMNS = BREAKDOWN_FIELDS + ("memcpy_exposed_us",)


_INT64 = 2**63


def _int(v) -> int | None:
    """An integer value SQLite can hold (bool is not one); None for anything else."""
    return v if isinstance(v, int) and not isinstance(v, bool) and -_INT64 <= v < _INT64 else None


def _step(v):
    """A numbered step as an integer; any other label kept as it is (text)."""
    if _int(v) is not None:
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) < _INT64:
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit() and abs(int(v)) < _INT64:
        return int(v)
    return None if v is None else str(v)


def _worker(role, rank) -> tuple[int | None, str | None]:
    """(rank as an integer, "role:rank") of a row whose rank is a number or a timeline worker name."""
    if isinstance(rank, str):
        tail = rank.rsplit(":", 1)[-1]
        return (_int(int(tail)) if tail.isascii() and tail.isdigit() else None), rank
    if _int(rank) is None:
        return None, None
    return rank, (f"{role}:{rank}" if role else str(rank))


def _flt(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def write_db(path: Path, summary: dict, results: list[dict]) -> None:
    """Write to a temporary file and rename it into place, so a crash never leaves half a db.
    `results`: the per-capture results of the batch ({"capture", "events"}): a trace's event columns,
    or a timeline's {"spans": every stage span}."""
    with atomic_path(path) as tmp:   # a failure leaves the previous db and no temporary file
        _write(tmp, summary, results)


def _write(tmp: Path, summary: dict, results: list[dict]) -> None:
    con = sqlite3.connect(tmp)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.executescript(SCHEMA)
        by_path = {r["capture"]["path"]: r.get("events") for r in results}
        con.executemany("INSERT OR IGNORE INTO runs VALUES (?,?)", [(r, k) for k, r in enumerate(summary.get("runs") or [])])
        con.executemany("INSERT INTO warnings VALUES (?,?,?)", [(None, None, str(w)) for w in summary.get("warnings") or []])
        spans = []
        for cid, c in enumerate(summary["captures"]):
            _capture(con, cid, c)
            extra = by_path.get(c["path"])
            if extra is None:
                continue
            if "spans" in extra:
                spans += extra["spans"]
            else:
                _events(con, cid, extra)
        con.executemany("INSERT INTO spans VALUES (?,?,?,?,?,?,?,?)",
                        [(s.get("run_id"), _int(s.get("iteration")), s["stage"], s["worker"], s.get("role"),
                          _int(s.get("rank")), s["start_us"], s["dur_us"]) for s in spans])
        _cross(con, summary)
        _timeline(con, summary.get("timeline") or {})
        con.executescript(INDICES)
        con.commit()
    finally:
        con.close()


def _capture(con: sqlite3.Connection, cid: int, c: dict) -> None:
    d = c.get("device") or {}
    sr = c.get("step_range") if isinstance(c.get("step_range"), list) and len(c["step_range"]) == 2 else [None, None]
    warns = [str(w) for w in c.get("warnings") or []]
    con.execute("INSERT INTO captures VALUES (" + ",".join("?" * 24) + ")",
                (cid, c["path"], c["kind"], c["status"], c.get("error"), c.get("run_id"), c.get("role"),
                 _int(c.get("rank")), c.get("stage"), _int(sr[0]), _int(sr[1]), _flt(c.get("start_us")),
                 _flt(c.get("wall_us")), d.get("busy_us"), d.get("compute_us"), d.get("communication_us"),
                 d.get("communication_exposed_us"), d.get("memcpy_exposed_us"), d.get("idle_us"),
                 len(c.get("steps") or []), _int(c.get("n_events")), _int(c.get("n_bad_events")), len(warns),
                 _flt(c.get("analyse_s"))))
    con.executemany("INSERT INTO warnings VALUES (?,?,?)", [(cid, c["path"], w) for w in warns])
    if c.get("error"):
        con.execute("INSERT INTO warnings VALUES (?,?,?)", (cid, c["path"], f"{c['status']}: {c['error']}"))
    comm = c.get("communication")
    if comm:
        dev, host = comm.get("device") or {}, comm.get("host") or {}
        con.execute("INSERT INTO communication VALUES (?,?,?,?,?,?,?)",
                    (cid, dev.get("total_us"), dev.get("exposed_us"), dev.get("overlapped_us"), dev.get("share_of_busy"),
                     host.get("total_us"), host.get("share_of_wall")))
        con.executemany("INSERT INTO collectives VALUES (?,?,?,?,?)",
                        [(cid, t["name"], t.get("where"), t.get("count"), t.get("total_us")) for t in comm.get("top") or []])
    con.executemany("INSERT INTO ops VALUES (?,?,?,?,?,?)",
                    [(cid, o["name"], o["count"], o["total_us"], o["self_us"], o["device_us"]) for o in c.get("top_ops") or []])
    con.executemany("INSERT INTO kernels VALUES (?,?,?,?,?)",
                    [(cid, k["name"], k["count"], k["total_us"], k.get("class")) for k in c.get("top_kernels") or []])
    con.executemany("INSERT INTO op_totals VALUES (?,?,?,?,?,?)", [(cid, *row[:5]) for row in c.get("op_totals") or []])
    con.executemany("INSERT INTO kernel_totals VALUES (?,?,?,?,?)", [(cid, *row[:4]) for row in c.get("kernel_totals") or []])
    con.executemany("INSERT INTO annotations VALUES (?,?,?,?,?,?,?)",
                    [(cid, a["name"], a["count"], a["total_us"], a.get("mean_us"), a.get("max_us"), a.get("device_us"))
                     for a in c.get("annotations") or []])
    con.executemany("INSERT INTO steps VALUES (?,?,?,?,?,?)",
                    [(cid, _step(s.get("step")), s.get("start_us"), s.get("dur_us"), s.get("device_busy_us"),
                      s.get("device_range_us")) for s in c.get("steps") or []])
    rows = [(c.get("rank"), c.get("device_id"), r, c.get("step_trace_source")) for r in c.get("step_trace") or []]
    rows += [(r.get("rank"), None, r, "msprof-analyze cluster") for r in c.get("ranks") or []]
    con.executemany("INSERT INTO step_breakdown VALUES (" + ",".join("?" * 15) + ")",
                    [(cid, _int(rank), _int(dev), _step(r.get("step")), *(_flt(r.get(k)) for k in BREAKDOWN_COLUMNS), src)
                     for rank, dev, r, src in rows])


def _events(con: sqlite3.Connection, cid: int, ev: dict) -> None:
    names, cats, pids, tids = ev["names"], ev["cats"], ev.get("pids"), ev.get("tids")
    con.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?)",
                    ((cid, names[n], cats[k], pids[p], tids[t], float(s), float(u))
                     for n, k, p, t, s, u in zip(ev["name"].tolist(), ev["cat"].tolist(), ev["pid"].tolist(),
                                                 ev["tid"].tolist(), ev["ts"].tolist(), ev["dur"].tolist())))


def _cross(con: sqlite3.Connection, summary: dict) -> None:
    rows = []
    for r in summary.get("stage_rank") or []:
        rank, worker = _worker(r.get("role"), r.get("rank"))
        rows.append((r.get("run_id"), r["source"], r["stage"], r.get("role"), rank, worker, r["metric"], r["value_us"],
                     r.get("spread_us"), r.get("n"), r.get("n_captures"), r.get("path")))
    con.executemany("INSERT INTO stage_rank VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    rows = []
    for r in summary.get("slow_ranks") or []:
        rank, worker = _worker(r.get("role"), r.get("rank"))
        rows.append((r.get("run_id"), r["source"], r["stage"], r["metric"], r.get("role"), rank, worker, r["value_us"],
                     r["median_us"], r["ratio"], r.get("n"), int(bool(r["flagged"])), r.get("reason")))
    con.executemany("INSERT INTO slow_ranks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)


def _timeline(con: sqlite3.Connection, tl: dict) -> None:
    its = tl.get("iterations") or []
    con.executemany("INSERT INTO timeline_stages VALUES (?,?,?,?,?)",
                    [(it["iteration"], name, v["total_us"], v["wall_us"], v["count"])
                     for it in its for name, v in it["stages"].items()])
    con.executemany("INSERT OR REPLACE INTO timeline_iterations VALUES (?,?,?,?,?,?,?,?,?)",
                    [(it["iteration"], it["start_us"], it["dur_us"], it["stage_covered_us"], it["overlap_us"],
                      it["no_stage_us"], it.get("profiler_us"), it.get("profiler_no_stage_us"),
                      " -> ".join(f"{p['stage']}@{p['worker']}" for p in it["critical_path"])) for it in its])
    con.executemany("INSERT INTO timeline_idle VALUES (?,?,?)",
                    [(it["iteration"], w, v) for it in its for w, v in (it.get("idle_per_worker_us") or {}).items()])
    con.executemany("INSERT INTO stage_worker VALUES (?,?,?,?,?,?,?,?,?)",
                    [(r["stage"], r["worker"], r.get("role"), _int(r.get("rank")), r["count"], r["total_us"],
                      r["mean_us"], r.get("median_us"), r.get("spread_us")) for r in tl.get("stage_worker") or []])
