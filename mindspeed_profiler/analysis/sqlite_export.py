"""`analysis.db`: the events of every capture and the summaries, for SQL queries.

Tables: captures(id, path, kind, status, error, role, rank, stage, wall_us, busy_us, ...),
events(capture_id, name, cat, pid, tid, ts_us, dur_us)  (complete events, absolute us),
ops / kernels / steps (the per-capture summaries), stage_rank, slow_ranks,
timeline_stages(iteration, stage, total_us, wall_us, count).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE captures(id INTEGER PRIMARY KEY, path TEXT, kind TEXT, status TEXT, error TEXT, role TEXT,
  rank INTEGER, stage TEXT, wall_us REAL, busy_us REAL, compute_us REAL, communication_exposed_us REAL,
  memcpy_exposed_us REAL, idle_us REAL, n_steps INTEGER);
CREATE TABLE events(capture_id INTEGER, name TEXT, cat TEXT, pid TEXT, tid TEXT, ts_us REAL, dur_us REAL);
CREATE TABLE ops(capture_id INTEGER, name TEXT, count INTEGER, total_us REAL, self_us REAL, device_us REAL);
CREATE TABLE kernels(capture_id INTEGER, name TEXT, count INTEGER, total_us REAL, class TEXT);
CREATE TABLE steps(capture_id INTEGER, step TEXT, dur_us REAL, device_busy_us REAL);
CREATE TABLE stage_rank(source TEXT, stage TEXT, rank TEXT, role TEXT, metric TEXT, value_us REAL, path TEXT);
CREATE TABLE slow_ranks(source TEXT, stage TEXT, metric TEXT, rank TEXT, value_us REAL, median_us REAL,
  ratio REAL, flagged INTEGER);
CREATE TABLE timeline_stages(iteration INTEGER, stage TEXT, total_us REAL, wall_us REAL, count INTEGER);
"""


def write_db(path: Path, summary: dict, results: list[dict]) -> None:
    path = Path(path)
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    try:
        con.executescript(SCHEMA)
        by_path = {r["capture"]["path"]: r.get("events") for r in results}
        for cid, c in enumerate(summary["captures"]):
            d = c.get("device") or {}
            con.execute("INSERT INTO captures VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (cid, c["path"], c["kind"], c["status"], c.get("error"), c.get("role"),
                         c.get("rank") if isinstance(c.get("rank"), int) else None, c.get("stage"),
                         c.get("wall_us"), d.get("busy_us"), d.get("compute_us"), d.get("communication_exposed_us"),
                         d.get("memcpy_exposed_us"), d.get("idle_us"), len(c.get("steps") or [])))
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
            con.executemany("INSERT INTO steps VALUES (?,?,?,?)",
                            [(cid, str(s.get("step")), s.get("dur_us"), s.get("device_busy_us")) for s in c.get("steps") or []])
        con.executemany("INSERT INTO stage_rank VALUES (?,?,?,?,?,?,?)",
                        [(r["source"], r["stage"], str(r["rank"]), r["role"], r["metric"], r["value_us"], r["path"])
                         for r in summary["stage_rank"]])
        con.executemany("INSERT INTO slow_ranks VALUES (?,?,?,?,?,?,?,?)",
                        [(r["source"], r["stage"], r["metric"], str(r["rank"]), r["value_us"], r["median_us"],
                          r["ratio"], int(r["flagged"])) for r in summary["slow_ranks"]])
        tl = summary.get("timeline") or {}
        con.executemany("INSERT INTO timeline_stages VALUES (?,?,?,?,?)",
                        [(it["iteration"], name, v["total_us"], v["wall_us"], v["count"])
                         for it in tl.get("iterations", []) for name, v in it["stages"].items()])
        con.commit()
    finally:
        con.close()
