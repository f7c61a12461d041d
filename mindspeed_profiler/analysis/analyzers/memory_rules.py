"""The advisor's rules on memory (issue 47): an out-of-memory error, a host watermark crossed, a
rank whose stage peak stands out from the other ranks', a stage close to the device's capacity. Pure:
each check gives the arguments of the advisor's findings, (id, title, impact, evidence, action,
anchor); advisor.py registers them (finding_rules.named_check). They live here because
advisor.py is at the module size bound; the thresholds are the constants below (docs/diagnosis.md
"Memory's findings", docs/memory.md)."""
from __future__ import annotations

from typing import Any, Callable

from mindspeed_profiler.analysis.analyzers.grouping import median
from mindspeed_profiler.analysis.models import questions as q
from mindspeed_profiler.analysis.models.finding_rules import named_check

__all__ = ["CHECKS", "DOCS", "named_check", "stage_workers"]

GIB = 2**30
OOM_IMPACT = 1.0                  # the run stopped there: ranked above every time finding
WATERMARK_IMPACT_WEIGHT = 0.5     # a risk, not time spent: half the used share of the limit
IMBALANCE_FACTOR = 1.25           # a rank's stage peak 25% above the median of the role's other ranks ...
IMBALANCE_MIN_BYTES = 256 << 20   # ... and by 256 MiB at least (small peaks differ for nothing)
IMBALANCE_IMPACT_WEIGHT = 0.5     # x the excess / the rank's peak
STAGE_NEAR_CAPACITY = 0.90        # a stage's reserved (else allocated) peak / the device's memory
NEAR_CAPACITY_IMPACT_WEIGHT = 0.5  # as the advisor's memory_near_capacity
ANCHOR = "memorys-findings"


def _gib(n: Any) -> str:
    return f"{n / GIB:.2f} GiB" if isinstance(n, (int, float)) else "?"


def _who(r: dict) -> str:
    return f"{r.get('role')} rank {r.get('rank')}"


def _stage_kind(stage: str | None) -> str:
    s = (stage or "").lower()
    if any(w in s for w in ("generate", "rollout", "generation")):
        return "generate"
    if any(w in s for w in ("update", "train")):
        return "update"
    if "log_prob" in s or "logp" in s or "value" in s:
        return "forward"
    return "other"


ACTIONS = {
    "generate": ("the generation's engine holds the most: lower its memory fraction (vLLM `gpu_memory_utilization`, "
                 "SGLang `mem_fraction_static`) or its KV cache (`max_num_seqs`, `max_model_len`); offload the actor's "
                 "parameters, gradients and optimizer states to the host during generation, and free the engine's KV "
                 "cache before the update (sleep / wake_up)"),
    "update": ("a smaller micro-batch (or more gradient accumulation), activation recomputation, offloading the "
               "optimizer states (or parameters) to the host; free the rollout engine's cache before the update"),
    "forward": ("a smaller micro-batch for the log-prob / value pass; offload the reference (or critic) between "
                "its calls"),
    "other": "a smaller micro-batch, offloading what the stage does not use, freeing caches between the stages",
}
HOST_ACTION = ("host memory: the offloaded states, Ray's object store (`object_store_memory`), a CPU engine's KV cache "
               "(`VLLM_CPU_KVCACHE_SPACE`) and the profiler's own buffers (the capture metadata's `own_memory`) live "
               "there; tracemalloc's top sites are in `oom_live` (by python) when it runs; give the job more host "
               "memory or fewer of those")


