"""The on-disk contract between what the runtime writes and what the analysis reads.

One module, standard library only, imported by the writers (profiler, backends, tracer) and the
readers (analysis, merge) alike, so a name or a pattern is defined exactly once. docs/formats.md
describes the same things in prose; tests/test_formats.py keeps the two in step.

    <profile_save_path>/
      run.json                                   RUN_FILE
      <stage or "all">/<capture dir>/            capture_dir_name(): <worker>_<pid>_<time>_<suffix>
        mindspeed_profiler_meta.json             META_FILE (keys: META_KEYS)
        <role>_rank<R>.<pid>.pt.trace.json.gz    trace_file_name() (Kineto JSON, torch captures)
        ASCEND_PROFILER_OUTPUT/...               ASCEND_* (torch_npu captures)
      timeline/<role>_rank<R>_<host>_<pid>.seg.jsonl   segment_name(); merged: TIMELINE_FILE(.gz), TIMELINE_PFTRACE_FILE
      system/                                    SYSTEM_DIR (or system.output_dir): process-level reports
        <group>_rank<R>.system.json              system_meta_name() (keys: SYSTEM_META_KEYS)
        <group>_rank<R>.iterations.jsonl         system_iterations_name(): the worker's iteration boundaries
        <group>_rank<R><report suffix>           system_report_name() (SYSTEM_REPORTS: per tool)
      metrics/<role>_rank<R>.jsonl               METRICS_DIR (or metrics.output_dir), metrics_file_name(): one row per iteration
      metrics/memory/                            MEMORY_DIR: per-stage memory and out-of-memory records (memory_*_name())
      analysis/summary.json, report.html, analysis.db
      requests/<id>.json, requests/workers/<role>_rank<R>.json   REQUESTS_DIR: on-demand capture
      profiler_config.json                       TORCH_NPU_DYNAMIC_FILE (torch_npu's request format)
"""
from __future__ import annotations

import os
import re
from typing import Any

CONFIG_ROOT_KEY = "profiler_config"  # the YAML block everything is configured under (docs/config.md)

# ---------------------------------------------------------------------------------- directories

ALL_DIR = "all"  # the stage directory of `stage: all` captures
TIMELINE_DIR = "timeline"
SYSTEM_DIR = "system"
METRICS_DIR = "metrics"  # the metrics tracker's JSON lines (metrics.output_dir; metrics_file_name())
METRICS_SUFFIX = ".jsonl"
ANALYSIS_DIR = "analysis"
# the analysis cache under the output directory: per-capture results a re-analysis reuses (a dot:
# discovery never walks into it; analysis/pipeline/result_cache.py)
ANALYSIS_CACHE_DIR = ".analysis_cache"
RUN_FILE = "run.json"
RUN_SCHEMA = 1
# The largest rank (and step number) an input may name: a 32-bit count, what the analysis tables
# (SQLite INTEGER, numpy int64 sums) hold safely; a 20-digit "rank" is no real worker's.
MAX_RANK = 2**31 - 1
# Every run has an id (run.json, each capture's metadata, each segment header), so that two runs
# written into one directory are never mixed. The driver makes it (manifest.start_run) and passes it
# to the workers in the config (`profiler_config.run_id`) and in this environment variable.
RUN_ID_KEY = "run_id"
RUN_ID_ENV = "MINDSPEED_PROFILER_RUN_ID"
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,63}$")
# On-demand capture (ondemand/): request files and worker states under RUN_DIR/requests/; the
# requests a run received are listed in run.json under RUN_REQUESTS_KEY. torch_npu's dynamic
# profiler file, RUN_DIR/profiler_config.json, is accepted as a request too.
REQUESTS_DIR = "requests"
RUN_REQUESTS_KEY = "requests"
TORCH_NPU_DYNAMIC_FILE = "profiler_config.json"

# ---------------------------------------------------------------------------------- captures

