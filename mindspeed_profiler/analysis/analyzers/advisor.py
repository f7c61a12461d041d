"""The advisor: rules over the analysis' row models that say *why* the time went and *what to try*.

Each rule reads the rows of one or two questions (questions.py: the same rows analysis.db holds) and
returns findings; a finding is

    id        the rule's id (finding_rules.REGISTRY: each rule registers itself below with
              `@finding_rule`, its id and its row of docs/diagnosis.md's table)
    title     one line naming who and where ("actor rank 1 is the straggler of actor_update ...")
    impact    the share of the time at stake, 0..1: findings are ranked by it
    evidence  the numbers the rule used and where they came from (table, field)
    action    what to try, with the docs page that explains the number

Pure: `findings(summary)` over a summary.json dict; batch.py stores the list as summary["findings"]
and the renderers show it first. Every threshold is a named constant below and in
docs/diagnosis.md ("The advisor"), whose table of the rules is generated from the registry
(`python -m mindspeed_profiler.analysis.analyzers.advisor`); tests/test_advisor.py has a case that triggers
each rule and one that does not (tests/test_finding_rules.py checks each id has a test).
"""
from __future__ import annotations

from typing import Iterable

from mindspeed_profiler.core.formats import is_train_stage

from mindspeed_profiler.analysis.models import questions as q
from mindspeed_profiler.analysis.analyzers import rollout_rules as rollout
from mindspeed_profiler.analysis.analyzers import async_rl
from mindspeed_profiler.analysis.analyzers import auto_capture_rules as auto_rules
from mindspeed_profiler.analysis.analyzers import memory_rules as mem_rules
from mindspeed_profiler.analysis.analyzers.tracker_metrics import MFU_PREFIX, maxima, means
from mindspeed_profiler.analysis.models.finding_rules import REGISTRY, Check, Finding, finding_rule, markdown, named_check

STRAGGLER_MIN_SHARE = 0.10        # a rank's waits for the straggler, net of the straggler's for it: 10% of its wall
STRAGGLER_SHARED_HOST_SHARE = 0.25  # the same, when both are CPU ranks on one host: they time-share its cores, and
                                  # the OS alone makes one late (the balanced GRPO example on the 2-core dev box:
                                  # 1.7-13% over 6 runs, same ops and shapes, its matmuls ~30% slower)
COMM_BOUND_SHARE = 0.30           # exposed communication / busy device time
HOST_BOUND_SHARE = 0.30           # host wait / the capture's wall time
GENERATION_BOUND_SHARE = 0.50     # generation stages' share of the iteration
PROFILER_OVERHEAD_SHARE = 0.10    # profiler time (export, start) / iteration time
STRAGGLER_HOST_SHARE = 0.50      # a straggler's delay is its host's when its late launches explain half of it
GROUP_IDLE_SHARE = 0.50           # a worker group idle half of the iterations while another works
MEMORY_NEAR_CAPACITY = 0.90       # peak reserved (else allocated) / the device's memory
MEMORY_IMPACT_WEIGHT = 0.5        # a memory finding ranks at half its used share: a risk (OOM), not time spent
LATENCY_BOUND_SHARE = 0.05        # time in latency-bound (small-message) collectives / the capture's wall
LOW_MFU = 0.25                    # MFU of a training stage below a quarter of the device's peak
MAX_PER_RULE = 10                 # findings kept per rule (the worst): a 10,000-rank job's host_bound on every rank is
                                  # one message, not 10,000 (each rule's table has every row)
CONTROLLER_ROLES = ("driver",)    # the single controller waits on the worker groups by design: never "idle"
DOCS = "docs/diagnosis.md"


def _finding(rule: str, title: str, impact: float, evidence: dict, action: str, anchor: str) -> Finding:
    impact = float(impact)
    impact = 0.0 if impact != impact else max(0.0, min(1.0, impact))   # NaN (a 0/0 upstream) ranks last, not first
    return {"id": rule, "title": title, "impact": round(impact, 4), "evidence": evidence,
            "action": action, "docs": f"{DOCS}#{anchor}"}


def _who(role, rank) -> str:
    return f"{role} rank {rank}" if role else f"rank {rank}"


