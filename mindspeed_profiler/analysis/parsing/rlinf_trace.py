"""RLinf's tracer output (rlinf/scheduler/manager/tracer.py): `trace_events.jsonl`, one Chrome event
per line, `B` / `E` pairs with wall-clock microseconds, `pid` = the worker's name ("ActorGroup:0")
or "driver", `tid` always "main", a `process_name` `M` event per process. The runner times each
training step (`cat: "runner"`, name `step`, `args.step_idx`) and its phases inside it
(`sync_weights`, `generate_rollouts`, `cal_adv_and_returns`, `actor_training`, ...); a worker's
timed functions carry its group as the category (`cat: "ActorGroup"`, name `run_training`).

Read into our timeline format (docs/formats.md): each step is an `iteration` span (iteration =
step_idx, or its order when it has none), each runner phase a `stage` span of the driver, each
worker function a `stage` span of that worker named `<group>/<function>` (`actor/run_training`,
the group's name without `Group`, lower case), numbered by the step it falls in. Unpaired events
are counted and reported, not fatal.
"""
from __future__ import annotations

import bisect
import re
from pathlib import Path

import orjson

from mindspeed_profiler.core import formats

RLINF_TRACE_FILE = "trace_events.jsonl"
RUNNER_CAT = "runner"
STEP_NAME = "step"
_GROUP_SUFFIX_RE = re.compile(r"(Group|Worker)$")


