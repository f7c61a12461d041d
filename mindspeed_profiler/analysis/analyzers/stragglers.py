"""Stragglers of a multi-rank job, from its ranks' collective kernels: HolisticTraceAnalysis's
(HTA 0.5.0) potential stragglers, `TraceAnalysis.get_potential_stragglers()` with its default
`find_stragglers_with_late_start_comm_kernels` (hta/analyzers/straggler.py), and, beyond HTA, who
arrived last at each collective and what it cost the others (docs/diagnosis.md, "Stragglers";
tests/test_stragglers.py compares with HTA on real traces).

Per rank (`rank_collectives`): its device collective kernels (classify's `comm` mask, i.e.
communication.py's nccl / rccl / hccl / hcom / gloo family names and Ascend's HCCL lanes) in trace
order, each with the profiler step HTA gives it (the ProfilerStep#N range that holds the start of
its launch call, same correlation id; -1 without one), and per step the first start and last end
of every event HTA assigns to it (a host event by its own start): HTA's normalisation needs them.
As HTA's loader (include_last_profiler_step=False, with two ProfilerStep names or more) drops
everything from the last step's start on, each kernel and extent also says whether it survives that.

HTA's metric (`potential_stragglers`): over the selected steps, t_min is the first start and
mean_iter the span to the last end divided by the number of steps. The kernels named ncclKernel*
(HTA's own test; NCCL 2.19's ncclDevKernel* is not one) on a stream > 0, in a step > 0, at least
1% of mean_iter long; per (rank, stream, step, name) the last in trace order. Their duration /
mean_iter has a standard deviation across ranks per (stream, step, name); the (stream, name) with the
largest mean of it over the steps is the metric kernel, and each rank's metric is its
normalized start time (start - t_min) / mean_iter. Per step, the ranks whose metric is at least
the k-th largest are flagged; the k ranks flagged most often (pandas' descending sort order for
ties) are HTA's potential stragglers. HTA compares raw start times across ranks: clock skew
counts as lateness.

Beyond HTA (`matched_collectives`): the same collective on several ranks is matched by (step,
name, stream, its ordinal among those in its step, by start). A collective ends together on every
rank, so each rank's clock is aligned on the kernel's end: a rank arrived `dur` before it, the one
with the shortest kernel arrived last, and every other rank waited for it its own duration minus
the last one's.

Ascend (`ascend_matched`, `slow_rank_vote`; docs/diagnosis.md, "On Ascend"): a capture's
`communication_ops` holds its collective ops from communication.json (else analysis.db's
CommAnalyzerTime, else the db export's COMMUNICATION_OP). Ops are matched by (step, group, op name,
ordinal); torch_npu's Wait Time is the time a rank waited in the op for the others, so the rank with
the smallest arrived last and each other one waited for it its wait minus that one's (p2p ops left
out: their wait is the pipeline's dependency). Beside it, msprof-analyze 26.2.0's slow_rank vote as
its recipe computes it, from the same COMMUNICATION_OP rows on db exports (slowAffectCount).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mindspeed_profiler.analysis.models.rows import Field, RowModel, rank_number
from .classify import ClassifiedTrace
from .grouping import distinct, median, member, run_starts
from .idle_causes import last_by_corr, stream_number
from .intervals import last_holding
from .slow_rank_vote import slow_rank_vote

HTA_COMM_PREFIX = "ncclKernel"        # HTA: sym_table names that startswith("ncclKernel")
MIN_NORMALIZED_DURATION = 0.01        # HTA's min_normalized_duration: kernels under 1% of an iteration are noise
NUM_CANDIDATES = 2                    # HTA's num_candidates


@dataclass
class RankCollectives:
    """One rank's collective kernels and the step extents HTA's metric is normalised by. Times are
    microseconds relative to `t0_us` (Events.t0_us), so ranks keep their sub-us digits."""

    rank: int
    t0_us: int
    kernels: list[dict]                          # name, stream, lane, ts, end, dur, step, kept, key (tuple or list)
    extents: dict[int, tuple[float, float]]      # step -> (first start, last end) of its events
    kept_extents: dict[int, tuple[float, float]]  # the same after HTA's last-step filter
    step_rows: frozenset[int]                    # steps with a ProfilerStep#N range
    kept_step_rows: frozenset[int]               # those HTA's last-step filter keeps
    step_names: frozenset[str]                   # event names containing "ProfilerStep"


def _extents(ts: np.ndarray, end: np.ndarray, it: np.ndarray, sel: np.ndarray) -> dict[int, tuple[float, float]]:
    """step -> (first start, last end) of the rows in `sel` with that step, by step (one sort, not
    a pass over every row per step: a capture may hold hundreds of steps)."""
    k = np.flatnonzero(sel & (it >= 0))
    if not len(k):
        return {}
    k = k[np.argsort(it[k], kind="stable")]
    first = run_starts(it[k])
    return {s: (a, b) for s, a, b in zip(it[k][first].tolist(), np.minimum.reduceat(ts[k], first).tolist(),
                                         np.maximum.reduceat(end[k], first).tolist())}


def _host_calls(ct: ClassifiedTrace, idx: np.ndarray) -> list[int]:
    """Of the host collective events `idx`, the ones that do the work: gloo's own (`gloo:*`, run on
    its worker threads, ending together on every rank) where there are any, since c10d::allreduce_
    only enqueues the work and returns; else the outermost per thread (one call counted once)."""
    ev = ct.ev
    gloo = [i for i in idx.tolist() if str(ev.names[int(ev.name[i])]).startswith("gloo:")]
    return gloo if gloo else _outermost(ct, idx)


def _outermost(ct: ClassifiedTrace, idx: np.ndarray) -> list[int]:
    """Of the host collective calls `idx`, those no other one of them encloses on the same thread
    (c10d::allreduce_ holds record_param_comms: one call, counted once)."""
    ev, out, open_end = ct.ev, [], {}
    for i in sorted(idx.tolist(), key=lambda i: (ct.ts[i], -ct.dur[i])):
        key = (int(ev.pid[i]), int(ev.tid[i]))
        if ct.ts[i] < open_end.get(key, -np.inf):
            continue
        open_end[key] = ct.end[i]
        out.append(i)
    return out


def rank_collectives(ct: ClassifiedTrace, rank: int) -> RankCollectives:
    """The rank's collective kernels and step extents, as HTA's parser assigns them (module doc)."""
    ev, m = ct.ev, ct.m
    ts, end = ct.ts, ct.end
    # HTA's data frame drops rows without a category and the Kineto "Trace" row
    counted = ev.lookup(ev.cats, lambda c: c is not None and c != "Trace")[ev.cat]
    dev, host = counted & m["device"], counted & ~m["device"]
    it = np.full(len(ev), -1, np.int64)
    steps = np.flatnonzero(host & (ct.step_num[ev.name] >= 0))
    if len(steps):   # in trace order: where two ranges overlap the later one wins, as HTA's loop
        h = np.flatnonzero(host)
        k = last_holding(ts[steps], end[steps], ts[h])
        it[h] = np.where(k >= 0, ct.step_num[ev.name[steps[np.maximum(k, 0)]]], -1)
    d = np.flatnonzero(dev)
    d_corr = ev.corr[d]
    hc = np.flatnonzero(host & (ev.corr >= 0))
    launch_step = last_by_corr(ev.corr[hc], it[hc].astype(np.float64), d_corr)   # HTA keeps the last
    it[d] = np.where(np.isnan(launch_step) | (d_corr < 0), -1, np.nan_to_num(launch_step, nan=-1)).astype(np.int64)

    # HTA's _filter_irrelevant_gpu_kernels (two ProfilerStep names or more over all ranks, the
    # last step not included): host rows from the last ProfilerStep's start on go, and so do
    # the device rows no remaining host row shares a correlation id with
    named_step = ev.lookup(ev.names, lambda n: "ProfilerStep" in str(n))[ev.name]
    last_start = ts[host & named_step].max() if (host & named_step).any() else np.nan
    kept = np.zeros(len(ev), bool)
    kept[host] = ts[host] < last_start    # NaN (no ProfilerStep on this rank): HTA keeps nothing
    kept[d] = (d_corr >= 0) & member(d_corr, distinct(ev.corr[kept & host & (ev.corr >= 0)]))

    kernels: list[dict] = []
    device_comm = np.flatnonzero(m["comm"] & counted)
    rt = np.flatnonzero(m["runtime"] & (ev.corr >= 0))
    launch = last_by_corr(ev.corr[rt], ts[rt], ev.corr[device_comm])   # its launch call's start (NaN: none)
    for i, la in zip(device_comm, launch):
        tid = ev.tids[int(ev.tid[i])]
        s = stream_number(tid)
        kernels.append({"name": str(ev.names[int(ev.name[i])]), "stream": s, "lane": s if s is not None else str(tid),
                        "ts": float(ts[i]), "end": float(end[i]), "dur": float(ct.dur[i]), "step": int(it[i]),
                        "kept": bool(kept[i]), "launch": None if np.isnan(la) else float(la)})
    if not len(device_comm):   # a CPU job: the host's collective calls (module doc)
        for i in _host_calls(ct, np.flatnonzero(m["host_comm"] & counted)):
            # thread ids are a process's own (and gloo's work alternates between its threads): one lane
            kernels.append({"name": str(ev.names[int(ev.name[i])]), "stream": None,
                            "lane": "host", "ts": float(ts[i]), "end": float(end[i]),
                            "dur": float(ct.dur[i]), "step": int(it[i]), "kept": bool(kept[i])})
    # the matching key: (step, name, lane, ordinal by start within them)
    seen: dict[tuple, int] = {}
    for k in sorted(kernels, key=lambda k: k["ts"]):
        g = (k["step"], k["name"], k["lane"])
        k["key"] = (*g, seen.get(g, 0))
        seen[g] = seen.get(g, 0) + 1
    names_used = {ev.names[int(x)] for x in distinct(ev.name[counted])}
    return RankCollectives(
        rank=int(rank), t0_us=int(ev.t0_us), kernels=kernels,
        extents=_extents(ts, end, it, counted), kept_extents=_extents(ts, end, it, counted & kept),
        step_rows=frozenset(int(ct.step_num[ev.name[i]]) for i in steps),
        kept_step_rows=frozenset(int(ct.step_num[ev.name[i]]) for i in steps if kept[i]),
        step_names=frozenset(str(n) for n in names_used if "ProfilerStep" in str(n)))


def _pandas_desc_order(values: np.ndarray) -> np.ndarray:
    """The order of pandas' Series.sort_values(ascending=False) (its nargsort: a quicksort of the
    reversed array, reversed), so that ties fall where HTA's top-k puts them."""
    idx = np.arange(len(values))[::-1]
    return idx[values[::-1].argsort(kind="quicksort")][::-1]