@finding_rule(
    "straggler",
    triggers=("the rank a rank costs most waited for it, net of the first rank's own waits for that one "
              "(`worst_victim_net_us`: two ranks late in turn cancel out), at least 10% of that rank's capture "
              "wall time; at least 25% when both are CPU ranks of one host (our profiler's capture meta: device"
              " `cpu`, the same host), because they time-share its cores and the OS alone makes one late: the "
              "balanced GRPO example (`./run main`, no straggler knob) on the 2-core dev box gave 1.7% to 13% "
              "over 6 runs (rank 0 the later one each time), with the same ops and shapes on both ranks and the"
              " later rank's matmuls ~30% slower (a deliberate difference from the 10% floor; the knob's "
              "straggler, `grpo.straggler_rank=1 grpo.straggler_ms=150`, costs rank 0 about 4 x 150 ms in an "
              "update of about 1 s: ~58%, found by tests/test_metrics_tracker.py)"),
    impact="that net wait / the victim's capture wall time",
    reads="`stragglers` (clocks aligned on the collective ends, above)")
def straggler(summary: dict) -> list[Finding]:
    """A rank the others wait for at the collectives (stragglers table, clocks aligned on the ends),
    net of its own waits for them: two ranks that are late in turn are no straggler."""
    caps = {(c.get("run_id"), c.get("role"), c.get("stage"), c.get("rank")): c for c in summary.get("captures") or []}
    out = Worst()
    for r in q.STRAGGLERS.rows(summary):
        victim, net = r.get("worst_victim_rank"), r.get("worst_victim_net_us") or 0.0
        job = (r.get("run_id"), r.get("role"), r.get("stage"))
        wall = (caps.get((*job, victim)) or {}).get("wall_us") or 0.0
        share = net / wall if wall > 0 else 0.0
        shared = _cpu_ranks_on_one_host(caps.get((*job, r.get("rank"))), caps.get((*job, victim)))
        if victim is None or share < (STRAGGLER_SHARED_HOST_SHARE if shared else STRAGGLER_MIN_SHARE):
            continue
        where = f" of {r['stage']}" if r.get("stage") else ""
        cause, action = _straggler_cause(r)
        out.append(_finding(
            "straggler", f"{_who(r.get('role'), r['rank'])} is the straggler{where}: {_who(r.get('role'), victim)} "
            f"waited {r['worst_victim_cost_us'] / 1e3:.1f} ms for it ({net / 1e3:.1f} ms more than the other way, "
            f"{share:.0%} of its time){cause}", share,
            {"table": "stragglers", "rank": r["rank"], "n_last": r["n_last"], "n_matched": r["n_matched"],
             "cost_to_others_us": r["cost_to_others_us"], "victim_rank": victim,
             "victim_cost_us": r["worst_victim_cost_us"], "victim_net_us": net, "victim_wall_us": wall,
             "late_launch_us": r.get("late_launch_us"), "source": r.get("source")},
            action, "stragglers"))
    return out


def _cpu_ranks_on_one_host(a: dict | None, b: dict | None) -> bool:
    """Both captures are CPU ranks (our profiler's meta: device "cpu") of the same host: they share its cores."""
    metas = [(c or {}).get("meta") or {} for c in (a, b)]
    hosts = {m.get("host") for m in metas}
    return all(m.get("device") == "cpu" for m in metas) and len(hosts) == 1 and None not in hosts


def _straggler_cause(r: dict) -> tuple[str, str]:
    """(title suffix, action) from where the straggler's delay comes from: its host launching the
    collectives late (late_launch_us, clocks aligned on the ends) or its device busy before them."""
    late, cost = r.get("late_launch_us"), r.get("cost_to_others_us") or 0.0
    balance = "balance the work across data-parallel ranks (sequence lengths, samples per rank)"
    if late is None or cost <= 0:
        host = str(r.get("source") or "").endswith("host calls")
        return ("; on the host (a CPU job)" if host else "", "look at what the straggler does before the collective "
                "(a longer compute, a late launch on the host, a data-loading stall); " + balance)
    if late >= STRAGGLER_HOST_SHARE * cost:
        return (f"; its host launched the collectives late ({late / cost:.0%} of the delay)",
                "the straggler's host is late to launch the collective: Python work, data loading, a "
                "synchronisation or logging before it on that rank (py-spy on it: profiler_config.system)")
    return (f"; launched in time, its device was busy before them ({1 - late / cost:.0%} of the delay)",
            "the straggler's device runs longer before the collective: more or longer sequences on that rank, "
            "a slower device; " + balance)


