"""What changed between two analyses (runs or captures): per stage, per rank, per op, per kernel
and the device time per step (computing / exposed communication / communication / free), sorted by
impact |B - A|.

Ops and kernels come from each capture's complete per-name totals (`op_totals`, `kernel_totals`),
not its top-N lists, so a change below one side's cut is still found, and an op that appears or
vanishes is listed as new / gone. Each capture's totals are divided by its captured steps (a
capture without steps counts as one unit). Like is compared with like: when both sides hold the
same (stage, worker) captures, rank by rank; else, when they hold the same stages, stage by stage
(the mean over the stage's captures); else everything pooled (the mean over all captures). `how`
says which, and what each value is. Takes two summary dicts (their totals are read where they are:
inline, or each capture's line of capture_totals.jsonl beside a loaded summary.json).
"""
from __future__ import annotations

from typing import Iterable

from mindspeed_profiler.analysis.results.outputs import TotalsReader

CAPTURE_KINDS = ("torch", "kineto", "ascend")


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


def _captures(s: dict) -> list[dict]:
    return [c for c in s.get("captures", []) if c.get("status") == "ok" and c.get("kind") in CAPTURE_KINDS]


TRACE_SUFFIXES = (".gz", ".json", ".pt.trace")   # stripped, in this order, from a raw trace's file name
FILE_LABEL_CHARS = 48


def _worker(c: dict) -> str:
    """"role:rank"; a capture with neither (a plain Kineto trace from another project) is named by
    its file, so that two such traces are told apart and the same file in two runs is matched."""
    role, rank = c.get("role") or "", c.get("rank")
    if role or rank is not None:
        return f"{role}:{rank if rank is not None else ''}"
    return file_label(str(c.get("path") or ""))