def potential_stragglers(per_rank: dict[int, RankCollectives], num_candidates: int = NUM_CANDIDATES,
                         profiler_steps: list[int] | None = None, include_last_step: bool = False,
                         min_normalized_duration: float = MIN_NORMALIZED_DURATION,
                         hta_names: bool = True) -> dict | None:
    """HTA's potential stragglers (module doc) with its defaults; `include_last_step` is
    TraceAnalysis' include_last_profiler_step, `hta_names=False` takes every collective kernel
    instead of ncclKernel* only. Returns {stragglers: HTA's list, counts: {rank: steps flagged},
    metric: {rank: {step: normalized start}}, stream, name, steps, t_min_us (relative to the
    smallest t0_us), mean_iter_us, min_duration_us}; None where HTA raises (no step selected, no
    kernel passes, or no (stream, name) on two ranks)."""
    if not per_rank:
        return None
    k_top = max(int(num_candidates), 1)
    names = frozenset().union(*(rc.step_names for rc in per_rank.values()))
    # HTA's filter compares shifted starts with unshifted ends when the last step is included: it
    # then keeps every event a step holds, so only the "not included" case drops anything
    filtered = len(names) >= 2 and not include_last_step
    available = set().union(*((rc.kept_step_rows if filtered else rc.step_rows) for rc in per_rank.values()))
    selected = sorted(available if profiler_steps is None else available & set(profiler_steps))
    if not selected:
        return None
    # one time base for all ranks (HTA subtracts the smallest start of all): whole microseconds apart
    base = min(rc.t0_us for rc in per_rank.values())
    shift = {r: float(rc.t0_us - base) for r, rc in per_rank.items()}
    ext = {r: {s: v for s, v in (rc.kept_extents if filtered else rc.extents).items() if s in selected}
           for r, rc in per_rank.items()}
    spans = [(a + shift[r], b + shift[r]) for r, e in ext.items() for a, b in e.values()]
    if not spans:
        return None
    n_iters = len({s for e in ext.values() for s in e})
    t_min = min(a for a, _ in spans)
    mean_iter = (max(b for _, b in spans) - t_min) / n_iters
    min_dur = mean_iter * min_normalized_duration

    def passes(k: dict) -> bool:
        return (not (filtered and not k["kept"]) and k["step"] in selected and k["step"] > 0
                and k["stream"] is not None and k["stream"] > 0 and k["dur"] >= min_dur
                and (not hta_names or k["name"].startswith(HTA_COMM_PREFIX)))

    last: dict[tuple, dict] = {}     # (rank, stream, step, name) -> the last kernel in trace order
    for r, rc in per_rank.items():
        for k in filter(passes, rc.kernels):
            last[(r, k["stream"], k["step"], k["name"])] = k
    durs: dict[tuple, dict[int, list[float]]] = {}
    for (r, s, step, name), k in last.items():
        durs.setdefault((s, name), {}).setdefault(step, []).append(k["dur"] / mean_iter)
    spread = {}
    for sn, by_step in durs.items():
        # pandas' std (ddof 1) per step, NaN on one rank; their mean skips the NaN
        std = [float(np.std(v, ddof=1)) for v in by_step.values() if len(v) > 1]
        if std:
            spread[sn] = float(np.mean(std))
    if not spread:
        return None
    # HTA's idxmax breaks a tie by symbol id, which follows a set's order: we take the smallest (stream, name)
    stream, name = min(spread, key=lambda sn: (-spread[sn], sn))
    metric: dict[int, dict[int, float]] = {}
    for (r, s, step, nm), k in sorted(last.items(), key=lambda x: (x[0][0], x[0][2])):
        if (s, nm) == (stream, name):
            metric.setdefault(r, {})[step] = (k["ts"] + shift[r] - t_min) / mean_iter
    ranks = sorted(metric)
    counts = dict.fromkeys(ranks, 0)
    for step in sorted({s for v in metric.values() for s in v}):
        vals = {r: v[step] for r, v in metric.items() if step in v}
        ordered = sorted(vals.values(), reverse=True)
        threshold = ordered[min(k_top, len(ordered)) - 1]   # HTA raises IndexError with fewer ranks than k
        for r, v in vals.items():
            counts[r] += int(v >= threshold)
    c = np.array([counts[r] for r in ranks], dtype=np.int64)
    top = [ranks[i] for i in _pandas_desc_order(c)[:k_top]]
    return {"stragglers": top, "counts": counts, "metric": metric, "stream": stream, "name": name,
            "steps": selected, "t_min_us": t_min, "mean_iter_us": mean_iter, "min_duration_us": min_dur}


