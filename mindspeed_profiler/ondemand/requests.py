"""On-demand capture requests: parsing, validation and the per-worker decision. Pure: no file, no
clock, no profiler.

Two request formats are read:

- ours (`mindspeed-profiler trigger` writes it; docs/ondemand.md):

      {"schema": 1, "id": "r-...", "created": "<iso>", "source": "trigger",
       "iterations": [first, last] | null,     # absolute, 1-based, inclusive
       "steps": N | null,                      # else: the next N iterations of each worker
       "roles": ["actor", ...] | null,         # null: every role
       "integrated": {"stage": ..., "profile_level": ..., "profile_ranks": ..., ...},
       "auto": {"slow_iteration": ..., ...} | absent}   # integrated.auto_capture's reason (auto_capture.py)

- torch_npu's dynamic-profiler `profiler_config.json` (torch_npu/profiler/_dynamic_profiler/
  _dynamic_profiler_config_context.py): every change of the file is a request (torch_npu's monitor
  sets `is_valid` itself on each load, so the key is ignored); `start_step` S > 0 starts after the
  S-th step() call, i.e. at our iteration S + 1; 0 or -1 means the next iteration boundary (we start
  at boundaries only); `warmup` iterations run under the profiler, then `active` are recorded.

A request overrides the job's `integrated` settings for its captures only; `profile`, `dynamic`,
the step window and the save path are the request's own business and cannot be overridden.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from mindspeed_profiler.core.capture_options import FIELD_OF_KEYWORD

SCHEMA = 1
MAX_ITERATIONS = 1000  # one request records at most this many iterations: more is a mistake, not a capture
MAX_FIELDS = 64        # integrated fields one request may set (the schema has fewer)
MAX_WARMUP = 10        # warm-up iterations a request may ask for beyond the job's own
MAX_QUEUED = 4         # accepted requests waiting on one worker (each books its iterations)
MAX_REASON_CHARS = 300  # of a rejection reason kept in a worker's state (a key list may be huge)
MAX_LISTED_KEYS = 5    # unknown keys named in a rejection
# integrated fields a request may not set: the request decides what and when, the job decides where
FIXED_FIELDS = ("profile", "dynamic", "profile_save_path", "profile_step_start", "profile_step_end", "profile_steps")
STATES = ("requested", "running", "done", "rejected", "skipped")
FINAL_STATES = ("done", "rejected", "skipped")
SOURCES = ("trigger", "torch_npu", "auto")   # auto: integrated.auto_capture (auto_capture.py)
MAX_AUTO_KEYS = 32     # keys of an automatic request's reason (`auto`)


class RequestError(ValueError):
    """A request that cannot be carried out; str() is the reason shown by `status`."""


@dataclass(frozen=True)
class Request:
    """One validated request. Exactly one of `iterations` / `steps` is set."""

    id: str
    iterations: tuple[int, int] | None = None
    steps: int | None = None
    roles: tuple[str, ...] | None = None
    integrated: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    source: str = "trigger"
    created: str | None = None
    notes: tuple[str, ...] = ()
    auto: Mapping[str, Any] | None = None   # an automatic capture's reason (core/auto_reason.py), else None

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "id": self.id, "created": self.created, "source": self.source,
                "iterations": list(self.iterations) if self.iterations else None, "steps": self.steps,
                "roles": list(self.roles) if self.roles else None, "integrated": dict(self.integrated),
                "notes": list(self.notes), **({"auto": dict(self.auto)} if self.auto is not None else {})}


def _positive_int(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RequestError(f"{name}: got {value!r}; expected an integer >= {minimum}")
    return value


def check_span(first: int, last: int) -> None:
    if last < first:
        raise RequestError(f"iterations: got {first}-{last}; the last iteration comes before the first")
    if last - first + 1 > MAX_ITERATIONS:
        raise RequestError(f"iterations: got {first}-{last} ({last - first + 1} iterations); one request records at most "
                           f"{MAX_ITERATIONS}")


def parse_request(raw: Any, fallback_id: str | None = None) -> Request:
    """Our request format (module docstring) -> Request; RequestError names the field, the value
    and what is allowed. Field values of `integrated` are checked later, against the job's config
    (check_fields)."""
    if not isinstance(raw, Mapping):
        raise RequestError(f"a request is a JSON object; got {type(raw).__name__}")
    rid = raw.get("id", fallback_id)
    if not isinstance(rid, str) or not rid or len(rid) > 128 or any(c in rid for c in "/\\\0"):
        raise RequestError(f"id: got {rid!r}; expected a non-empty string without slashes")
    unknown = [k for k in raw if k not in {"schema", "id", "created", "source", "iterations", "steps", "roles", "integrated",
                                           "notes", "run_id", "auto"}]
    if unknown:
        raise RequestError(f"unknown key(s) {_some(unknown)}; allowed: id, iterations, steps, roles, integrated")
    if raw.get("schema", SCHEMA) != SCHEMA:
        raise RequestError(f"schema: got {raw.get('schema')!r}; this version reads schema {SCHEMA}")
    iterations, steps = raw.get("iterations"), raw.get("steps")
    if (iterations is None) == (steps is None):
        raise RequestError("give exactly one of iterations: [first, last] or steps: N (the next N iterations)")
    its = None
    if iterations is not None:
        if not isinstance(iterations, (list, tuple)) or len(iterations) != 2:
            raise RequestError(f"iterations: got {iterations!r}; expected [first, last] (1-based, inclusive)")
        first, last = (_positive_int(v, "iterations") for v in iterations)
        check_span(first, last)
        its = (first, last)
    else:
        steps = _positive_int(steps, "steps")
        if steps > MAX_ITERATIONS:
            raise RequestError(f"steps: got {steps}; one request records at most {MAX_ITERATIONS} iterations")
    roles = raw.get("roles")
    if roles is not None:
        if not isinstance(roles, (list, tuple)) or not roles or len(roles) > MAX_FIELDS or not all(isinstance(r, str) and r for r in roles):
            raise RequestError(f"roles: got {roles!r}; expected a list of worker roles such as [actor] (or null: all)")
        roles = tuple(roles)
    integrated = raw.get("integrated") or {}
    if not isinstance(integrated, Mapping):
        raise RequestError(f"integrated: got {type(integrated).__name__}; expected a mapping of profiler_config.integrated fields")
    if len(integrated) > MAX_FIELDS:
        raise RequestError(f"integrated: {len(integrated)} keys; a request sets at most {MAX_FIELDS} fields")
    fixed = sorted(set(integrated) & set(FIXED_FIELDS))
    if fixed:
        raise RequestError(f"integrated.{fixed[0]}: set by the request itself (iterations / steps) or by the job; "
                           f"a request may not set {', '.join(FIXED_FIELDS)}")
    auto = raw.get("auto")
    if auto is not None and (not isinstance(auto, Mapping) or len(auto) > MAX_AUTO_KEYS):
        raise RequestError(f"auto: got {type(auto).__name__} of {len(auto) if isinstance(auto, Mapping) else '?'} keys; "
                           f"expected the reason of an automatic capture, an object of at most {MAX_AUTO_KEYS} keys")
    source = raw.get("source", "trigger")
    return Request(id=rid, iterations=its, steps=steps, roles=roles, integrated=MappingProxyType(dict(integrated)),
                   source=source if source in SOURCES else "trigger", created=raw.get("created") if isinstance(raw.get("created"), str) else None,
                   notes=tuple(str(n) for n in raw.get("notes") or () if isinstance(n, str)),
                   auto=MappingProxyType(dict(auto)) if auto is not None else None)


def _some(keys: Sequence[Any]) -> str:
    """The first few keys, each cut short, and how many more (a request may hold thousands)."""
    shown = [repr(str(k)[:60]) for k in list(keys)[:MAX_LISTED_KEYS]]
    more = len(keys) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def short_reason(reason: str | None) -> str | None:
    """A reason as kept in a worker's state: at most MAX_REASON_CHARS."""
    if reason is None or len(reason) <= MAX_REASON_CHARS:
        return reason
    return reason[:MAX_REASON_CHARS] + f"... ({len(reason)} characters)"