# Ours; torch_npu writes its own `profiler_metadata.json` into *_ascend_pt/, hence the long name.
META_FILE = "mindspeed_profiler_meta.json"
META_SCHEMA = 1
# Every key a capture's metadata carries (docs/formats.md explains each).
META_KEYS = (
    "schema", "run_id", "request_id", "role", "stage", "rank", "world_size", "local_rank", "parallel", "steps", "warmup_steps",
    "requested_warmup_steps", "profiled_iterations", "backend", "device", "level", "export_type", "mstx",
    "host", "pid", "node", "clock", "start_time", "end_time", "status", "errors", "trace_files", "options", "notes",
    "export_phases", "stopped_early", "own_memory",
)
# "recording": written when the capture starts, replaced when it ends (left: the worker never finished it)
# "exporting": recorded, its files still being written in the background (left: the process ended
# first; the files it lists are whole, the notes say what was not written)
# "held": recorded in a session held open until the run ends (export_after_run); written at its
# flush (left: the process ended before it; nothing of the capture was written)
CAPTURE_STATUSES = ("recording", "exporting", "held", "ok", "failed", "skipped")

# A capture directory's suffix says what is inside: the on-disk format, not the backend that
# wrote it (two backends may write the same format). A new format is a change of this contract.
CAPTURE_FORMATS: dict[str, str] = {
    "pt": "kineto",         # Kineto JSON trace files (torch.profiler)
    "ascend_pt": "ascend",  # torch_npu's layout: raw FRAMEWORK/ + PROF_*/, parsed ASCEND_PROFILER_OUTPUT/
}

# <role>_rank<R>_step<A>-<B>[_c<K>]_<host>_<pid>_<YYYYmmddHHMMSSmmm>_<suffix>; the longest
# suffix first so that "_ascend_pt" is not read as a host ending in "_ascend" + "_pt".
_SUFFIX_ALT = "|".join(sorted(map(re.escape, CAPTURE_FORMATS), key=len, reverse=True))
CAPTURE_DIR_RE = re.compile(
    r"^(?P<role>.+)_rank(?P<rank>\d+)_step(?P<first>\d+)-(?P<last>\d+)(?:_c(?P<call>\d+))?"
    rf"_(?P<host>[A-Za-z0-9.\-]+)_(?P<pid>\d+)_(?P<time>\d{{17}})_(?P<suffix>{_SUFFIX_ALT})$"
)
# The identity part alone (role, rank, steps), for directories renamed or copied by hand.
CAPTURE_NAME_PREFIX_RE = re.compile(r"^(?P<role>.+?)_rank(?P<rank>\d+)_step(?P<first>\d+)-(?P<last>\d+)(?:_c\d+)?_")
ROLE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
HOST_UNSAFE_RE = re.compile(r"[^A-Za-z0-9.\-]")


def analysis_dir(target: str | os.PathLike, out_dir: str | os.PathLike | None = None, is_dir: bool | None = None) -> str:
    """Where the analysis of `target` (a run directory, or one trace file) writes its outputs:
    `out_dir` (-o) when given, else ANALYSIS_DIR inside the directory, or beside the file. `is_dir`:
    whether `target` is a directory, when it cannot be looked at here (--ray)."""
    if out_dir:
        return os.fspath(out_dir)
    where = os.fspath(target)
    if is_dir is None:
        is_dir = os.path.isdir(where)
    return os.path.join(where if is_dir else os.path.dirname(where) or ".", ANALYSIS_DIR)


def host_token(host: str) -> str:
    """The host name with '_' and odd characters replaced by '-', so names split unambiguously."""
    return HOST_UNSAFE_RE.sub("-", host) or "host"


def worker_prefix(role: str, rank: int, first: int, last: int, call: int = 1) -> tuple[str, str]:
    """(role, `_rank<R>_step<A>-<B>[_c<K>]`): the parts of a worker name around the role."""
    return role, f"_rank{rank}_step{first}-{last}" + (f"_c{call}" if call > 1 else "")