def matched_collectives(per_rank: dict[int, RankCollectives]) -> list[dict]:
    """Every collective found on two ranks or more (module doc), by key: its ranks, the rank that
    arrived last (None when all arrived together), each rank's wait for it and their sum."""
    by_key: dict[tuple, dict[int, dict]] = {}
    for r, rc in per_rank.items():
        for k in rc.kernels:
            by_key.setdefault(tuple(k["key"]), {})[r] = k   # a list where read back from summary.json
    out = []
    for key, ks in sorted(by_key.items(), key=lambda x: (x[0][0], str(x[0][1]), str(x[0][2]), x[0][3])):
        if len(ks) < 2:
            continue
        # clocks aligned on the common end: a rank's start is -dur; the latest start arrived last
        start = {r: -k["dur"] for r, k in ks.items()}
        latest = max(start.values())
        wait = {r: latest - s for r, s in sorted(start.items())}
        late = min(r for r, s in start.items() if s == latest)   # a tie: the lowest rank
        last = late if any(w > 0 for w in wait.values()) else None
        out.append(STRAGGLER_COLLECTIVES.row(step=key[0], name=key[1], stream=key[2], ordinal=key[3], ranks=sorted(ks),
                                             n_ranks=len(ks), last_rank=last, wait_us=wait, max_wait_us=max(wait.values()),
                                             cost_us=sum(wait.values()),
                                             late_launch_share=late_launch_share(ks, wait, last) if last is not None else None))
    return out


