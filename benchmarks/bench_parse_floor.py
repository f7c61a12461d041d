"""One large Kineto trace against "the floor" (run by hand; results go to docs/perf_analysis.md,
"Past the floor").

    python benchmarks/bench_parse_floor.py [--repeat 5] [--big-mb 500] [--skip-big] [--skip-real] [--no-hta] [--no-hta-big]
    python benchmarks/bench_parse_floor.py --commands-only [--rounds 5] [--before-path DIR] [--no-hta] [--j1]
    python benchmarks/bench_parse_floor.py --phases [--rounds 3]

Prints, in one run:
  1. the parse candidates, on the chunks of each real trace (what the streaming loader hands a
     parser): orjson dicts (the old path), msgspec into typed Structs (ours), msgspec variants
     (all fields Any, a tagged union per ph), and gunzip variants (isal / zlib-ng when importable);
  2. on HTA's largest real traces (its tests/data: a 53.7 MB CUDA trace, an 86.9 MB MTIA trace,
     taken from the HolisticTraceAnalysis repository, MIT, into /tmp; or --real FILE...):
     the floor (read + gunzip + orjson.loads, GC paused), our parse (read_kineto_trace), our
     analysis (analyse_capture: load + summary + memory records), the same two with the parse
     shared with a forked helper (parsing/split_parse.py: what `analyse -j 2` does for a lone
     capture), interleaved, median and best of --repeat; then each in a child process (wall,
     peak RSS: the larger of its own and the helper's), and HTA 0.5.0 (TraceAnalysis +
     get_temporal_breakdown, its pool) in a child;
  3. a synthetic Kineto trace of --big-mb MB (bench_analyse.write_big): the same three in
     child processes, wall and peak RSS;
  4. whole commands (issue 34), as a user runs them, wall time of each process from its start to
     its exit, imports and outputs included: the floor as a command (python -c: read + gunzip +
     orjson.loads, GC paused), `python -m mindspeed_profiler.analyse DIR` (default -j, the tables
     printed to a pipe, summary.json and report.html written) cold (its analysis cache removed first)
     and warm (the same command right after: a re-analysis, every capture from the cache), the
     same with --before-path's code
     (an older checkout, e.g. `git archive`, on PYTHONPATH), and HTA's whole run (import,
     TraceAnalysis + get_temporal_breakdown); interleaved, --rounds rounds, median / best.
     `--commands-only` runs only this part.
Ratios are to the floor of the same run.
"""
from __future__ import annotations

import argparse
import gc
import gzip
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_analyse import ours, raw_parse, write_big  # noqa: E402
from mindspeed_profiler.analysis.parsing import typed_events as te  # noqa: E402

HTA_REPO = Path(os.environ.get("HTA_REPO", "/work/.mirror/facebookresearch+HolisticTraceAnalysis/repo"))
HTA_TRACES = ("tests/data/df_index_resolver/df_index_resolver.json.gz",      # CUDA, 53.7 MB of JSON
              "tests/data/mtia_trace_single_rank/mtia_rank_0.json.gz")       # MTIA, 86.9 MB
WORK = Path(tempfile.gettempdir()) / "bench_parse_floor"

# each child prints "<seconds inside the child> <peak RSS MB>" on its last line; imports happen
# before the clock starts (our package, numpy and msgspec take 0.3-0.5 s on a loaded box), but
# analyse_capture's own lazy imports of the analyzers, which are part of an analysis
_TWO = "from mindspeed_profiler.analysis.parsing import split_parse; split_parse.HELPERS = 1"  # what -j 2 on one capture allows
CHILD_IMPORTS = {
    "floor": "from bench_analyse import raw_parse",
    "ours parse": "from mindspeed_profiler.analysis.parsing.kineto_trace import read_kineto_trace",
    "ours analysis": "from bench_analyse import ours",
    "ours parse, 2 processes": f"from mindspeed_profiler.analysis.parsing.kineto_trace import read_kineto_trace; {_TWO}",
    "ours analysis, 2 processes": f"from bench_analyse import ours; {_TWO}",
}
CHILD = {
    "floor": "raw_parse(p)",
    "ours parse": "read_kineto_trace(p)",
    "ours analysis": "ours(p)",
    "ours parse, 2 processes": "read_kineto_trace(p)",
    "ours analysis, 2 processes": "ours(p)",
    "HTA": ("import logging; logging.disable(logging.CRITICAL); from hta.trace_analysis import TraceAnalysis; "
            "TraceAnalysis(trace_dir=str(p.parent)).get_temporal_breakdown(visualize=False)"),
}
CHILD_WRAP = ("import sys, time, resource; sys.path[:0] = {paths!r}; from pathlib import Path; p = Path(sys.argv[1]); "
              "{imports}; t = time.perf_counter(); {body}; t = time.perf_counter() - t; "
              "hwm = int(next(x for x in open('/proc/self/status') if x.startswith('VmHWM')).split()[1]); "
              "print(t, max(hwm, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024)")
