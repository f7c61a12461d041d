"""Ascend device idle ("free") time split by cause: msprof-analyze 26.2.0's `cluster -m free_analysis`
recipe (cluster_analyse/recipes/free_analysis/free_analysis.py, "the recipe" below, and
prof_exports/free_analysis_export.py, "the export") re-implemented on plain rows, per capture (one
rank). See docs/diagnosis.md, "On Ascend: free time by cause".

1. Busy ranges: every compute task (TASK joined to COMPUTE_TASK_INFO) and every collective op
   (COMMUNICATION_OP), merged where they overlap or touch (export:18-64). The free intervals are the
   gaps between consecutive busy ranges (recipe:104-121); the `top_n` longest are analysed
   (descending duration; ties: the earlier first).
2. Per free interval [s, e], from the device task -> CANN launch -> PyTorch op link rows
   (export:76-91; NULL times read as 0, recipe:233):
   - device tasks strictly inside (task_ts > s and task_end < e; copies, event records: tasks the
     busy ranges do not count) -> "Device task running: N TYPE tasks, max remaining free X us"
     (recipe:127-134, 248-264);
   - else the last task ending at or before s (prev) and the first starting at or after e (next);
     one missing -> "Skip ... no prev or next task"; a zero PyTorch start on either -> "Skip ... no
     pytorch dispatch time" (recipe:137-146);
   - pytorchIdleTime = next.pytorch_end - prev.pytorch_end, cannIdleTime = next.cann_end -
     prev.cann_end; wait = cann_ts - pytorch_end (the launch's delay after its op's end); if
     next_wait - prev_wait < 50 us (DIFF_WAIT_THRESHOLD_NS) -> "Idle Pytorch layer: no task
     dispatched in <pytorchIdleTime> us" (recipe:148-157);
   - else the largest of the two launches' durations and the gap between them: the gap (also on a
     tie) -> "Abnormal CANN layer: long time between two node@launch G us", a launch -> "Abnormal
     CANN layer: long node@launch D us" (recipe:159-170).

Numbers are ns in, us out as the recipe rounds them (round(ns * 0.001, 3), prof_common/utils.py:99);
start / end also as the recipe's exact text (Decimal(ns) / 1000, utils.py:104). The pure functions
take rows; parsing/ascend_free_db.py reads them; inputs/ascend_capture.py's `capture_free` is the entry point for a db file.
"""
from __future__ import annotations

import bisect
from decimal import Decimal
from typing import Iterable, Sequence

from ..parsing.numbers import integer
from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, inside

DEFAULT_TOP_N = 10                      # the recipe's DEFAULT_TOP_NUM (recipe:44)
DIFF_WAIT_THRESHOLD_NS = 50 * 1000      # the recipe's DIFF_WAIT_THRESHOLD_NS, 50 us (recipe:46)
LINK_TIMES = ("task_ts", "task_end", "cann_ts", "cann_end", "pytorch_end")   # NULL -> 0 (recipe:233)

# our short, stable codes for the recipe's reason branches
PYTORCH_IDLE = "pytorch_idle"
CANN_LAUNCH = "cann_launch"
DEVICE_TASKS = "device_tasks"
SKIPPED = "skipped"

SKIP_NO_NEIGHBOUR = "Skip free analysis due to no prev or next task."
SKIP_NO_DISPATCH = "Skip free analysis due to no pytorch dispatch time."


def ns_to_us(ns: int | None) -> float | None:
    """The recipe's convert_ns_to_us (prof_common/utils.py:99): ns * 0.001 rounded to 3 places."""
    return None if ns is None else round(ns * 0.001, 3)


def ns_to_us_text(ns: int) -> str:
    """The recipe's convert_ns_to_us_str (utils.py:104): the exact decimal, no float rounding
    (an absolute time in us needs 19 digits, a float holds 16)."""
    return str(Decimal(ns) / Decimal(1000))


# ------------------------------------------------------------------------------- busy / free