@finding_rule(
    "comm_bound",
    triggers="exposed communication is 30% or more of a capture's busy device time",
    impact="exposed communication / the capture's device window",
    reads="`breakdown`")
def comm_bound(summary: dict) -> list[Finding]:
    """A capture whose device time is mostly communication not hidden under compute."""
    out = Worst()
    for r in q.BREAKDOWN.rows(summary):
        busy, exposed = r.get("busy_us") or 0.0, r.get("communication_exposed_us") or 0.0
        if busy <= 0 or exposed / busy < COMM_BOUND_SHARE:
            continue
        window = r.get("window_us") or busy
        out.append(of=r, f=_finding(
            "comm_bound", f"{_who(r.get('role'), r.get('rank'))}{' in ' + r['stage'] if r.get('stage') else ''}: "
            f"{exposed / busy:.0%} of the device's busy time is communication not overlapped with compute",
            exposed / window, {"table": "breakdown", "path": r.get("path"), "busy_us": busy, "communication_exposed_us": exposed,
                               "window_us": window},
            "overlap communication with compute (bucketed gradient all-reduce, overlap_grad_reduce / "
            "overlap_param_gather), larger buckets for small collectives, or a cheaper parallel layout",
            "links"))
    return out


@finding_rule(
    "host_bound",
    triggers=("a device stream's host wait (idle time by cause, above) is 30% or more of its capture's wall "
              "time"),
    impact="host wait / wall",
    reads="`idle_causes`")
def host_bound(summary: dict) -> list[Finding]:
    """A device stream that waited for the host to launch its work much of the capture's time."""
    walls = {c.get("path"): c.get("wall_us") or 0.0 for c in summary.get("captures") or []}
    out = Worst()
    for r in q.IDLE_CAUSES.rows(summary):
        host, wall = r.get("host_wait_us") or 0.0, walls.get(r.get("path")) or 0.0
        if wall <= 0 or host / wall < HOST_BOUND_SHARE:
            continue
        out.append(of=r, f=_finding(
            "host_bound", f"{_who(r.get('role'), r.get('rank'))} stream {r.get('stream')}: the device waited for the host "
            f"{host / 1e3:.1f} ms ({host / wall:.0%} of the capture)", host / wall,
            {"table": "idle_causes", "path": r.get("path"), "stream": r.get("stream"), "host_wait_us": host,
             "idle_us": r.get("idle_us"), "wall_us": wall},
            "the host is too slow to keep the device fed: CUDA graphs / torch.compile, fewer small kernels, "
            "moving Python work (logging, .item(), data preparation) off the step", "idle-time-by-cause"))
    return out


@finding_rule(
    "slow_link",
    triggers="a link is flagged slow (Links, above)",
    impact="1 - its ratio to its transport's median",
    reads="`links`")
def slow_link(summary: dict) -> list[Finding]:
    """A link far below its transport's others (links table)."""
    out = Worst()
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


@finding_rule(
    "slow_rank",
    triggers="a row of `slow_ranks` is flagged (data-parallel imbalance: docs/analysis.md)",
    impact="1 - 1 / its ratio to the median",
    reads="`slow_ranks`")
def slow_rank(summary: dict) -> list[Finding]:
    """A rank of a stage well above the median of its group (slow_ranks table: data-parallel imbalance)."""
    out = Worst()
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


@finding_rule(
    "generation_bound",
    triggers=('generation stages (a name with "generat" or "rollout") take 50% or more of the iterations\' time'),
    impact="their share",
    reads="`timeline_stages`, `timeline_iterations`")
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


@finding_rule(
    "group_idle",
    triggers=("a worker group (role; not the driver, which waits on the groups by design) is idle 50% or more "
              "of the iterations (its workers' iteration time outside their stage spans, over their iterations'"
              " time), and another group is less idle: the one it waits on is the least idle group"),
    impact="its idle share x its workers / all workers (the share of the job's worker-time idle in it)",
    reads="`timeline_idle`, `timeline_iterations`")
