"""Columnar table of complete ("X") trace events, built batch by batch from parsed JSON.

Strings (name, cat, pid, tid) are interned to small ints so that every later aggregation is a
numpy operation. Timestamps are kept relative to an integer base (`t0_us`) so that Ascend's string
timestamps ("1704161511420306.491") keep their sub-microsecond digits in float64.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class Interner:
    def __init__(self) -> None:
        self.ids: dict = {}
        self.values: list = []

    def ids_of(self, items: list) -> list[int]:
        ids, values = self.ids, self.values
        out = []
        append = out.append
        for v in items:
            try:
                i = ids[v]
            except KeyError:
                i = ids[v] = len(values)
                values.append(v)
            except TypeError:  # unhashable junk (a list as a name): intern its text
                v = str(v)
                i = ids.get(v)
                if i is None:
                    i = ids[v] = len(values)
                    values.append(v)
            append(i)
        return out


def _num(v) -> float:
    if v is None:
        return np.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan


def _floats(values: list) -> np.ndarray:
    """float64 array; None and junk become NaN (fast path: numpy converts numbers and None)."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_num(v) for v in values], dtype=np.float64)


@dataclass
class EventTable:
    names: Interner = field(default_factory=Interner)
    cats: Interner = field(default_factory=Interner)
    pids: Interner = field(default_factory=Interner)
    tids: Interner = field(default_factory=Interner)
    t0_us: int | None = None
    process_names: dict = field(default_factory=dict)   # raw pid -> name (from "M" events)
    n_raw: int = 0
    _cols: dict = field(default_factory=lambda: {k: [] for k in ("name", "cat", "pid", "tid", "ts", "dur", "corr", "task")})
    tasks: Interner = field(default_factory=Interner)

    # -- building ---------------------------------------------------------------------------
    def add_batch(self, batch: list) -> None:
        self.n_raw += len(batch)
        xs = [e for e in batch if type(e) is dict and e.get("ph") == "X"]
        for e in batch:
            if type(e) is dict and e.get("ph") == "M" and e.get("name") == "process_name":
                args = e.get("args") or {}
                if isinstance(args, dict):
                    self.process_names[e.get("pid")] = str(args.get("name", ""))
        if not xs:
            return
        ts_raw = [e.get("ts") for e in xs]
        if self.t0_us is None:
            self.t0_us = self._base(ts_raw)
        ts = self._rel(ts_raw)
        dur = _floats([e.get("dur") for e in xs])
        args = [e.get("args") for e in xs]
        corr = [(a.get("correlation", -1) if type(a) is dict else -1) for a in args]
        task = [(a.get("Task Type") if type(a) is dict else None) for a in args]
        c = self._cols
        c["name"].append(np.array(self.names.ids_of([e.get("name") for e in xs]), dtype=np.int32))
        c["cat"].append(np.array(self.cats.ids_of([e.get("cat") for e in xs]), dtype=np.int32))
        c["pid"].append(np.array(self.pids.ids_of([e.get("pid") for e in xs]), dtype=np.int32))
        c["tid"].append(np.array(self.tids.ids_of([e.get("tid") for e in xs]), dtype=np.int32))
        c["ts"].append(ts)
        c["dur"].append(dur)
        c["corr"].append(np.array([x if type(x) is int else -1 for x in corr], dtype=np.int64))
        c["task"].append(np.array(self.tasks.ids_of(task), dtype=np.int32))

    @staticmethod
    def _base(ts_raw: list) -> int:
        for v in ts_raw:
            if isinstance(v, str):
                try:
                    return int(v.split(".", 1)[0])
                except ValueError:
                    continue
            elif isinstance(v, (int, float)):
                return int(v)
        return 0

    def _rel(self, ts_raw: list) -> np.ndarray:
        base = self.t0_us or 0
        if any(isinstance(v, str) for v in ts_raw):
            out = np.empty(len(ts_raw))
            for i, v in enumerate(ts_raw):
                if isinstance(v, str):
                    whole, _, frac = v.strip().partition(".")
                    try:
                        out[i] = (int(whole) - base) + (float("0." + frac) if frac else 0.0)
                    except ValueError:
                        out[i] = np.nan
                else:
                    out[i] = _num(v) - base
            return out
        return _floats(ts_raw) - base

    # -- finished columns -------------------------------------------------------------------
    def finish(self) -> "Events":
        c = self._cols
        def cat(k, dt):
            return np.concatenate(c[k]) if c[k] else np.empty(0, dtype=dt)
        ev = Events(
            name=cat("name", np.int32), cat=cat("cat", np.int32), pid=cat("pid", np.int32),
            tid=cat("tid", np.int32), ts=cat("ts", np.float64), dur=cat("dur", np.float64),
            corr=cat("corr", np.int64), task=cat("task", np.int32),
            names=self.names.values, cats=self.cats.values, pids=self.pids.values,
            tids=self.tids.values, tasks=self.tasks.values, t0_us=self.t0_us or 0,
            process_names=self.process_names, n_raw=self.n_raw,
        )
        self._cols = {k: [] for k in c}
        # drop events without a usable time (reported as a count, not silently)
        ok = np.isfinite(ev.ts) & np.isfinite(ev.dur) & (ev.dur >= 0)
        ev.n_bad = int(len(ok) - ok.sum())
        if ev.n_bad:
            ev.select(ok)
        return ev


@dataclass
class Events:
    name: np.ndarray
    cat: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    corr: np.ndarray
    task: np.ndarray
    names: list
    cats: list
    pids: list
    tids: list
    tasks: list
    t0_us: int
    process_names: dict
    n_raw: int = 0
    n_bad: int = 0

    ARRAYS = ("name", "cat", "pid", "tid", "ts", "dur", "corr", "task")

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def end(self) -> np.ndarray:
        return self.ts + self.dur

    def select(self, mask: np.ndarray) -> None:
        for k in self.ARRAYS:
            setattr(self, k, getattr(self, k)[mask])

    def lookup(self, values: list, pred) -> np.ndarray:
        """Boolean lookup table over interned values: pred(value) for each id."""
        return np.array([bool(pred(v)) for v in values], dtype=bool) if values else np.zeros(0, dtype=bool)
