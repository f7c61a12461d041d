"""The analysis' one place that turns values read from files into numbers (issue 32: the ten
`_int` / `_ns` / `_num` / `_number` / `_f` helpers of the parsers and analyzers now call these).

Numbers from files we did not write (CSV cells, db values), converted in bounded time to values
the tables hold. Python's own conversions are neither: int(Decimal("1e999990")) builds a
million-digit integer (30 s of CPU), int(float("1e400")) raises OverflowError, str.isdigit()
accepts "²", which int() refuses. A bad value is None or a ValueError saying what it is; the
caller counts the cell or row as bad and names file, column and value (`bad_cells`).

The rules, one per function (what each gives for a bool, NaN / inf, text and junk):

| function         | for                              | bool        | NaN / inf  | number text      | junk      |
|------------------|----------------------------------|-------------|------------|------------------|-----------|
| real             | CSV cells, db REALs              | ValueError  | ValueError | parsed (<=100 ch)| ValueError|
| real_or          | sums that go on after a bad cell | default     | default    | parsed           | default   |
| exact_int        | decimal times (ns) kept exact    | ValueError  | ValueError | parsed, rounded  | ValueError|
| integer          | db INTEGERs, JSON ids, ranks     | None        | None       | ASCII digits     | None      |
| json_int         | JSON integers we wrote (records) | None        | None       | None (not text)  | None      |
| bounded_int      | ranks and sizes in vendor JSON   | None        | None       | ASCII digits     | None      |
| finite_number    | JSON values we wrote (metrics)   | None        | None       | None (not text)  | None      |
| int_or           | JSON ids with a sentinel         | default     | default    | default          | default   |
| float_or_nan     | trace event times (numpy columns)| 0.0 / 1.0 * | kept *     | float()          | NaN       |
| caller_number    | a caller's value (sample records)| problem     | problem    | problem          | problem   |
| caller_int       | a caller's integer (any library) | None        | None       | None             | None      |

caller_number and caller_int take what a caller hands the writer (rollout/checks.py: an engine's
RequestOutput, a user's sample dict), numbers of other libraries included (a numpy scalar, a
one-element tensor: __float__ / operator.index); a value they refuse is said in the caller's
`problems`, rendered by `shown_typed`. ns_of_seconds turns such seconds into the records' ns.

(*) float_or_nan keeps Python's float(): a trace's `"ts": true` has always read as 1.0 and "inf"
as inf (the event table drops non-finite times itself); changing that would change the numbers
of such traces, so it stays (the one exception to "a bool is not a number").
"""
from __future__ import annotations

import math
import operator
from decimal import Decimal, InvalidOperation

MAX_TEXT = 100      # characters of a number's text: torch_npu writes at most ~25 (a float64, a tab)
MAX_EXPONENT = 30   # |decimal exponent|: no time (ns), size (bytes) or count in a capture is near 1e30
INT64 = 2**63       # what numpy arrays and analysis.db hold


def shown(v) -> str:
    """A value as a message shows it: its repr, cut to 40 characters."""
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def shown_typed(v) -> str:
    """A caller's bad value as a problem line shows it: its repr (cut to 60 characters) and its type."""
    r = repr(v)
    if len(r) > 60:
        r = r[:57] + "..."
    return f"{r} ({type(v).__name__})"


def caller_number(name: str, value, problems: list[str]) -> float | None:
    """`value` as a finite float, else None with a problem (None stays None, silently). Numbers of
    other libraries (a numpy scalar, a one-element tensor) are taken through their __float__."""
    if value is None:
        return None
    kind = type(value)
    if kind is not float and kind is not int:   # the common types first: the checks below cost more
        if kind is bool or isinstance(value, (str, bytes)) or not hasattr(kind, "__float__"):
            problems.append(f"{name}: {shown_typed(value)} is not a number")
            return None
    try:
        value = float(value)
    except OverflowError:
        value = math.inf
    except Exception:   # a tensor of many elements, a complex number, ...
        problems.append(f"{name}: {shown_typed(value)} is not a number")
        return None
    if not math.isfinite(value):
        problems.append(f"{name}: {value} is not a finite number")
        return None
    return value