def capture_dir_name(worker: str, suffix: str, pid: int, time_token: str) -> str:
    """`<worker>_<pid>_<YYYYmmddHHMMSSmmm>_<suffix>` (worker = `<role>_rank<R>_step<A>-<B>[_c<K>]_<host>`)."""
    if suffix not in CAPTURE_FORMATS:
        raise ValueError(f"capture suffix {suffix!r}: allowed: {', '.join(CAPTURE_FORMATS)}")
    return f"{worker}_{pid}_{time_token}_{suffix}"


def parse_capture_dir_name(name: str) -> dict[str, Any] | None:
    """role, rank, first, last, call, host, pid, time, suffix and format of a capture directory
    name, or None when it is not one of ours."""
    m = CAPTURE_DIR_RE.match(name)
    if not m:
        return None
    d: dict[str, Any] = m.groupdict()
    for k in ("rank", "first", "last", "pid"):
        d[k] = int(d[k])
    d["call"] = int(d["call"] or 1)
    d["format"] = CAPTURE_FORMATS[d["suffix"]]
    return d


def capture_format_of_dir(name: str) -> str | None:
    """The format a directory name's suffix announces (also for names not written by us, e.g.
    torch_npu's `<host>_<pid>_<time>_ascend_pt`), or None."""
    for suffix in sorted(CAPTURE_FORMATS, key=len, reverse=True):
        if name.endswith("_" + suffix):
            return CAPTURE_FORMATS[suffix]
    return None


TRACE_FILE_SUFFIX = ".pt.trace.json.gz"


def trace_file_name(basename: str, pid: int) -> str:
    """`<role>_rank<R>.<pid>.pt.trace.json.gz`: the Kineto JSON of a torch capture."""
    return f"{basename}.{pid}{TRACE_FILE_SUFFIX}"


# `profile_with_memory`: the allocator's history in PyTorch's snapshot format, beside the trace
MEMORY_SNAPSHOT_SUFFIX = ".memory_snapshot.pickle"


def memory_snapshot_name(basename: str, pid: int) -> str:
    """`<role>_rank<R>.<pid>.memory_snapshot.pickle` (opens in https://pytorch.org/memory_viz)."""
    return f"{basename}.{pid}{MEMORY_SNAPSHOT_SUFFIX}"


def trace_basename(role: str, rank: int) -> str:
    """`<role>_rank<R>`: the stem of a capture's trace files (backends/layout.py shortens a role
    too long for a file name)."""
    return f"{role}_rank{rank}"


# ---------------------------------------------------------------------------------- Ascend (torch_npu)

ASCEND_OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
ASCEND_TRACE_VIEW = "trace_view.json"
ASCEND_KERNEL_DETAILS = "kernel_details.csv"
ASCEND_STEP_TRACE = "step_trace_time.csv"
ASCEND_COMMUNICATION = "communication.json"
ASCEND_COMMUNICATION_MATRIX = "communication_matrix.json"
ASCEND_MEMORY_RECORD = "memory_record.csv"
# The parsed text files the analysis reads (a capture uses what it has: docs/analysis.md).
ASCEND_TEXT_FILES = (ASCEND_TRACE_VIEW, ASCEND_KERNEL_DETAILS, ASCEND_STEP_TRACE, ASCEND_COMMUNICATION,
                     ASCEND_COMMUNICATION_MATRIX, ASCEND_MEMORY_RECORD)
