"""Pure: one sample's values checked and turned into its `sample` line (docs/rollout.md).

Every value an engine or a caller gives is checked here, off the training thread: a value that is
not what the field holds (a string for a time, NaN, a negative duration, a wall time from another
clock, an end before the start) becomes null and one clause of the sample's `problem`; nothing
here raises for bad data.
"""
from __future__ import annotations

from typing import Any

from mindspeed_profiler.analysis.parsing.numbers import caller_int, caller_number, ns_of_seconds, shown_typed
from mindspeed_profiler.core import formats

# wall-clock seconds a sample time may hold: after 2000-01-01 (anything earlier is another clock:
# monotonic or perf_counter seconds since boot), at most a day after the recording
MIN_WALL_S = 946_684_800.0
MAX_AHEAD_S = 86_400.0
MAX_DURATION_S = 7 * 86_400.0   # a duration beyond a week is a unit or clock mistake
MAX_TOKENS = 10**9               # a token count beyond this is not a count
ORDER_SLACK_S = 1e-3             # times converted from two clocks may disagree by this much
NS = 1_000_000_000

# the sample line's keys, in the documented order
SAMPLE_KEYS = ("type", "iteration", "stage", "id", "prompt_tokens", "response_tokens", "start_ns", "first_token_ns",
               "end_ns", "finish_reason", "truncated", "policy_version", "reward_s", "tool_s", "queue_s", "prefill_s",
               "decode_s", "preemptions", "problem")
DURATIONS = ("reward_s", "tool_s", "queue_s", "prefill_s", "decode_s")


def wall_time(name: str, value: Any, now_s: float, problems: list[str]) -> float | None:
    """Wall-clock seconds, or None (with a problem when `value` was given but is not one)."""
    v = caller_number(name, value, problems)
    if v is not None and not MIN_WALL_S <= v <= now_s + MAX_AHEAD_S:
        problems.append(f"{name}: {v:.6g} s is not a wall-clock time (after 2000-01-01, at most a day after the "
                        "recording): another clock?")
        return None
    return v


def duration(name: str, value: Any, problems: list[str]) -> float | None:
    """Seconds >= 0 and below a week, or None (with a problem when `value` was given but is not)."""
    v = caller_number(name, value, problems)
    if v is not None and not 0.0 <= v <= MAX_DURATION_S:
        problems.append(f"{name}: {v:.6g} s is {'negative' if v < 0 else 'over a week'}")
        return None
    return v


def count(name: str, value: Any, problems: list[str]) -> int | None:
    """A token count (an int from 0 to MAX_TOKENS), or None (with a problem when given but not one)."""
    if value is None:
        return None
    n = caller_int(value)
    if n is None or not 0 <= n <= MAX_TOKENS:
        problems.append(f"{name}: {shown_typed(value)} is not a token count (an integer from 0 to {MAX_TOKENS})")
        return None
    return n


def text(name: str, value: Any, problems: list[str]) -> str | None:
    if value is None or isinstance(value, str):
        return value
    n = caller_int(value)
    if n is not None:
        return str(n)
    if type(value) is float:
        return str(value)
    problems.append(f"{name}: {shown_typed(value)} is not text")
    return None


def version(value: Any, problems: list[str]) -> int | None:
    """The policy version: an integer (a string of digits is taken as one), else None."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    n = caller_int(value)
    if n is None:
        problems.append(f"policy_version: {shown_typed(value)} is not an integer")
    return n


def ordered(start: float | None, first: float | None, end: float | None,
            problems: list[str]) -> tuple[float | None, float | None, float | None]:
    """The three times with what contradicts the others set to None: an end before the start makes
    all three unknown (which one is wrong cannot be told), a first token outside [start, end] makes
    only the first token unknown."""
    if start is not None and end is not None and end < start - ORDER_SLACK_S:
        problems.append(f"end is {start - end:.6g} s before start")
        return None, None, None
    if first is not None and ((start is not None and first < start - ORDER_SLACK_S)
                              or (end is not None and first > end + ORDER_SLACK_S)):
        problems.append("first_token is outside [start, end]")
        first = None
    return start, first, end


def truncated(finish_reason: str | None, response_tokens: int | None, max_tokens: Any) -> bool | None:
    """Whether the sample stopped at its token limit: finish_reason "length"; without a finish
    reason, response_tokens >= max_tokens when both are known; else None."""
    if finish_reason is not None:
        return finish_reason == "length"
    limit = None if max_tokens is None else caller_int(max_tokens)
    if response_tokens is not None and limit is not None and limit > 0:
        return response_tokens >= limit
    return None




def sample_line(iteration: int, stage: str, sample_id: Any, *, prompt_tokens: Any = None, response_tokens: Any = None,
                start: Any = None, first_token: Any = None, end: Any = None, finish_reason: Any = None,
                max_tokens: Any = None, policy_version: Any = None, durations: dict[str, Any] | None = None,
                now_s: float, problems: list[str] | None = None, preemptions: Any = None) -> dict[str, Any]:
    """The `sample` line of one sample (keys in SAMPLE_KEYS' order). `start`, `first_token`, `end`:
    wall-clock seconds already converted from the engine's clock; `durations`: any of DURATIONS,
    seconds; `problems`: what the caller already found wrong with this sample."""
    problems = list(problems or ())
    sid = text("id", sample_id, problems)
    if sid is None and sample_id is None:
        problems.append("id: missing")
    prompt = count("prompt_tokens", prompt_tokens, problems)
    response = count("response_tokens", response_tokens, problems)
    s, f, e = ordered(wall_time("start", start, now_s, problems), wall_time("first_token", first_token, now_s, problems),
                      wall_time("end", end, now_s, problems), problems)
    reason = text("finish_reason", finish_reason, problems)
    given = durations or {}
    line: dict[str, Any] = {
        "type": formats.SAMPLE_RECORD, "iteration": iteration, "stage": stage, "id": sid,
        "prompt_tokens": prompt, "response_tokens": response,
        "start_ns": ns_of_seconds(s), "first_token_ns": ns_of_seconds(f), "end_ns": ns_of_seconds(e),
        "finish_reason": reason, "truncated": truncated(reason, response, max_tokens),
        "policy_version": version(policy_version, problems),
    }
    for name in DURATIONS:
        line[name] = duration(name, given.get(name), problems)
    line["preemptions"] = count("preemptions", preemptions, problems)
    line["problem"] = "; ".join(problems) if problems else None
    return line