def file_label(path: str) -> str:
    """A capture's path without its trace suffixes, the middle cut when long
    ("kineto/worker0.1623143089861.pt.trace.json.gz" -> "kineto/worker0.1623143089861")."""
    for suffix in TRACE_SUFFIXES:
        if path.endswith(suffix) and len(path) > len(suffix):
            path = path[: -len(suffix)]
    n = FILE_LABEL_CHARS
    return path if len(path) <= n else path[: n // 2 - 1] + "…" + path[-(n - n // 2):]


def _group_of(c: dict, level: str) -> tuple:
    stage = c.get("stage") or "all"
    return (stage, _worker(c)) if level == "rank" else (stage, "") if level == "stage" else ("", "")


def choose_level(a: dict, b: dict) -> str:
    """rank, stage or all: the finest grouping both sides share."""
    ga = {_group_of(c, "rank") for c in _captures(a)}
    gb = {_group_of(c, "rank") for c in _captures(b)}
    if ga and ga == gb:
        return "rank"
    if {g[0] for g in ga} == {g[0] for g in gb} and len({g[0] for g in ga}) > 1:
        return "stage"
    return "all"


def _totals(c: dict, what: str, rd: TotalsReader) -> tuple[dict[str, float], bool]:
    """{name: time} of one capture (ops: self time; kernels: total), and whether it is complete
    (False: an older summary with top-N lists only, or a capture whose totals cannot be read)."""
    if what == "ops":
        ops = rd.get(c, "op_totals")
        if ops is not None:
            return {r[0]: r[3] for r in ops}, True
        return {o["name"]: o["self_us"] for o in c.get("top_ops") or []}, False
    kernels = rd.get(c, "kernel_totals")
    if kernels is not None:
        return {r[0]: r[2] for r in kernels}, True
    return {k["name"]: k["total_us"] for k in c.get("top_kernels") or []}, False


def per_step_values(s: dict, what: str, level: str) -> tuple[dict[tuple, float], bool]:
    """{(stage, worker, name): mean over the group's captures of time per captured step}, and
    whether every capture had complete totals."""
    sums: dict[tuple, float] = {}
    members: dict[tuple, int] = {}
    complete = True
    with TotalsReader(s) as rd:
        for c in _captures(s):
            group = _group_of(c, level)
            members[group] = members.get(group, 0) + 1
            totals, full = _totals(c, what, rd)
            complete = complete and full
            n = max(1, len(c.get("steps") or []))
            for name, v in totals.items():
                key = group + (name,)
                sums[key] = sums.get(key, 0.0) + v / n
    return {k: v / members[k[:2]] for k, v in sums.items()}, complete


STEP_TIME = "step time"


def step_time_values(s: dict, level: str) -> dict[tuple, float]:
    """{(stage, worker, "step time"): mean over the group's captures of the mean duration of a
    captured step (ProfilerStep#N, or the capture's own step rows)}: what a user compares first."""
    sums: dict[tuple, float] = {}
    members: dict[tuple, int] = {}
    for c in _captures(s):
        durs = [st["dur_us"] for st in c.get("steps") or [] if isinstance(st.get("dur_us"), (int, float))]
        if not durs:
            continue
        key = _group_of(c, level) + (STEP_TIME,)
        members[key] = members.get(key, 0) + 1
        sums[key] = sums.get(key, 0.0) + sum(durs) / len(durs)
    return {k: v / members[k] for k, v in sums.items()}


BREAKDOWN = (("computing_us", "compute_us"), ("communication_exposed_us", "communication_exposed_us"),
             ("communication_us", "communication_us"), ("free_us", "idle_us"))


def breakdown_values(s: dict, level: str) -> dict[tuple, float]:
    """{(stage, worker, field): mean over the group's captures of the device time per step}:
    computing, exposed communication, communication and free (msprof-analyze's fields: an Ascend
    capture's step rows; a Kineto capture's device block per captured step, idle as free)."""
    sums: dict[tuple, float] = {}
    members: dict[tuple, int] = {}
    for c in _captures(s):
        rows = c.get("step_trace") or []
        dev = c.get("device")
        if rows:
            vals = {f: sum(r.get(f) or 0.0 for r in rows) / len(rows) for f, _ in BREAKDOWN}
        elif dev:
            n = max(1, len(c.get("steps") or []))
            vals = {f: (dev.get(d) or 0.0) / n for f, d in BREAKDOWN}
        else:
            continue
        group = _group_of(c, level)
        members[group] = members.get(group, 0) + 1
        for f, v in vals.items():
            sums[group + (f,)] = sums.get(group + (f,), 0.0) + v
    return {k: v / members[k[:2]] for k, v in sums.items()}


def _deltas(a: dict, b: dict, a_complete: bool = True, b_complete: bool = True) -> list[dict]:
    """Rows sorted by impact |B - A|. A key missing from a complete side is 0 there (the op is new
    or gone); missing from an incomplete side (top-N only) it is unknown: delta None, listed last."""
    rows = []
    for k in set(a) | set(b):
        va, vb = a.get(k), b.get(k)
        if (va is None and not a_complete) or (vb is None and not b_complete):
            d, status = None, "unknown"
        else:
            d = (vb or 0.0) - (va or 0.0)
            status = "new" if va is None else "gone" if vb is None else "changed" if d else "same"
        row = {"key": k if isinstance(k, str) else " / ".join(x for x in k if x), "a_us": va, "b_us": vb,
               "delta_us": d, "ratio": (vb / va) if va and vb is not None else None, "status": status}
        if isinstance(k, tuple):
            row.update(stage=k[0] or None, worker=k[1] or None, name=k[2])
        rows.append(row)
    return sorted(rows, key=lambda r: (r["delta_us"] is None, -abs(r["delta_us"] or 0.0), r["key"]))


def _how(level: str, a: dict, b: dict) -> dict:
    na, nb = len(_captures(a)), len(_captures(b))
    what = {"rank": "per (stage, worker): the mean over that worker's captures of the stage",
            "stage": "per stage: the mean over the stage's captures (all ranks)",
            "all": "the mean over all captures (stages and ranks pooled: the two sides' stages differ)"}[level]
    return {"level": level, "captures": [na, nb],
            "values": f"microseconds per captured step (a capture without steps: per capture), {what}; "
                      "ops: self time, kernels: device time"}


def compare(a: dict, b: dict) -> dict:
    level = choose_level(a, b)
    out = {"a": a.get("root"), "b": b.get("root"), "how": _how(level, a, b),
           "steps": _deltas(step_time_values(a, level), step_time_values(b, level)),
           "stages": _deltas(_stage_values(a), _stage_values(b)),
           "ranks": _deltas(_rank_values(a), _rank_values(b))}
    for what in ("ops", "kernels"):
        (va, ca), (vb, cb) = per_step_values(a, what, level), per_step_values(b, what, level)
        out[what] = _deltas(va, vb, ca, cb)
    out["breakdown"] = _deltas(breakdown_values(a, level), breakdown_values(b, level))
    out["nothing_comparable"] = nothing_comparable(a, b, out)
    return out


TABLES = ("steps", "stages", "ranks", "ops", "kernels", "breakdown")


def nothing_comparable(a: dict, b: dict, res: dict) -> str | None:
    """Why the two sides share nothing to compare (no table has a key on both sides), or None."""
    if any(r["a_us"] is not None and r["b_us"] is not None for t in TABLES for r in res[t]):
        return None
    def what(s: dict) -> str:
        caps = s.get("captures") or []
        ok = [c for c in caps if c.get("status") == "ok"]
        kinds = sorted({c.get("kind") for c in ok})
        return (f"{len(caps)} capture(s), {len(ok)} ok" + (f" ({', '.join(map(str, kinds))})" if kinds else "")
                + ("" if s.get("timeline") else ", no RL timeline"))
    return (f"nothing comparable: no step-time, stage, rank, op, kernel or device-time row is on both sides "
            f"(A: {what(a)}; B: {what(b)}); captures without steps, ops, kernels or device time give nothing to compare")


def changed(rows: Iterable[dict]) -> list[dict]:
    """The rows that changed (new, gone, or a non-zero delta)."""
    return [r for r in rows if r["status"] != "same"]
