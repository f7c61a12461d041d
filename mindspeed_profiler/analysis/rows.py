"""Row models: one per analysis question, declared once beside the analyzer that answers it.

A `RowModel` names its fields (name, unit, meaning, older names) and where its rows live in
summary.json; analysis.db's table (sqlite_export.py), the RunAnalysis method (facade.py), the
terminal and report.html (display.py) and the field tables of docs/analysis.md (questions.py
writes them, a test compares) are all made from it, so a field has one name everywhere.

Names. A field's `key` is its path in the summary's row (default: its own name). A field read from a
nested block is named after the path, joined by "_" (summary.json's communication.device.exposed_us
is `device_exposed_us` in analysis.db and RunAnalysis). Where one value had two names, the field
keeps the other in `aliases`: summary.json keeps writing its own key, and RunAnalysis rows carry the
alias too (the same value), so code written against either name keeps working. A `computed` field
is not in the summary row (n_steps, worker): the model's select() makes it.

Standard library only: this is the contract of summary.json and analysis.db.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

IDENTITY = ("path", "role", "rank", "stage")   # what RunAnalysis puts first on a capture's rows

# unit -> SQLite column type (times REAL microseconds, counts / ranks / flags INTEGER)
SQL_TYPES = {"us": "REAL", "ms": "REAL", "s": "REAL", "MB": "REAL", "GB/s": "REAL", "share": "REAL",
             "ratio": "REAL", "count": "INTEGER", "bytes": "INTEGER", "id": "INTEGER", "rank": "INTEGER",
             "iteration": "INTEGER", "step": "INTEGER", "flag": "INTEGER", "index": "INTEGER", "text": "TEXT",
             "number": "REAL"}

# (capture index or None, the capture or None, the raw row: a summary dict, plus computed values)
Record = tuple[Any, Any, dict]


@dataclass(frozen=True)
class Field:
    """One column of a question's rows."""

    name: str
    unit: str                          # a key of SQL_TYPES
    doc: str
    aliases: tuple[str, ...] = ()      # older names of the same value
    key: tuple = ()                    # path in the summary row; () = (name,)
    computed: bool = False             # not in summary.json: select() puts it in the raw row under `name`
    to_db: Callable[[Any], Any] | None = None   # instead of the unit's conversion (sqlite_export.py)

    def __post_init__(self) -> None:
        if self.unit not in SQL_TYPES:
            raise ValueError(f"field {self.name}: unknown unit {self.unit!r}")

    @property
    def path(self) -> tuple:
        return (self.name,) if self.computed or not self.key else self.key

    @property
    def sql(self) -> str:
        return SQL_TYPES[self.unit]

    def get(self, raw: Any) -> Any:
        """The value in a raw row (None where the path is missing)."""
        v = raw
        for k in self.path:
            if isinstance(v, dict):
                v = v.get(k)
            elif isinstance(v, (list, tuple)) and isinstance(k, int) and -len(v) <= k < len(v):
                v = v[k]
            else:
                return None
        return v


@dataclass(frozen=True)
class RowModel:
    """The rows of one question. `select(summary)` yields Records in table order; None for a table
    filled from the traces themselves (events, spans): analysis.db only."""

    question: str                      # the question's name (docs, tests)
    per: str                           # "one row per ..." (docs)
    where: str                         # where the rows are in summary.json (docs)
    fields: tuple[Field, ...]
    select: Callable[[dict], Iterable[Record]] | None
    table: str | None = None           # analysis.db table
    method: str | None = None          # RunAnalysis method
    per_capture: bool = True           # analysis.db: a capture_id column first; RunAnalysis: IDENTITY first
    primary: str | None = None         # analysis.db primary key column
    conflict: str = ""                 # INSERT OR <conflict> ("IGNORE", "REPLACE") with a primary key
    legacy: tuple[str, ...] = ()       # nested summary keys RunAnalysis rows keep as they were
    open_row: bool = False             # the summary row holds more than these fields (other questions)

    def __post_init__(self) -> None:
        names = [n for f in self.fields for n in (f.name, *f.aliases)]
        if len(names) != len(set(names)):
            raise ValueError(f"{self.question}: a field name or alias is used twice")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def columns(self) -> tuple[str, ...]:
        """analysis.db's columns, in order."""
        return (("capture_id",) if self.per_capture else ()) + self.names

    def records(self, summary: dict) -> Iterator[tuple[Any, Any, dict, dict]]:
        """(capture index, capture, raw row, {field: value}) of every row."""
        if self.select is None:
            return
        for cid, cap, raw in self.select(summary):
            yield cid, cap, raw, {f.name: f.get(raw) for f in self.fields}

    def rows(self, summary: dict) -> list[dict]:
        """RunAnalysis' rows: the capture's identity first, then the fields, their aliases and the
        legacy nested values."""
        out = []
        for _, cap, raw, vals in self.records(summary):
            row = {k: (cap or {}).get(k) for k in IDENTITY} if self.per_capture else {}
            row.update(vals)
            row.update({a: vals[f.name] for f in self.fields for a in f.aliases})
            row.update({k: raw.get(k) for k in self.legacy})
            out.append(row)
        return out


def each_capture(rows_of: Callable[[dict], Iterable[dict] | None]) -> Callable[[dict], Iterator[Record]]:
    """A select() over every capture of a summary: rows_of(capture) -> its raw rows (or None)."""
    def select(summary: dict) -> Iterator[Record]:
        for cid, c in enumerate(summary.get("captures") or []):
            for raw in rows_of(c) or ():
                yield cid, c, raw
    return select


def block(key: str) -> Callable[[dict], list[dict]]:
    """rows_of() for a capture's nested block (one row when present)."""
    return lambda c: [c[key]] if c.get(key) else []


def listed(key: str) -> Callable[[dict], list]:
    """rows_of() for a capture's list of row dicts."""
    return lambda c: c.get(key) or []


def inside(key: str, sub: str) -> Callable[[dict], list]:
    """rows_of() for the list `sub` of a capture's block `key` (captures[*].<key>.<sub>[*])."""
    def rows_of(c: dict) -> list:
        b = c.get(key)
        return (b.get(sub) or []) if isinstance(b, dict) else []
    return rows_of


def compact(key: str, names: tuple[str, ...]) -> Callable[[dict], list[dict]]:
    """rows_of() for a compact list of lists (op_totals, kernel_totals): the fields in order."""
    return lambda c: [dict(zip(names, r)) for r in c.get(key) or []]


def worker_name(role: Any, rank: Any) -> str | None:
    """A row's worker: the timeline's "role:rank" (its rank already is that text), else role:rank,
    else the rank alone; None without a rank. The db's `worker` column and both renderers use it."""
    if rank is None:
        return None
    if isinstance(rank, str) or not role:
        return str(rank)
    return f"{role}:{rank}"


INT64 = 2**63   # SQLite INTEGER and JSON readers hold [-INT64, INT64)


def int64(v: Any) -> int | None:
    """`v` if it is an integer (never a bool) a 64-bit column holds; None for anything else."""
    return v if isinstance(v, int) and not isinstance(v, bool) and -INT64 <= v < INT64 else None


def rank_number(rank: Any) -> int | None:
    """The integer rank of a row whose rank is a number or a timeline worker name ("actor:3" -> 3)."""
    if isinstance(rank, str):
        tail = rank.rsplit(":", 1)[-1]
        return int(tail) if tail.isascii() and tail.isdigit() and len(tail) < 19 else None
    return int64(rank)
