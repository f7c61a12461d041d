"""Collection: what both the local batch and the Ray one (ray_batch.py) do to turn a directory into
per-capture results. One protocol: a collector's `collect(root, opts)` returns `Collected`; the
batch (batch.py) builds the cross-capture tables and the outputs from it, whichever collected.
`LocalCollector` discovers, prepares and analyses here (a pool of worker processes)."""
from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from mindspeed_profiler.analysis.pipeline.capture import analyse_capture
from mindspeed_profiler.analysis.pipeline.discover import Capture, discover
from mindspeed_profiler.analysis.inputs import input_kinds
from mindspeed_profiler.analysis.pipeline import forked, result_cache
from mindspeed_profiler.analysis.pipeline.pool import Limits, failed_result, run_pool

POOL_MIN_BYTES = 8 << 20   # below this, starting worker processes costs more than it saves
UNPARSED = "unparsed"


def stderr_log(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass(frozen=True)
class CollectOptions:
    """How to collect: the same for every collector. `fn` analyses one capture (analyse_capture;
    tests pass their own); `limits` bound each capture's time and memory; `run` keeps one run's
    captures; `python` is the interpreter the prepare step runs the vendor parser with. `keep`, when
    given, is applied to each result as it arrives, before it is held (the batch moves the bulky
    totals out of the driver's memory with it: outputs.TotalsSpool)."""

    jobs: int = 1
    top_n: int = 20
    export_type: str = "text"
    progress: bool = False
    fn: Callable = analyse_capture
    limits: Limits = field(default_factory=Limits)
    log: Callable[[str], None] = stderr_log
    python: str = sys.executable
    run: str | None = None
    keep: Callable[[dict], dict] | None = None
    idle_only: bool = False   # a lone capture's second process only onto an idle core (the analyse command)
    cache_dir: Path | None = None   # the analysis cache's directory (result_cache.py); None: no cache

    @property
    def want_events(self) -> bool:
        return self.export_type == "db"   # analysis.db keeps the event columns


class Collector(Protocol):
    def collect(self, root: Path, opts: CollectOptions) -> "Collected": ...


def prepare(root: Path, caps: list[Capture], jobs: int, export_type: str, log: Callable[[str], None],
            python: str = sys.executable) -> dict[str, str]:
    """Each input kind's preparation step; {capture path: why it cannot be analysed here}."""
    reasons: dict[str, str] = {}
    for kind in input_kinds():
        if kind.prepare is not None:
            reasons.update(kind.prepare(root, caps, jobs, export_type, log, python))
    return reasons


def run_captures(root: Path, caps: list[Capture], jobs: int, top_n: int, want_events: bool,
                 progress: bool, fn: Callable = analyse_capture, limits: Limits | None = None,
                 keep: Callable[[dict], dict] | None = None, spare_core: bool = True) -> list[dict]:
    """Analyse captures: in bounded worker processes when there is more than one job and capture
    (and enough bytes to be worth starting them), or when a file looks like a decompression bomb
    (then also with one job); else here, under the time limit (a lone capture with jobs > 1: its
    trace parsed by two processes when large, parsing/split_parse.py, unless `spare_core` is false:
    no core idle). `keep(result)` is what is held of each result, applied as it arrives."""
    if not caps:
        return []
    _load_numpy_before_forks()
    limits = limits or Limits()
    results: dict[int, dict] = {}
    bar = ProgressBar(len(caps), progress, "analysing")

    def done(i: int, res: dict) -> None:
        results[i] = keep(res) if keep is not None else res
        bar.advance()

    try:
        if (jobs > 1 and len(caps) > 1 and _total_bytes(root, caps) > POOL_MIN_BYTES) or _any_bomb(root, caps):
            run_pool(root, caps, jobs, top_n, want_events, done, fn, limits)
        else:
            from mindspeed_profiler.analysis.parsing import split_parse   # (numpy: only when something is parsed)

            # a lone capture with jobs to spare: its trace may be parsed by two processes
            with split_parse.helpers(1 if jobs > 1 and len(caps) == 1 and spare_core else 0):
                for i, c in enumerate(caps):
                    done(i, run_in_process(fn, root, c, top_n, want_events, limits.timeout_s))
    finally:
        bar.stop()
    return [results[i] for i in range(len(caps))]


def _load_numpy_before_forks() -> None:
    """numpy loaded here before a helper or a worker is forked, so that they share it instead of
    each loading it (the analyse command defers numpy to its first use: commands/analyse.py)."""
    try:
        import numpy

        numpy.ndarray   # noqa: B018  (the first attribute of the command's stand-in loads numpy)
    except ImportError:
        pass


def _any_bomb(root: Path, caps: list[Capture]) -> bool:
    """Whether a capture's file looks like a decompression bomb (gzip_stream.looks_like_bomb): it is
    then parsed in a worker whose memory is capped, never in this process."""
    from mindspeed_profiler.analysis.parsing import gzip_stream

    for c in caps:
        for f in c.files:
            try:
                size = (root / f).stat().st_size
                expanded = gzip_stream.expanded_size(root / f)
            except OSError:
                continue
            if gzip_stream.looks_like_bomb(size, expanded):
                return True
    return False


class _TimeLimit(Exception):
    pass


def run_in_process(fn: Callable, root: Path, cap: Capture, top_n: int, want_events: bool, timeout_s: float | None) -> dict:
    """One capture here, stopped after timeout_s (a timer signal, in the main thread only)."""
    if not timeout_s or threading.current_thread() is not threading.main_thread():
        return fn(str(root), cap.to_dict(), top_n, want_events)

    def expired(signum, frame):
        raise _TimeLimit()
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return fn(str(root), cap.to_dict(), top_n, want_events)
    except _TimeLimit:
        return failed_result(cap, f"analysis took longer than {timeout_s:g} s (the per-capture time limit): stopped")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _total_bytes(root: Path, caps: list[Capture]) -> int:
    total = 0
    for c in caps:
        for f in c.files:
            try:
                total += (root / f).stat().st_size
            except OSError:
                pass
    return total


def default_limits() -> Limits:
    """30 minutes and half of this machine's memory per capture."""
    try:
        half = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2 >> 20
    except (ValueError, OSError, AttributeError):
        half = None
    return Limits(timeout_s=1800.0, memory_mb=half)


class ProgressBar:
    """A transient bar on stderr (rich), or nothing when `on` is false or there is nothing to do."""

    def __init__(self, total: int, on: bool, label: str):
        self.bar = None
        if on and total:
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(transient=True, console=Console(stderr=True))
            self.task = self.bar.add_task(label, total=total)
            self.bar.start()

    def advance(self) -> None:
        if self.bar:
            self.bar.advance(self.task)

    def stop(self) -> None:
        if self.bar:
            self.bar.stop()


class RunNotFound(ValueError):
    """`--run ID` names a run the directory does not hold."""


def select_run(root: Path, caps: list[Capture], run: str) -> list[Capture]:
    """The captures of one run; a timeline holding that run is kept and told to analyse it only."""
    from mindspeed_profiler.analysis.timeline.merge import read_segments

    known = {c.run_id for c in caps if c.run_id and c.kind != "timeline"}
    chosen = [c for c in caps if c.run_id == run and c.kind != "timeline"]
    for c in caps:
        if c.kind == "timeline":
            try:   # segments: their headers say which runs they hold; a merged file is one run's
                runs = set(read_segments(str(root / c.path)).runs()) if not c.files else {c.run_id}
            except (OSError, ValueError):
                runs = set()
            known |= {r for r in runs if r}
            if run in runs or (c.files and c.run_id is None):
                c.run_id = run
                chosen.append(c)
    if not chosen:
        raise RunNotFound(f"no capture of run {run!r} here (runs found: {', '.join(sorted(known)) or 'none with an id'})")
    return chosen


@dataclass
class Collected:
    """What the dispatch hands to the cross-capture tables and outputs (one code path for both)."""

    results: list[dict]                     # analyse_capture results: {"capture", "events"}
    unparsed: list[dict]                    # captures that stay unanalysed (status "unparsed", error = why)
    base: Path                              # the directory DIR/analysis goes in (unless out_dir)
    warnings: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)   # more summary keys (with --ray: "ray")
    root: Path | None = None                # DIR as this machine names it, when not `root` (--ray: ~ and $VARS expanded)