def oom_findings(summary: dict) -> list[tuple]:
    """An out-of-memory error escaping a stage: who, where, what it asked for against what was free,
    what held the memory (the snapshot's top site and stage) and what to try for that stage."""
    out = []
    for r in q.OOM_RECORDS.rows(summary):
        if r.get("kind") not in ("device_oom", "host_oom"):
            continue
        device = r["kind"] == "device_oom"
        held = ""
        if r.get("top_site"):
            stage = str(r.get("top_stage"))
            where = stage.strip("()") if stage.startswith("(") else f"in {stage}"   # (before the history), (outside stages)
            held = (f"; the most memory alive was allocated at {r['top_site']} ({_gib(r.get('top_site_bytes'))}); by "
                    f"stage, the most was allocated {where} ({_gib(r.get('top_stage_bytes'))})")
        asked = (f": it asked for {_gib(r.get('tried_bytes'))} with {_gib(r.get('device_free_bytes'))} free"
                 if device and r.get("tried_bytes") is not None else "")
        title = (f"{_who(r)}: out of {'device' if device else 'host'} memory in {r.get('stage')}, iteration "
                 f"{r.get('iteration')}{asked}{held}")
        action = ACTIONS[_stage_kind(r.get("stage"))] if device else HOST_ACTION
        if device and not r.get("snapshot"):
            action += ("; to see what held the memory next time, set `metrics.oom_snapshot: true` (the allocator's "
                       "history, dumped at the error: docs/memory.md)")
        evidence = {"table": "oom_records", "record": r.get("record"), "tried_bytes": r.get("tried_bytes"),
                    "device_free_bytes": r.get("device_free_bytes"), "device_allocated_bytes": r.get("device_allocated_bytes"),
                    "device_reserved_bytes": r.get("device_reserved_bytes"), "capacity_bytes": r.get("capacity_bytes"),
                    "host_rss_bytes": r.get("host_rss_bytes"), "snapshot": r.get("snapshot"),
                    "top_site": r.get("top_site"), "top_stage": r.get("top_stage")}
        out.append(("out_of_memory", title, OOM_IMPACT, evidence, action, ANCHOR))
    return out


def watermark_findings(summary: dict) -> list[tuple]:
    out = []
    for r in q.OOM_RECORDS.rows(summary):
        if r.get("kind") != "host_watermark":
            continue
        rss, limit = r.get("host_rss_bytes"), r.get("host_limit_bytes")
        share = rss / limit if rss and limit else (r.get("watermark_share") or 0.0)
        out.append(("host_memory_watermark",
                    f"{_who(r)}: host memory {_gib(rss)}, {share:.0%} of its limit ({_gib(limit)}), in {r.get('stage')}"
                    f", iteration {r.get('iteration')}", WATERMARK_IMPACT_WEIGHT * share,
                    {"table": "oom_records", "record": r.get("record"), "host_rss_bytes": rss, "host_limit_bytes": limit,
                     "host_available_bytes": r.get("host_available_bytes"), "watermark_share": r.get("watermark_share")},
                    "the kernel's OOM killer is next (it leaves no record): " + HOST_ACTION, ANCHOR))
    return out


def _peak(r: dict) -> tuple[int | None, str]:
    """The stage row's peak the comparisons use: device reserved, else allocated, else host."""
    for field, what in (("device_reserved_peak_bytes", "device reserved"), ("device_allocated_peak_bytes",
                                                                          "device allocated"), ("host_peak_bytes", "host")):
        if isinstance(r.get(field), int):
            return r[field], what
    return None, ""


def imbalance_findings(summary: dict) -> list[tuple]:
    """A rank whose peak in a stage stands out from the other ranks of its role in that stage."""
    groups: dict[tuple, list[dict]] = {}
    for r in q.STAGE_MEMORY.rows(summary):
        groups.setdefault((r.get("role"), r.get("stage")), []).append(r)
    out = []
    for (role, stage), rows in groups.items():
        if len(rows) < 2:
            continue
        for r in rows:
            peak, what = _peak(r)
            others = [p for o in rows if o is not r and (p := _peak(o)[0]) is not None and _peak(o)[1] == what]
            if peak is None or not others:
                continue
            typical = median(others)
            if peak < IMBALANCE_FACTOR * typical or peak - typical < IMBALANCE_MIN_BYTES:
                continue
            excess = (peak - typical) / peak
            out.append(("stage_memory_imbalance",
                        f"{_who(r)}: {what} peak in {stage} {_gib(peak)}, {peak / typical:.1f}x the other ranks' "
                        f"median ({_gib(typical)})", IMBALANCE_IMPACT_WEIGHT * excess,
                        {"table": "stage_memory", "role": role, "rank": r.get("rank"), "stage": stage, "peak_bytes": peak,
                         "others_median_bytes": int(typical), "measure": what},
                        "one rank holds more than its peers in this stage: uneven shards (sequence lengths, samples per "
                        "rank), a rank that also hosts another role or the engine, a leak on that rank (its peak grows "
                        "with the iterations: the stage-call lines); the out-of-memory error will come from it first",
                        ANCHOR))
    return out