def group_idle(summary: dict) -> list[Finding]:
    """A worker group (role) idle much of the iterations while another works (timeline: the
    iteration minus each worker's stage union, timeline_idle). A group's idle share is its
    workers' idle time over their iterations' time; the busiest group is the one it waits on."""
    dur = {r.get("iteration"): r.get("dur_us") or 0.0 for r in q.ITERATIONS.rows(summary)}
    idle: dict[str, float] = {}
    total: dict[str, float] = {}
    workers: dict[str, set] = {}
    for r in q.TIMELINE_IDLE.rows(summary):
        role = str(r.get("worker") or "").rsplit(":", 1)[0]
        if role in CONTROLLER_ROLES:
            continue
        idle[role] = idle.get(role, 0.0) + (r.get("idle_us") or 0.0)
        total[role] = total.get(role, 0.0) + (dur.get(r.get("iteration")) or 0.0)
        workers.setdefault(role, set()).add(r.get("worker"))
    share = {role: idle[role] / total[role] for role in idle if total[role] > 0}
    if len(share) < 2:
        return []
    busiest = min(share, key=lambda role: (share[role], role))
    n_all = sum(len(workers[role]) for role in share)
    out = Worst()
    for role, s in sorted(share.items()):
        if role == busiest or s < GROUP_IDLE_SHARE or s <= share[busiest]:
            continue
        n = len(workers[role])
        out.append(_finding(
            "group_idle", f"worker group {role} is idle {s:.0%} of the iterations while {busiest} works "
            f"({busiest} idle {share[busiest]:.0%})", s * n / n_all,
            {"table": "timeline_idle", "role": role, "idle_share": s, "workers": n, "busiest_role": busiest,
             "busiest_idle_share": share[busiest], "all_workers": n_all},
            "the group waits on another: colocate the groups on the same devices (a hybrid engine), overlap them "
            "(asynchronous rollout, one step off-policy), or give the idle group fewer devices", "the-advisor"))
    return out


def _tracker_workers(summary: dict) -> dict[tuple, list[dict]]:
    """(role, rank) -> the tracker rows of that worker."""
    out: dict[tuple, list[dict]] = {}
    for r in q.TRACKER_METRICS.rows(summary):
        out.setdefault((r.get("role"), r.get("rank")), []).append(r)
    return out


@finding_rule(
    "memory_near_capacity",
    triggers=("a device's peak reserved memory (else allocated) is 90% or more of its capacity: the tracker's "
              "`perf/max_memory_reserved_gb` / `perf/memory_capacity_gb` (docs/metrics.md), or a GPU capture's "
              "memory-record peak / the trace's `deviceProperties` `totalGlobalMem`"),
    impact=("0.5 x the used share (an out-of-memory error is a risk, not time spent: it ranks below a large "
            "time finding)"),
    reads="`tracker_metrics`, `memory_record_peaks` (`capacity_bytes`)")
def memory_near_capacity(summary: dict) -> list[Finding]:
    """A device whose peak reserved (else allocated) memory is close to its capacity: the tracker's
    perf/max_memory_reserved_gb over perf/memory_capacity_gb, or a GPU capture's memory records
    over the trace's deviceProperties."""
    out, staged = Worst(), mem_rules.stage_workers(summary)   # those: stage_near_capacity names the stage
    for (role, rank), rows in sorted(_tracker_workers(summary).items(), key=lambda kv: tuple(map(str, kv[0]))):
        if (role, rank) in staged:
            continue
        top = maxima(rows)
        used = top.get("perf/max_memory_reserved_gb", top.get("perf/max_memory_allocated_gb"))
        cap = top.get("perf/memory_capacity_gb")
        if used is None or not cap or used / cap < MEMORY_NEAR_CAPACITY:
            continue
        out.append(_memory_finding(_who(role, rank), used / cap, {"table": "tracker_metrics", "used_gb": used,
                                                                   "capacity_gb": cap}))
    for r in q.MEMORY_RECORD_PEAKS.rows(summary):
        used, cap = r.get("peak_reserved_bytes") or r.get("peak_allocated_bytes"), r.get("capacity_bytes")
        if not used or not cap or used / cap < MEMORY_NEAR_CAPACITY:
            continue
        out.append(of=r, f=_memory_finding(f"{_who(r.get('role'), r.get('rank'))} {r.get('device')}", used / cap,
                                   {"table": "memory_record_peaks", "path": r.get("path"), "used_bytes": used,
                                    "capacity_bytes": cap, "source": r.get("source")}))
    return out