ASCEND_DB_GLOB = "ascend_pytorch_profiler*.db"
# torch_npu's own analysis db beside the parsed output (its StepTraceTime table is
# step_trace_time.csv's rows); not our DIR/analysis/analysis.db
ASCEND_ANALYSIS_DB = "analysis.db"
# Other files torch_npu writes beside them (claimed with the capture, never read as traces).
ASCEND_SIDE_FILES = frozenset({
    "operator_details.csv", "op_statistic.csv", "api_statistic.csv", "operator_memory.csv", "npu_module_mem.csv",
    "data_preprocess.csv", "l2_cache.csv", "op_summary.csv", "static_op_mem.csv",
})
ASCEND_METADATA_FILE = "profiler_metadata.json"
ASCEND_INFO_PREFIX = "profiler_info"   # profiler_info_<rank>.json: rank_id, level, export type
# msprof-analyze's cluster output (`msprof-analyze cluster -d DIR`, in cluster_analysis_output/).
CLUSTER_STEP_TRACE_FILE = "cluster_step_trace_time.csv"
CLUSTER_COMMUNICATION_FILE = "cluster_communication.json"
CLUSTER_MATRIX_FILE = "cluster_communication_matrix.json"
CLUSTER_GROUP_FILE = "communication_group.json"
CLUSTER_DB_FILE = "cluster_analysis.db"
CLUSTER_FILES = (CLUSTER_STEP_TRACE_FILE, CLUSTER_COMMUNICATION_FILE, CLUSTER_MATRIX_FILE, CLUSTER_GROUP_FILE,
                 CLUSTER_DB_FILE)

# ---------------------------------------------------------------------------------- system (process-level)

# Process-level capture of Ray worker groups (profiler_config.system): each wrapped worker's report,
# metadata and iteration boundaries sit in the system directory, named by worker group and stable
# rank (never by pid: a re-run of the same group and rank replaces its files).
SYSTEM_SCHEMA = 1
SYSTEM_META_SUFFIX = ".system.json"
SYSTEM_ITERATIONS_SUFFIX = ".iterations.jsonl"
# backend (the `system.backend` value) -> the suffix of its report: a file, or a directory for the
# tools that write several files (SYSTEM_REPORT_DIRS).
SYSTEM_REPORTS: dict[str, str] = {
    "nsight": ".nsys-rep",        # nsys profile -o <base>  ->  <base>.nsys-rep
    "rocprof_sys": ".rocprof-sys",  # ROCPROFSYS_OUTPUT_PATH (a directory)
    "msprof": ".msprof",          # msprof --output=<dir>  ->  <dir>/PROF_*/
    "py_spy": ".py-spy.json",     # py-spy record --format chrometrace -o <file>
}
SYSTEM_REPORT_DIRS = frozenset({"rocprof_sys", "msprof"})
# The environment variable that carries a wrapped worker's settings (set by the launch settings, read
# once by the worker), and the one the launcher sets to say whether the tool really wraps the worker.
SYSTEM_ENV = "MINDSPEED_PROFILER_SYSTEM"
SYSTEM_STATUS_ENV = "MINDSPEED_PROFILER_SYSTEM_STATUS"
# A report's life: "running" (the launcher started the tool), then "complete" (the tool exited and
# its report is there) or "incomplete" (it exited without one, e.g. killed); "unwrapped": the tool
# could not be started (not on PATH, or exec failed) and the worker ran without it.
SYSTEM_STATUSES = ("running", "complete", "incomplete", "unwrapped")
SYSTEM_META_KEYS = (
    "schema", "run_id", "backend", "tool", "tool_path", "version", "group", "rank", "host", "launcher_pid",
    "command", "steps", "report", "status", "reason", "launched_wall_ns", "ended_wall_ns", "report_bytes", "env",
)
# The iterations file: JSON lines with a "type": one "worker" header (pid, host, clock anchor), one
# "iteration" per iteration ended (begin/end wall-clock ns, whether it is a listed step), one "range"
# per CUDA profiler range call made around a listed step (`mode`: "cuda" when torch.cuda called it,
# "recorded" on a machine without CUDA), and under py-spy one "clock" mark: the wall-clock ns during
# which the worker ran CLOCK_MARK_FUNCTION, found again in the samples to align py-spy's clock.
SYS_WORKER, SYS_ITERATION, SYS_RANGE, SYS_CLOCK = "worker", "iteration", "range", "clock"
SYSTEM_RECORD_TYPES = (SYS_WORKER, SYS_ITERATION, SYS_RANGE, SYS_CLOCK)
CLOCK_MARK_FUNCTION = "mindspeed_profiler_clock_mark"
CAT_PYSPY = "py-spy"           # py-spy frames placed on the merged timeline (analysis.system_tracks)
_GROUP_UNSAFE_RE = re.compile(r"[^A-Za-z0-9_.\-]+")