def collect_here(root: Path, opts: CollectOptions) -> Collected:
    """Discover, prepare and analyse on this machine (a pool of worker processes); with
    `opts.cache_dir`, what the analysis cache holds for unchanged inputs is taken from it."""
    if not root.exists():
        raise FileNotFoundError(f"analyse: directory {str(root)!r} does not exist")
    base = root if root.is_dir() else root.parent
    cache = _open_cache(root, opts)
    files = result_cache.listing(root, skip=[opts.cache_dir.parent]) if cache is not None else {}
    caps = cache.discovered(root, files, opts.run) if cache is not None else None
    reasons: dict[str, str] = {}
    if caps is None:   # the listing changed (or no cache): discovery and the preparation steps
        caps = discover(root)
        if opts.run is not None:
            caps = select_run(base, caps, opts.run)
        reasons = prepare(base, caps, opts.jobs, opts.export_type, opts.log, opts.python)
        if cache is not None:
            after = result_cache.listing(root, skip=[opts.cache_dir.parent])
            if caps and after == files and not reasons:   # found something; no file written by a preparation step, none left unparsed
                cache.keep_discovery(root, files, opts.run, caps)
            files = after
    todo = [c for c in caps if c.path not in reasons]
    hits, fresh = cache.split(base, todo, files) if cache is not None else ({}, list(range(len(todo))))
    # a lone capture's second process (the split parse, forked children) only onto an idle core
    spare = not opts.idle_only or len(fresh) != 1 or opts.jobs < 2 or forked.core_idle()

    def keep(res: dict) -> dict:
        if cache is not None:
            cache.store(res)   # before `opts.keep` moves parts of it to the outputs' side files
        return opts.keep(res) if opts.keep is not None else res
    ran = iter(run_captures(base, [todo[i] for i in fresh], opts.jobs, opts.top_n, opts.want_events, opts.progress,
                            opts.fn, limits=opts.limits, keep=keep, spare_core=spare))
    results = [(opts.keep(hits[i]) if opts.keep is not None else hits[i]) if i in hits else next(ran)
               for i in range(len(todo))]
    if cache is not None:
        if hits:
            opts.log(f"analyse: {len(hits)} of {len(todo)} captures from the analysis cache "
                     f"({cache.dir}; --no-cache to analyse them again)")
        if opts.run is None:
            cache.prune(c.path for c in todo)
    unparsed = []
    for c in caps:
        if c.path in reasons:
            d = c.to_dict()
            d.update(status=UNPARSED, error=reasons[c.path])
            unparsed.append(d)
    return Collected(results, unparsed, base)


def _open_cache(root: Path, opts: CollectOptions) -> "result_cache.AnalysisCache | None":
    """The analysis cache when asked for and the results are analyse_capture's without the event
    columns (analysis.db's events table is not cached: --export-type db analyses every capture)."""
    if opts.cache_dir is None or opts.fn is not analyse_capture or opts.want_events:
        return None
    # the directory analysed is part of every key: two directories may write to one -o
    return result_cache.AnalysisCache(opts.cache_dir, {"top_n": opts.top_n, "root": str(root.resolve())}, opts.log)


class LocalCollector:
    """Collection on this machine."""

    def collect(self, root: Path, opts: CollectOptions) -> Collected:
        return collect_here(root, opts)