# peak RSS: VmHWM, not ru_maxrss (Linux carries ru_maxrss over exec: a child of a big parent would
# report the parent's size); RUSAGE_CHILDREN for HTA's pool workers


def real_traces(given: list[str]) -> list[Path]:
    if given:
        return [Path(g) for g in given]
    out = []
    for rel in HTA_TRACES:
        dst = WORK / "real" / Path(rel).parent.name / Path(rel).name   # one trace per directory (HTA reads a dir)
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            blob = subprocess.run(["git", f"--git-dir={HTA_REPO}", "show", f"HEAD:{rel}"], capture_output=True, check=True).stdout
            dst.write_bytes(blob)
        out.append(dst)
    return out


def child(kind: str, path: Path, timeout: float = 3600) -> tuple[float, float, float]:
    """(wall s, in-child s, peak RSS MB) of one measurement in a fresh process."""
    here = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
    imports = CHILD_IMPORTS.get(kind, "pass")
    code = CHILD_WRAP.format(paths=here, imports=imports, body=CHILD[kind])
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{kind}: {p.stderr[-1500:]}")
    inside, rss = (float(x) for x in p.stdout.strip().splitlines()[-1].split())
    return wall, inside, rss


# -- whole commands (issue 34) --------------------------------------------------------------------
FLOOR_CMD = ("import gc, gzip, sys, orjson; gc.disable(); "
             "orjson.loads(gzip.decompress(open(sys.argv[1], 'rb').read()) if sys.argv[1].endswith('.gz') "
             "else open(sys.argv[1], 'rb').read())")
HTA_CMD = ("import logging, sys; logging.disable(logging.CRITICAL); from hta.trace_analysis import TraceAnalysis; "
           "TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)")


OURS_COLD = "ours, cold: python -m mindspeed_profiler.analyse DIR (its analysis cache removed first)"
OURS_WARM = "ours, warm: the same command again (every capture from the analysis cache)"


def commands(path: Path, before: str | None, hta: bool, j1: bool = False) -> dict[str, tuple[list[str], dict | None]]:
    """{name: (argv, environment or None)} of the whole commands compared on one trace (`j1`: ours and
    before's with -j 1 too: one process, whatever the load). Ours twice: cold (run_command removes
    the analysis cache before it: `forget_cache`) and warm, right after it (a re-analysis: the
    capture's result and report.html from the cache)."""
    here = str(Path(__file__).resolve().parents[1])
    ours = [sys.executable, "-m", "mindspeed_profiler.analyse", str(path.parent)]
    env = {**os.environ, "PYTHONPATH": here}
    out = {"floor (python -c: read + gunzip + orjson.loads, GC paused)": ([sys.executable, "-c", FLOOR_CMD, str(path)], None),
           OURS_COLD: (ours, env), OURS_WARM: (ours, env)}
    if before:
        out["before: the same command, --before-path's code"] = (ours, {**os.environ, "PYTHONPATH": before})
    if j1:
        out["ours -j 1 (cold)"] = (ours + ["-j", "1"], env)
        if before:
            out["before -j 1"] = (ours + ["-j", "1"], {**os.environ, "PYTHONPATH": before})
    if hta:
        out["HTA 0.5.0: import + TraceAnalysis + get_temporal_breakdown"] = ([sys.executable, "-c", HTA_CMD, str(path.parent)], None)
    return out


def forget_cache(path: Path) -> None:
    """The analysis cache of `path`'s directory removed: the next command analyses cold."""
    from mindspeed_profiler.analysis.pipeline.result_cache import CACHE_DIR
    from mindspeed_profiler.core import formats

    shutil.rmtree(path.parent / formats.ANALYSIS_DIR / CACHE_DIR, ignore_errors=True)


