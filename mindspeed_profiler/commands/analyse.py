"""Analyse profiler output offline: captures, steps, device breakdown, slow ranks, RL timeline.

    python -m mindspeed_profiler.analyse ./profiler_data [-j N] [--export-type text|db] [--top N] [--no-html]

Finds, at any depth: torch captures (*_pt/ and Kineto *.json[.gz]), Ascend captures (*_ascend_pt/
with ASCEND_PROFILER_OUTPUT text files or ascend_pytorch_profiler_*.db; raw ones are parsed with
torch_npu when it works here), timelines (timeline.json[.gz] or *.seg.jsonl) and msprof-analyze's
cluster_step_trace_time.csv. Writes DIR/analysis/summary.json, report.html (and analysis.db with
--export-type db). No device and no torch_npu are needed for parsed data. Run again, it analyses
only new or changed captures and takes the others from DIR/analysis/.analysis_cache (the same
outputs; --no-cache: every capture analysed, nothing kept).

With --ray [--address ADDR]: on every node of a Ray cluster, each capture on the node whose disk
holds it (DIR as each node sees it); only the per-capture summaries come back (docs/analysis.md).

Exit codes: 0 every capture analysed; 1 some captures failed or could not be parsed (each is
reported with its path and reason; the rest are analysed); 2 usage error; 3 nothing found.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import threading
import types

from mindspeed_profiler.analysis.parsing import prefetch   # (standard library only: no numpy)
from mindspeed_profiler.core import formats


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", help="profile_save_path (or any directory / trace file) to analyse")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="worker processes (default: %(default)s = the number of cores)")
    parser.add_argument("--export-type", choices=("text", "db"), default="text",
                        help="text: summary.json + report.html; db: also analysis.db (SQLite), and db for raw Ascend parsing")
    parser.add_argument("--top", type=int, default=None,
                        help="how many ops / kernels / ranges to keep per capture in summary.json and to list per "
                             "stage on the terminal (default: 20 kept, 10 listed)")
    parser.add_argument("--no-html", action="store_true", help="do not write report.html")
    parser.add_argument("--threshold", type=float, default=1.2,
                        help="flag a rank slower than this ratio to the median (default: %(default)s)")
    parser.add_argument("-o", "--output", default=None, help="output directory (default: DIR/analysis)")
    parser.add_argument("--run", default=None, metavar="RUN_ID",
                        help="analyse only this run's captures and timeline (a directory written by several runs "
                             "lists their ids; default: every run, each on its own)")
    parser.add_argument("--capture-timeout", type=float, default=1800.0, metavar="SECONDS",
                        help="stop a capture's analysis after this long and report it failed (default: %(default)s)")
    parser.add_argument("--capture-memory-mb", type=int, default=None, metavar="MB",
                        help="memory one capture's analysis may take in a worker (default: half of this machine's)")
    parser.add_argument("--peak-tflops", type=float, default=None, metavar="TFLOPS",
                        help="one device's peak TFLOPS: the metrics tracker's MFU is recomputed for it (docs/metrics.md)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no tables on the terminal")
    parser.add_argument("--no-cache", action="store_true",
                        help="analyse every capture again and keep nothing: no analysis cache read or written (default: "
                             "the results of captures whose files did not change are taken from OUT/.analysis_cache; "
                             "delete that folder to empty it)")
    ray = parser.add_argument_group("on a Ray cluster, where the data lives (docs/analysis.md)")
    ray.add_argument("--ray", action="store_true",
                     help="discover DIR on every node of the Ray cluster (DIR as each node sees it: a relative DIR is "
                          "taken from this directory, quoted ~ / $VARS are expanded on each node) and analyse each "
                          "capture on the node that holds it; only the summaries come back")
    ray.add_argument("--address", default=None, metavar="ADDR",
                     help="the Ray cluster (default: RAY_ADDRESS, else a cluster started on this machine with "
                          "`ray start`, else a new local one)")
    ray.add_argument("--ray-task-cpus", type=float, default=None, metavar="CPUS",
                     help="CPUs each capture's task reserves on its node (default: 0.5)")


def _load_numpy() -> None:
    """numpy loaded when first used, with one OpenBLAS thread (issue 34). OpenBLAS starts a thread
    per core when numpy is loaded (56 ms of a 2-core box's 0.14 s import, more with more cores) and
    the analysis does no linear algebra; the variable is put back after the import, so no child
    process (the vendor parser, the pool's workers) sees the change. When first used, not here: a
    re-analysis whose captures all come from the analysis cache never uses it (its modules still say
    `import numpy as np`: they get a stand-in, `_DeferredNumpy`, that loads numpy on its first
    attribute). A value the user set, or numpy loaded already: nothing is changed."""
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    import importlib.util

    try:
        spec = importlib.util.find_spec("numpy")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return
    stand_in = _DeferredNumpy("numpy")
    stand_in.__spec__ = spec   # what `import numpy` looks at in sys.modules (not initialising: no load)
    sys.modules["numpy"] = stand_in


class _DeferredNumpy(types.ModuleType):
    """`sys.modules["numpy"]` until numpy is used: its first attribute looked up (np.zeros, numpy's
    __path__ for `import numpy.x`, `from numpy import y`) imports the real numpy, with one OpenBLAS
    thread, puts it in sys.modules and copies its names here, so that a module holding this object
    as `np` finds them as attributes of its own from then on."""

    def __getattr__(self, name: str):
        with _NUMPY_LOCK:
            if sys.modules.get("numpy") is self:
                del sys.modules["numpy"]
                set_here = "OPENBLAS_NUM_THREADS" not in os.environ
                if set_here:
                    os.environ["OPENBLAS_NUM_THREADS"] = "1"
                try:
                    real = importlib.import_module("numpy")
                except BaseException:
                    sys.modules.setdefault("numpy", self)
                    raise
                finally:
                    if set_here:
                        os.environ.pop("OPENBLAS_NUM_THREADS", None)
                self.__dict__.update(real.__dict__)
            real = sys.modules["numpy"]
        return getattr(real, name)


_NUMPY_LOCK = threading.RLock()


def _keep_freed_memory() -> None:
    """glibc's malloc told to keep what the analysis frees for its next allocations (issue 34): by
    default every block of 128 KB or more (numpy columns, the parse's chunks) is a fresh mapping,
    unmapped when freed, so each parse batch page-faults its memory in again; a first parse of the
    53.7 MB CUDA trace took 38,122 page faults and 0.068 s of system time (0.385 s in all; a second,
    the allocator warmed, 0.29 s). With blocks below 256 MB from the heap and the heap trimmed only
    past 1 GB free: 5,777 faults, 0.299 s (MTIA: 0.601 -> 0.51 s). This process only (the pool's
    workers are fresh processes); a setting of the user's (MALLOC_MMAP_THRESHOLD_,
    MALLOC_TRIM_THRESHOLD_) wins; not glibc: nothing."""
    if not sys.platform.startswith("linux") or any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        if hasattr(libc, "gnu_get_libc_version"):   # glibc's option numbers (musl's mallopt does nothing)
            libc.mallopt(-3, 256 << 20)   # M_MMAP_THRESHOLD
            libc.mallopt(-1, 1 << 30)     # M_TRIM_THRESHOLD
    except (OSError, AttributeError, ImportError):
        pass


def run(args: argparse.Namespace) -> int:
    _keep_freed_memory()
    _load_numpy()
    try:
        _start_prefetch(args)
        return _run(args)
    finally:
        prefetch.release()


def _start_prefetch(args: argparse.Namespace) -> None:
    """A lone large gzip trace inflated by a child process while the analysis is imported (issue 34;
    parsing/prefetch.py): with a second core and job, and only onto an idle core (forked.core_idle:
    the rule of the command's other second processes; on a busy box the child would take a core from
    the imports), not with --ray, not when the analysis cache already holds results for this
    directory (a re-analysis reads none of it)."""
    from mindspeed_profiler.analysis.pipeline import forked   # (standard library only)

    if args.ray or args.jobs < 2 or (os.cpu_count() or 1) < 2:
        return
    out = formats.analysis_dir(args.directory, args.output)
    if not args.no_cache and os.path.isdir(os.path.join(out, formats.ANALYSIS_CACHE_DIR)):
        return
    if not forked.core_idle():   # (last: what runs now, judged as late as possible)
        return
    trace = prefetch.single_trace(args.directory)
    if trace is not None:
        prefetch.start(trace)


def _run(args: argparse.Namespace) -> int:
    from mindspeed_profiler.analysis.pipeline.batch import EXIT_NOTHING_FOUND, RunNotFound, analyse_directory

    if args.jobs < 1:
        print(f"analyse: --jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return 2
    if args.top is not None and args.top < 1:
        print(f"analyse: --top must be >= 1, got {args.top}", file=sys.stderr)
        return 2
    if not args.threshold > 0:   # also rejects nan
        print(f"analyse: --threshold must be > 0, got {args.threshold}", file=sys.stderr)
        return 2
    if args.peak_tflops is not None and not (args.peak_tflops > 0 and args.peak_tflops != float("inf")):
        print(f"analyse: --peak-tflops must be a positive number of TFLOPS, got {args.peak_tflops}", file=sys.stderr)
        return 2
    if not args.capture_timeout > 0 or (args.capture_memory_mb is not None and args.capture_memory_mb < 64):
        print("analyse: --capture-timeout must be > 0 and --capture-memory-mb >= 64", file=sys.stderr)
        return 2
    if not args.ray and (args.address is not None or args.ray_task_cpus is not None):
        print("analyse: --address and --ray-task-cpus need --ray", file=sys.stderr)
        return 2
    if args.ray_task_cpus is not None and not args.ray_task_cpus > 0:
        print(f"analyse: --ray-task-cpus must be > 0, got {args.ray_task_cpus}", file=sys.stderr)
        return 2
    from mindspeed_profiler.analysis.pipeline.batch import default_limits
    from mindspeed_profiler.analysis.pipeline.pool import Limits

    limits = Limits(timeout_s=args.capture_timeout, memory_mb=args.capture_memory_mb or default_limits().memory_mb)
    ray_options, setup_errors, where = {}, (), args.directory
    use_cache = not args.no_cache and not args.ray   # the analysis cache (results and the page): not with --ray
    if args.ray:   # ray itself is imported by the analysis, only now
        from mindspeed_profiler.analysis.pipeline.ray_batch import RaySetupError, driver_dir

        setup_errors = (RaySetupError,)
        ray_options = {"ray": True, "ray_address": args.address, "ray_task_cpus": args.ray_task_cpus or 0.5}
        where = str(driver_dir(args.directory))
        if args.output is None and "$" in where:
            print(f"analyse --ray: {args.directory} names a variable not set here: give -o DIR for the outputs",
                  file=sys.stderr)
            return 2
    try:
        summary, code = analyse_directory(args.directory, jobs=args.jobs, export_type=args.export_type,
                                          top_n=args.top or 20, html=False, threshold=args.threshold,
                                          out_dir=args.output, run=args.run, limits=limits,
                                          peak_tflops=args.peak_tflops, idle_only=True,
                                          cache=use_cache, **ray_options)
    except setup_errors as exc:   # () without --ray: catches nothing
        print(f"analyse --ray: {exc}", file=sys.stderr)
        return 2
    except RunNotFound as exc:
        print(f"analyse: --run {args.run}: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        if not args.ray and not os.path.exists(args.directory):
            print(str(exc), file=sys.stderr)
            return EXIT_NOTHING_FOUND
        print(f"analyse: cannot write the outputs: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:   # an output directory we cannot create or write
        print(f"analyse: cannot write the outputs: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    prefetch.release()   # (unused when the trace was not the one analysed here) before report.html's fork
    if code == EXIT_NOTHING_FOUND:
        print(f"analyse: nothing to analyse under {args.directory} (no *_pt / *_ascend_pt captures, Kineto JSON, "
              "timeline or cluster_step_trace_time.csv)", file=sys.stderr)
        return code
    as_dir = os.path.isdir(where) or (args.ray and not os.path.isfile(where))   # --ray: DIR may not be here
    out = formats.analysis_dir(where, args.output, is_dir=as_dir)
    # report.html: rendered by a forked child while this process prints the tables (issue 34; the
    # same page: analyse_directory would write it last, from the same summary)
    written = getattr(summary, "where", None) or out   # where analyse_directory wrote summary.json
    # the page too: from the analysis cache when the summary is the same
    report = _start_report(summary, str(written), fork=args.jobs > 1, cache=use_cache) if not args.no_html else None

    def wait_report() -> None:   # its error, if any, is said below
        if report is not None:
            with contextlib.suppress(OSError):
                report.result()
    try:
        c = summary["counts"]
        print(f"analysed {c['ok']}/{c['found']} captures ({c['failed']} failed, {c['unparsed']} not parsed) "
              f"in {summary['elapsed_s']} s -> {out}", file=sys.stderr, flush=True)
        if not args.quiet:   # after the count line, so that the last lines are the files and how to open them
            from mindspeed_profiler.analysis.results.console import print_summary
            print_summary(summary, top_n=args.top or 10, out_dir=out, html=not args.no_html,
                          db=args.export_type == "db", before_outputs=wait_report)
    finally:
        wait_report()   # written even where the printing failed (a closed pipe)
    if report is not None:
        try:
            report.result()
        except OSError as exc:   # the report's directory we cannot write
            print(f"analyse: cannot write the outputs: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
    return code


def _start_report(summary: dict, out: str, fork: bool, cache: bool = False):
    """report.html written from `summary`: by a forked child when `fork`, else when waited for;
    with `cache`, the last page again when it was made from the same summary (report_cache.py)."""
    from mindspeed_profiler.analysis.pipeline import forked

    def write() -> None:
        from mindspeed_profiler.analysis.pipeline import report_cache

        report_cache.write_report(os.path.join(out, formats.REPORT_FILE), summary,
                                  os.path.join(out, formats.ANALYSIS_CACHE_DIR) if cache else None)
    return forked.start(write, fork=fork and forked.core_idle())


FAST_EXIT = True   # cli.py: the process may end with exit_now() after this command


def exit_now(code: int) -> None:
    """End the process with `code` without tearing the interpreter down (issue 34: freeing every
    module and object at exit took 0.07-0.11 s of the analyse command's wall time): the atexit
    handlers run (Ray's shutdown, logging, multiprocessing, temporary directories), stdout and stderr
    are flushed, then os._exit. With another thread alive (its join at exit is kept), a normal exit."""
    import atexit
    import threading

    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):   # a closed pipe: nothing more can be said
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mindspeed_profiler.analyse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