def late_launch_share(ks: dict[int, dict], wait: dict[int, float], last: int) -> float | None:
    """How much of the last rank's lateness its host explains: its launch call, with the clocks
    aligned on the kernel's end, came that much later than the others' (median over them), as a
    share 0..1 of its lateness (the median of their waits). The rest: the kernel was launched in
    time but started late, the device busy with work before it. None where a launch is unknown
    (a CPU job's host calls: the delay is the host's anyway)."""
    if any(k.get("launch") is None for k in ks.values()):
        return None
    aligned = {r: k["launch"] - k["end"] for r, k in ks.items()}
    others = [r for r in ks if r != last and wait[r] > 0]
    if not others:
        return None
    late_by = aligned[last] - median([aligned[r] for r in others])
    return float(min(1.0, max(0.0, late_by / median([wait[r] for r in others]))))


def straggler_costs(instances: list[dict]) -> dict[int, dict]:
    """Per rank over the matched collectives: n_matched, n_last (arrived last, someone waited),
    cost_to_others_us (the others' waits for it), worst_victim_rank / worst_victim_cost_us (the
    rank it cost most; the lowest on a tie), worst_victim_net_us (those waits minus its own waits
    for that rank), waited_us (its own waits for the others)."""
    per: dict[int, dict] = {}
    victims: dict[int, dict[int, float]] = {}
    for c in instances:
        for r in c["ranks"]:
            p = per.setdefault(r, {"n_matched": 0, "n_last": 0, "cost_to_others_us": 0.0, "waited_us": 0.0,
                                   "late_launch_us": None})
            p["n_matched"] += 1
            p["waited_us"] += c["wait_us"][r]
        late = c["last_rank"]
        if late is None:
            continue
        per[late]["n_last"] += 1
        per[late]["cost_to_others_us"] += c["cost_us"]
        if c.get("late_launch_share") is not None:   # the part of this cost its host's late launch explains
            per[late]["late_launch_us"] = (per[late]["late_launch_us"] or 0.0) + c["cost_us"] * c["late_launch_share"]
        v = victims.setdefault(late, {})
        for r, w in c["wait_us"].items():
            if r != late:
                v[r] = v.get(r, 0.0) + w
    for r, p in per.items():
        v = victims.get(r) or {}
        worst = min(v, key=lambda x: (-v[x], x)) if v else None
        p["worst_victim_rank"] = worst
        p["worst_victim_cost_us"] = v[worst] if worst is not None else None
        # what it cost that rank beyond what that rank cost it: two ranks that jitter in turn cancel out
        p["worst_victim_net_us"] = v[worst] - (victims.get(worst) or {}).get(r, 0.0) if worst is not None else None
    return per