def looks_like_rlinf(path: Path) -> bool:
    """A JSON-lines file whose first event has RLinf's shape (ph, name, a string pid, tid "main")."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(1 << 16)
        e = orjson.loads(first)
    except (OSError, ValueError):
        return False
    return isinstance(e, dict) and e.get("ph") in ("B", "E", "M", "X") and isinstance(e.get("pid"), str) \
        and e.get("tid") == "main"


def read_rlinf_events(path: Path) -> tuple[list[dict], list[str]]:
    """The events of the file, and problems (bad lines) as warnings."""
    events, warnings = [], []
    bad = 0
    with open(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                e = orjson.loads(line)
            except ValueError:
                bad += 1
                continue
            if isinstance(e, dict):
                events.append(e)
            else:
                bad += 1
    if bad:
        warnings.append(f"{path.name}: {bad} line(s) that are not a JSON event were skipped (a run still writing, or cut by a crash)")
    return events, warnings


def _group_stage(cat: str, name: str) -> str:
    group = _GROUP_SUFFIX_RE.sub("", cat or "worker").lower() or "worker"
    return f"{group}/{name}"


MAX_NUMBER = formats.MAX_RANK   # ranks and step numbers a table holds


def _worker(pid: str) -> tuple[str, int]:
    """("actor", 0) from "ActorGroup:0"; ("driver", 0) from "driver"."""
    role, _, rank = pid.partition(":")
    role = _GROUP_SUFFIX_RE.sub("", role).lower() or role
    return role, int(rank) if rank.isascii() and rank.isdigit() and int(rank) <= MAX_NUMBER else 0


def _step_number(idx, order: int) -> int:
    """The runner's step_idx when it is a plausible step number, else the step's order."""
    if isinstance(idx, (int, float)) and not isinstance(idx, bool) and idx == idx and 0 <= idx <= MAX_NUMBER:
        return int(idx)
    return order


def to_timeline(events: list[dict]) -> tuple[dict, list[str]]:
    """Our timeline (a Chrome trace object with stage / iteration spans) from RLinf's events.
    Linear after one sort: an end closes the latest open begin of the same name on its thread (one
    stack per thread and name), a span's step is found by bisection."""
    warnings: list[str] = []
    stacks: dict[tuple, list[dict]] = {}
    spans: list[dict] = []
    unpaired = 0
    for e in sorted((e for e in events if e.get("ph") in ("B", "E") and isinstance(e.get("ts"), (int, float))
                     and not isinstance(e.get("ts"), bool) and e["ts"] == e["ts"]),
                    key=lambda e: (e["ts"], e["ph"] == "B")):
        key = (str(e.get("pid")), str(e.get("tid")), str(e.get("name")))
        if e["ph"] == "B":
            stacks.setdefault(key, []).append(e)
            continue
        stack = stacks.get(key)
        if not stack:
            unpaired += 1
            continue
        b = stack.pop()
        spans.append({"name": str(b.get("name")), "cat": str(b.get("cat") or ""), "pid": key[0], "ts": float(b["ts"]),
                      "dur": float(e["ts"]) - float(b["ts"]), "args": b.get("args") if isinstance(b.get("args"), dict) else {}})
    unpaired += sum(len(s) for s in stacks.values())
    if unpaired:
        warnings.append(f"{unpaired} begin / end event(s) without their pair were left out")
    steps = sorted((s for s in spans if s["cat"] == RUNNER_CAT and s["name"] == STEP_NAME), key=lambda s: s["ts"])
    step_lo = [s["ts"] for s in steps]
    step_hi = [s["ts"] + s["dur"] for s in steps]
    step_no = [_step_number(s["args"].get("step_idx"), k) for k, s in enumerate(steps, 1)]

    def iteration_of(s: dict) -> int | None:
        """The step (the last one begun at or before the span) that holds the span's start."""
        k = bisect.bisect_right(step_lo, s["ts"]) - 1
        return step_no[k] if k >= 0 and s["ts"] <= step_hi[k] else None

    out: list[dict] = []
    pids: dict[str, int] = {}
    for s in spans:
        role, rank = _worker(s["pid"])
        pid = pids.setdefault(s["pid"], len(pids) + 1)
        it = iteration_of(s)
        base = {"ph": "X", "ts": s["ts"], "dur": s["dur"], "pid": pid, "tid": 1}
        if s["cat"] == RUNNER_CAT and s["name"] == STEP_NAME:
            out.append({**base, "name": formats.SPAN_ITERATION, "cat": formats.CAT_ITERATION,
                        "args": {"role": role, "rank": rank, "iteration": it, **s["args"]}})
        elif s["cat"] == RUNNER_CAT:
            out.append({**base, "name": s["name"], "cat": formats.CAT_STAGE,
                        "args": {"role": role, "rank": rank, "iteration": it, "stage": s["name"]}})
        else:
            stage = _group_stage(s["cat"], s["name"])
            out.append({**base, "name": stage, "cat": formats.CAT_STAGE,
                        "args": {"role": role, "rank": rank, "iteration": it, "stage": stage}})
    meta = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}} for name, pid in pids.items()]
    origin = min((e["ts"] for e in out), default=0.0)
    for e in out:   # relative microseconds, as our merged timelines (doubles keep sub-microsecond digits)
        e["ts"] -= origin
    return {"traceEvents": meta + sorted(out, key=lambda e: e["ts"]), "displayTimeUnit": "ms",
            "otherData": {"generator": "mindspeed-profiler (from RLinf's trace_events.jsonl)",
                          "time_origin_unix_ns": int(origin * 1000), "warnings": warnings}}, warnings


def combine(ours: dict, rlinf: dict) -> dict:
    """Our merged timeline with an RLinf timeline's events added on the same time base (both are
    wall-clock; RLinf's processes get pids after ours)."""
    o_origin = int(ours.get("otherData", {}).get("time_origin_unix_ns") or 0)
    r_origin = int(rlinf.get("otherData", {}).get("time_origin_unix_ns") or 0)
    shift = (r_origin - o_origin) / 1000.0
    base = max((e.get("pid") for e in ours["traceEvents"] if isinstance(e.get("pid"), int)), default=0)
    added = []
    for e in rlinf["traceEvents"]:
        e = dict(e, pid=e["pid"] + base)
        if e.get("ph") != "M":
            e["ts"] = e["ts"] + shift
        added.append(e)
    other = dict(ours.get("otherData", {}))
    other["warnings"] = list(other.get("warnings", [])) + list(rlinf.get("otherData", {}).get("warnings", []))
    other["sources"] = ["segments", RLINF_TRACE_FILE]
    return {**ours, "traceEvents": ours["traceEvents"] + added, "otherData": other}
