"""One profiler's per-sample records: `SampleRecorder`, an observer that takes record_samples()
calls on the training thread (pull.py: attributes into tuples, nothing else) and writes them at the
next step() / stop() (engines.py converts and checks, then one append to
`<profile_save_path>/samples/<role>_rank<R>.jsonl`, docs/rollout.md).

One writer per file: the recorder holds an exclusive lock (flock) on its file while its profiler
runs; a second process of the same role and rank (separate rollout actors left at rank 0) finds it
taken and writes `<role>_rank<R>.pid<P>.jsonl` instead, and the analysis reads both. Each batch line
says its writer (`pid`) and its attempt (`attempt`: when the profiler started, ns): a run resumed
after a crash re-runs iterations, and the analysis keeps an iteration's last attempt.

When it records: while its profiler runs, with any part of the profiler on (`integrated.profile`,
`integrated.dynamic`, `metrics.enable`, `tracer.enable`, or a tracer running in this process), so
it stays on with `profile: false`, as the metrics tracker does; with all of them off nothing is
written ("off means off"). Every rank records (the rank filters select captures, not records).

Bounded: at most `formats.MAX_SAMPLES_PER_ITERATION` sample lines per worker and iteration; the
rest are counted in the batch line's `dropped`. A write that fails (a directory where the file
should be, a full disk) is one warning; training goes on.
"""
from __future__ import annotations

import errno
import json
import os
import time
import weakref
from pathlib import Path
from typing import Any, Iterable, Mapping

import orjson

from mindspeed_profiler.capture import stages
from mindspeed_profiler.capture.observers import Observer
from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import open_append
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.core.warn import new_scope, warn_once
from mindspeed_profiler.rollout.engines import CONVERTERS, CLOCK_NONE, Context
from mindspeed_profiler.rollout.pull import DICT, Pulled, pull
from mindspeed_profiler.runtime.manifest import resolve_run_id
from mindspeed_profiler.runtime.ranks import resolve_rank

CLOCKS = (None, "wall", "monotonic", "perf_counter")
MAX_PROBLEMS = 20   # problem lines per batch line; the rest are counted
_JSON_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def _ENCODE(line: dict[str, Any]) -> str:   # noqa: N802 - the encoder, named as it was
    """One line as compact JSON: orjson (~1.3 us a sample line against json's ~13: the write at
    step() is most of the records' cost, bench_vllm_rollout.py), json where orjson refuses (a lone
    surrogate in a text, an integer past 64 bits: json escapes or writes them). The checks leave no
    NaN or infinity in a line, which orjson would write as null."""
    try:
        return orjson.dumps(line).decode()
    except TypeError:
        return _JSON_ENCODE(line)
# sample files this process has written: only its first write of one may start it afresh
WRITTEN: set[str] = set()


def check_arguments(items: Any, stage: Any, clock: Any, policy_version: Any = None) -> None:
    """ValueError naming the argument, its value and what is allowed; else nothing."""
    if policy_version is not None and (isinstance(policy_version, bool) or not isinstance(policy_version, int)
                                       or policy_version < 0):
        raise ValueError(f"record_samples(policy_version=...): {policy_version!r} is not a version; allowed: None or "
                         "an integer >= 0")
    if not isinstance(stage, str) or not stages.is_stage(stage):
        raise ValueError(f"record_samples(stage=...): {stage!r} is not a registered stage; allowed: "
                         f"{', '.join(stages.registered_stages())} (register_stage(name) adds one)")
    if not any(clock is c or (isinstance(clock, str) and clock == c) for c in CLOCKS):
        raise ValueError(f"record_samples(clock=...): {clock!r} is not a clock; allowed: None or 'wall' (time.time()), "
                         "'monotonic' (time.monotonic()), 'perf_counter' (time.perf_counter())")
    if isinstance(items, (str, bytes, bytearray, Mapping)) or not _iterable(items):
        raise ValueError(f"record_samples(items=...): a {type(items).__name__} is not an iterable of samples; allowed: "
                         "a list (or any iterable) of vLLM RequestOutputs, SGLang result dicts (with meta_info) or sample "
                         "dicts")


def _iterable(items: Any) -> bool:
    try:
        iter(items)
    except TypeError:
        return False
    return True