def _memory_finding(who: str, share: float, evidence: dict) -> Finding:
    return _finding(
        "memory_near_capacity", f"{who}: peak memory {share:.0%} of the device's", share * MEMORY_IMPACT_WEIGHT,
        {**evidence, "used_share": share},
        "close to an out-of-memory error: activation recomputation, a smaller micro batch, offloading the optimizer "
        "or the reference model, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation",
        "peak-memory-from-the-memory-records")


@finding_rule(
    "latency_bound",
    triggers=("a capture spends 5% or more of its wall time in collectives flagged `latency_bound` (messages "
              "too small to use the link's bandwidth: Collective bandwidth, above), each timed call counted at "
              "the fastest call's time (`bytes_per_call / algbw_max_gbps`: waits for a late rank left out)"),
    impact="that time / the capture's wall time",
    reads="`collective_bandwidth`")
def latency_bound(summary: dict) -> list[Finding]:
    """A capture spending a share of its time in collectives too small to use the link's bandwidth
    (collective_bandwidth rows flagged latency_bound)."""
    walls = {c.get("path"): c.get("wall_us") or 0.0 for c in summary.get("captures") or []}
    per: dict = {}
    for r in q.COLLECTIVE_BANDWIDTH.rows(summary):
        floor = _fastest_calls_us(r)
        if r.get("latency_bound") and floor:
            p = per.setdefault(r.get("path"), {"role": r.get("role"), "rank": r.get("rank"), "stage": r.get("stage"),
                                               "path": r.get("path"), "us": 0.0, "calls": 0, "names": set()})
            p["us"] += floor
            p["calls"] += r.get("n_timed") or 0
            p["names"].add(str(r.get("collective")))
    out = Worst()
    for path, p in sorted(per.items(), key=lambda kv: str(kv[0])):
        wall = walls.get(path) or 0.0
        if wall <= 0 or p["us"] / wall < LATENCY_BOUND_SHARE:
            continue
        out.append(of=p, f=_finding(
            "latency_bound", f"{_who(p['role'], p['rank'])}{' in ' + p['stage'] if p.get('stage') else ''}: "
            f"{p['calls']} small collectives take {p['us'] / wall:.0%} of the capture", p["us"] / wall,
            {"table": "collective_bandwidth", "path": path, "latency_bound_us": p["us"], "calls": p["calls"],
             "collectives": sorted(p["names"]), "wall_us": wall},
            "many small messages pay the link's latency, not its bandwidth: bucket them (DDP bucket_cap_mb, "
            "Megatron's overlap_grad_reduce buckets), coalesce (all_reduce_coalesced), or fuse the small tensors",
            "collective-bandwidth"))
    return out


def _fastest_calls_us(r: dict) -> float:
    """The timed calls of a collective_bandwidth row as if each took the fastest one's time
    (bytes_per_call / algbw_max): a floor that leaves out the waits for a late rank, which inflate a
    call's time but are a straggler's cost, not the message's latency."""
    fastest, size, n = r.get("algbw_max_gbps"), r.get("bytes_per_call"), r.get("n_timed") or 0
    if not fastest or not size or n <= 0:
        return 0.0
    return n * size / (fastest * 1e3)   # bytes / (GB/s x 1e9) s = bytes / (GB/s x 1e3) us


@finding_rule(
    "low_mfu",
    triggers=('a training stage (a name with "update" or "train") has an MFU (the tracker\'s `perf/mfu/<stage>`,'
              " mean over iterations, then over the role's ranks) under 25% of the device's peak"),
    impact=("the iteration time the stage would save at 25%: stage share of the iteration x (1 - MFU / 0.25)"),
    reads="`tracker_metrics`")
