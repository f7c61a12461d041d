"""The collective ops and links of Ascend captures, from torch_npu's communication.json /
communication_matrix.json and msprof-analyze's cluster files (parsing/ascend_comm.py rows):
where each collective's time goes (transit vs waiting for the peers), and what each transport
carried. Pure."""
from __future__ import annotations

from mindspeed_profiler.analysis.analyzers.grouping import top


def collective_totals(rows: list[dict]) -> list[dict]:
    """Per op name (over ranks and steps): count, elapse / transit / wait / sync / idle us, and
    the wait share of the elapse time (how much of the collective was waiting for other ranks)."""
    agg: dict[str, dict] = {}
    for r in rows:
        a = agg.setdefault(r["op"], {"name": r["op"], "type": r.get("type"), "count": 0, "elapse_us": 0.0,
                                     "transit_us": 0.0, "wait_us": 0.0, "sync_us": 0.0, "idle_us": 0.0})
        a["count"] += 1
        for k in ("elapse_us", "transit_us", "wait_us", "sync_us", "idle_us"):
            a[k] += r.get(k) or 0.0
    for a in agg.values():
        a["wait_share"] = a["wait_us"] / a["elapse_us"] if a["elapse_us"] > 0 else None
    return sorted(agg.values(), key=lambda a: -a["elapse_us"])


def collective_summary(rows: list[dict], top_n: int) -> dict | None:
    """A capture's `communication.collectives`: totals over its ops and the top ops by elapse time."""
    if not rows:
        return None
    ops = collective_totals(rows)
    tot = {k: sum(o[k] for o in ops) for k in ("elapse_us", "transit_us", "wait_us", "sync_us", "idle_us")}
    tot["wait_share"] = tot["wait_us"] / tot["elapse_us"] if tot["elapse_us"] > 0 else None
    return {**tot, "n_ops": sum(o["count"] for o in ops), "top": top(ops, "elapse_us", top_n)}


def per_rank(rows: list[dict]) -> list[dict]:
    """Per rank: elapse / transit / wait over its collectives (the cluster file's ranks)."""
    agg: dict = {}
    for r in rows:
        if r.get("rank") is None:
            continue
        a = agg.setdefault(r["rank"], {"rank": r["rank"], "n_ops": 0, "elapse_us": 0.0, "transit_us": 0.0, "wait_us": 0.0})
        a["n_ops"] += 1
        for k in ("elapse_us", "transit_us", "wait_us"):
            a[k] += r.get(k) or 0.0
    for a in agg.values():
        a["wait_share"] = a["wait_us"] / a["elapse_us"] if a["elapse_us"] > 0 else None
    return [agg[k] for k in sorted(agg)]


def link_summary(rows: list[dict]) -> list[dict] | None:
    """Per transport type: links, MB moved, transit ms and the resulting bandwidth (GB/s), from the
    matrix's per-op-type totals (`<op>-total` groups) where it has them, else every entry."""
    if not rows:
        return None
    totals = [r for r in rows if str(r.get("op") or "").endswith("-total")]
    use = totals or rows
    agg: dict[str, dict] = {}
    for r in use:
        if r["src"] == r["dst"] and r["transport"] == "LOCAL" and not r["size_mb"]:
            continue
        a = agg.setdefault(r["transport"], {"transport": r["transport"], "links": set(), "size_mb": 0.0, "time_ms": 0.0})
        a["links"].add((r["src"], r["dst"]))
        a["size_mb"] += r["size_mb"]
        a["time_ms"] += r["time_ms"]
    out = []
    for a in agg.values():
        out.append({"transport": a["transport"], "n_links": len(a["links"]), "size_mb": a["size_mb"], "time_ms": a["time_ms"],
                    "bandwidth_gbps": a["size_mb"] / a["time_ms"] if a["time_ms"] > 0 else None})
    return sorted(out, key=lambda a: -a["size_mb"])