def config_records(integ: Any, full: Any) -> bool:
    """Whether a profiler of this config records samples (the module docstring; the tracer
    running in this process is checked at each call)."""
    if integ.profile or getattr(integ, "dynamic", False):
        return True
    return full is not None and bool(full.metrics.enable or full.tracer.enable)


class SampleRecorder(Observer):
    """The per-sample records of `profiler` (see the module docstring). `full`: its whole
    ProfilerConfig, or None when it was given only the `integrated` section."""

    def __init__(self, profiler: Any, full: Any = None):
        self.role = profiler.role
        self.rank = resolve_rank(profiler.rank, profiler.world_size)[0]
        self.path = Path(profiler.cfg.profile_save_path) / formats.SAMPLES_DIR / formats.samples_file_name(self.role, self.rank)
        self.run_id = resolve_run_id(full)[0]   # keeps runs into one save path apart (None: nothing tells)
        self._configured = config_records(profiler.cfg, full)
        self._pending: list[tuple[Context, Pulled, int]] = []
        self._taken_in: int | None = None   # the iteration `_taken` counts items of
        self._taken = 0
        self._written: dict[int, int] = {}  # sample lines written per iteration (the bound)
        self._scope = new_scope()
        self._file: Any = None   # the samples file, open (and locked) from the first write to stop()
        self.attempt = time.time_ns()   # this start of the profiler (batch lines' `attempt`)

    # ------------------------------------------------------------------ the training thread

    def record(self, profiler: Any, items: Iterable[Any], stage: str = "actor_generate", clock: str | None = None,
               policy_version: int | None = None) -> int:
        """Take `items` for the profiler's current iteration: attributes pulled now, written at the
        next step() / stop(). Returns how many items were taken (the rest were past the bound or
        unreadable). Bad arguments: ValueError; anything else: a warning, 0."""
        check_arguments(items, stage, clock, policy_version)
        iteration = profiler.iteration
        if not (self._configured or STATE.tracer is not None):
            warn_once((self._scope, "off"), "record_samples: %s rank %d has integrated.profile, dynamic, metrics and the "
                      "tracer all off: samples are not recorded (turn one on)", self.role, self.rank)
            return 0
        if iteration is None or not profiler.running:   # not started, stopped, or a forked child's copy
            warn_once((self._scope, "idle"), "record_samples: the profiler of %s rank %d is not running (call start() "
                      "first): samples not recorded", self.role, self.rank)
            return 0
        try:
            ns = time.time_ns()
            mono, perf = time.monotonic(), time.perf_counter()
            now = ns / 1e9
            if iteration != self._taken_in:
                self._taken_in, self._taken = iteration, 0
            pulled = pull(items, formats.MAX_SAMPLES_PER_ITERATION - self._taken)
            taken = pulled.taken
            self._taken += taken
            self._pending.append((Context(iteration, stage, now, now - mono, now - perf, clock, policy_version), pulled, ns))
            return taken
        except Exception as exc:   # an iterator that raises, ...: training goes on
            warn_once((self._scope, "record", type(exc).__name__), "record_samples failed for %s rank %d (training goes "
                      "on, these samples are not recorded): %s: %s", self.role, self.rank, type(exc).__name__, exc)
            return 0

    # ------------------------------------------------------------------ the observer protocol

    def started(self, profiler: Any, iteration: int) -> None:
        self.attempt = time.time_ns()   # started again (a resumed run): a new attempt

    def step(self, profiler: Any, iteration: int) -> None:
        self.flush()

    def stopped(self, profiler: Any, iteration: int | None) -> None:
        self.flush()
        fh, self._file = self._file, None
        if fh is not None:   # the lock goes with it: the file may have another writer now
            try:
                fh.close()
            except OSError:
                pass

    # ------------------------------------------------------------------ writing

    def flush(self) -> int:
        """Convert, check, encode and append what was recorded since the last flush; returns the
        number of lines written. Never raises."""
        pending, self._pending = self._pending, []
        if not pending:
            return 0
        chunks: list[str] = []
        for ctx, pulled, ns in pending:
            try:
                chunks.extend(self.lines(ctx, pulled, ns))
            except Exception as exc:   # one call's records lost, the others written
                warn_once((self._scope, "encode", type(exc).__name__), "record_samples: the samples of one call "
                          "(iteration %s, %s) could not be encoded and are dropped: %s: %s", ctx.iteration, ctx.stage,
                          type(exc).__name__, exc)
        latest = max(ctx.iteration for ctx, _, _ in pending)
        self._written = {it: n for it, n in self._written.items() if it >= latest}
        if chunks:
            self._append(chunks, first_iteration=min(ctx.iteration for ctx, _, _ in pending))
        return len(chunks)

    def lines(self, ctx: Context, pulled: Pulled, ns: int) -> list[str]:
        """The encoded lines of one call: per source, a batch line and its sample lines (pure but
        for the per-iteration bound it counts)."""
        out: list[str] = []
        groups = pulled.groups or ({DICT: []} if pulled.problems or pulled.dropped else {})
        dropped, problems = pulled.dropped, list(pulled.problems)   # the call's own: on its first batch line
        for source, raws in groups.items():
            converted = CONVERTERS[source](raws, ctx)
            written = self._written.get(ctx.iteration, 0)
            keep = converted.lines[:max(0, formats.MAX_SAMPLES_PER_ITERATION - written)]
            self._written[ctx.iteration] = written + len(keep)
            out.append(_ENCODE(self.batch_line(ctx, ns, source, len(keep), dropped + len(converted.lines) - len(keep),
                                               converted.clock if raws else CLOCK_NONE, problems + converted.problems)))
            out.extend(_ENCODE(line) for line in keep)
            dropped, problems = 0, []
        return out

    def batch_line(self, ctx: Context, ns: int, source: str, samples: int, dropped: int, clock: str,
                   problems: list[str]) -> dict[str, Any]:
        if len(problems) > MAX_PROBLEMS:
            problems = problems[:MAX_PROBLEMS] + [f"... and {len(problems) - MAX_PROBLEMS} more problems"]
        return {"type": formats.SAMPLE_BATCH, "v": formats.SAMPLES_SCHEMA, "role": self.role, "rank": self.rank,
                "run_id": self.run_id, "iteration": ctx.iteration, "stage": ctx.stage, "samples": samples,
                "dropped": dropped, "recorded_ns": ns, "source": source, "clock": clock, "problems": problems,
                "pid": os.getpid(), "attempt": self.attempt}

    def _append(self, chunks: list[str], first_iteration: int) -> None:
        try:
            fh = self._file if self._file is not None else self._open(first_iteration)
            fh.write(("\n".join(chunks) + "\n").encode("utf-8"))
            fh.flush()
        except Exception as exc:   # a directory there, a full disk, a read-only tree: training goes on
            warn_once((self._scope, "write"), "record_samples: could not write %s (%s rank %d): %s: %s; training goes "
                      "on, these samples are lost", self.path, self.role, self.rank, type(exc).__name__, exc)

    def _open(self, first_iteration: int) -> Any:
        """The file this recorder writes, opened, locked and kept until stop(): `<role>_rank<R>.jsonl`,
        or, while another process holds that one, `<role>_rank<R>.pid<P>.jsonl`. A run's first write
        starts it afresh when it begins at iteration 1 (a resumed run appends)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # never a plain open(): a FIFO at the path would hang step(), a link's target would be written
        fh = open_append(self.path)
        if not _locked(fh):
            fh.close()
            self.path = self.path.with_name(formats.samples_file_name(self.role, self.rank, os.getpid()))
            fh = open_append(self.path)
            _locked(fh)
        key = str(self.path.absolute())
        if key not in WRITTEN and first_iteration == 1:
            os.ftruncate(fh.fileno(), 0)   # ours alone now (the lock), never another live writer's
        WRITTEN.add(key)
        self._file = fh
        return fh


def _locked(fh: Any) -> bool:
    """Take the exclusive lock on an open file for as long as it stays open: False when another
    process holds it; True when taken, or when this system has no such locks (then one writer is
    not checked)."""
    try:
        import fcntl
    except ImportError:
        return True
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        return exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


_RECORDERS: "weakref.WeakKeyDictionary[Any, SampleRecorder]" = weakref.WeakKeyDictionary()


def recorder_of(profiler: Any, full: Any = None) -> SampleRecorder:
    """`profiler`'s recorder, made (and added to its observers) at its first record_samples()."""
    rec = _RECORDERS.get(profiler)
    if rec is None:
        rec = _RECORDERS[profiler] = SampleRecorder(profiler, full)
        profiler.add_observer(rec)
    return rec