def system_base_name(group: str, rank: int) -> str:
    """`<group>_rank<R>`: a wrapped worker's file names start with this (group made file-safe)."""
    return f"{_GROUP_UNSAFE_RE.sub('-', group) or 'group'}_rank{int(rank)}"


def system_meta_name(group: str, rank: int) -> str:
    return system_base_name(group, rank) + SYSTEM_META_SUFFIX


def system_iterations_name(group: str, rank: int) -> str:
    return system_base_name(group, rank) + SYSTEM_ITERATIONS_SUFFIX


def system_report_name(backend: str, group: str, rank: int) -> str:
    if backend not in SYSTEM_REPORTS:
        raise ValueError(f"system backend {backend!r}: allowed: {', '.join(SYSTEM_REPORTS)}")
    return system_base_name(group, rank) + SYSTEM_REPORTS[backend]


# ---------------------------------------------------------------------------------- timeline

SEGMENT_SUFFIX = ".seg.jsonl"
SEGMENT_SCHEMA = 1
TIMELINE_FILE = "timeline.json"
TIMELINE_FILES = (TIMELINE_FILE, TIMELINE_FILE + ".gz")  # readers take either, the plain one first
TIMELINE_PFTRACE_FILE = "timeline.pftrace"   # the same timeline as Perfetto's protobuf trace, beside it


def pftrace_name(json_name: str) -> str:
    """`timeline.pftrace` for `timeline.json` or `timeline.json.gz` (`timeline.<run_id>.pftrace` for a
    run's file): the protobuf trace the merge writes beside the JSON."""
    return json_name.removesuffix(".gz").removesuffix(".json") + TIMELINE_PFTRACE_FILE.removeprefix("timeline")


def run_timeline_file(run_id: str) -> str:
    """`timeline.<run_id>.json`: one run's timeline, when a directory holds segments of several runs
    (timeline.json is then the latest run's)."""
    return f"timeline.{run_id}.json"


def metrics_file_name(role: str, rank: int) -> str:
    """`<role>_rank<R>.jsonl`: one worker's per-iteration metrics (metrics/tracker.py, docs/metrics.md)."""
    return f"{role}_rank{rank}{METRICS_SUFFIX}"


# asynchronous RL's tracker keys (metrics/async_rl.py, analysis/analyzers/async_rl.py, docs/async.md)
ASYNC_METRICS_PREFIX = "async/"
# actor -> (HF layout, for an inference engine) -> object store -> rollout -> its model; spans
# `weight_sync/<phase>` of category CAT_WEIGHT_SYNC (examples/common/weight_sync.py)
WEIGHT_SYNC_PHASES = ("gather", "convert", "transfer", "load")


# ---------------------------------------------------------------------------------- rollout samples
# one worker's per-sample records of its generation stages (record_samples; docs/rollout.md)

SAMPLES_DIR = "samples"
SAMPLES_SUFFIX = ".jsonl"
SAMPLES_SCHEMA = 1
SAMPLE_BATCH = "batch"      # the line each record_samples() call writes first
SAMPLE_RECORD = "sample"    # one line per sample
MAX_SAMPLES_PER_ITERATION = 65536   # per worker and iteration; the rest are counted in the batch line's `dropped`
# `.pid<P>`: a second process of one role and rank (separate rollout actors left at rank 0) writes a
# file of its own: a samples file has one writer at a time (rollout/recorder.py)
SAMPLES_FILE_RE = re.compile(r"^(?P<role>[A-Za-z0-9][A-Za-z0-9_.\-]*?)_rank(?P<rank>\d+)(?:\.pid(?P<pid>\d+))?"
                             + re.escape(SAMPLES_SUFFIX) + "$")


