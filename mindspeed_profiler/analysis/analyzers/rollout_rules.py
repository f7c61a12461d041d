"""The advisor's rules on the rollout's per-sample records (rollout_batches rows, long_tail.py):
long-tail generation, truncation, an engine that queues. Pure: each `*_findings(summary)` gives
the arguments of the advisor's findings, (id, title, impact, evidence, action, anchor); advisor.py
registers one rule per function (`@finding_rule(id, **DOCS[id])`) and makes the findings. They
live here because advisor.py is at the module size bound; the thresholds are the constants below
(docs/diagnosis.md "The advisor" and docs/rollout.md "The long tail: definitions").
"""
from __future__ import annotations

from mindspeed_profiler.analysis.models import questions as q

# long_tail_generation: one sample in 8 running 8x longer than the rest loses 1 - 15/64 = 77% of its
# batch's generation capacity, t100 = 8 x t50; lengths spread evenly over [1, L] lose ~50%, t100 =
# 2 x t50 (tests/test_advisor.py has both)
LONG_TAIL_LOST_SHARE = 0.60       # tail_lost_share (1 - mean occupancy) of a batch's generation window
LONG_TAIL_SPREAD = 3.0            # the last sample ends 3x later than the median one: t100 >= 3 x t50
LONG_TAIL_MIN_SAMPLES = 4         # timed samples in the batch (fewer: no tail to speak of)
TRUNCATED_SHARE = 0.10            # samples that stopped at their token limit / samples whose finish is known
TRUNCATED_MIN_SAMPLES = 8
TRUNCATION_IMPACT_WEIGHT = 0.5    # cut answers hurt the learning, they lose no time: ranked at half their time share
QUEUE_SHARE = 0.20                # queue_s / (end - start), summed over a batch's samples with a queue_s
QUEUE_MIN_SAMPLES = 4
ANCHORS = {"long_tail_generation": "long-tail-generation", "truncation": "truncation", "engine_queueing": "engine-queueing"}

DOCS = {
    "long_tail_generation": dict(
        triggers=("a batch of samples (one run's, one iteration and stage, 4 or more with times; docs/rollout.md) "
                  "loses 60% or more of its generation capacity to the tail (`tail_lost_share` = 1 - mean "
                  "occupancy) and its last sample ends 3x or more later than its median one (t100 >= 3 x t50): "
                  "one sample in 8 running 8x longer loses 77% (t100 = 8 x t50); lengths spread evenly over "
                  "[1, L] lose ~50% (t100 = 2 x t50) and do not trigger it"),
        impact=("the capacity lost to the tail (`tail_lost_s`) / the iteration's wall time (the tracker's "
                "`timing_s/iteration`, the slowest worker's; else the timeline's iteration); without either, / "
                "the generation window"),
        reads="`rollout_batches`, `tracker_metrics`, `timeline_iterations`"),
    "truncation": dict(
        triggers=("10% or more of a batch's samples (8 or more whose finish is known) stopped at their token limit "
                  "(`finish_reason` `length`)"),
        impact=("0.5 x the truncated samples' share of the batch's generation time (`truncated_time_share`), else "
                "of their share of the samples (cut answers hurt the learning, not the time: it ranks below a "
                "time finding of the same share)"),
        reads="`rollout_batches`"),
    "engine_queueing": dict(
        triggers=("the samples of a batch (4 or more with the engine's `queue_s`) spent 20% or more of their "
                  "latency (end - start) in the engine's queue"),
        impact="that share (`queue_share`) x the batch's mean occupancy (the share of the window the samples ran)",
        reads="`rollout_batches`"),
}

LONG_TAIL_ACTION = (
    "shorten the tail: partial rollout (MindSpeed-RL's `partial_rollout_max_split`: a long response is cut and "
    "finished in a later iteration), a lower `max_tokens`, over-sampling with early stop (generate more prompts "
    "than the batch needs and stop at the batch size), more rollout replicas (the long samples spread over more "
    "engines)")
TRUNCATION_ACTION = (
    "many responses hit `max_tokens`: their rewards judge cut answers. Raise `max_tokens` if the task needs longer "
    "answers, or penalise / filter overlong responses (DAPO's overlong filtering); check the stop tokens")
QUEUE_ACTION = (
    "requests wait in the engine before they run: raise its concurrency (vLLM `max_num_seqs`, "
    "`max_num_batched_tokens`; SGLang `max_running_requests`), give it more KV-cache memory "
    "(`gpu_memory_utilization`), or add replicas / data-parallel engines")

FindingArgs = tuple   # (id, title, impact, evidence, action, anchor): advisor's _finding arguments


def iteration_seconds(summary: dict) -> dict[int, tuple[float, str]]:
    """iteration -> (its wall time in s, where from): the tracker's timing_s/iteration (the slowest
    worker's), else the timeline's iteration dur_us."""
    out: dict[int, tuple[float, str]] = {}
    for r in q.TRACKER_METRICS.rows(summary):
        v = r.get("value")
        if r.get("metric") == "timing_s/iteration" and isinstance(v, (int, float)) and v > 0:
            it = r.get("iteration")
            if v > out.get(it, (0.0, ""))[0]:
                out[it] = (float(v), "tracker_metrics timing_s/iteration")
    for r in q.ITERATIONS.rows(summary):
        d = r.get("dur_us")
        if r.get("iteration") not in out and isinstance(d, (int, float)) and d > 0:
            out[r.get("iteration")] = (d / 1e6, "timeline_iterations dur_us")
    return out


