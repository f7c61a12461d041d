"""Reading one worker's per-sample records, `<save_path>/samples/<role>_rank<R>.jsonl` (the format:
docs/rollout.md "The record format", names in core/formats.py). Pure parsing, no analysis.

The stable entry point (the long-tail analysis and the timeline both use it):

    read_samples(path) -> SamplesFile
        .path, .role, .rank        the worker (from the file name; a batch line's role / rank win)
        .batches: list[SampleBatch]   one per `batch` line, in file order
        .samples: list[Sample]        one per readable `sample` line, in file order
        .problems: list[(line, message)]   lines not read (not JSON, not an object, no integer
                                           iteration / text stage, unknown type), bounds reached

A corrupt line is a problem and the other lines are read. A sample whose times are missing or
inconsistent is kept with `problem` set (the writer's reason, else the reader's: "end_ns before
start_ns", a time of the wrong type, ...); another field of the wrong type is read as null and
said in `problems` (the sample is kept). Bounded: at
most MAX_LINES lines and MAX_LINE_BYTES per line are read (a problem says so). Raises OSError
(missing, unreadable, not a regular file) only for the file itself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import orjson

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import open_regular
from mindspeed_profiler.core.jsonsafe import loads_lenient

from .numbers import INT64, finite_number, json_int, shown

# lines read from one file: 16 iterations at the writer's per-worker bound, 1,000 of 1,024 samples
# (~0.3 GB of Sample objects); a file past this is from a very long run: its first lines are read
# and the cut is said
MAX_LINES = 1 << 20
MAX_LINE_BYTES = 1 << 20     # a sample line is ~400 bytes; a longer line is no record of ours

TIME_FIELDS = ("start_ns", "first_token_ns", "end_ns")
TOKEN_FIELDS = ("prompt_tokens", "response_tokens")
SECONDS_FIELDS = ("reward_s", "tool_s", "queue_s", "prefill_s", "decode_s")
INT_FIELDS = TOKEN_FIELDS + TIME_FIELDS + ("policy_version", "preemptions")


@dataclass(frozen=True, slots=True)
class Sample:
    """One `sample` line, its fields checked (a wrong type read as None, said in `problem`)."""

    role: str
    rank: int
    iteration: int
    stage: str
    id: str
    prompt_tokens: Optional[int] = None
    response_tokens: Optional[int] = None
    start_ns: Optional[int] = None
    first_token_ns: Optional[int] = None
    end_ns: Optional[int] = None
    finish_reason: Optional[str] = None
    truncated: Optional[bool] = None
    policy_version: Optional[int] = None
    reward_s: Optional[float] = None
    tool_s: Optional[float] = None
    queue_s: Optional[float] = None
    prefill_s: Optional[float] = None
    decode_s: Optional[float] = None
    preemptions: Optional[int] = None   # times the engine preempted it (vLLM's num_preemptions), where given
    problem: Optional[str] = None
    run_id: Optional[str] = None   # the batch line's `run_id` when it has one (optional, not in version 1)
    line: int = 0
    attempt: Optional[int] = None  # the batch line's `attempt`: when the writer's profiler started (ns)

    @property
    def timed(self) -> bool:
        """Whether the sample's start and end can be used (both known, no problem)."""
        return self.problem is None and self.start_ns is not None and self.end_ns is not None


@dataclass(frozen=True)
class SampleBatch:
    """One `batch` line: one record_samples() call of one worker."""

    role: str
    rank: int
    iteration: int
    stage: str
    samples: int = 0
    dropped: int = 0
    recorded_ns: Optional[int] = None
    source: str = ""
    clock: str = ""
    problems: tuple = ()
    run_id: Optional[str] = None
    v: Optional[int] = None
    line: int = 0
    pid: Optional[int] = None       # the writing process
    attempt: Optional[int] = None   # when its profiler started (ns): a resumed run's attempts differ


@dataclass
class SamplesFile:
    path: str
    role: str
    rank: int
    pid: Optional[int] = None   # the file name's `.pid<P>` (a second writer of one role and rank)
    batches: list = field(default_factory=list)    # SampleBatch
    samples: list = field(default_factory=list)    # Sample
    problems: list = field(default_factory=list)   # (line number, message)


def read_samples(path: str | Path) -> SamplesFile:
    """Parse one samples file (see the module's docstring). OSError for the file itself only."""
    who = formats.SAMPLES_FILE_RE.match(Path(path).name)
    out = SamplesFile(path=str(path), role=who["role"] if who else "", rank=int(who["rank"]) if who else 0,
                      pid=int(who["pid"]) if who and who["pid"] else None)
    current: Optional[SampleBatch] = None
    with open_regular(path) as fh:   # never a FIFO: it would block
        for lineno, raw in enumerate(fh, 1):
            if lineno > MAX_LINES:
                out.problems.append((lineno, f"more than {MAX_LINES} lines: the rest of the file is not read"))
                break
            if len(raw) > MAX_LINE_BYTES:
                out.problems.append((lineno, f"a line of {len(raw)} bytes (at most {MAX_LINE_BYTES}): skipped"))
                continue
            if not raw.strip():
                continue
            rec = _parse(raw)
            if not isinstance(rec, dict):
                why = "not valid JSON (truncated by a crash?)" if rec is _BAD else "not a JSON object"
                out.problems.append((lineno, f"{why}: skipped"))
                continue
            kind = rec.get("type")
            if kind == formats.SAMPLE_BATCH:
                batch = _batch(rec, out, lineno)
                if batch is not None:
                    current = batch
                    out.batches.append(batch)
            elif kind == formats.SAMPLE_RECORD:
                s = _sample(rec, out, current, lineno)
                if s is not None:
                    out.samples.append(s)
            else:
                out.problems.append((lineno, f"unknown record type {shown(kind)} (allowed: "
                                             f"{formats.SAMPLE_BATCH!r}, {formats.SAMPLE_RECORD!r}): skipped"))
    return out