def check_limits(fields: Mapping[str, Any], job: Any) -> None:
    """A request's fields within the job's own limits (`job`: its IntegratedConfig): warm-up at
    most MAX_WARMUP beyond the job's (a session open for a billion iterations would block every
    later request), and a trace size budget only lowered, never lifted (null) or raised: the job's
    disk guard is the job's."""
    w = fields.get("warmup_steps")
    if w is not None and isinstance(w, int) and not isinstance(w, bool) and w > job.warmup_steps + MAX_WARMUP:
        raise RequestError(f"warmup_steps: got {w}; a request may ask for at most {job.warmup_steps + MAX_WARMUP} "
                           f"(the job's {job.warmup_steps} + {MAX_WARMUP})")
    if "trace_size_budget_mb" in fields and job.trace_size_budget_mb is not None:
        b = fields["trace_size_budget_mb"]
        if b is None or not isinstance(b, (int, float)) or isinstance(b, bool) or b > job.trace_size_budget_mb:
            raise RequestError(f"trace_size_budget_mb: got {b!r}; the job's budget is {job.trace_size_budget_mb} MB and a "
                               "request may only lower it")


# torch_npu dynamic profiler -> our integrated fields
_NPU_LEVELS = {"level_none": "level_none", "level0": "level0", "level1": "level1", "level2": "level2"}
_NPU_BOOLS = {**FIELD_OF_KEYWORD, "analyse": "profile_analysis"}
_NPU_EXP_BOOLS = {"l2_cache": "l2_cache", "mstx": "mstx", "msprof_tx": "mstx", "data_simplification": "data_simplification"}