def straggler_rows(per_rank: dict[int, RankCollectives], hta: dict | None = None,
                   instances: list[dict] | None = None, source: str = "kineto") -> list[dict]:
    """One STRAGGLERS row per rank, by rank: HTA's metric and verdict (`hta`: potential_stragglers'
    result, None where it has none) beside the matched collectives' costs."""
    instances = matched_collectives(per_rank) if instances is None else instances
    costs = straggler_costs(instances)
    flagged = set(hta["stragglers"]) if hta else set()
    rows = []
    for r in sorted(per_rank):
        m = (hta or {}).get("metric", {}).get(r)
        c = costs.get(r, {})
        rows.append(STRAGGLERS.row(rank=r, metric_ratio=float(np.mean(list(m.values()))) if m else None,
                                   n_flagged=(hta or {}).get("counts", {}).get(r), is_potential_straggler=r in flagged,
                                   n_collectives=len(per_rank[r].kernels), n_matched=c.get("n_matched", 0),
                                   n_last=c.get("n_last", 0), cost_to_others_us=c.get("cost_to_others_us", 0.0),
                                   worst_victim_rank=c.get("worst_victim_rank"),
                                   worst_victim_cost_us=c.get("worst_victim_cost_us"),
                                   worst_victim_net_us=c.get("worst_victim_net_us"),
                                   waited_us=c.get("waited_us", 0.0), late_launch_us=c.get("late_launch_us"),
                                   source=source))
    return rows


# -- the per-capture block (summary.json captures[*].collective_kernels) and the run's tables

MAX_KERNELS = 50_000   # per capture: a bound on summary.json (a longer trace is cut, and says so)


def collectives_block(ct: ClassifiedTrace) -> dict | None:
    """A capture's `collective_kernels`: rank_collectives() as JSON (the rank is the capture's,
    known to the run); None without collective kernels."""
    rc = rank_collectives(ct, 0)
    return block_of(rc) if rc.kernels else None


def block_of(rc: RankCollectives) -> dict:
    """A RankCollectives as JSON (lists for tuples and sets; at most MAX_KERNELS kernels)."""
    kernels = [{**k, "key": list(k["key"])} for k in rc.kernels[:MAX_KERNELS]]
    return {"t0_us": rc.t0_us, "kernels": kernels, "truncated": len(rc.kernels) > MAX_KERNELS,
            "extents": [[s, a, b] for s, (a, b) in sorted(rc.extents.items())],
            "kept_extents": [[s, a, b] for s, (a, b) in sorted(rc.kept_extents.items())],
            "step_rows": sorted(rc.step_rows), "kept_step_rows": sorted(rc.kept_step_rows),
            "step_names": sorted(rc.step_names)}


