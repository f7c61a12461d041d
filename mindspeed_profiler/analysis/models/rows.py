"""Row models: one per analysis question, declared once beside the analyzer that answers it.

A `RowModel` names its fields (name, unit, meaning, older names) and where its rows live in
summary.json; analysis.db's table (sqlite_export.py), the RunAnalysis method (facade.py), the
terminal and report.html (display.py) and the field tables of docs/analysis.md (questions.py
writes them, a test compares) are all made from it, so a field has one name everywhere.

Names. A field's `name` is the name users see (analysis.db's column, the RunAnalysis row's key, the
summary key by default). Where that name means another unit in another model (`device` a device
index here, a device's text there), the field also has a name of its own in code, `code`, unique per
unit across the models (tests/test_field_units.py): row() and display.field() take it besides
`name`, docs/questions.md shows it ("in code: ..."), and the outputs keep the older name. A field's
`key` is its path in the summary's row (default: its own name). A field read from a
nested block is named after the path, joined by "_" (summary.json's communication.device.exposed_us
is `device_exposed_us` in analysis.db and RunAnalysis). Where one value had two names, the field
keeps the other in `aliases`: summary.json keeps writing its own key, and RunAnalysis rows carry the
alias too (the same value), so code written against either name keeps working. A `computed` field
is not in the summary row (n_steps, worker): the model's select() makes it.

Writing (issue 32). An analyzer or an input builds its rows through the model, never as a dict
literal, and puts them where the model says they live:

    row = STEPS.row(step=3, start_us=t0, dur_us=d)     # the summary row: {"step": 3, ...}
    STEPS.put(capture_fields, rows)                    # capture_fields["steps"] = rows
    COMMUNICATION.row(device=COMMUNICATION.part("device", total_us=.., exposed_us=..), ...)

- `row(**values)` takes the names of the model's fields whose summary key is one level deep (their
  summary key, which is the field's name unless `key` says otherwise; a field's `code` name is taken
  for it), the first key of its nested
  fields (a sub-dict made by `part(block, **values)`, or None) and the names in `holds` (blocks of
  other questions the row carries, e.g. communication's `top`). Any other name raises
  `UnknownField` (a KeyError and a ValueError) naming the model, the name and the closest declared
  one. A computed field is accepted: the code of a select() that computes its rows (stragglers)
  builds them with row() too. Declared defaults (`Field.default`) are
  filled for names not given; the values keep the order the caller gave them (summary.json is
  written in that order), defaults after them.
- `put(target, rows)` stores a capture's rows (a list, or the one row of a block) in the capture's
  dict `target` where select() reads them (each_capture(listed / block / inside / compact)); a model
  read by a select function of its own has no place: put() raises TypeError.
- `columns_row(values)`: a compact row (op_totals, kernel_totals): the values in field order.
Cost: row() is one dict subset check when the model has no defaults (cheap enough per op row).
Reading: `rows(summary)` / `records(summary)` as before; readers should go through `Field.get`.

Standard library only: this is the contract of summary.json and analysis.db.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, Iterator

IDENTITY = ("path", "role", "rank", "stage")   # what RunAnalysis puts first on a capture's rows

# unit -> SQLite column type (times REAL microseconds, counts / ranks / flags INTEGER)
SQL_TYPES = {"us": "REAL", "ms": "REAL", "s": "REAL", "MB": "REAL", "GB/s": "REAL", "share": "REAL",
             "ratio": "REAL", "count": "INTEGER", "bytes": "INTEGER", "id": "INTEGER", "rank": "INTEGER",
             "iteration": "INTEGER", "step": "INTEGER", "flag": "INTEGER", "index": "INTEGER", "text": "TEXT",
             "number": "REAL"}

# (capture index or None, the capture or None, the raw row: a summary dict, plus computed values)
Record = tuple[Any, Any, dict]

NO_DEFAULT: Any = type("NoDefault", (), {"__repr__": lambda self: "NO_DEFAULT"})()


class UnknownField(KeyError, ValueError):
    """A row was given a name its model does not declare."""

    def __str__(self) -> str:   # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


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
    default: Any = NO_DEFAULT          # what row() writes when the field is not given (NO_DEFAULT: nothing)
    code: str = ""                     # its name in code where `name` means another unit elsewhere

    def __post_init__(self) -> None:
        if self.unit not in SQL_TYPES:
            raise ValueError(f"field {self.name}: unknown unit {self.unit!r}")

    @property
    def code_name(self) -> str:
        """Its name in code, unique per unit across the models: `code`, else `name`."""
        return self.code or self.name

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
    holds: tuple[str, ...] = ()        # those other blocks by name: row() accepts them

    def __post_init__(self) -> None:
        names = [n for f in self.fields for n in {f.name, f.code_name, *f.aliases}]
        if len(names) != len(set(names)):
            raise ValueError(f"{self.question}: a field name or alias is used twice")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    # -- writing (see the module doc)

    @cached_property
    def _writable(self) -> frozenset:
        top = {f.path[0] for f in self.fields}
        return frozenset(top | set(self.holds))

    @cached_property
    def _defaults(self) -> tuple[tuple[str, Any], ...]:
        return tuple((f.path[0], f.default) for f in self.fields if f.default is not NO_DEFAULT and len(f.path) == 1)

    def _unknown(self, names: Iterable[str], declared: Iterable[str], where: str = "") -> UnknownField:
        bad = sorted(set(names) - set(declared))[0]
        import difflib   # only for this message (2.5 ms of every analysis's start otherwise)

        close = difflib.get_close_matches(bad, sorted(declared), n=1, cutoff=0.5)
        why = "is not a field of it" + (f" (did you mean {close[0]!r}?)" if close else "")
        return UnknownField(f"row model {self.question!r}{where}: {bad!r} {why}; declared: "
                            f"{', '.join(sorted(declared))}")

    @cached_property
    def _coded(self) -> dict[str, str]:
        """name in code -> summary key, for the fields with a `code` name of their own."""
        return {f.code: f.path[0] for f in self.fields if f.code and len(f.path) == 1}

    def row(self, **values: Any) -> dict:
        """One summary row of this model (see the module doc); unknown names raise UnknownField."""
        if not values.keys() <= self._writable:
            named = {self._coded.get(k, k): v for k, v in values.items()}   # the code names, as written
            if not named.keys() <= self._writable:
                raise self._unknown(values, self._writable | self._coded.keys())
            if len(named) < len(values):
                raise UnknownField(f"row model {self.question!r}: a field given under both its names")
            values = named
        for name, default in self._defaults:
            if name not in values:
                values[name] = default
        return values

    def part(self, block: str, **values: Any) -> dict:
        """The sub-dict `block` of a row whose fields are nested (key=(block, name))."""
        declared = {f.path[1] for f in self.fields if len(f.path) == 2 and f.path[0] == block}
        if not declared:
            raise self._unknown([block], {f.path[0] for f in self.fields if len(f.path) == 2}, " (blocks)")
        if not values.keys() <= declared:
            raise self._unknown(values, declared, f" block {block!r}")
        return values

    def columns_row(self, values: dict) -> list:
        """A compact row: the values of `values` in field order, None where missing (op_totals, kernel_totals)."""
        return [values.get(k) for k in self.names]

    def put(self, target: dict, rows: Any) -> None:
        """Store a capture's rows in its dict `target` where select() reads them."""
        where = getattr(self.select, "where", None)
        if where is None:
            raise TypeError(f"row model {self.question!r} is read by a select() of its own: it has no place to put rows")
        where.put(target, rows)

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


