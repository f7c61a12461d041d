"""Pure: what pull.py took from one source turned into `sample` lines, the engine's clock converted
to wall clock, and the batch's `clock` text and problems (docs/rollout.md).

Field names follow the recorded releases exactly (mindspeed_profiler/data/vllm-0.33.0.json,
sglang-0.5.23.json; docs/engines_api.md):
- vLLM `RequestStateStats`: `arrival_time` is time.time() of the frontend; `queued_ts`,
  `scheduled_ts`, `first_token_ts`, `last_token_ts` are time.monotonic() of the EngineCore process
  (0.0 while unset). CLOCK_MONOTONIC is host-wide on Linux, so `wall - monotonic` sampled when
  record_samples() is called maps them to wall clock (same host only).
- SGLang `meta_info`: `request_received_ts`, `request_finished_ts`, `forward_entry_time`,
  `prefill_finished_time` are wall-clock seconds (with `enable_metrics`); `e2e_latency`,
  `first_token_latency`, `queue_time` are durations.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from mindspeed_profiler.analysis.parsing.numbers import caller_number
from mindspeed_profiler.rollout import checks
from mindspeed_profiler.rollout.pull import DICT, SGLANG, VLLM

CLOCK_WALL = "wall"
CLOCK_MONOTONIC = "monotonic -> wall"
CLOCK_PERF = "perf_counter -> wall"
CLOCK_VLLM = "engine monotonic -> wall"
CLOCK_NONE = "none"
CLOCK_SGLANG_TS = "sglang wall (request_received_ts, request_finished_ts)"
CLOCK_SGLANG_E2E = "end = recorded_ns, start = end - e2e_latency"
NO_METRICS = "vLLM gave no RequestOutput.metrics: build the engine with disable_log_stats=False"

# the keys a plain sample dict may have (docs/rollout.md); any other is named in one problem line
DICT_KEYS = ("id", "prompt_tokens", "response_tokens", "start", "first_token", "end", "finish_reason", "max_tokens",
             "policy_version", "reward_s", "tool_s", "queue_s", "prefill_s", "decode_s")
_DICT_KEY_SET = frozenset(DICT_KEYS)


class Context(NamedTuple):
    """When and where one record_samples() call happened, and the offsets to wall clock then."""

    iteration: int
    stage: str
    now_s: float          # time.time() at the call
    mono_offset: float    # time.time() - time.monotonic() at the call
    perf_offset: float    # time.time() - time.perf_counter() at the call
    clock: str | None     # the caller's clock for plain dicts: None / "wall", "monotonic", "perf_counter"
    policy_version: int | None = None   # the caller's version for items that give none


class Converted(NamedTuple):
    lines: list[dict[str, Any]]
    clock: str
    problems: list[str]


def _unset(value: Any) -> bool:
    """None, or vLLM's 0.0 for a time that has not happened (RequestStateStats' defaults)."""
    return value is None or (type(value) in (int, float) and value == 0)


def _engine_ts(name: str, value: Any, problems: list[str]) -> float | None:
    """An engine timestamp as a float in its own clock, or None (unset, or not a number)."""
    return None if _unset(value) else caller_number(name, value, problems)


def _diff(later: float | None, earlier: float | None) -> float | None:
    return None if later is None or earlier is None else later - earlier


def vllm_lines(raws: list[tuple[Any, ...]], ctx: Context) -> Converted:
    lines: list[dict[str, Any]] = []
    batch: list[str] = []
    missing = with_metrics = 0
    for rid, n_prompt, comps, times in raws:
        problems: list[str] = []
        start = first = end = preempted = None
        durations: dict[str, Any] = {}
        if times is None:
            missing += 1
        else:
            with_metrics += 1
            arrival, queued, scheduled, first_ts, last_ts, preempted = times
            start = _engine_ts("metrics.arrival_time", arrival, problems)   # time.time(): wall clock already
            q = _engine_ts("metrics.queued_ts", queued, problems)            # the others: engine monotonic
            s = _engine_ts("metrics.scheduled_ts", scheduled, problems)
            f = _engine_ts("metrics.first_token_ts", first_ts, problems)
            e = _engine_ts("metrics.last_token_ts", last_ts, problems)
            unset = [name for name, raw in (("arrival_time", arrival), ("first_token_ts", first_ts),
                                            ("last_token_ts", last_ts)) if _unset(raw)]
            if unset:
                problems.append(", ".join(f"metrics.{name}" for name in unset) + " not set")
            first = None if f is None else f + ctx.mono_offset
            end = None if e is None else e + ctx.mono_offset
            durations = {"queue_s": _diff(s, q), "prefill_s": _diff(f, s), "decode_s": _diff(e, f)}
        if not comps:
            batch.append(f"request {rid!r}: no outputs")
        for index, n_tokens, reason in comps:
            sid = rid if len(comps) == 1 or rid is None else f"{rid}/{index}"
            lines.append(checks.sample_line(ctx.iteration, ctx.stage, sid, prompt_tokens=n_prompt,
                                            response_tokens=n_tokens, start=start, first_token=first, end=end,
                                            finish_reason=reason, durations=durations, now_s=ctx.now_s,
                                            problems=problems, preemptions=preempted, policy_version=ctx.policy_version))
    if missing:
        batch.insert(0, f"{NO_METRICS} ({missing} of {missing + with_metrics} requests)")
    shared = sum(1 for _, _, comps, times in raws if times is not None and len(comps) > 1)
    if shared:
        batch.append(f"{shared} requests with several completions (SamplingParams n > 1): vLLM keeps one "
                     "RequestStateStats per request, the completion that finished last: their samples share its "
                     "first-token and end times, queue / prefill / decode and preemptions (send one request per "
                     "sample for each sample's own)")
    return Converted(lines, CLOCK_VLLM if with_metrics else CLOCK_NONE, batch)


def sglang_lines(metas: list[dict[str, Any]], ctx: Context) -> Converted:
    lines: list[dict[str, Any]] = []
    paths: dict[str, None] = {}
    for meta in metas:
        problems: list[str] = []
        num = caller_number
        received = num("meta_info.request_received_ts", meta.get("request_received_ts"), problems)
        finished = num("meta_info.request_finished_ts", meta.get("request_finished_ts"), problems)
        e2e = checks.duration("meta_info.e2e_latency", meta.get("e2e_latency"), problems)
        ftl = checks.duration("meta_info.first_token_latency", meta.get("first_token_latency"), problems)
        forward = num("meta_info.forward_entry_time", meta.get("forward_entry_time"), problems)
        prefilled = num("meta_info.prefill_finished_time", meta.get("prefill_finished_time"), problems)
        if finished is not None or received is not None:
            paths[CLOCK_SGLANG_TS] = None
        elif e2e is not None:
            paths[CLOCK_SGLANG_E2E] = None
        end = finished if finished is not None else (ctx.now_s if e2e is not None else None)
        start = received if received is not None else (end - e2e if end is not None and e2e is not None else None)
        first = start + ftl if start is not None and ftl is not None else prefilled
        reason = meta.get("finish_reason")
        if isinstance(reason, dict):
            reason = reason.get("type")
        version = meta.get("weight_version")   # SGLang's is text ("default"): kept only when it is a number
        durations = {"queue_s": meta.get("queue_time"), "prefill_s": _diff(prefilled, forward),
                     "decode_s": _diff(finished, first) if finished is not None else None}
        lines.append(checks.sample_line(
            ctx.iteration, ctx.stage, meta.get("id"), prompt_tokens=meta.get("prompt_tokens"),
            response_tokens=meta.get("completion_tokens"), start=start, first_token=first, end=end,
            finish_reason=reason, durations=durations, now_s=ctx.now_s, problems=problems,
            policy_version=version if isinstance(version, int) or (isinstance(version, str) and version.isdigit())
            else ctx.policy_version))
    return Converted(lines, " | ".join(paths) or CLOCK_NONE, [])


def dict_lines(dicts: list[dict[str, Any]], ctx: Context) -> Converted:
    offset, clock = {None: (0.0, CLOCK_WALL), "wall": (0.0, CLOCK_WALL), "monotonic": (ctx.mono_offset, CLOCK_MONOTONIC),
                     "perf_counter": (ctx.perf_offset, CLOCK_PERF)}[ctx.clock]
    lines: list[dict[str, Any]] = []
    unknown: dict[str, None] = {}
    for d in dicts:
        problems: list[str] = []
        for key in d:
            if key not in _DICT_KEY_SET:
                unknown[str(key)] = None
        times = [caller_number(name, d.get(name), problems) for name in ("start", "first_token", "end")]
        start, first, end = (None if t is None else t + offset for t in times)
        lines.append(checks.sample_line(
            ctx.iteration, ctx.stage, d.get("id"), prompt_tokens=d.get("prompt_tokens"),
            response_tokens=d.get("response_tokens"), start=start, first_token=first, end=end,
            finish_reason=d.get("finish_reason"), max_tokens=d.get("max_tokens"),
            policy_version=d.get("policy_version", ctx.policy_version),
            durations={name: d.get(name) for name in checks.DURATIONS}, now_s=ctx.now_s, problems=problems))
    batch = []
    if unknown:
        names = list(unknown)
        shown = ", ".join(repr(n) for n in names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        batch.append(f"unknown keys in the sample dicts, ignored: {shown}; allowed: {', '.join(DICT_KEYS)}")
    return Converted(lines, clock, batch)


CONVERTERS: dict[str, Callable[[list[Any], Context], Converted]] = {VLLM: vllm_lines, SGLANG: sglang_lines,
                                                                    DICT: dict_lines}
