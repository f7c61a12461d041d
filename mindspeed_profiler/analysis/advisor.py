"""The advisor: rules over the analysis' row models that say *why* the time went and *what to try*.

Each rule reads the rows of one or two questions (questions.py: the same rows analysis.db holds) and
returns findings; a finding is

    id        the rule's id (straggler, comm_bound, host_bound, slow_link, slow_rank,
              generation_bound, profiler_overhead)
    title     one line naming who and where ("actor rank 1 is the straggler of actor_update ...")
    impact    the share of the time at stake, 0..1: findings are ranked by it
    evidence  the numbers the rule used and where they came from (table, field)
    action    what to try, with the docs page that explains the number

Pure: `findings(summary)` over a summary.json dict; batch.py stores the list as summary["findings"]
and the renderers show it first. Every threshold is a named constant below and in
docs/diagnosis.md ("The advisor"); tests/test_advisor.py has a case that triggers each rule and one
that does not.
"""
from __future__ import annotations

from typing import Callable, Iterable

from . import questions as q

STRAGGLER_MIN_SHARE = 0.05        # a rank's waits for the straggler, net of the straggler's for it: 5% of its wall
COMM_BOUND_SHARE = 0.30           # exposed communication / busy device time
HOST_BOUND_SHARE = 0.30           # host wait / the capture's wall time
GENERATION_BOUND_SHARE = 0.50     # generation stages' share of the iteration
PROFILER_OVERHEAD_SHARE = 0.10    # profiler time (export, start) / iteration time
DOCS = "docs/diagnosis.md"

Finding = dict


def _finding(rule: str, title: str, impact: float, evidence: dict, action: str, anchor: str) -> Finding:
    return {"id": rule, "title": title, "impact": round(max(0.0, min(1.0, float(impact))), 4), "evidence": evidence,
            "action": action, "docs": f"{DOCS}#{anchor}"}


def _who(role, rank) -> str:
    return f"{role} rank {rank}" if role else f"rank {rank}"


def straggler(summary: dict) -> list[Finding]:
    """A rank the others wait for at the collectives (stragglers table, clocks aligned on the ends),
    net of its own waits for them: two ranks that are late in turn are no straggler."""
    walls = {(c.get("run_id"), c.get("role"), c.get("stage"), c.get("rank")): c.get("wall_us") or 0.0
             for c in summary.get("captures") or []}
    out = []
    for r in q.STRAGGLERS.rows(summary):
        victim, net = r.get("worst_victim_rank"), r.get("worst_victim_net_us") or 0.0
        wall = walls.get((r.get("run_id"), r.get("role"), r.get("stage"), victim)) or 0.0
        share = net / wall if wall > 0 else 0.0
        if victim is None or share < STRAGGLER_MIN_SHARE:
            continue
        where = f" of {r['stage']}" if r.get("stage") else ""
        out.append(_finding(
            "straggler", f"{_who(r.get('role'), r['rank'])} is the straggler{where}: {_who(r.get('role'), victim)} "
            f"waited {r['worst_victim_cost_us'] / 1e3:.1f} ms for it ({net / 1e3:.1f} ms more than the other way, "
            f"{share:.0%} of its time)", share,
            {"table": "stragglers", "rank": r["rank"], "n_last": r["n_last"], "n_matched": r["n_matched"],
             "cost_to_others_us": r["cost_to_others_us"], "victim_rank": victim,
             "victim_cost_us": r["worst_victim_cost_us"], "victim_net_us": net, "victim_wall_us": wall,
             "source": r.get("source")},
            "look at what the straggler does before the collective (a longer compute, a late launch on the host, "
            "a data-loading stall); balance the work across data-parallel ranks", "stragglers"))
    return out


def comm_bound(summary: dict) -> list[Finding]:
    """A capture whose device time is mostly communication not hidden under compute."""
    out = []
    for r in q.BREAKDOWN.rows(summary):
        busy, exposed = r.get("busy_us") or 0.0, r.get("communication_exposed_us") or 0.0
        if busy <= 0 or exposed / busy < COMM_BOUND_SHARE:
            continue
        window = r.get("window_us") or busy
        out.append(_finding(
            "comm_bound", f"{_who(r.get('role'), r.get('rank'))}{' in ' + r['stage'] if r.get('stage') else ''}: "
            f"{exposed / busy:.0%} of the device's busy time is communication not overlapped with compute",
            exposed / window, {"table": "breakdown", "path": r.get("path"), "busy_us": busy, "communication_exposed_us": exposed,
                               "window_us": window},
            "overlap communication with compute (bucketed gradient all-reduce, overlap_grad_reduce / "
            "overlap_param_gather), larger buckets for small collectives, or a cheaper parallel layout",
            "links"))
    return out