def parse_torch_npu_config(raw: Any, request_id: str) -> Request:
    """torch_npu's `profiler_config.json` (its template: torch_npu's DynamicProfilerShareMemory.JSON_DATA)
    -> Request."""
    if not isinstance(raw, Mapping):
        raise RequestError(f"profiler_config.json: got {type(raw).__name__}; expected a JSON object")
    if "NPU_MONITOR_START" in raw:
        raise RequestError("profiler_config.json: dynolog (NPU_MONITOR_START) requests are not supported; use the file format")
    fields: dict[str, Any] = {}
    notes: list[str] = []
    acts = raw.get("activities")
    if acts is not None:
        if not isinstance(acts, list) or not all(isinstance(a, str) for a in acts):
            raise RequestError(f"activities: got {acts!r}; expected a list such as [\"CPU\", \"NPU\"]")
        upper = {a.upper() for a in acts}
        bad = sorted(upper - {"CPU", "NPU", "CUDA"})
        if bad:
            raise RequestError(f"activities: got {bad[0]!r}; allowed: CPU, NPU")
        fields["profile_with_cpu"] = "CPU" in upper
        fields["profile_with_npu"] = bool(upper & {"NPU", "CUDA"})
    for key, ours in _NPU_BOOLS.items():
        if key in raw and raw[key] is not None:
            if not isinstance(raw[key], bool):
                raise RequestError(f"{key}: got {raw[key]!r}; expected true or false")
            fields[ours] = raw[key]
    exp = raw.get("experimental_config") or {}
    if not isinstance(exp, Mapping):
        raise RequestError(f"experimental_config: got {type(exp).__name__}; expected an object")
    if "profiler_level" in exp:
        level = exp["profiler_level"]
        if not isinstance(level, str) or level.lower() not in _NPU_LEVELS:
            raise RequestError(f"experimental_config.profiler_level: got {level!r}; allowed: Level_none, Level0, Level1, Level2")
        fields["profile_level"] = _NPU_LEVELS[level.lower()]
    if exp.get("aic_metrics") not in (None, "AiCoreNone"):
        fields["aic_metrics"] = exp["aic_metrics"]
    for key, ours in _NPU_EXP_BOOLS.items():
        if key in exp and exp[key] is not None:
            if not isinstance(exp[key], bool):
                raise RequestError(f"experimental_config.{key}: got {exp[key]!r}; expected true or false")
            fields[ours] = exp[key] or fields.get(ours, False) if ours == "mstx" else exp[key]
    export = exp.get("export_type")
    if export is not None:
        kinds = [export] if isinstance(export, str) else export
        if not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) and k.lower() in ("text", "db") for k in kinds):
            raise RequestError(f"experimental_config.export_type: got {export!r}; allowed: text, db")
        fields["profile_export_type"] = "db" if "db" in [k.lower() for k in kinds] else "text"
        if len(kinds) > 1:
            notes.append(f"export_type {kinds}: one export type per capture here, {fields['profile_export_type']!r} used")
    for key in ("mstx_domain_include", "mstx_domain_exclude"):
        if exp.get(key):
            fields[key] = exp[key]
    if raw.get("is_rank") is True:
        ranks = raw.get("rank_list")
        if not isinstance(ranks, list) or not ranks or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks):
            raise RequestError(f"rank_list: got {ranks!r}; expected a non-empty list of ranks >= 0 when is_rank is true")
        fields["profile_ranks"] = sorted(set(ranks))
    warmup = raw.get("warmup", 0)
    fields["warmup_steps"] = _positive_int(warmup, "warmup", minimum=0)
    active = _positive_int(raw.get("active", 1), "active")
    if active > MAX_ITERATIONS:
        raise RequestError(f"active: got {active}; one request records at most {MAX_ITERATIONS} iterations")
    start = raw.get("start_step", 0)
    if isinstance(start, bool) or not isinstance(start, int) or start < -1:
        raise RequestError(f"start_step: got {start!r}; expected -1 or 0 (the next step) or a step number >= 1")
    if raw.get("prof_dir") not in (None, "", "./"):
        notes.append(f"prof_dir {raw['prof_dir']!r} not used: captures are written under the job's profile_save_path")
    if start >= 1:
        # torch_npu starts after the start_step-th step() call: our iteration start_step + 1
        its = (start + 1 + fields["warmup_steps"], start + fields["warmup_steps"] + active)
        return Request(id=request_id, iterations=its, integrated=MappingProxyType(fields), source="torch_npu", notes=tuple(notes))
    return Request(id=request_id, steps=active, integrated=MappingProxyType(fields), source="torch_npu", notes=tuple(notes))