def from_block(rank: int, block: dict) -> RankCollectives:
    """collectives_block() read back (summary.json) as the rank's RankCollectives."""
    return RankCollectives(
        rank=int(rank), t0_us=int(block["t0_us"]),
        kernels=block["kernels"],   # the record's own dicts, not copies (10,000 ranks: ~60 MB less at once)
        extents={int(s): (float(a), float(b)) for s, a, b in block["extents"]},
        kept_extents={int(s): (float(a), float(b)) for s, a, b in block["kept_extents"]},
        step_rows=frozenset(int(x) for x in block["step_rows"]),
        kept_step_rows=frozenset(int(x) for x in block["kept_step_rows"]),
        step_names=frozenset(str(x) for x in block["step_names"]))


def _jobs(captures: list[dict]) -> dict[tuple, dict[int, RankCollectives]]:
    """The multi-rank jobs of a run: captures of one (run, role, stage) with collective kernels,
    one per rank (the first by path where a rank has several)."""
    jobs: dict[tuple, dict[int, RankCollectives]] = {}
    for c in sorted(captures, key=lambda c: str(c.get("path"))):
        block, rank = c.get("collective_kernels"), rank_number(c.get("rank"))
        if c.get("status") != "ok" or not isinstance(block, dict) or rank is None:
            continue
        try:
            rc = from_block(rank, block)
        except (KeyError, TypeError, ValueError):   # an older or damaged summary: that capture is left out
            continue
        jobs.setdefault((c.get("run_id"), c.get("role"), c.get("stage")), {}).setdefault(rank, rc)
    return {k: v for k, v in jobs.items() if len(v) >= 2}


def straggler_tables(captures: list[dict]) -> tuple[list[dict], list[dict]]:
    """(STRAGGLERS rows, STRAGGLER_COLLECTIVES rows) of every multi-rank job among `captures`: an
    Ascend job (captures with `communication_ops`) from its wait times, any other from its kernels."""
    ranks, matched = [], []
    ascend = _ascend_jobs(captures)
    # an Ascend job's trace_view.json also gives Kineto rows (its host hcom calls): its wait times say more
    kineto = {k: v for k, v in _jobs(captures).items() if k not in ascend}
    for job in sorted({*ascend, *kineto}, key=lambda k: tuple(map(str, k))):
        ident = {"run_id": job[0], "role": job[1], "stage": job[2]}
        if job in ascend:
            per_rank = ascend[job]
            instances = ascend_matched(per_rank)
            rows = ascend_straggler_rows(per_rank, instances)
        else:
            per_rank = kineto[job]
            instances = matched_collectives(per_rank)
            host = all(k["lane"] == "host" for rc in per_rank.values() for k in rc.kernels)
            rows = straggler_rows(per_rank, potential_stragglers(per_rank), instances,
                                  source="kineto host calls" if host else "kineto")
        ranks += [{**ident, **r} for r in rows]
        matched += [{**ident, **{k: v for k, v in c.items() if k not in ("ranks", "wait_us", "measured")}}
                    for c in instances]
    return ranks, matched


# -- Ascend: the collectives' wait times (communication.json) and msprof-analyze's slow_rank vote

MAX_COMM_OPS = 20_000   # per capture and list: a bound on summary.json (a longer capture is cut, and says so)
OP_COLUMNS = ("step", "type", "group", "op", "start_us", "elapse_us", "wait_us", "transit_us", "sync_us")
VOTE_COLUMNS = ("group", "op", "start", "elapse_us")
ASCEND_SOURCE = "ascend communication"                 # costs from torch_npu's Wait Time
ASCEND_ELAPSE_SOURCE = "ascend communication elapse"   # no Wait Time (a level-0 db export): ends aligned

def ascend_ops_block(rows: list[dict], source: str, vote_rows: list[dict] | None = None,
                     vote_source: str | None = None) -> dict | None:
    """A capture's `communication_ops`: its collective ops (parsing/ascend_comm.py's collective_rows
    shape: step, type, group, op, start_us, elapse_us, wait_us (None: not measured), transit_us, sync_us)
    as lists of OP_COLUMNS, and the slow_rank recipe's input where the db export has it
    (comm_ops_from_profiler_db: group, op, start_ns, elapse_us) as VOTE_COLUMNS; None without ops."""
    if not rows and not vote_rows:
        return None
    ops = [[r.get(c) for c in OP_COLUMNS] for r in rows[:MAX_COMM_OPS]]
    vote = [[r["group"], r["op"], r["start_ns"], r["elapse_us"]] for r in (vote_rows or [])[:MAX_COMM_OPS]]
    return {"source": source, "ops": ops, "vote_source": vote_source if vote_rows else None,
            "vote_ops": vote if vote_rows else None,
            "truncated": len(rows) > MAX_COMM_OPS or len(vote_rows or []) > MAX_COMM_OPS}