def low_mfu(summary: dict) -> list[Finding]:
    """A training stage (its name has update / train) whose MFU (the tracker's perf/mfu/<stage>,
    mean over iterations and ranks) is below LOW_MFU; impact: the iteration time that stage would
    save at LOW_MFU."""
    acc: dict[tuple, list[tuple[float, float, float]]] = {}
    for (role, _rank), rows in _tracker_workers(summary).items():
        m = means(rows)
        for key, mfu in m.items():
            stage = key[len(MFU_PREFIX):] if key.startswith(MFU_PREFIX) else None
            if stage and is_train_stage(stage):
                acc.setdefault((role, stage), []).append(
                    (mfu, m.get(f"timing_s/{stage}") or 0.0, m.get("timing_s/iteration") or 0.0))
    out = Worst()
    for (role, stage), vals in sorted(acc.items(), key=lambda kv: tuple(map(str, kv[0]))):
        mfu = sum(v[0] for v in vals) / len(vals)
        t_stage, t_iter = sum(v[1] for v in vals) / len(vals), sum(v[2] for v in vals) / len(vals)
        if mfu >= LOW_MFU:
            continue
        share = t_stage / t_iter if t_iter > 0 else 0.0
        out.append(_finding(
            "low_mfu", f"{role} {stage}: MFU {mfu:.1%} of the device's peak (under {LOW_MFU:.0%})",
            share * (1.0 - mfu / LOW_MFU),
            {"table": "tracker_metrics", "role": role, "stage": stage, "mfu": mfu, "workers": len(vals),
             "stage_s": t_stage, "iteration_s": t_iter, "stage_share": share},
            "the update leaves the device's compute unused: larger micro batches or sequence packing, fused kernels "
            "(flash attention, fused optimizer), fewer host syncs; check the peak the MFU is measured against "
            "(metrics.peak_tflops)", "the-advisor"))
    return out


@finding_rule(
    "profiler_overhead",
    triggers=("the profiler's own time (capture start and export on the timeline) is 10% or more of the "
              "iterations' time"),
    impact="its share",
    reads="`timeline_iterations`")
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


# the registered rules, in registration order (a rule of another module, registered later, runs too)
# the rollout's rules (per-sample records): their logic and thresholds in rollout_rules.py
@finding_rule("long_tail_generation", **rollout.DOCS["long_tail_generation"])
def long_tail_generation(summary: dict) -> list[Finding]:
    return [_finding(*f) for f in rollout.long_tail_findings(summary)]


@finding_rule("truncation", **rollout.DOCS["truncation"])
def truncation(summary: dict) -> list[Finding]:
    return [_finding(*f) for f in rollout.truncation_findings(summary)]


@finding_rule("engine_queueing", **rollout.DOCS["engine_queueing"])
def engine_queueing(summary: dict) -> list[Finding]:
    return [_finding(*f) for f in rollout.queueing_findings(summary)]


# asynchronous RL's rules (the tracker's async/* keys): their logic, thresholds and docs in async_rl.py
ASYNC_RULES = tuple(finding_rule(i, **async_rl.DOCS[i])(named_check(i, async_rl.CHECKS[i], _finding))
                    for i in async_rl.CHECKS)
finding_rule(auto_rules.RULE, **auto_rules.DOCS[auto_rules.RULE])(auto_rules.check(_finding))   # integrated.auto_capture's
# memory's rules (issue 47: out-of-memory records, the host watermark, the per-stage peaks): memory_rules.py
MEMORY_RULES = tuple(finding_rule(i, **mem_rules.DOCS[i])(named_check(i, mem_rules.CHECKS[i], _finding))
                     for i in mem_rules.CHECKS)


RULES: tuple[Check, ...] = tuple(r.check for r in REGISTRY.values())


def findings(summary: dict, rules: Iterable[Check] | None = None) -> list[Finding]:
    """Every rule's findings (`rules`: default every registered one), largest impact first (a
    failing rule is a finding of its own kind: never raised)."""
    if rules is None:
        rules = [r.check for r in REGISTRY.values()]
    out = Worst()
    for rule in rules:
        try:
            out.merge(_in_captures(rule(summary), summary))
        except Exception as exc:   # one rule's bug never loses the others' findings
            out.append(_finding("advisor_error", f"rule {rule.__name__} failed: {type(exc).__name__}: {exc}", 0.0,
                                {}, "report this", "the-advisor"))
    return _at_most_per_rule(sorted(out, key=_rank_key), MAX_PER_RULE, out.counts)


def _rank_key(f: Finding) -> tuple:
    return (-f["impact"], f["id"], f["title"])


