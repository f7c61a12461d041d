"""The shape of a summary.json read back (report, compare, RunAnalysis: outputs.load_summary).

A file that is valid JSON but not what the analysis writes (a list, `{"captures": 5}`, a capture
that is a number, a step without its duration) is refused here, once, naming the file, the field,
the value and what was expected: never a traceback from whichever table reads the field first.
The spec holds what the readers index or compute with; every other field may be anything.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


class SummaryShapeError(ValueError):
    """A summary.json whose content is not of the shape the analysis writes."""


class _Kind:
    """A leaf: a test on the value and the words for what it allows."""

    def __init__(self, test, what: str):
        self.test, self.what = test, what


class MapOf:
    """An object whose keys are names (stages, workers, fields), each value of one spec (or null
    where `nulls`: a block whose fields a capture may lack, as the device's)."""

    def __init__(self, spec: Any, nulls: bool = False):
        self.spec, self.nulls = spec, nulls


NUM = _Kind(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number")
STR = _Kind(lambda v: isinstance(v, str), "text")
ANY = _Kind(lambda v: True, "anything")
DICT = MapOf(ANY)
LIST = [ANY]


def _nums(*keys: str) -> dict:
    """Optional numeric fields (absent or null allowed)."""
    return {f"{k}?": NUM for k in keys}


# A dict spec: "key" is required and not null, "key?" may be absent or null, "key*" may be absent
# but not null (the readers take its absence for empty, not a null).
STEP = {"step": ANY, "dur_us": NUM, **_nums("start_us", "device_busy_us")}
OP = {"name": ANY, "count": ANY, "self_us": NUM, "total_us": NUM, **_nums("device_us")}
KERNEL = {"name": ANY, "count": ANY, "total_us": NUM}
ANNOTATION = {"name": ANY, "count": ANY, "total_us": NUM, "mean_us": NUM, "max_us": NUM, **_nums("device_us")}
BLOCK = MapOf(NUM, nulls=True)
COMMUNICATION = {"device?": BLOCK, "host?": BLOCK, "top?": [{"name": ANY, "total_us": NUM}]}
CAPTURE = {
    "path": STR, "kind": STR, "status": STR, "stage?": STR, "role?": STR, **_nums("wall_us"),
    "steps?": [STEP], "device?": BLOCK, "communication?": COMMUNICATION, "annotations?": [ANNOTATION],
    "top_ops?": [OP], "top_ops_by_device?": [OP], "top_kernels?": [KERNEL], "warnings?": LIST, "totals?": DICT,
    "step_trace?": [_nums("computing_us", "communication_exposed_us", "communication_us", "free_us", "overlapped_us",
                          "bubble_us", "preparing_us", "stage_us", "dur_us")],
    "idle_causes?": [DICT], "missing?": LIST,
}
STAGE_RANK = {"source": ANY, "stage": STR, "rank": ANY, "value_us": NUM, "role?": STR}
SLOW_RANK = {"source": ANY, "stage": ANY, "metric": ANY, "flagged": ANY, "value_us": NUM, "median_us": NUM,
             "ratio": NUM}
FINDING = {"impact": NUM, "evidence?": DICT}
ITERATION = {
    "iteration": ANY, "start_us": NUM, "dur_us": NUM, "no_stage_us": NUM, "overlap_us": NUM,
    **_nums("profiler_us", "profiler_no_stage_us"),
    "stages": MapOf({"wall_us": NUM, **_nums("first_start_us")}),
    "critical_path": [{"stage": ANY, "worker": ANY}], "idle_per_worker_us": MapOf(NUM),
}
GANTT = {"iteration": ANY, "stage": STR, "worker": STR, "start_us": NUM, "dur_us": NUM}
TIMELINE = {"iterations": [ITERATION], "gantt?": [GANTT]}
SUMMARY = {
    "captures*": [CAPTURE], "stage_rank*": [STAGE_RANK], "slow_ranks?": [SLOW_RANK], "findings?": [FINDING],
    "timeline?": TIMELINE, "counts*": DICT, "options?": DICT, "runs?": LIST, "warnings?": LIST,
}


def _what(spec: Any) -> str:
    if isinstance(spec, _Kind):
        return spec.what
    if isinstance(spec, list):
        return "a list"
    return "an object"


def _describe(v: Any) -> str:
    text = repr(v)
    return f"{text[:60]}{'…' if len(text) > 60 else ''} ({type(v).__name__})"


def _walk(v: Any, spec: Any, where: str) -> None:
    """Raise SummaryShapeError (the message without the file) at the first value unlike `spec`."""
    if isinstance(spec, _Kind):
        if not spec.test(v):
            raise SummaryShapeError(f"{where} is {_describe(v)}; expected {spec.what}")
        return
    if isinstance(spec, list):
        if not isinstance(v, list):
            raise SummaryShapeError(f"{where} is {_describe(v)}; expected a list")
        if spec[0] is not ANY:
            for i, x in enumerate(v):
                _walk(x, spec[0], f"{where}[{i}]")
        return
    if not isinstance(v, dict):
        raise SummaryShapeError(f"{where} is {_describe(v)}; expected {_what(spec)}")
    if isinstance(spec, MapOf):
        if spec.spec is not ANY:
            for k, x in v.items():
                if x is not None or not spec.nulls:
                    _walk(x, spec.spec, f"{where}.{k}")
        return
    for key, sub in spec.items():
        name = key.rstrip("?*")
        x = v.get(name)
        if x is None:
            if key.endswith("?") or (key.endswith("*") and name not in v):
                continue
            found = f"{where} has no {name!r}" if name not in v else f"{where}.{name} is null"
            raise SummaryShapeError(f"{found}; expected {_what(sub)}")
        _walk(x, sub, f"{where}.{name}")


def checked(summary: Any, path: str | Path) -> Any:
    """`summary` (the JSON of `path`), or SummaryShapeError naming the file, the field, the value and
    what was expected."""
    try:
        _walk(summary, SUMMARY, "summary")
    except SummaryShapeError as exc:
        raise SummaryShapeError(f"{path}: not a summary.json of this analysis: {exc} "
                                "(analyse the run again to rewrite it)") from None
    return summary