def caller_int(value) -> int | None:
    """`value` as an int when it is an integer of any library (operator.index: numpy, torch), else
    None; never a bool."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except Exception:
        return None


def ns_of_seconds(seconds: float | None) -> int | None:
    return None if seconds is None else int(round(seconds * 1_000_000_000))


def _text(v: str) -> str:
    # torch_npu pads some values with a tab so that Excel keeps the digits
    t = v.strip().strip("\t").strip()
    if len(t) > MAX_TEXT:
        raise ValueError(f"{shown(t)}: {len(t)} characters, not a number")
    return t


def real(v) -> float | None:
    """A finite float of a number or its text; None for NULL or an empty cell; ValueError for
    junk, inf and nan."""
    if v is None:
        return None
    if isinstance(v, str):
        v = _text(v)
        if not v:
            return None
    elif isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{shown(v)}: not a number")
    try:
        x = float(v)
    except (ValueError, OverflowError):
        raise ValueError(f"{shown(v)}: not a number") from None
    if not math.isfinite(x):
        raise ValueError(f"{shown(v)}: not a finite number")
    return x


def exact_int(v, unit: int = 1) -> int | None:
    """A decimal text (or number) times `unit` as an exact int, rounded half-even (the digits a
    float64 would lose are kept); None for an empty cell; ValueError for junk, inf, nan, an
    exponent beyond MAX_EXPONENT (checked before any digit is expanded) or a result beyond int64."""
    if v is None:
        return None
    t = _text(v) if isinstance(v, str) else v
    if t == "":
        return None
    if isinstance(t, bool) or not isinstance(t, (str, int, float)):
        raise ValueError(f"{shown(v)}: not a number")
    try:
        d = Decimal(t)
    except (InvalidOperation, ValueError):
        raise ValueError(f"{shown(v)}: not a number") from None
    if not d.is_finite():
        raise ValueError(f"{shown(v)}: not a finite number")
    if d and abs(d.adjusted()) > MAX_EXPONENT:
        raise ValueError(f"{shown(v)}: out of range (at most 1e{MAX_EXPONENT})")
    n = int((d * unit).to_integral_value())
    if not -INT64 <= n < INT64:
        raise ValueError(f"{shown(v)}: out of range (beyond int64)")
    return n


def integer(v) -> int | None:
    """An int of a db value or a JSON field: an INTEGER, a finite REAL (truncated, as int() reads
    the db's REAL times) or the text of ASCII digits with an optional sign, within int64; None for
    NULL, bool, junk, inf and anything else."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, float):
        v = int(v) if math.isfinite(v) else None
    elif isinstance(v, str):
        t = v.strip()
        digits = t[1:] if t[:1] in "+-" else t
        # isascii: str.isdigit() also accepts "²" and "①", which int() refuses
        v = int(t) if digits.isascii() and digits.isdigit() and len(digits) <= 19 else None
    return v if isinstance(v, int) and -INT64 <= v < INT64 else None


def json_int(v) -> int | None:
    """A JSON integer (never a bool, a float or text) within int64; None otherwise."""
    return v if isinstance(v, int) and not isinstance(v, bool) and -INT64 <= v < INT64 else None


def bounded_int(v, bound: int) -> int | None:
    """integer()'s int (never from a float: a rank of 1.5 is none) with |n| <= `bound`; None otherwise."""
    n = integer(v) if not isinstance(v, float) else None
    return n if n is not None and abs(n) <= bound else None


def real_or(v, default: float = 0.0) -> float:
    """real(), with `default` for an empty cell, junk, inf and nan (a sum that must go on)."""
    try:
        x = real(v)
    except ValueError:
        return default
    return default if x is None else x


def finite_number(v) -> float | None:
    """A JSON number (int or float, never a bool or text) as a finite float; None otherwise (an
    int past a double's range too)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def int_or(v, default: int = -1) -> int:
    """`v` if it is an int (never a bool), else `default` (a sentinel that sorts first)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def float_or_nan(v) -> float:
    """Python's float(v) (see the table's *), NaN for None and what float() refuses."""
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


FINITE = f"a finite number below 1e{MAX_EXPONENT}"


def bad_cells(source: str, bad: dict[str, tuple[int, object]], allowed: str = FINITE,
              what: str = "left out") -> list[str]:
    """One warning per column of `bad` ({column: (count, first bad value)}), naming the file (or
    table), the column, the first value and what is allowed."""
    return [f"{source}: {n} bad value(s) in column {col} (the first: {shown(first)}; allowed: {allowed}): {what}"
            for col, (n, first) in bad.items()]


def note_bad(bad: dict[str, tuple[int, object]], column: str, value) -> None:
    """Count one bad cell of `column` into `bad` (bad_cells' input), keeping the first value."""
    n, first = bad.get(column, (0, value))
    bad[column] = (n + 1, first)