def samples_file_name(role: str, rank: int, pid: int | None = None) -> str:
    """`<role>_rank<R>.jsonl`: one worker's per-sample records, under `<save_path>/samples/`; with
    `pid`, `<role>_rank<R>.pid<P>.jsonl`: those of process P while another writes the first."""
    return f"{role}_rank{rank}{'' if pid is None else f'.pid{pid}'}{SAMPLES_SUFFIX}"


TRAIN_STAGE_WORDS = ("update", "train")   # a stage named with one of these runs forward + backward: 6 N per token


def is_train_stage(name: str) -> bool:
    """A stage that trains (the tracker's 6 N FLOPs per token; the advisor's MFU rule)."""
    lowered = name.lower()
    return any(word in lowered for word in TRAIN_STAGE_WORDS)


FORWARD_FLOPS_PER_PARAM = 2      # one multiply-add per parameter per token
TRAIN_FLOPS_PER_PARAM = 6        # forward 2 + backward 4


def flops_per_token(stage: str, parameters: int) -> int:
    """6 N for a stage that trains (its name has "update" or "train"), 2 N for the others: the
    tracker's perf/mfu/<stage> and the analysis' --peak-tflops recomputation (docs/metrics.md)."""
    return (TRAIN_FLOPS_PER_PARAM if is_train_stage(stage) else FORWARD_FLOPS_PER_PARAM) * parameters


METRICS_FILE_RE = re.compile(r"^(?P<role>[A-Za-z0-9][A-Za-z0-9_.\-]*?)_rank(?P<rank>\d+)" + re.escape(METRICS_SUFFIX) + "$")


def parse_metrics_file_name(name: str) -> tuple[str, int] | None:
    """(role, rank) of a metrics_file_name(), or None for another file."""
    m = METRICS_FILE_RE.match(name)
    return (m["role"], int(m["rank"])) if m and int(m["rank"]) <= MAX_RANK else None


# per-stage memory and out-of-memory records (metrics/memory_tracking.py, docs/memory.md), in
# MEMORY_DIR under the metrics directory:
#   <role>_rank<R>.stages.jsonl                   one "worker" line, then one "stage" line per stage call
#   <role>_rank<R>.<kind>.<pid>-<n>.memory.json   an out-of-memory error's or a host watermark's record
#   <role>_rank<R>.<kind>.<pid>-<n>.memory_snapshot.pickle   the allocator's snapshot of that record
MEMORY_DIR = "memory"
MEMORY_STAGES_SUFFIX = ".stages.jsonl"
MEMORY_RECORD_SUFFIX = ".memory.json"
MEMORY_STAGES_RE = re.compile(r"^(?P<role>[A-Za-z0-9][A-Za-z0-9_.\-]*?)_rank(?P<rank>\d+)" + re.escape(MEMORY_STAGES_SUFFIX) + "$")
MEMORY_RECORD_RE = re.compile(r"^(?P<role>[A-Za-z0-9][A-Za-z0-9_.\-]*?)_rank(?P<rank>\d+)\.(?P<kind>[a-z_]+)\.(?P<pid>\d+)-(?P<n>\d+)"
                              + re.escape(MEMORY_RECORD_SUFFIX) + "$")
CAT_MEMORY_MOVE = "memory_move"   # an offload / onload span (metrics/offload.py); args: direction, bytes, what


def memory_stages_name(role: str, rank: int) -> str:
    return f"{role}_rank{rank}{MEMORY_STAGES_SUFFIX}"


def memory_record_name(role: str, rank: int, kind: str, pid: int, n: int) -> str:
    return f"{role}_rank{rank}.{kind}.{pid}-{n}{MEMORY_RECORD_SUFFIX}"