def near_capacity_findings(summary: dict) -> list[tuple]:
    """A stage whose device peak comes within STAGE_NEAR_CAPACITY of the device's memory."""
    out = []
    for r in q.STAGE_MEMORY.rows(summary):
        used = r.get("device_reserved_peak_bytes") or r.get("device_allocated_peak_bytes")
        cap = r.get("capacity_bytes")
        if not used or not cap or used / cap < STAGE_NEAR_CAPACITY:
            continue
        share = used / cap
        out.append(("stage_near_capacity", f"{_who(r)}: {r.get('stage')} peaks at {share:.0%} of the device's memory "
                    f"({_gib(used)} of {_gib(cap)})", NEAR_CAPACITY_IMPACT_WEIGHT * share,
                    {"table": "stage_memory", "stage": r.get("stage"), "used_bytes": used, "capacity_bytes": cap,
                     "used_share": share},
                    "close to an out-of-memory error in this stage: " + ACTIONS[_stage_kind(r.get("stage"))], ANCHOR))
    return out


def stage_workers(summary: dict) -> set[tuple]:
    """(role, rank) of the workers with per-stage device peaks: the advisor's memory_near_capacity
    leaves them to stage_near_capacity (one finding per worker, naming the stage)."""
    return {(r.get("role"), r.get("rank")) for r in q.STAGE_MEMORY.rows(summary)
            if r.get("capacity_bytes") and (r.get("device_reserved_peak_bytes") or r.get("device_allocated_peak_bytes"))}


CHECKS: dict[str, Callable[[dict], list[tuple]]] = {
    "out_of_memory": oom_findings,
    "host_memory_watermark": watermark_findings,
    "stage_memory_imbalance": imbalance_findings,
    "stage_near_capacity": near_capacity_findings,
}

DOCS = {
    "out_of_memory": dict(
        triggers=("an out-of-memory record (`oom_records` kind `device_oom` or `host_oom`): a device out-of-memory "
                  "error (`torch.OutOfMemoryError`, the NPU's) or a host one (`MemoryError`, torch's CPU allocator) "
                  "escaped a stage; the action follows the stage (generation, update, log-prob) and names what held "
                  "the memory when the allocator's snapshot was dumped (`oom_live`)"),
        impact="1 (the run stopped there: above every time finding)",
        reads="`oom_records`, `oom_live`"),
    "host_memory_watermark": dict(
        triggers=("a host watermark record (`oom_records` kind `host_watermark`): the process's resident memory "
                  "passed `metrics.host_memory_watermark` (default 0.9) of the host memory it may use"),
        impact="0.5 x the resident memory / the limit",
        reads="`oom_records`"),
    "stage_memory_imbalance": dict(
        triggers=("a rank's peak in a stage (device reserved, else allocated, else host) is 1.25x or more the median "
                  "of the other ranks of its role in that stage, and 256 MiB or more above it"),
        impact="0.5 x (the peak - that median) / the peak",
        reads="`stage_memory`"),
    "stage_near_capacity": dict(
        triggers=("a stage's device peak (reserved, else allocated) is 90% or more of the device's memory "
                  "(`stage_memory` `capacity_bytes`); such a worker's `memory_near_capacity` is left to this rule"),
        impact="0.5 x the used share",
        reads="`stage_memory`"),
}