def run_command(argv: list[str], env: dict | None, timeout: float = 3600, expect: bytes | None = None) -> tuple[float, float]:
    """(wall s, CPU s) of one whole process, from its start to its exit; CPU: user + system of it and
    of every child it waited for (forked helpers included), less sensitive than the wall time to
    what else the box runs. `expect`: what its stderr must say."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    # run outside the repository: `python -m` puts the working directory first on sys.path, so that
    # from the repository root --before-path's PYTHONPATH would lose to the checkout's own code
    p = subprocess.run(argv, env=env, capture_output=True, timeout=timeout, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{argv[:3]}: exit {p.returncode}: {p.stderr[-1500:].decode(errors='replace')}")
    if expect is not None and expect not in p.stderr:
        raise RuntimeError(f"{argv[:3]}: its stderr does not say {expect!r}: {p.stderr[-500:].decode(errors='replace')}")
    return wall, after.ru_utime + after.ru_stime - ru.ru_utime - ru.ru_stime


def whole_commands(path: Path, rounds: int, before: str | None, hta: bool,
                   j1: bool = False) -> dict[str, list[tuple[float, float]]]:
    """Each command once per round, in turn (interleaved: the box's load falls on all alike); every
    command but the warm one runs without the analysis cache (removed before it)."""
    cmds = commands(path, before, hta, j1)
    # every tree's .pyc files written first (compileall writes them even under PYTHONDONTWRITEBYTECODE,
    # which a box may set: then a tree without them, or a module edited since, compiles at every start)
    for tree in [Path(__file__).resolve().parents[1] / "mindspeed_profiler"] + ([Path(before)] if before else []):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], capture_output=True, timeout=600)
    res: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    for argv, env in cmds.values():   # a first run of each, not counted: page cache, .pyc files
        run_command(argv, env)
    for _ in range(rounds):
        for k, (argv, env) in cmds.items():
            if k != OURS_WARM:
                forget_cache(path)
            res[k].append(run_command(argv, env, expect=b"from the analysis cache" if k == OURS_WARM else None))
    return res


def print_commands(path: Path, res: dict[str, list[tuple[float, float]]]) -> None:
    wall = {k: [w for w, _ in v] for k, v in res.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in res.items()}
    fl = statistics.median(next(iter(wall.values())))
    cold, warm = statistics.median(wall[OURS_COLD]), statistics.median(wall[OURS_WARM])
    print(f"\nwhole commands, {path.name}, interleaved, median / best of {len(next(iter(wall.values())))} "
          f"(load {os.getloadavg()[0]:.1f} at the end)\n\n| command | wall s, median | best | / floor | / ours cold "
          "| / ours warm | CPU s (median) |\n|---|---:|---:|---:|---:|---:|---:|")
    for k, v in wall.items():
        m = statistics.median(v)
        print(f"| {k} | {m:.3f} | {min(v):.3f} | {m / fl:.2f} | {m / cold:.2f} | {m / warm:.2f} | {cpu[k]:.2f} |")
    sys.stdout.flush()


# where the command's wall time goes: the same command in a child with timestamps at its phases
# (time.perf_counter is CLOCK_MONOTONIC, the same clock in both processes); its imports done first,
# as the command does them before it reads anything
PHASES = """
import sys, time; t_python = time.perf_counter()
from mindspeed_profiler.commands import analyse as cmd
cmd._load_numpy(); import numpy; numpy.ndarray   # (deferred by the command to its first use: loaded here, as a cold run does)
import mindspeed_profiler.analysis.pipeline.batch, mindspeed_profiler.analysis.results.console as console
from mindspeed_profiler.analysis.inputs import kineto
from mindspeed_profiler.analysis.pipeline import forked
from mindspeed_profiler.analysis.parsing import split_parse
marks = [("python started", t_python), ("imports", time.perf_counter())]
def mark(label, fn):
    def run(*a, **k):
        out = fn(*a, **k)
        marks.append((label, time.perf_counter()))
        return out
    return run
kineto.read_kineto_trace = mark("parse (this process' half + the helper's part)", kineto.read_kineto_trace)
kineto.summarise = mark("summarise (the memory block meanwhile in a child)", kineto.summarise)
forked.Pending.result = mark("waited for a child (memory block / report.html)", forked.Pending.result)
import mindspeed_profiler.analysis.pipeline.batch as batch
batch.analyse_directory = mark("advisor, cross-capture tables, summary.json", batch.analyse_directory)
console.print_summary = mark("tables printed", console.print_summary)
code = cmd.main([sys.argv[1]])
marks.append(("exit", time.perf_counter()))
print(repr(marks))
cmd.exit_now(code)   # as python -m mindspeed_profiler.analyse ends
"""


def phases(path: Path) -> list[tuple[str, float]]:
    """[(phase, seconds since the process was started)] of one cold run of the command (its
    analysis cache removed first)."""
    forget_cache(path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", PHASES, str(path.parent)], env=env, capture_output=True, text=True, timeout=600)
    end = time.perf_counter()
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-1500:])
    import ast
    marks = ast.literal_eval(p.stdout.strip().splitlines()[-1])
    return [(k, v - t) for k, v in marks] + [("process gone", end - t)]


def timed(fn, *a) -> float:
    gc.collect()
    t = time.perf_counter()
    fn(*a)
    return time.perf_counter() - t


def interleaved(path: Path, repeat: int) -> dict[str, list[float]]:
    from mindspeed_profiler.analysis.parsing import split_parse
    from mindspeed_profiler.analysis.parsing.kineto_trace import read_kineto_trace

    def two(fn):   # the trace's parse shared with a forked helper (parsing/split_parse.py)
        def run(p: Path):
            with split_parse.helpers(1):
                return fn(p)
        return run
    fns = {"floor": raw_parse, "ours parse": read_kineto_trace, "ours analysis": ours,
           "ours parse, 2 processes": two(read_kineto_trace), "ours analysis, 2 processes": two(ours)}
    res: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            res[k].append(timed(fn, path))
    return res


# -- the candidates ------------------------------------------------------------------------------
def _array_chunks(path: Path, size: int = 256 << 10) -> list[bytes]:
    """The event array cut into JSON arrays of ~`size` bytes, as the streaming loader cuts it."""
    arr = orjson.dumps(raw_parse(path)["traceEvents"])
    out, pos = [], 1
    while pos < len(arr) - 1:
        j = arr.find(b"},{", pos + size)
        j = len(arr) - 2 if j < 0 else j
        out.append(b"[" + arr[pos:j + 1] + b"]")
        pos = j + 2
    return out


class AnyEvent(msgspec.Struct, gc=False):
    """A candidate: the same fields, untyped (anything decodes, nothing falls back)."""
    ph: Any = None
    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: te.Args | None = te.NO_ARGS


class OneEvent(msgspec.Struct, gc=False):
    """A candidate (the typed decoder's first version): one Struct for every phase."""
    ph: str | None = None
    name: str | None = None
    cat: str | None = None
    pid: te.Int | str | None = None
    tid: te.Int | str | None = None
    ts: te.Num = None
    dur: te.Num = None
    args: te.Args | None = te.NO_ARGS


def parse_candidates() -> dict:
    return {
        "orjson.loads -> dicts (before)": orjson.loads,
        "msgspec.json.decode -> dicts": msgspec.json.Decoder().decode,
        "msgspec one typed Struct for every ph (first version)": msgspec.json.Decoder(list[OneEvent]).decode,
        "msgspec Structs, fields Any": msgspec.json.Decoder(list[AnyEvent]).decode,
        "msgspec typed Struct per ph, tagged union (ours)": te._DECODER.decode,
        "  + columns (typed_events.columns)": lambda b: te.columns(te._DECODER.decode(b)),
    }


def gunzip_candidates(path: Path) -> dict:
    raw = path.read_bytes()

    def stream(opener) -> None:
        with opener(path, "rb") as f:
            while f.read(256 << 10):
                pass

    def ours() -> None:
        from mindspeed_profiler.analysis.parsing import jsonscan
        for _ in jsonscan.chunks(path):
            pass
    out = {"gzip.decompress (the floor's)": lambda: gzip.decompress(raw), "gzip.open, 256 KB reads (before)": lambda: stream(gzip.open),
           "zlib.decompressobj in the parsing thread (ours: jsonscan._inflate)": ours}
    for name, mod, attr in (("isal igzip", "isal.igzip", "open"), ("zlib-ng gzip_ng", "zlib_ng.gzip_ng", "open")):
        try:
            opener = getattr(__import__(mod, fromlist=[attr]), attr)
        except ImportError:
            continue
        out[f"{name}.open, 256 KB reads"] = lambda o=opener: stream(o)
    return out


def compare(cands: dict, arg_sets: list, repeat: int) -> None:
    res: dict[str, list[float]] = {k: [] for k in cands}
    gc.disable()
    try:
        for _ in range(repeat):
            for k, fn in cands.items():
                t = time.perf_counter()
                for a in arg_sets:
                    r = fn(*a)
                    del r
                res[k].append(time.perf_counter() - t)
    finally:
        gc.enable()
    base = statistics.median(next(iter(res.values())))
    for k, v in res.items():
        m = statistics.median(v)
        print(f"| {k} | {m:.3f} | {min(v):.3f} | {m / base:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", nargs="*", default=[], help="trace files (default: HTA's two largest)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--big-mb", type=int, default=500)
    ap.add_argument("--skip-big", action="store_true")
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--no-hta-big", action="store_true", help="no HTA on the synthetic trace (it runs > 7 min on 500 MB)")
    ap.add_argument("--skip-real", action="store_true", help="only the synthetic trace")
    ap.add_argument("--extra-site", help="a directory holding isal / zlib-ng, for the gunzip candidates")
    ap.add_argument("--commands-only", action="store_true", help="only the whole commands (part 4) on the real traces")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the whole commands")
    ap.add_argument("--j1", action="store_true", help="with --commands-only: ours and before's with -j 1 too")
    ap.add_argument("--phases", action="store_true", help="where the command's wall time goes (--rounds runs)")
    ap.add_argument("--before-path", help="an older checkout of the package: its command is measured too (PYTHONPATH)")
    args = ap.parse_args()
    if args.extra_site:
        sys.path.append(args.extra_site)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    traces = [] if args.skip_real else real_traces(args.real)
    if args.phases:
        for path in traces:
            runs = [phases(path) for _ in range(args.rounds)]
            print(f"\n{path.name}: seconds since the start, median of {args.rounds} (load {os.getloadavg()[0]:.1f})\n\n"
                  "| phase | ends at s | takes s |\n|---|---:|---:|")
            prev = 0.0
            for i, (label, _) in enumerate(runs[0]):
                at = statistics.median(r[i][1] for r in runs)
                if i and label == runs[0][i - 1][0] and at - prev < 0.0005:
                    continue   # a result asked for again (known once)
                print(f"| {label} | {at:.3f} | {at - prev:.3f} |")
                prev = at
        return
    if args.commands_only:
        for path in traces:
            print_commands(path, whole_commands(path, args.rounds, args.before_path, not args.no_hta, args.j1))
        return
    for path in traces:
        print(f"\n## {path.name}: {path.stat().st_size / 1e6:.1f} MB gz, {len(gzip.decompress(path.read_bytes())) / 1e6:.1f} MB JSON")
        print("\nparse candidates (all chunks of the event array, 256 KB each; median / best of", args.repeat, "s)\n")
        print("| candidate | median s | best s | / first |\n|---|---:|---:|---:|")
        compare(parse_candidates(), [(c,) for c in _array_chunks(path)], args.repeat)
        print("\ngunzip candidates\n\n| candidate | median s | best s | / first |\n|---|---:|---:|---:|")
        compare(gunzip_candidates(path), [()], args.repeat)
        res = interleaved(path, args.repeat)
        fl = statistics.median(res["floor"])
        print(f"\nin-process, interleaved, median / best of {args.repeat}\n\n| | median s | best s | / floor |\n|---|---:|---:|---:|")
        for k, v in res.items():
            print(f"| {k} | {statistics.median(v):.3f} | {min(v):.3f} | {statistics.median(v) / fl:.2f} |")
        _children(path, not args.no_hta)
        print_commands(path, whole_commands(path, args.rounds, args.before_path, not args.no_hta))
    if not args.skip_big:
        big = WORK / "big" / "huge_rank0.pt.trace.json"
        big.parent.mkdir(parents=True, exist_ok=True)
        n = write_big(big, args.big_mb)
        print(f"\n## synthetic: {big.stat().st_size / 1e6:.0f} MB JSON (not gzipped), {n:,} complete events")
        _children(big, not (args.no_hta or args.no_hta_big))
        big.unlink()


def _children(path: Path, hta: bool) -> None:
    print("\nchild processes (one each)\n\n| | wall s | in-child s | peak RSS MB | / floor (in-child) |\n|---|---:|---:|---:|---:|")
    base = None
    for kind in ("floor", "ours parse", "ours analysis", "ours parse, 2 processes", "ours analysis, 2 processes") \
            + (("HTA",) if hta else ()):
        try:
            wall, inside, rss = child(kind, path)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"| {kind} | failed: {str(exc)[-200:]!r} | | | |")
            continue
        base = base or inside
        print(f"| {kind} | {wall:.2f} | {inside:.2f} | {rss:.0f} | {inside / base:.2f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