def memory_record_snapshot_name(record_name: str) -> str:
    """The allocator snapshot beside a record (opens in https://pytorch.org/memory_viz)."""
    return record_name.removesuffix(MEMORY_RECORD_SUFFIX) + MEMORY_SNAPSHOT_SUFFIX


_SEGMENT_UNSAFE_RE = re.compile(r"[^A-Za-z0-9_.\-]+")


def segment_name(role: str, rank: int, host: str, pid: int) -> str:
    """Unique per process and host, readable: `<role>_rank<R>_<host>_<pid>.seg.jsonl`."""
    return f"{_SEGMENT_UNSAFE_RE.sub('-', role)}_rank{rank}_{_SEGMENT_UNSAFE_RE.sub('-', host)}_{pid}{SEGMENT_SUFFIX}"


# Segment files are JSON lines: records are objects with a "type", events are flat lists
#   [ph, name, cat, start_mono_ns, dur_ns, lane, args | null]
# with ph "X" (complete span) or "i" (instant). docs/tracing.md shows an example of each.
SEG_HEADER, SEG_THREAD, SEG_CLOCK, SEG_STATS, SEG_CLOSE = "header", "thread", "clock", "stats", "close"
SEG_RECORD_TYPES = (SEG_HEADER, SEG_THREAD, SEG_CLOCK, SEG_STATS, SEG_CLOSE)
PH_SPAN, PH_INSTANT = "X", "i"
EVENT_FIELDS = ("ph", "name", "cat", "start_ns", "dur_ns", "lane", "args")

# Span categories the analysis relies on (other categories are free: user, driver, ...).
CAT_STAGE = "stage"            # an RL stage on a worker; name / args.stage = the stage name
CAT_WEIGHT_SYNC = "weight_sync"   # a phase of the actor -> rollout weight sync: weight_sync/<phase>, args.phase
CAT_ITERATION = "iteration"    # one training iteration; args.iteration = its 1-based number
CAT_RPC = "rpc"                # a driver-side call into a worker group
CAT_PROFILER = "profiler"      # the profiler's own work (profiler_export), kept out of stage spans
CAT_MSTX = "mstx"              # a marked range (mstx_timer_decorator / mstx_range / mstx_mark)
# The span names the profiler writes for itself.
SPAN_ITERATION = "iteration"
SPAN_PROFILER_EXPORT = "profiler_export"

# ---------------------------------------------------------------------------------- analysis outputs

SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"
DB_FILE = "analysis.db"
# each capture's complete per-name totals (op_totals, kernel_totals), one JSON line per capture, beside
# summary.json; a capture record's `totals` = {file, offset, bytes} says where its line is
CAPTURE_TOTALS_FILE = "capture_totals.jsonl"
# Above INLINE_DETAIL_MAX captures, each capture's per-capture lists (its top lists and the straggler
# analysis' blocks: most of what is left of a record) go to its capture_totals.jsonl line too, so that
# summary.json stays small at 10,000 ranks; the record's `totals.detail` names the keys moved, and
# outputs.load_summary puts them back.
INLINE_DETAIL_MAX = 1000
DETAIL_KEYS = ("top_ops", "top_ops_by_device", "top_kernels", "kernel_types", "annotations", "idle_causes",
               "kernel_launches", "collective_kernels", "communication_ops", "memory_records", "ascend_free",
               "step_trace")
SUMMARY_SCHEMA = 1
# JSON files that are never traces, wherever they lie.
NOT_TRACE_FILES = frozenset({
    META_FILE, ASCEND_METADATA_FILE, RUN_FILE, SUMMARY_FILE, "profiler_info.json", ASCEND_COMMUNICATION,
    ASCEND_COMMUNICATION_MATRIX, CLUSTER_COMMUNICATION_FILE, CLUSTER_MATRIX_FILE, CLUSTER_GROUP_FILE, "package.json",
    TORCH_NPU_DYNAMIC_FILE,
})