def _op_rows(block: dict) -> list[dict]:
    return [dict(zip(OP_COLUMNS, row)) for row in block.get("ops") or []]


def is_p2p(row: dict) -> bool:
    """A point-to-point op (communication.json's "p2p" type; by its name where the type is unknown):
    its wait is the pipeline's data dependency (the previous stage still computing), not lateness."""
    if row.get("type") is not None:
        return row["type"] == "p2p"
    name = str(row.get("op") or "").lower()
    return any(w in name for w in ("send", "recv", "receive"))


def ascend_matched(per_rank: dict[int, dict]) -> list[dict]:
    """The collective ops (p2p ones left out: is_p2p) found on two ranks or more, matched by (step,
    group, op name, ordinal by start), in matched_collectives' shape. torch_npu's Wait Time is the time a rank waited in the op for the
    others: the smallest arrived last, and each other rank waited for it its wait minus that one's.
    Without Wait Time on every rank (level-0 db exports) the ends are aligned as for Kineto: elapse
    minus the shortest elapse."""
    by_key: dict[tuple, dict[int, dict]] = {}
    for r, block in per_rank.items():
        seen: dict[tuple, int] = {}
        for row in sorted(filter(lambda x: not is_p2p(x), _op_rows(block)), key=lambda x: (x["start_us"] is None, x["start_us"] or 0.0)):
            g = (row["step"], row["group"], row["op"])
            by_key.setdefault((*g, seen.get(g, 0)), {})[r] = row
            seen[g] = seen.get(g, 0) + 1
    out = []
    for key, rows in sorted(by_key.items(), key=lambda x: tuple(map(str, x[0][:3])) + (x[0][3],)):
        if len(rows) < 2:
            continue
        measured = all(x["wait_us"] is not None for x in rows.values())
        t = {r: float(x["wait_us"] if measured else x["elapse_us"] or 0.0) for r, x in sorted(rows.items())}
        least = min(t.values())
        wait = {r: v - least for r, v in t.items()}
        late = min(r for r, v in t.items() if v == least)   # a tie: the lowest rank
        out.append(STRAGGLER_COLLECTIVES.row(step=key[0], name=key[2], stream=key[1], ordinal=key[3], ranks=sorted(rows),
                                             n_ranks=len(rows), last_rank=late if any(w > 0 for w in wait.values()) else None,
                                             wait_us=wait, max_wait_us=max(wait.values()), cost_us=sum(wait.values()),
                                             measured=measured))
    return out


def vote_input(per_rank: dict[int, dict]) -> dict[int, list[tuple]]:
    """The recipe's rows: the db export's COMMUNICATION_OP where every rank has it (what msprof-analyze
    reads), else the ops' elapse times (communication.json: the recipe's rule on torch_npu's Elapse Time)."""
    if all(b.get("vote_ops") for b in per_rank.values()):
        return {r: [tuple(x) for x in b["vote_ops"]] for r, b in per_rank.items()}
    return {r: [(x["group"], x["op"], x["start_us"], x["elapse_us"] or 0.0) for x in _op_rows(b)]
            for r, b in per_rank.items()}


def ascend_straggler_rows(per_rank: dict[int, dict], instances: list[dict] | None = None) -> list[dict]:
    """One STRAGGLERS row per rank of an Ascend job: the wait-based costs (HTA's fields None) and
    msprof-analyze's slowAffectCount (0 for a rank without a vote)."""
    instances = ascend_matched(per_rank) if instances is None else instances
    costs = straggler_costs(instances)
    votes, _ = slow_rank_vote(vote_input(per_rank))
    measured = all(c["measured"] for c in instances)
    rows = []
    for r in sorted(per_rank):
        c = costs.get(r, {})
        rows.append(STRAGGLERS.row(rank=r, metric=None, n_flagged=None, is_potential_straggler=None,
                                   n_collectives=len(per_rank[r].get("ops") or []), n_matched=c.get("n_matched", 0),
                                   n_last=c.get("n_last", 0), cost_to_others_us=c.get("cost_to_others_us", 0.0),
                                   worst_victim_rank=c.get("worst_victim_rank"),
                                   worst_victim_cost_us=c.get("worst_victim_cost_us"),
                                   worst_victim_net_us=c.get("worst_victim_net_us"), waited_us=c.get("waited_us", 0.0),
                                   slow_affect_count=votes.get(r, 0),
                                   source=ASCEND_SOURCE if measured else ASCEND_ELAPSE_SOURCE))
    return rows


