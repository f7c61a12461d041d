"""`analysis.db`: the events of every capture and the summaries, for SQL queries.

Tables: captures(id, path, kind, status, error, role, rank, stage, start_us, wall_us, busy_us, ...),
events(capture_id, name, cat, pid, tid, ts_us, dur_us)  (complete events, absolute us),
ops / kernels / steps (the per-capture summaries), stage_rank, slow_ranks,
timeline_stages(iteration, stage, total_us, wall_us, count), timeline_iterations(iteration, start_us,
dur_us, stage_covered_us, overlap_us, no_stage_us, critical_path). Indices on events(capture_id, ts_us),
events(name), events(cat, name) and the capture_id of ops / kernels / steps.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE captures(id INTEGER PRIMARY KEY, path TEXT, kind TEXT, status TEXT, error TEXT, role TEXT,
  rank INTEGER, stage TEXT, start_us REAL, wall_us REAL, busy_us REAL, compute_us REAL,
  communication_exposed_us REAL, memcpy_exposed_us REAL, idle_us REAL, n_steps INTEGER,
  n_events INTEGER, n_bad_events INTEGER);
CREATE TABLE events(capture_id INTEGER, name TEXT, cat TEXT, pid TEXT, tid TEXT, ts_us REAL, dur_us REAL);
CREATE TABLE ops(capture_id INTEGER, name TEXT, count INTEGER, total_us REAL, self_us REAL, device_us REAL);
CREATE TABLE kernels(capture_id INTEGER, name TEXT, count INTEGER, total_us REAL, class TEXT);
CREATE TABLE steps(capture_id INTEGER, step TEXT, start_us REAL, dur_us REAL, device_busy_us REAL);
CREATE TABLE stage_rank(source TEXT, stage TEXT, rank TEXT, role TEXT, metric TEXT, value_us REAL, n INTEGER,
  path TEXT);
CREATE TABLE slow_ranks(source TEXT, stage TEXT, metric TEXT, rank TEXT, role TEXT, value_us REAL, median_us REAL,
  ratio REAL, flagged INTEGER);
CREATE TABLE timeline_stages(iteration INTEGER, stage TEXT, total_us REAL, wall_us REAL, count INTEGER);
CREATE TABLE timeline_iterations(iteration INTEGER PRIMARY KEY, start_us REAL, dur_us REAL, stage_covered_us REAL,
  overlap_us REAL, no_stage_us REAL, critical_path TEXT);
"""
# built after the bulk insert (faster than maintaining them row by row)
INDICES = """
CREATE INDEX events_capture_ts ON events(capture_id, ts_us);
CREATE INDEX events_name ON events(name);
CREATE INDEX events_cat_name ON events(cat, name);
CREATE INDEX ops_capture ON ops(capture_id);
CREATE INDEX kernels_capture ON kernels(capture_id);
CREATE INDEX steps_capture ON steps(capture_id);
CREATE INDEX timeline_stages_iteration ON timeline_stages(iteration, stage);
"""


def write_db(path: Path, summary: dict, results: list[dict]) -> None:
    """Write to a temporary file and rename it into place, so a crash never leaves half a db."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    con = sqlite3.connect(tmp)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.executescript(SCHEMA)
        by_path = {r["capture"]["path"]: r.get("events") for r in results}
        for cid, c in enumerate(summary["captures"]):
            d = c.get("device") or {}
            rank = c.get("rank")
            con.execute("INSERT INTO captures VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (cid, c["path"], c["kind"], c["status"], c.get("error"), c.get("role"),
                         rank if isinstance(rank, int) and not isinstance(rank, bool) else None, c.get("stage"),
                         c.get("start_us"), c.get("wall_us"), d.get("busy_us"), d.get("compute_us"),
                         d.get("communication_exposed_us"), d.get("memcpy_exposed_us"), d.get("idle_us"),
                         len(c.get("steps") or []), c.get("n_events"), c.get("n_bad_events")))
            ev = by_path.get(c["path"])
            if ev is not None:
                names, cats, pids, tids = ev["names"], ev["cats"], ev.get("pids"), ev.get("tids")
                con.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?)",
                                ((cid, names[n], cats[k], pids[p], tids[t], float(s), float(u))
                                 for n, k, p, t, s, u in zip(ev["name"].tolist(), ev["cat"].tolist(),
                                                             ev["pid"].tolist(), ev["tid"].tolist(),
                                                             ev["ts"].tolist(), ev["dur"].tolist())))
            con.executemany("INSERT INTO ops VALUES (?,?,?,?,?,?)",
                            [(cid, o["name"], o["count"], o["total_us"], o["self_us"], o["device_us"])
                             for o in c.get("top_ops") or []])
            con.executemany("INSERT INTO kernels VALUES (?,?,?,?,?)",
                            [(cid, k["name"], k["count"], k["total_us"], k.get("class")) for k in c.get("top_kernels") or []])
            con.executemany("INSERT INTO steps VALUES (?,?,?,?,?)",
                            [(cid, str(s.get("step")), s.get("start_us"), s.get("dur_us"), s.get("device_busy_us"))
                             for s in c.get("steps") or []])
        con.executemany("INSERT INTO stage_rank VALUES (?,?,?,?,?,?,?,?)",
                        [(r["source"], r["stage"], str(r["rank"]), r["role"], r["metric"], r["value_us"], r.get("n"),
                          r["path"]) for r in summary["stage_rank"]])
        con.executemany("INSERT INTO slow_ranks VALUES (?,?,?,?,?,?,?,?,?)",
                        [(r["source"], r["stage"], r["metric"], str(r["rank"]), r.get("role"), r["value_us"],
                          r["median_us"], r["ratio"], int(r["flagged"])) for r in summary["slow_ranks"]])
        tl = summary.get("timeline") or {}
        con.executemany("INSERT INTO timeline_stages VALUES (?,?,?,?,?)",
                        [(it["iteration"], name, v["total_us"], v["wall_us"], v["count"])
                         for it in tl.get("iterations", []) for name, v in it["stages"].items()])
        con.executemany("INSERT OR REPLACE INTO timeline_iterations VALUES (?,?,?,?,?,?,?)",
                        [(it["iteration"], it["start_us"], it["dur_us"], it["stage_covered_us"], it["overlap_us"],
                          it["no_stage_us"], " -> ".join(f"{p['stage']}@{p['worker']}" for p in it["critical_path"]))
                         for it in tl.get("iterations", [])])
        con.executescript(INDICES)
        con.commit()
    finally:
        con.close()
    os.replace(tmp, path)