def busy_ranges(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge (start_ns, end_ns) intervals as the export's SQL does (export:34-63): in start order a
    row opens a new range when it starts after the largest end seen so far (touching ranges merge);
    rows with the same start share a range (the SQL's running SUM uses a RANGE frame)."""
    out: list[list[int]] = []
    max_end: int | None = None
    prev_start: int | None = None
    for s, e in sorted(intervals, key=lambda se: se[0]):
        if max_end is None or (s > max_end and s != prev_start):
            out.append([s, e])
        else:
            out[-1][1] = max(out[-1][1], e)
        max_end = e if max_end is None else max(max_end, e)
        prev_start = s
    return [(s, e) for s, e in out]


def free_intervals(busy: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The gaps between consecutive busy ranges (recipe:112-115): (previous end, next start)."""
    return [(busy[i][1], busy[i + 1][0]) for i in range(len(busy) - 1)]


def top_free(free: Sequence[tuple[int, int]], top_n: int = DEFAULT_TOP_N) -> list[tuple[int, int]]:
    """The top_n longest gaps, longest first (recipe:120-121). The recipe sorts with pandas'
    default (unstable) sort; here equal durations keep time order, which is what that sort gives
    on short inputs."""
    order = sorted(range(len(free)), key=lambda i: -(free[i][1] - free[i][0]))
    return [free[i] for i in order[:max(top_n, 0)]]


# ------------------------------------------------------------------------------- link rows


def normalise_links(rows: Iterable[dict], msprof_float: bool = True) -> list[dict]:
    """The link rows as the recipe uses them. The rows hold the db's values as stored (int, text in
    PYTORCH_API of some schema versions, None for NULL); pandas types each column (pd.read_sql) and
    the recipe's arithmetic and tests follow those types:

    - the five times of LINK_TIMES become int, NULL / junk 0 (ensure_numeric_columns, recipe:233);
      a column holding a NULL goes through float64 on the way, and ns since the epoch (~1.7e18) as
      a double are multiples of 256 ns: with `msprof_float` (the default) such a column is rounded
      the same way, so the numbers and reasons equal the recipe's; False keeps every ns;
    - pytorch_ts stays as read, and the recipe's `if not pytorch_ts` (recipe:144) is kept per row
      as `_dispatched`: 0 or "" is no dispatch; a NULL is none (None, falsy) in a text column or an
      all-NULL one, but NaN (truthy: "dispatched", with pytorch_end read as 0) in an integer one.
    `_null` names the CANN / PyTorch times that were NULL (the row's idle times are then garbage)."""
    rows = [dict(r) for r in rows]
    as_float = {k for k in LINK_TIMES if msprof_float and any(_int_or_none(r.get(k)) is None for r in rows)}
    pts = [r.get("pytorch_ts") for r in rows]
    object_column = all(v is None for v in pts) or any(isinstance(v, str) for v in pts)
    for n in rows:
        n["_null"] = tuple(k for k in ("cann_ts", "cann_end", "pytorch_end") if _int_or_none(n.get(k)) is None)
        for k in LINK_TIMES:
            v = _int0(n.get(k))
            n[k] = int(float(v)) if k in as_float else v
        pt = n.get("pytorch_ts")
        n["_dispatched"] = (not object_column) if pt is None else bool(pt)
        n["pytorch_ts"] = _int_or_none(pt)
    return rows


_int_or_none = integer   # None for NULL, junk, a REAL inf


def _int0(v) -> int:
    n = _int_or_none(v)
    return 0 if n is None else n


class LinkIndex:
    """The link rows indexed for the recipe's three look-ups per interval (it filters the whole
    table each time): the tasks inside, the last task ending before, the first starting after."""

    def __init__(self, links: list[dict]):
        self.links = links
        # stable sorts: ties keep the export's row order (ORDER BY TASK.startNs)
        self.by_ts = sorted(range(len(links)), key=lambda i: links[i]["task_ts"])
        self.ts_keys = [links[i]["task_ts"] for i in self.by_ts]
        self.by_end = sorted(range(len(links)), key=lambda i: links[i]["task_end"])
        self.end_keys = [links[i]["task_end"] for i in self.by_end]
        # a task ending before it starts could start at or after `end` and still end before it
        self.any_negative = any(t["task_end"] < t["task_ts"] for t in links)

    def inside(self, start: int, end: int) -> list[dict]:
        """Tasks with task_ts > start and task_end < end (recipe:127-129), in row order."""
        lo = bisect.bisect_right(self.ts_keys, start)
        hi = len(self.ts_keys) if self.any_negative else bisect.bisect_left(self.ts_keys, end)
        idx = sorted(i for i in self.by_ts[lo:hi] if self.links[i]["task_end"] < end)
        return [self.links[i] for i in idx]

    def prev(self, start: int) -> dict | None:
        """The task ending last at or before `start`; of equal ends the later row (recipe:137-139:
        sort by task_end, take the last)."""
        k = bisect.bisect_right(self.end_keys, start)
        return self.links[self.by_end[k - 1]] if k else None

    def next(self, end: int) -> dict | None:
        """The task starting first at or after `end`; of equal starts the earlier row (recipe:138-140)."""
        k = bisect.bisect_left(self.ts_keys, end)
        return self.links[self.by_ts[k]] if k < len(self.ts_keys) else None


# ------------------------------------------------------------------------------- reasons


def remaining_free(start: int, end: int, spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end] less the union of `spans` (RangeCaculator.generate_free_intervals,
    cluster_analyse/common_func/time_range_calculator.py:98-151): spans are merged where they
    overlap or touch, clipped to the window; a zero-length span inside still splits it."""
    merged: list[list[int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    out, cur = [], start
    for s, e in merged:
        s, e = max(s, start), min(e, end)
        if e <= start or s >= end:
            continue
        if cur < s:
            out.append((cur, s))
        cur = max(cur, e)
    if cur < end:
        out.append((cur, end))
    return out


def type_counts(tasks: Iterable[dict]) -> list[tuple[str, int]]:
    """(task type, count), most first, equal counts in order of first appearance, NULL types left
    out (pandas' value_counts, recipe:250)."""
    counts: dict[str, int] = {}
    for t in tasks:
        k = t.get("task_type")
        if k is not None:
            counts[k] = counts.get(k, 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])


def device_tasks_reason(start: int, end: int, tasks: list[dict]) -> tuple[str, int | None]:
    """The reason for a gap with device tasks inside (recipe:248-264) and the longest stretch of it
    they leave free (ns; None where they leave none)."""
    desc = ", ".join(f"{n} {k} tasks" for k, n in type_counts(tasks))
    rest = remaining_free(start, end, ((t["task_ts"], t["task_end"]) for t in tasks))
    if not rest:
        return f"Device task running: {desc}.", None
    longest = max(e - s for s, e in rest)
    return f"Device task running: {desc}, max remaining free {ns_to_us(longest)} us", longest


def launch_reason(prev: dict, nxt: dict, threshold_ns: int = DIFF_WAIT_THRESHOLD_NS) -> tuple[str, str]:
    """(cause, reason) between two dispatched tasks (recipe:148-170). wait = the launch's start after
    its PyTorch op's end; if it grows by less than the threshold the host simply sent nothing
    (PyTorch idle); else CANN: the longest of the two launches and the gap between them."""
    pytorch_idle = nxt["pytorch_end"] - prev["pytorch_end"]
    prev_wait = prev["cann_ts"] - prev["pytorch_end"]
    next_wait = nxt["cann_ts"] - nxt["pytorch_end"]
    if next_wait - prev_wait < threshold_ns:
        return PYTORCH_IDLE, f"Idle Pytorch layer: no task dispatched in {ns_to_us(pytorch_idle)} us"
    prev_launch = prev["cann_end"] - prev["cann_ts"]
    next_launch = nxt["cann_end"] - nxt["cann_ts"]
    gap = nxt["cann_ts"] - prev["cann_end"]
    if max(prev_launch, next_launch, gap) == gap:
        return CANN_LAUNCH, f"Abnormal CANN layer: long time between two node@launch {ns_to_us(gap)} us"
    return CANN_LAUNCH, f"Abnormal CANN layer: long node@launch {ns_to_us(max(prev_launch, next_launch))} us"


def free_row(start: int, end: int, index: LinkIndex) -> dict:
    """One ASCEND_FREE row: the recipe's analyze_free_reason (recipe:123-172) for [start, end]."""
    row = ASCEND_FREE.row(start_us=float(ns_to_us_text(start)), end_us=float(ns_to_us_text(end)),
                          start_time=ns_to_us_text(start), end_time=ns_to_us_text(end),
                          duration_us=ns_to_us(end - start), pytorch_idle_us=None, cann_idle_us=None,
                          cause=None, reason=None, n_device_tasks=0, max_remaining_free_us=None, zeroed_links=None)
    inside = index.inside(start, end)
    if inside:
        row["reason"], longest = device_tasks_reason(start, end, inside)
        row.update(cause=DEVICE_TASKS, n_device_tasks=len(inside), max_remaining_free_us=ns_to_us(longest))
        return row
    prev, nxt = index.prev(start), index.next(end)
    if prev is None or nxt is None:
        return {**row, "cause": SKIPPED, "reason": SKIP_NO_NEIGHBOUR}
    if not prev["_dispatched"] or not nxt["_dispatched"]:
        return {**row, "cause": SKIPPED, "reason": SKIP_NO_DISPATCH}
    row["pytorch_idle_us"] = ns_to_us(nxt["pytorch_end"] - prev["pytorch_end"])
    row["cann_idle_us"] = ns_to_us(nxt["cann_end"] - prev["cann_end"])
    row["cause"], row["reason"] = launch_reason(prev, nxt)
    # the recipe reads a NULL CANN / PyTorch time as 0: say so, the numbers are then meaningless
    zeroed = sorted({f"{side}.{k}" for side, t in (("prev", prev), ("next", nxt)) for k in t.get("_null", ())})
    row["zeroed_links"] = ", ".join(zeroed) or None
    return row


def free_rows(busy_intervals: Iterable[tuple[int, int]], link_rows: Iterable[dict],
              top_n: int = DEFAULT_TOP_N, msprof_float: bool = True) -> tuple[list[dict], dict]:
    """ASCEND_FREE rows of one rank (the recipe's _mapper_func, recipe:216-246) and the totals of
    all its gaps. No link rows: no rows, as the recipe (recipe:234-236). msprof_float: see
    normalise_links."""
    busy = busy_ranges(busy_intervals)
    gaps = free_intervals(busy)
    totals = {"n_busy": len(busy), "n_free": len(gaps), "free_us": ns_to_us(sum(e - s for s, e in gaps)),
              "window_us": ns_to_us(busy[-1][1] - busy[0][0]) if busy else None}
    links = normalise_links(link_rows, msprof_float)
    if not gaps or not links:
        return [], totals
    index = LinkIndex(links)
    return [free_row(s, e, index) for s, e in top_free(gaps, top_n)], totals


ASCEND_FREE = RowModel(
    "ascend_free", "free (idle) interval of an Ascend device between busy ranges: the top_n longest per capture",
    "captures[*].ascend_free.rows[*]", table="ascend_free", method="ascend_free",
    select=each_capture(inside("ascend_free", "rows")), fields=(
        Field("start_us", "us", "absolute start: the end of a busy range (compute tasks and collective ops merged); "
              "start_time has every digit"),
        Field("end_us", "us", "absolute end: the start of the next busy range"),
        Field("duration_us", "us", "end - start (msprof-analyze free_analysis' Duration(us))"),
        Field("pytorch_idle_us", "us", "next task's PyTorch op end - previous task's PyTorch op end (Pytorch Idle "
              "Time(us)); None for device-task and skipped intervals"),
        Field("cann_idle_us", "us", "next task's CANN launch end - previous task's CANN launch end (Cann Idle Time(us))"),
        Field("cause", "text", "pytorch_idle (no task dispatched), cann_launch (slow or late node@launch), device_tasks "
              "(non-compute device tasks inside), skipped (no neighbour task or no PyTorch dispatch time)"),
        Field("reason", "text", "msprof-analyze free_analysis' Reason text, as it writes it"),
        Field("n_device_tasks", "count", "device tasks strictly inside the interval (cause device_tasks)"),
        Field("max_remaining_free_us", "us", "the longest stretch those tasks leave free"),
        Field("start_time", "text", "the start in us as exact decimal text (msprof-analyze's Start Time(us))"),
        Field("end_time", "text", "the end in us as exact decimal text"),
        Field("zeroed_links", "text", "the CANN / PyTorch times that were NULL and read as 0 (msprof-analyze does): "
              "the idle times are then not meaningful; None when the link is complete"),
    ))
