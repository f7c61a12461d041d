"""The shape of a worker's state file (`RUN_DIR/requests/workers/<role>_rank<R>.json`, written by
listener.Listener.state(); under Ray also the mailbox's copy), checked before `trigger` and
`status` use it. Anyone can write into the requests tree: one file of the wrong shape (a list as the
heartbeat, NaN as the iteration period, a 400-digit iteration) must be reported and skipped, never
end the command in a traceback that blocks on-demand capture of the whole job. Pure: no file."""
from __future__ import annotations

import reprlib
from typing import Any, Callable, Mapping

from mindspeed_profiler.analysis.parsing.numbers import finite_number, json_int

# the listener writes seconds and counts far below these; anything above is not one of ours
MAX_SECONDS = 1e11        # a time stamp (year 5138) or a period
MAX_ITERATION = 2**31 - 1  # config.checks.MAX_ITERATION: an iteration the runtime can reach

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60
_short.maxlist = _short.maxdict = 4


def _seconds(v: Any) -> bool:
    return (x := finite_number(v)) is not None and 0 <= x <= MAX_SECONDS


def _iteration(v: Any) -> bool:
    return (n := json_int(v)) is not None and 0 <= n <= MAX_ITERATION


def _pair(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(_iteration(x) for x in v)


def _dicts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


# field -> (check, what is allowed); null (or absent) is always allowed: older listeners omit fields
Spec = Mapping[str, tuple[Callable[[Any], bool], str]]
NUMBER = (_seconds, f"a finite number from 0 to {MAX_SECONDS:g}")
HEARTBEAT: Spec = {
    "time": NUMBER, "iteration_period_s": NUMBER, "fastest_period_s": NUMBER, "poll_interval_s": NUMBER,
    "state_every": NUMBER, "started": NUMBER,
    "iteration": (_iteration, f"an iteration, an integer from 0 to {MAX_ITERATION}"),
    "listening": (lambda v: isinstance(v, bool), "true or false"),
}
ENTRY: Spec = {
    "state": (lambda v: isinstance(v, str), "a state name (text)"),
    "reason": (lambda v: isinstance(v, str), "text"),
    "source": (lambda v: isinstance(v, str), "text"),
    "iterations": (_pair, "[first, last], two iterations"),
    "captures": (_dicts, "a list of objects"),
}
TOP: Spec = {
    "worker": (lambda v: isinstance(v, str), "text"),
    "role": (lambda v: isinstance(v, str), "text"),
    "run_id": (lambda v: isinstance(v, str), "text"),
    "rank": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "stages": (_strings, "a list of stage names"),
    "heartbeat": (lambda v: isinstance(v, dict), "an object"),
    "requests": (lambda v: isinstance(v, dict), "an object of request states"),
}


def _first_bad(obj: Mapping[str, Any], spec: Spec, where: str) -> str | None:
    for key, (ok, allowed) in spec.items():
        value = obj.get(key)
        if value is not None and not ok(value):
            return f"{where}{key} is {_short.repr(value)}; expected {allowed}"
    return None


def problem(state: Any) -> str | None:
    """None when `state` has the shape the listener writes, else what is wrong: the field, its
    value and what is allowed (the first problem found)."""
    if not isinstance(state, dict):
        return f"the file holds {type(state).__name__} {_short.repr(state)}; expected a JSON object (a worker state)"
    bad = _first_bad(state, TOP, "") or _first_bad(state.get("heartbeat") or {}, HEARTBEAT, "heartbeat.")
    if bad is not None:
        return bad
    for rid, entry in (state.get("requests") or {}).items():
        where = f"requests.{_short.repr(rid)}"
        if not isinstance(entry, dict):
            return f"{where} is {_short.repr(entry)}; expected an object (a request's state)"
        bad = _first_bad(entry, ENTRY, where + ".")
        if bad is not None:
            return bad
    return None
