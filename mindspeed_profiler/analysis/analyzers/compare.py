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


def _op_values(s: dict) -> tuple[dict[str, float], bool]:
    """Self time of each op (and time of each kernel) summed over captures, per step when the
    capture has steps; and whether any list was cut at the top-N (then an op missing from this
    side is not zero, only unknown: below the cut)."""
    out: dict[str, float] = {}
    top = (s.get("options") or {}).get("top")
    truncated = False
    for c in s.get("captures", []):
        if c.get("status") != "ok":
            continue
        n = max(1, len(c.get("steps") or []))
        ops, kernels = c.get("top_ops") or [], c.get("top_kernels") or []
        if not isinstance(top, int) or len(ops) >= top or len(kernels) >= top:
            truncated = truncated or bool(ops or kernels)
        for o in ops:
            out[o["name"]] = out.get(o["name"], 0.0) + o["self_us"] / n
        for k in kernels:
            key = f"kernel: {k['name']}"
            out[key] = out.get(key, 0.0) + k["total_us"] / n
    return out, truncated


def _deltas(a: dict[str, float], b: dict[str, float], a_cut: bool = False, b_cut: bool = False) -> list[dict]:
    """Rows sorted by impact |B - A|. A key missing from a side whose list was cut at the top-N
    has an unknown value there: delta_us None, sorted after the known ones."""
    rows = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if (va is None and a_cut) or (vb is None and b_cut):
            d = None
        else:
            d = (vb or 0.0) - (va or 0.0)
        rows.append({"key": k, "a_us": va, "b_us": vb, "delta_us": d,
                     "ratio": (vb / va) if va and vb is not None else None})
    return sorted(rows, key=lambda r: (r["delta_us"] is None, -abs(r["delta_us"] or 0.0), r["key"]))


def compare(a: dict, b: dict) -> dict:
    (oa, ca), (ob, cb) = _op_values(a), _op_values(b)
    return {"a": a.get("root"), "b": b.get("root"),
            "stages": _deltas(_stage_values(a), _stage_values(b)),
            "ranks": _deltas(_rank_values(a), _rank_values(b)),
            "ops": _deltas(oa, ob, ca, cb)}
