"""What the terminal (console.py) and report.html (report/sections.py) both say about rows: the same
rows (from the questions' row models), named and selected by the same rules. How numbers are
written (the terminal's ms have 2 decimals, the report's 3) and the escaping (rich markup, HTML)
stay with each renderer."""
from __future__ import annotations

from typing import Iterator

from .analyzers.critical_path import path_text
from .questions import COMMUNICATION, SLOW_RANKS, STEP_BREAKDOWN

# the step_breakdown fields both renderers show, in their column order
BREAKDOWN_CELLS = ("computing_us", "communication_exposed_us", "overlapped_us", "free_us", "bubble_us", "preparing_us",
                   "stage_us")

__all__ = ["BREAKDOWN_CELLS", "path_text", "short", "pct", "slow_ranks", "capture_worker", "capture_label", "comm_shares", "by_text",
           "step_breakdown", "communication"]


def short(text, n: int) -> str:
    """At most n characters, cutting the middle (both the start and the end of a name tell something)."""
    text = "" if text is None else str(text)
    return text if len(text) <= n else text[: n // 2 - 1] + "…" + text[-(n - n // 2):]


def pct(x) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def slow_ranks(summary: dict) -> list[dict]:
    """summary.json's slow_ranks rows, each with its `worker` ("role:rank", the timeline's worker
    name; None without a rank), as the slow_ranks row model gives them."""
    return [raw for _, _, raw, _ in SLOW_RANKS.records(summary)]


def capture_worker(c: dict) -> str:
    """A capture's worker in a table cell: "role rank", or what there is of it."""
    return " ".join(str(x) for x in (c.get("role"), c.get("rank")) if x is not None and x != "")


def capture_label(c: dict) -> str:
    """A capture's name: its role, rank and stage, or its path."""
    label = " ".join(str(x) for x in (c.get("role"), f"rank {c['rank']}" if c.get("rank") is not None else None,
                                      c.get("stage")) if x)
    return label or c["path"]


def comm_shares(c: dict) -> tuple[float | None, float | None]:
    """(exposed communication / the device's busy time, host collective calls / the wall time)."""
    comm = c.get("communication") or {}
    return (comm.get("device") or {}).get("share_of_busy"), (comm.get("host") or {}).get("share_of_wall")


def by_text(captures: list[dict], key: str) -> dict[str, list[str]]:
    """Each distinct text of the captures' `key` list (warnings, missing) -> the paths that have it."""
    out: dict[str, list[str]] = {}
    for c in captures:
        for w in c.get(key) or []:
            out.setdefault(str(w), []).append(c["path"])
    return out


def step_breakdown(summary: dict) -> Iterator[tuple[int, dict, dict]]:
    """(capture index, capture, step_breakdown row) of the ok captures, in summary order: an Ascend
    capture's steps, a cluster capture's rank rows (source "cluster")."""
    for cid, c, _, row in STEP_BREAKDOWN.records(summary):
        if c.get("status") == "ok":
            yield cid, c, row


def communication(summary: dict) -> Iterator[tuple[dict, dict, list[dict]]]:
    """(capture, communication row, its top collectives) of the ok captures with any."""
    for _, c, raw, row in COMMUNICATION.records(summary):
        if c.get("status") == "ok":
            yield c, row, raw.get("top") or []