class _EachCapture:
    """each_capture()'s select: remembers where the rows live (`where`), so that put() can store them."""

    __slots__ = ("where", "_rows_of")

    def __init__(self, where: Callable[[dict], Iterable[dict] | None]) -> None:
        self.where = where if hasattr(where, "put") else None
        self._rows_of = where

    def __call__(self, summary: dict) -> Iterator[Record]:
        rows_of = self._rows_of
        for cid, c in enumerate(summary.get("captures") or []):
            for raw in rows_of(c) or ():
                yield cid, c, raw


def each_capture(rows_of: Callable[[dict], Iterable[dict] | None]) -> Callable[[dict], Iterator[Record]]:
    """A select() over every capture of a summary: rows_of(capture) -> its raw rows (or None)."""
    return _EachCapture(rows_of)


@dataclass(frozen=True)
class block:
    """rows_of() for a capture's nested block (one row when present)."""

    key: str

    def __call__(self, c: dict) -> list[dict]:
        return [c[self.key]] if c.get(self.key) else []

    def put(self, c: dict, row: dict | None) -> None:
        c[self.key] = row


@dataclass(frozen=True)
class listed:
    """rows_of() for a capture's list of row dicts."""

    key: str

    def __call__(self, c: dict) -> list:
        return c.get(self.key) or []

    def put(self, c: dict, rows: list) -> None:
        c[self.key] = rows


@dataclass(frozen=True)
class inside:
    """rows_of() for the list `sub` of a capture's block `key` (captures[*].<key>.<sub>[*])."""

    key: str
    sub: str

    def __call__(self, c: dict) -> list:
        b = c.get(self.key)
        return (b.get(self.sub) or []) if isinstance(b, dict) else []

    def put(self, c: dict, rows: list) -> None:
        c.setdefault(self.key, {})[self.sub] = rows


@dataclass(frozen=True)
class compact:
    """rows_of() for a compact list of lists (op_totals, kernel_totals): the fields in order."""

    key: str
    names: tuple[str, ...]

    def __call__(self, c: dict) -> list[dict]:
        return [dict(zip(self.names, r)) for r in c.get(self.key) or []]

    def put(self, c: dict, rows: list[list]) -> None:
        c[self.key] = rows


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