class Worst(list):
    """A rule's findings as they come, holding at most `keep` per rule id (the worst, in the order
    findings() ranks them) and counting all: a rule that fires on every one of 10,000 ranks does
    not hold 60,000 findings at once (~50 MB on the driver) to keep 10.

    A finding about one capture (`append(f, of=row)`: the row's role, stage and path) is grouped
    with the rule's others of the same role and stage: one finding per subject, the worst one's,
    with the captures it was found in (`groups`); findings() says "in N of M captures"."""

    def __init__(self, keep: int | None = None):
        super().__init__()
        self.keep = MAX_PER_RULE if keep is None else keep
        self.counts: dict[str, int] = {}
        self.groups: dict[tuple, tuple[Finding, set]] = {}   # (id, role, stage) -> (the worst, its captures' paths)
        self._limit = 4 * self.keep + 16

    def append(self, f: Finding, of: dict | None = None) -> None:
        if of is not None:
            key = (f["id"], of.get("role"), of.get("stage"))
            group = self.groups.get(key)
            if group is not None:
                group[1].add(of.get("path"))
                if _rank_key(f) >= _rank_key(group[0]):
                    return   # the subject's worst stays
                self.groups[key] = (f, group[1])
                self._replace(group[0], f)
                return
            self.groups[key] = (f, {of.get("path")})
        self.counts[f["id"]] = self.counts.get(f["id"], 0) + 1
        super().append(f)
        if len(self) > self._limit:
            self._trim()

    def _replace(self, old: Finding, new: Finding) -> None:
        """`new` in the place of `old` (appended where a trim already dropped `old`)."""
        for i, x in enumerate(self):
            if x is old:
                self[i] = new
                return
        super().append(new)
        if len(self) > self._limit:
            self._trim()

    def merge(self, found: Iterable[Finding]) -> None:
        """Another rule's findings (a Worst: with the counts of those it dropped)."""
        counts = getattr(found, "counts", None)
        for f in found:
            super().append(f)
            if counts is None:
                self.counts[f["id"]] = self.counts.get(f["id"], 0) + 1
        for k, n in (counts or {}).items():
            self.counts[k] = self.counts.get(k, 0) + n
        self._trim()

    def _trim(self) -> None:
        seen: dict[str, int] = {}
        kept = []
        for f in sorted(self, key=_rank_key):   # stable: equal keys keep their order, as in findings()
            seen[f["id"]] = seen.get(f["id"], 0) + 1
            if seen[f["id"]] <= self.keep:
                kept.append(f)
        self[:] = kept
        self._limit = max(4 * self.keep + 16, 2 * len(self))


def _in_captures(found: Iterable[Finding], summary: dict) -> Iterable[Finding]:
    """A rule's findings, each grouped one (Worst.groups) saying in how many of its role and stage's
    captures the rule found it ("in 2 of 2 captures of actor_generate"), where there are several."""
    groups = getattr(found, "groups", None)
    if not groups:
        return found
    of: dict[tuple, int] = {}
    for c in summary.get("captures") or []:
        if isinstance(c, dict) and c.get("status") == "ok":
            of[(c.get("role"), c.get("stage"))] = of.get((c.get("role"), c.get("stage")), 0) + 1
    said: dict[int, Finding] = {}
    for (_rule, role, stage), (f, paths) in groups.items():
        n = len(paths)
        m = max(n, of.get((role, stage), 0))
        if m > 1:
            where = f" of {stage}" if stage else ""
            said[id(f)] = {**f, "title": f"{f['title']} (in {n} of {m} captures{where}; the worst shown)",
                           "evidence": {**f["evidence"], "n_captures": n, "of_captures": m}}
    found[:] = [said.get(id(f), f) for f in found]   # type: ignore[index]
    return found


def _at_most_per_rule(ranked: list[Finding], keep: int, total: dict[str, int] | None = None) -> list[Finding]:
    """The `keep` worst findings of each rule; the worst of a trimmed rule says how many there were
    (evidence n_like_this; `total`: the counts per rule where `ranked` is already trimmed) and
    where all of them are (its table)."""
    if total is None:
        total = {}
        for f in ranked:
            total[f["id"]] = total.get(f["id"], 0) + 1
    out, seen = [], {}
    for f in ranked:
        n = seen[f["id"]] = seen.get(f["id"], 0) + 1
        if n > keep:
            continue
        if n == 1 and total[f["id"]] > keep:
            table = f["evidence"].get("table")
            f = {**f, "title": f"{f['title']} (the worst of {total[f['id']]} {f['id']} findings; the {keep} worst are "
                 f"listed{', all rows in the ' + table + ' table' if table else ''})",
                 "evidence": {**f["evidence"], "n_like_this": total[f["id"]]}}
        out.append(f)
    return out


if __name__ == "__main__":
    print(markdown())