def _where(r: dict) -> str:
    run = f" (run {r['run_id']})" if r.get("run_id") else ""
    return f"{r.get('stage')} iteration {r.get('iteration')}{run}"


def _worst_per_stage(found: list[FindingArgs], counted: dict) -> list[FindingArgs]:
    """The worst batch's finding of each (run, stage), saying in how many of its iterations the rule fired."""
    best: dict[tuple, FindingArgs] = {}
    for f in found:
        key = (f[3].get("run_id"), f[3].get("stage"))
        if key not in best or f[2] > best[key][2]:
            best[key] = f
    out = []
    for key, f in best.items():
        n = sum(1 for g in found if (g[3].get("run_id"), g[3].get("stage")) == key)
        of = counted.get(key, n)
        title = f[1] + (f" (in {n} of {of} iterations; the worst shown)" if of > 1 else "")
        out.append((f[0], title, f[2], {**f[3], "n_iterations": n, "of_iterations": of}, *f[4:]))
    return out


def _batches(summary: dict) -> tuple[list[dict], dict]:
    rows = q.ROLLOUT_BATCHES.rows(summary)
    counted: dict[tuple, int] = {}
    for r in rows:
        counted[(r.get("run_id"), r.get("stage"))] = counted.get((r.get("run_id"), r.get("stage")), 0) + 1
    return rows, counted


def long_tail_findings(summary: dict) -> list[FindingArgs]:
    rows, counted = _batches(summary)
    wall = iteration_seconds(summary)
    found = []
    for r in rows:
        share, lost, t50, t100 = r.get("tail_lost_share"), r.get("tail_lost_s"), r.get("t50_s"), r.get("t100_s")
        if (r.get("timed") or 0) < LONG_TAIL_MIN_SAMPLES or share is None or share < LONG_TAIL_LOST_SHARE \
                or not t50 or t100 is None or t100 < LONG_TAIL_SPREAD * t50:
            continue
        it_s, source = wall.get(r.get("iteration"), (None, None))
        impact = lost / it_s if it_s else share
        of = f"{impact:.0%} of the iteration" if it_s else f"{share:.0%} of the generation window"
        found.append(("long_tail_generation",
                      f"long tail in {_where(r)}: {lost:.3g} s of generation capacity lost ({of}); half the samples "
                      f"done at {t50:.3g} s, the last at {t100:.3g} s, mean occupancy {r.get('mean_occupancy'):.0%}",
                      impact,
                      {"table": "rollout_batches", "run_id": r.get("run_id"), "iteration": r.get("iteration"),
                       "stage": r.get("stage"), "tail_lost_s": lost, "tail_lost_share": share, "t50_s": t50,
                       "t90_s": r.get("t90_s"), "t100_s": t100, "mean_occupancy": r.get("mean_occupancy"),
                       "samples": r.get("timed"), "tokens_p50": r.get("tokens_p50"), "tokens_max": r.get("tokens_max"),
                       "iteration_s": it_s, "iteration_source": source},
                      LONG_TAIL_ACTION, ANCHORS["long_tail_generation"]))
    return _worst_per_stage(found, counted)


def truncation_findings(summary: dict) -> list[FindingArgs]:
    rows, counted = _batches(summary)
    found = []
    for r in rows:
        share, n_cut, known = r.get("truncated_share"), r.get("truncated") or 0, r.get("truncation_known") or 0
        if share is None or share < TRUNCATED_SHARE or known < TRUNCATED_MIN_SAMPLES:
            continue
        time_share = r.get("truncated_time_share")
        found.append(("truncation", f"{share:.0%} of the samples of {_where(r)} stopped at their token limit "
                                    f"({n_cut} of {known}, the longest {r.get('tokens_max')} tokens)",
                      TRUNCATION_IMPACT_WEIGHT * (time_share if time_share is not None else share),
                      {"table": "rollout_batches", "run_id": r.get("run_id"), "iteration": r.get("iteration"),
                       "stage": r.get("stage"), "truncated": n_cut, "truncated_share": share,
                       "truncated_time_share": time_share, "tokens_max": r.get("tokens_max")},
                      TRUNCATION_ACTION, ANCHORS["truncation"]))
    return _worst_per_stage(found, counted)


def queueing_findings(summary: dict) -> list[FindingArgs]:
    rows, counted = _batches(summary)
    found = []
    for r in rows:
        share = r.get("queue_share")
        if share is None or share < QUEUE_SHARE or (r.get("queue_known") or 0) < QUEUE_MIN_SAMPLES:
            continue
        occ = r.get("mean_occupancy")
        found.append(("engine_queueing", f"the samples of {_where(r)} waited {share:.0%} of their latency in the "
                                         f"engine's queue (mean {r.get('queue_mean_s') or 0:.3g} s)",
                      share * (occ if occ is not None else 1.0),
                      {"table": "rollout_batches", "run_id": r.get("run_id"), "iteration": r.get("iteration"),
                       "stage": r.get("stage"), "queue_share": share, "queue_mean_s": r.get("queue_mean_s"),
                       "latency_mean_s": r.get("latency_mean_s"), "mean_occupancy": occ},
                      QUEUE_ACTION, ANCHORS["engine_queueing"]))
    return _worst_per_stage(found, counted)
