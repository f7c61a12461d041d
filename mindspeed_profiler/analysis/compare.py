"""Deltas between two analyses (runs or captures): per stage, per rank, per op; sorted by impact.

Pure: takes two summary dicts. Impact = |B - A| in microseconds (what the change cost or saved).
"""
from __future__ import annotations


def _stage_values(s: dict) -> dict[str, float]:
    """Mean time per iteration of each RL stage (timeline), else per-capture stage time."""
    tl = s.get("timeline")
    out: dict[str, float] = {}
    if tl and tl.get("iterations"):
        n = len(tl["iterations"])
        for it in tl["iterations"]:
            for name, v in it["stages"].items():
                out[name] = out.get(name, 0.0) + v["wall_us"] / n
        return out
    acc: dict[str, list[float]] = {}
    for r in s.get("stage_rank", []):
        if r["source"] == "capture":
            acc.setdefault(r["stage"], []).append(r["value_us"])
    return {k: sum(v) / len(v) for k, v in acc.items()}


def _rank_values(s: dict) -> dict[str, float]:
    out = {}
    for r in s.get("stage_rank", []):
        out[f"{r['source']}:{r['stage']}:{r.get('role') or ''}:{r['rank']}"] = r["value_us"]
    return out


def _op_values(s: dict) -> dict[str, float]:
    """Self time of each op summed over captures, per step when the capture has steps."""
    out: dict[str, float] = {}
    for c in s.get("captures", []):
        if c.get("status") != "ok":
            continue
        n = max(1, len(c.get("steps") or []))
        for o in c.get("top_ops") or []:
            out[o["name"]] = out.get(o["name"], 0.0) + o["self_us"] / n
        for k in c.get("top_kernels") or []:
            key = f"kernel: {k['name']}"
            out[key] = out.get(key, 0.0) + k["total_us"] / n
    return out


def _deltas(a: dict[str, float], b: dict[str, float]) -> list[dict]:
    rows = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        d = (vb or 0.0) - (va or 0.0)
        rows.append({"key": k, "a_us": va, "b_us": vb, "delta_us": d,
                     "ratio": (vb / va) if va and vb is not None else None})
    return sorted(rows, key=lambda r: -abs(r["delta_us"]))


def compare(a: dict, b: dict) -> dict:
    return {"a": a.get("root"), "b": b.get("root"),
            "stages": _deltas(_stage_values(a), _stage_values(b)),
            "ranks": _deltas(_rank_values(a), _rank_values(b)),
            "ops": _deltas(_op_values(a), _op_values(b))}
