"""`analysis.db`: the events of every capture and the summaries, for SQL queries.

One table per question, made from its row model (questions.MODELS: the columns, their types, the
rows taken from summary.json), plus `events` (every complete event of each trace) and `spans` (every
stage span of the timeline, not only the Gantt's), which come from the traces themselves.
docs/analysis.md "Outputs" lists the tables and useful queries.
Types: times are REAL microseconds, counts and ranks INTEGER, flags INTEGER 0 / 1; a step is
INTEGER for a numbered step (a label that is not a number is kept as TEXT in the same column).
Indices on events(capture_id, ts_us), events(name), events(cat, name), the capture_id of the
per-capture tables and spans(iteration). Written to a temporary file and renamed into place.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from mindspeed_profiler.core.fileio import atomic_path

from mindspeed_profiler.analysis.models.questions import BY_TABLE, MODELS
from mindspeed_profiler.analysis.models.rows import INT64, Field, RowModel, int64


def create_table(m: RowModel) -> str:
    """The CREATE TABLE of a question's model: capture_id first for per-capture rows, then its fields
    (names quoted: `index` is an SQL keyword)."""
    cols = ["capture_id INTEGER" + (" PRIMARY KEY" if m.primary == "capture_id" else "")] if m.per_capture else []
    cols += [f'"{f.name}" {f.sql}' + (" PRIMARY KEY" if m.primary == f.name else "") for f in m.fields]
    return f"CREATE TABLE {m.table}({', '.join(cols)});"


SCHEMA = "\n".join(create_table(m) for m in MODELS)
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
CREATE INDEX critical_path_iteration ON critical_path(iteration, position);
"""


_int = int64   # an integer value SQLite can hold (bool is not one); None for anything else


def _step(v):
    """A numbered step as an integer; any other label kept as it is (text)."""
    if _int(v) is not None:
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) < INT64:
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit() and abs(int(v)) < INT64:
        return int(v)
    return None if v is None else str(v)


def _flt(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _text(v) -> str | None:
    return v if v is None or isinstance(v, str) else str(v)


def _flag(v) -> int | None:
    return None if v is None else int(bool(v))


_BY_SQL: dict[str, Callable[[Any], Any]] = {"REAL": _flt, "INTEGER": _int, "TEXT": _text}
_BY_UNIT: dict[str, Callable[[Any], Any]] = {"step": _step, "flag": _flag}


def converter(f: Field) -> Callable[[Any], Any]:
    """How a field's value becomes what its column holds."""
    return f.to_db or _BY_UNIT.get(f.unit) or _BY_SQL[f.sql]


class EventSpool:
    """The traces' event columns, written to a side SQLite file as each capture finishes (`take`),
    so the driver never holds the events of 10,000 captures; write_db copies each capture's rows
    from there under its final capture_id. The file is removed by `discard` (and write_db's caller)."""

    def __init__(self, spool_dir: Path | None):
        self.spool_dir = spool_dir
        self.path: Path | None = None
        self._con: sqlite3.Connection | None = None

    def _open(self) -> sqlite3.Connection:
        if self._con is None:
            import os
            import secrets
            import tempfile
            try:
                assert self.spool_dir is not None
                self.spool_dir.mkdir(parents=True, exist_ok=True)
                self.path = self.spool_dir / f".events.{os.getpid()}.{secrets.token_hex(4)}.tmp"
                self._con = sqlite3.connect(self.path)
            except (OSError, sqlite3.Error, AssertionError):
                fd, name = tempfile.mkstemp(prefix=".events.", suffix=".tmp")
                os.close(fd)
                self.path = Path(name)
                self._con = sqlite3.connect(self.path)
            self._con.execute("PRAGMA journal_mode=OFF")
            self._con.execute("PRAGMA synchronous=OFF")
            self._con.execute("CREATE TABLE ev(name, cat, pid, tid, ts_us, dur_us)")
        return self._con

    def take(self, res: dict) -> dict:
        """The result with a trace's event columns moved to the spool ({"spooled": [first, last rowid]})."""
        ev = res.get("events")
        if not isinstance(ev, dict) or "spans" in ev or "name" not in ev:
            return res
        con = self._open()
        first = (con.execute("SELECT max(rowid) FROM ev").fetchone()[0] or 0) + 1
        con.executemany("INSERT INTO ev VALUES (?,?,?,?,?,?)", _event_rows(ev))
        last = con.execute("SELECT max(rowid) FROM ev").fetchone()[0] or 0
        con.commit()
        return {**res, "events": {"spooled": [first, last]}}

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def discard(self) -> None:
        self.close()
        if self.path is not None:
            try:
                self.path.unlink()
            except OSError:
                pass
            self.path = None


def write_db(path: Path, summary: dict, results: list[dict], spool: EventSpool | None = None) -> None:
    """Write to a temporary file and rename it into place, so a crash never leaves half a db.
    `results`: the per-capture results of the batch ({"capture", "events"}): a trace's event columns
    (or where `spool` holds them), or a timeline's {"spans": every stage span}."""
    with atomic_path(path) as tmp:   # a failure leaves the previous db and no temporary file
        _write(tmp, summary, results, spool)


def _write(tmp: Path, summary: dict, results: list[dict], spool: EventSpool | None = None) -> None:
    con = sqlite3.connect(tmp)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.executescript(SCHEMA)
        if spool is not None and spool.path is not None:
            spool.close()
            con.execute("ATTACH DATABASE ? AS spool", (str(spool.path),))
        for m in MODELS:
            if m.select is not None:
                _insert(con, m, ((cid, vals) for cid, _, _, vals in m.records(summary)))
        by_path = {r["capture"]["path"]: r.get("events") for r in results}
        spans = []
        for cid, c in enumerate(summary["captures"]):
            extra = by_path.get(c["path"])
            if extra is None:
                continue
            if "spans" in extra:
                spans += extra["spans"]
            elif "spooled" in extra:
                con.execute("INSERT INTO events SELECT ?, name, cat, pid, tid, ts_us, dur_us FROM spool.ev "
                            "WHERE rowid BETWEEN ? AND ? ORDER BY rowid", (cid, *extra["spooled"]))
            else:
                _events(con, cid, extra)
        _insert(con, BY_TABLE["spans"], ((None, s) for s in spans))
        con.executescript(INDICES)
        con.commit()
    finally:
        con.close()


def _insert(con: sqlite3.Connection, m: RowModel, rows: Iterable[tuple[Any, dict]]) -> None:
    """rows: (capture index, {field: value}); each value converted for its column, streamed (the
    totals of 10,000 captures are read from their file one capture at a time, never all held)."""
    conv = [(f.name, converter(f)) for f in m.fields]
    verb = f"INSERT OR {m.conflict}" if m.conflict else "INSERT"
    con.executemany(f"{verb} INTO {m.table} VALUES ({','.join('?' * len(m.columns))})",
                    (((cid,) if m.per_capture else ()) + tuple(c(vals.get(n)) for n, c in conv) for cid, vals in rows))


def _event_rows(ev: dict) -> Iterator[tuple]:
    names, cats, pids, tids = ev["names"], ev["cats"], ev.get("pids"), ev.get("tids")
    return ((names[n], cats[k], pids[p], tids[t], float(s), float(u))
            for n, k, p, t, s, u in zip(ev["name"].tolist(), ev["cat"].tolist(), ev["pid"].tolist(),
                                        ev["tid"].tolist(), ev["ts"].tolist(), ev["dur"].tolist()))


def _events(con: sqlite3.Connection, cid: int, ev: dict) -> None:
    con.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?)", ((cid, *r) for r in _event_rows(ev)))
