"""Across captures: the stage x rank table and slow ranks (ratio to the group median)."""
from __future__ import annotations

import statistics


def _per_step(c: dict) -> tuple[float | None, str]:
    """The time a capture's rank spent per step: device busy if there was a device, else wall."""
    n = max(1, len(c.get("steps") or []))
    dev = c.get("device")
    if dev and dev.get("busy_us"):
        return dev["busy_us"] / n, "device_busy_us_per_step"
    if c.get("wall_us"):
        return c["wall_us"] / n, "wall_us_per_step"
    return None, ""


def stage_rank_rows(captures: list[dict]) -> list[dict]:
    """One row per (source, stage, role, rank): from captures (the mean over that rank's captures
    of the stage, e.g. one per call or step window), the timeline and cluster step traces."""
    rows = []
    per_rank: dict[tuple, list] = {}
    for c in captures:
        if c.get("status") != "ok":
            continue
        if c["kind"] in ("torch", "kineto", "ascend"):
            v, metric = _per_step(c)
            if v is not None and c.get("rank") is not None:
                per_rank.setdefault((c.get("stage") or "all", c.get("role"), c["rank"], metric), []).append((v, c["path"]))
        elif c["kind"] == "timeline":
            for r in c["timeline"]["stage_worker"]:
                rows.append({"source": "timeline", "stage": r["stage"], "rank": r["worker"], "role": r["role"],
                             "metric": "median_span_us", "value_us": r["median_us"], "n": r["count"], "path": c["path"]})
        elif c["kind"] == "cluster":
            for r in c["ranks"]:
                rows.append({"source": "cluster", "stage": "step", "rank": r["rank"], "role": None,
                             "metric": "computing_us", "value_us": r.get("computing_us", 0.0), "n": 1, "path": c["path"]})
    for (stage, role, rank, metric), vals in per_rank.items():
        rows.insert(0, {"source": "capture", "stage": stage, "rank": rank, "role": role, "metric": metric,
                        "value_us": sum(v for v, _ in vals) / len(vals), "n": len(vals),
                        "path": vals[0][1] if len(vals) == 1 else f"{len(vals)} captures"})
    return rows


def slow_ranks(rows: list[dict], threshold: float = 1.2) -> list[dict]:
    """Ratio of each rank's value to the median of its group (same source, stage, metric);
    flagged when above `threshold`. Sorted: flagged first, then by ratio."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["source"], r["stage"], r["role"], r["metric"]), []).append(r)
    out = []
    for (source, stage, _role, metric), rs in groups.items():
        if len(rs) < 2:
            continue
        med = statistics.median(r["value_us"] for r in rs)
        for r in rs:
            ratio = r["value_us"] / med if med > 0 else 0.0
            out.append({"source": source, "stage": stage, "metric": metric, "rank": r["rank"], "role": r["role"],
                        "value_us": r["value_us"], "median_us": med, "ratio": ratio, "flagged": ratio > threshold})
    return sorted(out, key=lambda r: (not r["flagged"], -r["ratio"], str(r["rank"])))