@dataclass(frozen=True)
class Decision:
    """What one worker does with a request: `state` is "requested" (accepted, starts at
    `first`), "rejected" or "skipped" (not for this worker), with the reason."""

    state: str
    first: int | None = None
    last: int | None = None
    reason: str | None = None


def decide(req: Request, *, role: str, rank: int, iteration: int, ranks_selected: bool,
           busy: Sequence[tuple[str, int, int]] = (), static_runs: tuple[tuple[int, int], ...] = (),
           warmup: int = 0) -> Decision:
    """The decision of the worker (role, rank) at the start of `iteration` (its next boundary).

    `ranks_selected`: whether the request's profile_ranks (or the job's) select this rank.
    `busy`: (request id, begin, last) of each on-demand capture this worker is running or has
    accepted. `static_runs`: the (first, last) runs of iterations the job's own config captures
    (empty: profile off). `warmup`: iterations under the profiler before `first`, not recorded (a
    "next N" request records the N iterations after them)."""
    if req.roles is not None and role not in req.roles:
        return Decision("skipped", reason=f"role {role!r} not in roles {list(req.roles)}")
    if not ranks_selected:
        return Decision("skipped", reason=f"rank {rank} not selected by profile_ranks / role_ranks")
    if req.iterations is not None:
        first, last = req.iterations
        if first < iteration:
            return Decision("rejected", reason=f"iteration {first} already began: this worker is at iteration {iteration} "
                                               f"(ask for later iterations, or steps: N for the next N)")
    else:
        first = iteration + warmup
        last = first + req.steps - 1
    begin = max(iteration, first - warmup)
    for other, a, b in busy:
        if not (last < a or begin > b):
            return Decision("rejected", reason=f"a capture is already running or accepted on this worker: request {other!r}, "
                                               f"iterations {a}-{b}")
    if len(busy) >= MAX_QUEUED:
        return Decision("rejected", reason=f"{len(busy)} requests are already running or waiting on this worker (at most "
                                           f"{MAX_QUEUED}): ask again when one is done")
    for a, b in static_runs:
        if not (last < a or begin > b):
            return Decision("rejected", reason=f"iterations {first}-{last} overlap the job's configured capture "
                                               f"(iterations {a}-{b}); one capture at a time per process")
    return Decision("requested", first=first, last=last)