def host_bound(summary: dict) -> list[Finding]:
    """A device stream that waited for the host to launch its work much of the capture's time."""
    walls = {c.get("path"): c.get("wall_us") or 0.0 for c in summary.get("captures") or []}
    out = []
    for r in q.IDLE_CAUSES.rows(summary):
        host, wall = r.get("host_wait_us") or 0.0, walls.get(r.get("path")) or 0.0
        if wall <= 0 or host / wall < HOST_BOUND_SHARE:
            continue
        out.append(_finding(
            "host_bound", f"{_who(r.get('role'), r.get('rank'))} stream {r.get('stream')}: the device waited for the host "
            f"{host / 1e3:.1f} ms ({host / wall:.0%} of the capture)", host / wall,
            {"table": "idle_causes", "path": r.get("path"), "stream": r.get("stream"), "host_wait_us": host,
             "idle_us": r.get("idle_us"), "wall_us": wall},
            "the host is too slow to keep the device fed: CUDA graphs / torch.compile, fewer small kernels, "
            "moving Python work (logging, .item(), data preparation) off the step", "idle-time-by-cause"))
    return out


def slow_link(summary: dict) -> list[Finding]:
    """A link far below its transport's others (links table)."""
    out = []
    for r in q.LINKS.rows(summary):
        if not r.get("slow"):
            continue
        ratio = r.get("ratio") or 0.0
        out.append(_finding(
            "slow_link", f"link {r.get('src_rank')} -> {r.get('dst_rank')} ({r.get('transport')}) in {r.get('op')}: "
            f"{r.get('bandwidth_gbps', 0):.2f} GB/s, {ratio:.2f}x its transport's median", 1.0 - ratio,
            {"table": "links", "step": r.get("step"), "group": r.get("group"), "bandwidth_gbps": r.get("bandwidth_gbps"),
             "median_gbps": r.get("median_gbps"), "size_mb": r.get("size_mb")},
            "check that link's hardware and placement (a degraded HCCS / RDMA port, a rank on the wrong NUMA node)",
            "links"))
    return out


def slow_rank(summary: dict) -> list[Finding]:
    """A rank of a stage well above the median of its group (slow_ranks table: data-parallel imbalance)."""
    out = []
    for r in q.SLOW_RANKS.rows(summary):
        if not r.get("flagged"):
            continue
        ratio = r.get("ratio") or 1.0
        out.append(_finding(
            "slow_rank", f"{r.get('worker') or _who(r.get('role'), r.get('rank'))} in {r.get('stage')}: {ratio:.2f}x the "
            f"median of its group", 1.0 - 1.0 / ratio if ratio > 1 else 0.0,
            {"table": "slow_ranks", "value_us": r.get("value_us"), "median_us": r.get("median_us"), "ratio": ratio,
             "metric": r.get("metric"), "reason": r.get("reason")},
            "imbalanced work across data-parallel ranks (sequence lengths, samples per rank) or a slower device: "
            "balance the batches (sort or pack by length)", "stragglers"))
    return out


def _is_generation(stage: str) -> bool:
    return "generat" in stage or "rollout" in stage


def generation_bound(summary: dict) -> list[Finding]:
    """Iterations whose time goes mostly to generation (timeline: stage time per iteration)."""
    gen, total = 0.0, 0.0
    for r in q.ITERATIONS.rows(summary):
        total += r.get("dur_us") or 0.0
    for r in q.TIMELINE_STAGES.rows(summary):
        if _is_generation(str(r.get("stage") or "")):
            gen += r.get("wall_us") or 0.0
    if total <= 0 or gen / total < GENERATION_BOUND_SHARE:
        return []
    return [_finding(
        "generation_bound", f"generation takes {gen / total:.0%} of the iterations' time", gen / total,
        {"table": "timeline_stages", "generation_wall_us": gen, "iterations_us": total},
        "generation bounds the step: a faster inference engine (vLLM / SGLang with larger batches), overlapping "
        "generation with training (asynchronous rollout), shorter responses", "the-advisor")]


def profiler_overhead(summary: dict) -> list[Finding]:
    """The profiler's own time (capture start, export) in the iterations it ran in."""
    prof, total = 0.0, 0.0
    for r in q.ITERATIONS.rows(summary):
        total += r.get("dur_us") or 0.0
        prof += r.get("profiler_us") or 0.0
    if total <= 0 or prof / total < PROFILER_OVERHEAD_SHARE:
        return []
    return [_finding(
        "profiler_overhead", f"the profiler took {prof / total:.0%} of the iterations' time", prof / total,
        {"table": "timeline_iterations", "profiler_us": prof, "iterations_us": total},
        "fewer profiled steps, a lower profiler_level, no with_stack / record_shapes, or an export off the step",
        "the-advisor")]


RULES: tuple[Callable[[dict], list[Finding]], ...] = (
    straggler, comm_bound, host_bound, slow_link, slow_rank, generation_bound, profiler_overhead)


def findings(summary: dict, rules: Iterable[Callable[[dict], list[Finding]]] = RULES) -> list[Finding]:
    """Every rule's findings, largest impact first (a failing rule is a finding of its own kind: never raised)."""
    out: list[Finding] = []
    for rule in rules:
        try:
            out += rule(summary)
        except Exception as exc:   # one rule's bug never loses the others' findings
            out.append(_finding("advisor_error", f"rule {rule.__name__} failed: {type(exc).__name__}: {exc}", 0.0,
                                {}, "report this", "the-advisor"))
    return sorted(out, key=lambda f: (-f["impact"], f["id"], f["title"]))