def _ascend_jobs(captures: list[dict]) -> dict[tuple, dict[int, dict]]:
    """The multi-rank Ascend jobs: captures of one (run, role, stage) with `communication_ops`, one
    per rank (the first by path)."""
    jobs: dict[tuple, dict[int, dict]] = {}
    for c in sorted(captures, key=lambda c: str(c.get("path"))):
        block, rank = c.get("communication_ops"), rank_number(c.get("rank"))
        if c.get("status") != "ok" or not isinstance(block, dict) or rank is None:
            continue
        if not isinstance(block.get("ops"), list) or not all(isinstance(x, list) and len(x) == len(OP_COLUMNS)
                                                             for x in block["ops"]):
            continue   # an older or damaged summary: that capture is left out
        jobs.setdefault((c.get("run_id"), c.get("role"), c.get("stage")), {}).setdefault(rank, block)
    return {k: v for k, v in jobs.items() if len(v) >= 2}


def _computed(which: int):
    return lambda summary: ((None, None, r) for r in straggler_tables(summary.get("captures") or [])[which])


_IDENT = (Field("run_id", "text", "the run", computed=True),
          Field("role", "text", "the captures' role", computed=True),
          Field("stage", "text", "the captures' stage (null: whole iterations)", computed=True))

STRAGGLERS = RowModel(
    "stragglers", "rank of a multi-rank job (Kineto or Ascend captures of one run, role and stage)",
    "computed from captures[*].collective_kernels or captures[*].communication_ops", table="stragglers", method="stragglers",
    per_capture=False, select=_computed(0), fields=(
        *_IDENT,
        Field("rank", "rank", "the rank", computed=True),
        Field("metric", "ratio", "HTA's metric: the metric kernel's (start - t_min) / mean iteration time, "
              "mean over the steps", computed=True, code="metric_ratio"),
        Field("n_flagged", "count", "steps where HTA's top-k rule flagged the rank", computed=True),
        Field("is_potential_straggler", "flag", "in HTA's get_potential_stragglers() list", computed=True),
        Field("n_collectives", "count", "the rank's collective kernels (a CPU job: its outermost host collective calls)", computed=True),
        Field("n_matched", "count", "of them, found on another rank too (step, name, stream, ordinal)", computed=True),
        Field("n_last", "count", "matched collectives it arrived at last (clocks aligned on the end)", computed=True),
        Field("cost_to_others_us", "us", "the other ranks' waits for it, summed", computed=True),
        Field("worst_victim_rank", "rank", "the rank it made wait longest", computed=True),
        Field("worst_victim_cost_us", "us", "that rank's waits for it, summed", computed=True),
        Field("worst_victim_net_us", "us", "those waits minus its own waits for that rank (ranks that jitter in "
              "turn: about 0)", computed=True),
        Field("waited_us", "us", "its own waits for the last rank, summed", computed=True),
        Field("late_launch_us", "us", "of cost_to_others_us, the part its host explains: the collective's launch call "
              "came late (clocks aligned on the end); the rest, the device busy before it. None: launches unknown "
              "(a CPU job's host calls, Ascend)", computed=True),
        Field("slow_affect_count", "count", "Ascend: msprof-analyze slow_rank's vote (its slowAffectCount: ops "
              "where the rank's elapse time was the outlier short one)", computed=True),
        Field("source", "text", "kineto (device collective kernels), kineto host calls (a CPU job's), ascend "
              "communication (torch_npu's Wait Time) or ascend communication elapse (no Wait Time: ends aligned)",
              computed=True),
    ))

STRAGGLER_COLLECTIVES = RowModel(
    "straggler_collectives", "collective matched on two ranks or more",
    "computed from captures[*].collective_kernels or captures[*].communication_ops",
    table="straggler_collectives", method="straggler_collectives", per_capture=False,
    holds=("ranks", "wait_us", "measured"), select=_computed(1), fields=(
        *_IDENT,
        Field("step", "step", "HTA's step of its launch (-1: none)", computed=True),
        Field("name", "text", "the kernel", computed=True),
        Field("stream", "text", "its stream (or thread; Ascend: its communication group)", computed=True),
        Field("ordinal", "index", "its rank among those of the same step, name and stream, by start", computed=True),
        Field("n_ranks", "count", "ranks it was found on", computed=True),
        Field("last_rank", "rank", "the rank that arrived last (none: all together)", computed=True),
        Field("max_wait_us", "us", "the longest wait for it", computed=True),
        Field("cost_us", "us", "all ranks' waits for it, summed", computed=True),
        Field("late_launch_share", "ratio", "of the last rank's lateness, the share its late launch call explains "
              "(late_launch_share(); None: launches unknown)", computed=True),
    ))
