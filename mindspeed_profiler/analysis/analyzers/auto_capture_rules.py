"""The advisor's rule on automatic captures (`integrated.auto_capture`, docs/ondemand.md): each slow
iteration the profiler captured the iterations after, with its time against the running median and
the capture directories that recorded them. Pure: `slow_iteration_findings(summary)` gives the
arguments of the advisor's findings (id, title, impact, evidence, action, anchor); advisor.py
registers the rule (`DOCS`). It reads each capture's metadata note (core/auto_reason.py).
"""
from __future__ import annotations

from typing import Any, Callable

from mindspeed_profiler.core import auto_reason
from mindspeed_profiler.analysis.parsing.numbers import finite_number

RULE = "slow_iteration_captured"
# a slow iteration's excess over the median ranks at this weight of its share of that iteration: it is
# one iteration of the run, and the finding's use is the link to its capture
IMPACT_WEIGHT = 0.5
MAX_SHOWN_DIRS = 4   # capture directories named in the title (the evidence lists all)

DOCS = {
    RULE: dict(
        triggers=("an automatic capture's metadata (`integrated.auto_capture`) says why it was taken: an iteration "
                  "(or the stage named) took more than `factor` x its running median; one finding per slow "
                  "iteration and role, naming the capture directories of every rank that recorded the iterations "
                  "after it"),
        impact=f"{IMPACT_WEIGHT} x (its time - the median) / its time",
        reads="`captures` (each capture's metadata notes)"),
}


def slow_iteration_findings(summary: dict) -> list[tuple]:
    """One finding per (role, slow iteration) found in the captures' metadata."""
    groups: dict[tuple, dict[str, Any]] = {}
    for c in summary.get("captures") or []:
        if not isinstance(c, dict) or not isinstance(c.get("meta"), dict):
            continue
        why = auto_reason.reason_of(c["meta"].get("notes"))
        slow = why.get("slow_iteration") if why else None
        t, med = (finite_number(why.get("time_s")), finite_number(why.get("median_s"))) if why else (None, None)
        if not isinstance(slow, int) or t is None or med is None:
            continue   # no reason, or one that does not parse: not ours to guess
        g = groups.setdefault((str(c.get("role")), slow), {"why": why, "own": False, "dirs": [], "ranks": set()})
        g["dirs"].append(c.get("path"))
        g["ranks"].add(c.get("rank"))
        if not g["own"] and c.get("rank") == why.get("rank"):
            g["why"], g["own"] = why, True   # the reason as the first rank that saw it itself says it
    out = []
    for (role, slow), g in sorted(groups.items()):
        why, dirs = g["why"], sorted(d for d in g["dirs"] if d)
        t, med = float(why["time_s"]), float(why["median_s"])
        its = why.get("iterations")
        what = f"stage {why['stage']}" if why.get("stage") else "the iteration"
        shown = ", ".join(dirs[:MAX_SHOWN_DIRS]) + (f" and {len(dirs) - MAX_SHOWN_DIRS} more" if len(dirs) > MAX_SHOWN_DIRS else "")
        span = f"iterations {its[0]}-{its[1]}" if isinstance(its, list) and len(its) == 2 else "the iterations after it"
        title = (f"iteration {slow} of {role} was slow: {what} took {t:.3g} s, {t / med if med > 0 else float('inf'):.1f}x "
                 f"its running median {med:.3g} s (factor {why.get('factor')}); {span} captured on "
                 f"{len(g['ranks'])} rank(s): {shown}")
        evidence = {"table": "captures", "role": role, "slow_iteration": slow, "time_s": t, "median_s": med,
                    "ratio": why.get("ratio"), "factor": why.get("factor"), "stage": why.get("stage"),
                    "seen_by_rank": why.get("rank"), "iterations": its, "capture_dirs": dirs,
                    "ranks": sorted(r for r in g["ranks"] if isinstance(r, int))}
        action = ("open the capture that recorded the iterations after it (`mindspeed-profiler analyse` on that "
                  "directory, or its trace in Perfetto) to see what was slow; raise auto_capture.lead_iterations "
                  "if some ranks are missing, or auto_capture.factor if this slowness is expected")
        out.append((RULE, title, IMPACT_WEIGHT * max(0.0, (t - med) / t) if t > 0 else 0.0, evidence, action,
                    "slow-iteration-captured"))
    return out


# rule id -> its findings' arguments (advisor.py registers one rule per entry, with DOCS[id])
CHECKS = {RULE: slow_iteration_findings}


def check(make: Callable[..., dict]) -> Callable[[dict], list[dict]]:
    """The rule's check for the advisor's registry, its findings made by `make` (advisor._finding's
    signature); named as the rule (the advisor's tests and terminal read a check's name)."""
    def slow_iteration_captured(summary: dict) -> list[dict]:
        return [make(*f) for f in slow_iteration_findings(summary)]
    return slow_iteration_captured