_BAD = object()


def _parse(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:   # NaN, huge integers, lone surrogates: Python's json takes them, the checks below judge them
        return loads_lenient(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return _BAD


def _where(rec: dict, out: SamplesFile, lineno: int, what: str) -> Optional[tuple[int, str]]:
    """(iteration, stage) of a line, or None with the problem said (the line cannot be placed)."""
    it, stage = json_int(rec.get("iteration")), rec.get("stage")
    if it is None or it < 0:
        out.problems.append((lineno, f"{what} line with iteration {shown(rec.get('iteration'))} "
                                     "(allowed: an integer >= 0): skipped"))
        return None
    if not isinstance(stage, str) or not stage:
        out.problems.append((lineno, f"{what} line with stage {shown(stage)} (allowed: a non-empty text): skipped"))
        return None
    return it, stage


def _text(v: Any) -> Optional[str]:
    return v if isinstance(v, str) else None


def _batch(rec: dict, out: SamplesFile, lineno: int) -> Optional[SampleBatch]:
    where = _where(rec, out, lineno, "batch")
    if where is None:
        return None
    role, rank = _text(rec.get("role")), json_int(rec.get("rank"))
    probs = rec.get("problems")
    return SampleBatch(
        role=role if role else out.role, rank=rank if rank is not None and rank >= 0 else out.rank,
        iteration=where[0], stage=where[1],
        samples=max(json_int(rec.get("samples")) or 0, 0), dropped=max(json_int(rec.get("dropped")) or 0, 0),
        recorded_ns=json_int(rec.get("recorded_ns")), source=_text(rec.get("source")) or "",
        clock=_text(rec.get("clock")) or "",
        problems=tuple(str(p)[:500] for p in probs[:100]) if isinstance(probs, list) else (),
        run_id=_text(rec.get("run_id")), v=json_int(rec.get("v")), line=lineno,
        pid=json_int(rec.get("pid")), attempt=json_int(rec.get("attempt")))


def _sample(rec: dict, out: SamplesFile, batch: Optional[SampleBatch], lineno: int) -> Optional[Sample]:
    where = _where(rec, out, lineno, "sample")
    if where is None:
        return None
    bad: list[str] = []
    vals: dict[str, Any] = {}
    get = rec.get
    for k in INT_FIELDS:
        v = get(k)
        # the common case inline (type() is: a bool is no int here); the rest through the checks
        vals[k] = v if v is None or (type(v) is int and 0 <= v < INT64) else \
            _checked(rec, k, json_int, "an integer >= 0", bad, nonneg=True)
    for k in SECONDS_FIELDS:
        v = get(k)
        vals[k] = v if v is None or (type(v) is float and 0.0 <= v < math.inf) else \
            _checked(rec, k, finite_number, "a finite number >= 0", bad, nonneg=True)
    vals["finish_reason"] = _checked(rec, "finish_reason", _text, "a text", bad)
    vals["truncated"] = _checked(rec, "truncated", lambda v: v if isinstance(v, bool) else None, "true or false", bad)
    if vals["truncated"] is None and vals["finish_reason"] is not None:
        vals["truncated"] = vals["finish_reason"] == "length"
    writer = rec.get("problem")
    problem = str(writer)[:500] if writer not in (None, "") else None
    bad_times = [b for b in bad if b.split(" ", 1)[0] in TIME_FIELDS]
    problem = problem or _inconsistent(vals) or ("; ".join(bad_times) if bad_times else None)
    if len(bad) > len(bad_times):
        out.problems.append((lineno, "sample " + "; ".join(b for b in bad if b not in bad_times)))
    sid = rec.get("id")
    return Sample(role=batch.role if batch else out.role, rank=batch.rank if batch else out.rank,
                  iteration=where[0], stage=where[1], id="" if sid is None else str(sid)[:200],
                  problem=problem, run_id=batch.run_id if batch else None, line=lineno,
                  attempt=batch.attempt if batch else None, **vals)


def _checked(rec: dict, key: str, conv, allowed: str, bad: list[str], nonneg: bool = False) -> Any:
    """`conv(rec[key])` (numbers.py's rules), None with the problem said when it gives none (or,
    with `nonneg`, a negative number)."""
    v = rec.get(key)
    if v is None:
        return None
    x = conv(v)
    if x is None or (nonneg and x < 0):
        bad.append(f"{key} {shown(v)} (allowed: {allowed} or null) read as null")
        return None
    return x


def _inconsistent(vals: dict) -> Optional[str]:
    """Why the times cannot all be true (None: they can, or too few are known to tell)."""
    start, first, end = vals["start_ns"], vals["first_token_ns"], vals["end_ns"]
    if start is not None and end is not None and end < start:
        return f"end_ns {end} before start_ns {start}"
    if first is not None and start is not None and first < start:
        return f"first_token_ns {first} before start_ns {start}"
    if first is not None and end is not None and end < first:
        return f"end_ns {end} before first_token_ns {first}"
    return None
