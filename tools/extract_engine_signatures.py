#!/usr/bin/env python3
"""Snapshot the vLLM and SGLang APIs that per-sample rollout records and engine captures rely on,
read from the released wheels' sources with `ast` (never imported: neither runs without a GPU).

The snapshot format extends the torch_npu one (tools/extract_torch_npu_signatures.py, whose
Source / _signature / _callable / dumps / write_json this tool imports): "functions" holds the
signatures (same entries, so tests/fake_torch_npu.signature_of can bind calls against them; async
methods carry "async": true), "absent" what the release does not have, and besides:
  classes              dataclass / msgspec.Struct / pydantic field lists (name, annotation, default,
                       line; inherited fields say where they are defined_in), enum members
  instance_attributes  what a plain class's __init__ assigns to self (vllm RequestOutput)
  routes               HTTP routes: path -> handler, methods, params (with annotations)
  env_vars             environment variables: name -> file, line, default_src
  dict_keys            string keys a function writes into dicts (SGLang's meta_info / out_dict)
  anchors              source lines the docs cite (trace file naming, which clock a timestamp
                       uses): file, line, the line's text, and the clocks called on it
                       (time.time / time.monotonic / time.perf_counter ...)
Every entry has the file (path inside the wheel) and line. What to record is the ENGINES table.

    python tools/extract_engine_signatures.py --engine vllm --version 0.33.0 [--wheel-dir /tmp/wheels]
    python tools/extract_engine_signatures.py --engine sglang --wheel /tmp/wheels/sglang-0.5.23-....whl
    python tools/extract_engine_signatures.py --engine vllm --source-dir /tmp/vllm_src --out x.json
Writes mindspeed_profiler/data/<engine>-<version>.json (sorted keys, the torch_npu layout).
pip downloads the wheel without installing it (--no-deps). docs/engines_api.md is the readable
record of these snapshots; tests/test_engine_snapshots.py checks both.
"""
from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    from extract_torch_npu_signatures import (DATA_DIR, Source, _callable, _default, _member, _signature, dumps,
                                              write_json)
finally:
    sys.path.pop(0)

__all__ = ["ENGINES", "DirSource", "WheelSource", "extract", "dumps", "write_json", "snapshot_name"]

# Each spec: the modules are dotted names inside the distribution; a public name is the dotted path
# of the definition (vllm and sglang export LLM / Engine lazily, so the defining module is named).
ENGINES: dict[str, dict[str, Any]] = {
    "vllm": {
        "package": "vllm",
        "version_file": "vllm/_version.py",
        "callables": {
            "vllm.entrypoints.llm.LLM.__init__": ("vllm.entrypoints.llm", ("LLM", "__init__")),
            "vllm.entrypoints.llm.LLM.start_profile": ("vllm.entrypoints.llm", ("LLM", "start_profile")),
            "vllm.entrypoints.llm.LLM.stop_profile": ("vllm.entrypoints.llm", ("LLM", "stop_profile")),
            "vllm.entrypoints.llm.LLM.generate": ("vllm.entrypoints.llm", ("LLM", "generate")),
            "vllm.v1.engine.llm_engine.LLMEngine.start_profile": ("vllm.v1.engine.llm_engine", ("LLMEngine", "start_profile")),
            "vllm.v1.engine.llm_engine.LLMEngine.stop_profile": ("vllm.v1.engine.llm_engine", ("LLMEngine", "stop_profile")),
            "vllm.v1.engine.async_llm.AsyncLLM.start_profile": ("vllm.v1.engine.async_llm", ("AsyncLLM", "start_profile")),
            "vllm.v1.engine.async_llm.AsyncLLM.stop_profile": ("vllm.v1.engine.async_llm", ("AsyncLLM", "stop_profile")),
            "vllm.v1.engine.async_llm.AsyncLLM.generate": ("vllm.v1.engine.async_llm", ("AsyncLLM", "generate")),
            "vllm.engine.protocol.EngineClient.start_profile": ("vllm.engine.protocol", ("EngineClient", "start_profile")),
            "vllm.engine.protocol.EngineClient.stop_profile": ("vllm.engine.protocol", ("EngineClient", "stop_profile")),
            "vllm.v1.executor.abstract.Executor.profile": ("vllm.v1.executor.abstract", ("Executor", "profile")),
            "vllm.v1.worker.gpu_worker.Worker.profile": ("vllm.v1.worker.gpu_worker", ("Worker", "profile")),
            "vllm.distributed.utils.get_worker_rank_suffix": ("vllm.distributed.utils", ("get_worker_rank_suffix",)),
            "vllm.config.profiler.validate_profile_prefix": ("vllm.config.profiler", ("validate_profile_prefix",)),
            "vllm.profiler.wrapper.create_worker_profiler": ("vllm.profiler.wrapper", ("create_worker_profiler",)),
            "vllm.profiler.wrapper.TorchProfilerWrapper.__init__": ("vllm.profiler.wrapper", ("TorchProfilerWrapper", "__init__")),
            "vllm.outputs.RequestOutput.__init__": ("vllm.outputs", ("RequestOutput", "__init__")),
        },
        "required": ("vllm.entrypoints.llm.LLM.__init__", "vllm.entrypoints.llm.LLM.start_profile"),
        "classes": {
            "vllm.config.profiler.ProfilerConfig": ("vllm.config.profiler", "ProfilerConfig"),
            "vllm.entrypoints.serve.profile.api_router.StartProfileRequest":
                ("vllm.entrypoints.serve.profile.api_router", "StartProfileRequest"),
            "vllm.outputs.CompletionOutput": ("vllm.outputs", "CompletionOutput"),
            "vllm.v1.metrics.stats.RequestStateStats": ("vllm.v1.metrics.stats", "RequestStateStats"),
            "vllm.v1.metrics.stats.FinishedRequestStats": ("vllm.v1.metrics.stats", "FinishedRequestStats"),
            "vllm.v1.engine.EngineCoreEvent": ("vllm.v1.engine", "EngineCoreEvent"),
            "vllm.v1.engine.EngineCoreEventType": ("vllm.v1.engine", "EngineCoreEventType"),
            "vllm.v1.engine.EngineCoreOutputs": ("vllm.v1.engine", "EngineCoreOutputs"),
            # gone: the v0 per-request metrics (arrival_time, first_scheduled_time, time_in_queue, ...)
            "vllm.sequence.RequestMetrics": ("vllm.sequence", "RequestMetrics"),
            "vllm.outputs.RequestMetrics": ("vllm.outputs", "RequestMetrics"),
        },
        # only these fields of a large class: LLM(**kwargs) goes to EngineArgs
        "class_fields_only": {"vllm.engine.arg_utils.EngineArgs": (
            ("vllm.engine.arg_utils", "EngineArgs"), ("disable_log_stats", "profiler_config"))},
        "instance_attributes": {"vllm.outputs.RequestOutput": ("vllm.outputs", "RequestOutput", "__init__")},
        "routes": {"module": "vllm.entrypoints.serve.profile.api_router", "paths": ("/start_profile", "/stop_profile")},
        # older releases configured the profiler through these; 0.33 has none (ProfilerConfig instead)
        "env_vars": {"module": "vllm.envs", "names": (
            "VLLM_TORCH_PROFILER_DIR", "VLLM_TORCH_PROFILER_RECORD_SHAPES", "VLLM_TORCH_PROFILER_WITH_PROFILE_MEMORY",
            "VLLM_TORCH_PROFILER_WITH_STACK", "VLLM_TORCH_PROFILER_WITH_FLOPS", "VLLM_TORCH_CUDA_PROFILE",
            "VLLM_PROFILER_DELAY_ITERS", "VLLM_PROFILER_MAX_ITERS")},
        "dict_keys": {},
        "anchors": {
            # trace file naming
            "trace_name.worker": ("vllm.v1.worker.gpu_worker", r'trace_name = f"\{profile_prefix\}_\{rank_suffix\}"', None),
            "trace_name.rank_suffix": ("vllm.distributed.utils", r'suffix = f"dp\{dp_rank\}_pp\{pp_rank\}_tp\{tp_rank\}', None),
            "trace_name.rank_suffix_global": ("vllm.distributed.utils", r'suffix = f"\{suffix\}_rank\{global_rank\}"', None),
            "trace_name.frontend": ("vllm.v1.engine.async_llm", r'f"\{socket\.gethostname\(\)\}_\{os\.getpid\(\)\}\.async_llm"', None),
            "trace_name.frontend_prefix": ("vllm.v1.engine.async_llm", r'worker_name = f"\{profile_prefix\}_\{worker_name\}"', None),
            "trace_handler.torch": ("vllm.profiler.wrapper", r"torch\.profiler\.tensorboard_trace_handler\(",
                                    "TorchProfilerWrapper.__init__"),
            "trace_handler.use_gzip": ("vllm.profiler.wrapper", r"use_gzip=profiler_config\.torch_profiler_use_gzip",
                                       "TorchProfilerWrapper.__init__"),
            "trace_name.profiler_out_txt": ("vllm.profiler.wrapper", r'f"\{self\._worker_name\}\.profiler_out\.txt"', None),
            "profiler.default_activities": ("vllm.profiler.wrapper", r'"cuda": \("CPU", "CUDA"\)', None),
            "profiler.executor_passes_overrides_only_when_set": ("vllm.v1.executor.abstract",
                                                                  r"if delay_iterations is not None:", "Executor.profile"),
            "routes.attached_only_with_profiler": ("vllm.entrypoints.serve.profile.api_router",
                                                   r"if profiler_config is not None and profiler_config\.profiler is not None:", None),
            # request metrics: when RequestOutput.metrics is filled, and which clock each timestamp uses
            "metrics.llm_disables_log_stats": ("vllm.entrypoints.llm", r'kwargs\["disable_log_stats"\] = True', None),
            "metrics.only_with_log_stats": ("vllm.v1.engine.output_processor",
                                            r"RequestStateStats\(arrival_time=arrival_time\) if log_stats else None", None),
            "metrics.request_output_metrics": ("vllm.v1.engine.output_processor", r"metrics=self\.stats,", None),
            "clock.arrival_time.request": ("vllm.v1.request", r"self\.arrival_time = arrival_time if arrival_time is not None else time\.time\(\)", None),
            "clock.arrival_time.input_processor": ("vllm.v1.engine.input_processor", r"arrival_time = time\.time\(\)", None),
            "clock.engine_core_event": ("vllm.v1.engine", r"timestamp = time\.monotonic\(\) if timestamp is None else timestamp", None),
            "clock.scheduled_timestamp": ("vllm.v1.core.sched.scheduler", r"scheduled_timestamp = time\.monotonic\(\)", None),
            "clock.engine_core_outputs": ("vllm.v1.engine", r"self\.timestamp = time\.monotonic\(\)", None),
            "clock.engine_core_timestamp": ("vllm.v1.engine.llm_engine", r"engine_core_timestamp=outputs\.timestamp", None),
            "clock.iteration_timestamp": ("vllm.v1.metrics.stats", r"self\.iteration_timestamp = time\.time\(\)", None),
            "stats.queued_ts": ("vllm.v1.metrics.stats", r"req_stats\.queued_ts = event\.timestamp", None),
            "stats.scheduled_ts": ("vllm.v1.metrics.stats", r"req_stats\.scheduled_ts = event\.timestamp", None),
            "stats.first_token_ts": ("vllm.v1.metrics.stats", r"req_stats\.first_token_ts = engine_core_timestamp", None),
            "stats.last_token_ts": ("vllm.v1.metrics.stats", r"req_stats\.last_token_ts = engine_core_timestamp", None),
            "stats.first_token_latency": ("vllm.v1.metrics.stats", r"first_token_latency = self\._time_since\(req_stats\.arrival_time\)", None),
            "stats.e2e_latency": ("vllm.v1.metrics.stats", r"e2e_latency = self\._time_since\(req_stats\.arrival_time\)", None),
            "stats.queued_time": ("vllm.v1.metrics.stats", r"queued_time = req_stats\.scheduled_ts - req_stats\.queued_ts", None),
        },
    },
    "sglang": {
        "package": "sglang",
        "version_file": "sglang/_version.py",
        "callables": {
            "sglang.srt.entrypoints.engine.Engine.__init__": ("sglang.srt.entrypoints.engine", ("Engine", "__init__")),
            "sglang.srt.entrypoints.engine.Engine.start_profile": ("sglang.srt.entrypoints.engine", ("Engine", "start_profile")),
            "sglang.srt.entrypoints.engine.Engine.stop_profile": ("sglang.srt.entrypoints.engine", ("Engine", "stop_profile")),
            "sglang.srt.entrypoints.engine.Engine.generate": ("sglang.srt.entrypoints.engine", ("Engine", "generate")),
            "sglang.srt.entrypoints.engine.Engine.async_generate": ("sglang.srt.entrypoints.engine", ("Engine", "async_generate")),
            "sglang.srt.managers.tokenizer_manager.TokenizerManager.start_profile":
                ("sglang.srt.managers.tokenizer_manager", ("TokenizerManager", "start_profile")),
            "sglang.srt.managers.tokenizer_manager.TokenizerManager.stop_profile":
                ("sglang.srt.managers.tokenizer_manager", ("TokenizerManager", "stop_profile")),
            "sglang.srt.managers.scheduler_components.profiler_manager.SchedulerProfilerManager._init_profile":
                ("sglang.srt.managers.scheduler_components.profiler_manager", ("SchedulerProfilerManager", "_init_profile")),
            "sglang.srt.observability.req_time_stats.APIServerReqTimeStats.convert_to_output_meta_info":
                ("sglang.srt.observability.req_time_stats", ("APIServerReqTimeStats", "convert_to_output_meta_info")),
            "sglang.srt.observability.req_time_stats.SchedulerReqTimeStats.convert_to_output_meta_info":
                ("sglang.srt.observability.req_time_stats", ("SchedulerReqTimeStats", "convert_to_output_meta_info")),
        },
        "required": ("sglang.srt.entrypoints.engine.Engine.__init__", "sglang.srt.entrypoints.engine.Engine.start_profile"),
        "classes": {
            "sglang.srt.managers.io_struct.ProfileReq": ("sglang.srt.managers.io_struct", "ProfileReq"),
            "sglang.srt.managers.io_struct.ProfileReqType": ("sglang.srt.managers.io_struct", "ProfileReqType"),
            "sglang.srt.managers.io_struct.ProfileReqOutput": ("sglang.srt.managers.io_struct", "ProfileReqOutput"),
            # the old name of the /start_profile body
            "sglang.srt.managers.io_struct.ProfileReqInput": ("sglang.srt.managers.io_struct", "ProfileReqInput"),
            "sglang.srt.observability.req_time_stats.APIServerReqTimeStats":
                ("sglang.srt.observability.req_time_stats", "APIServerReqTimeStats"),
            "sglang.srt.observability.req_time_stats.SchedulerReqTimeStats":
                ("sglang.srt.observability.req_time_stats", "SchedulerReqTimeStats"),
        },
        # only these fields of a large class
        "class_fields_only": {"sglang.srt.arg_groups.fields.observability.Observability": (
            ("sglang.srt.arg_groups.fields.observability", "Observability"), ("enable_metrics", "log_requests"))},
        "instance_attributes": {},
        "routes": {"module": "sglang.srt.entrypoints.http_server", "paths": ("/start_profile", "/stop_profile")},
        "env_vars": {"module": "sglang.srt.environ", "names": (
            "SGLANG_TORCH_PROFILER_DIR", "SGLANG_PROFILE_WITH_STACK", "SGLANG_PROFILE_RECORD_SHAPES", "SGLANG_PROFILE_V2",
            "SGLANG_PROFILE_BY_STAGE_DECODE_MIN_BS", "SGLANG_MEM_PROFILE_MAX_ENTRIES")},
        "dict_keys": {
            "sglang.srt.managers.tokenizer_manager.TokenizerManager._handle_batch_output":
                ("sglang.srt.managers.tokenizer_manager", ("TokenizerManager", "_handle_batch_output"),
                 ("meta_info", "out_dict")),
            "sglang.srt.observability.req_time_stats.APIServerReqTimeStats.convert_to_output_meta_info":
                ("sglang.srt.observability.req_time_stats", ("APIServerReqTimeStats", "convert_to_output_meta_info"),
                 ("meta_info",)),
            "sglang.srt.observability.req_time_stats.SchedulerReqTimeStats.convert_to_output_meta_info":
                ("sglang.srt.observability.req_time_stats", ("SchedulerReqTimeStats", "convert_to_output_meta_info"),
                 ("meta_data",)),
        },
        "anchors": {
            # trace file naming (torch profiler, non-NPU): [<prefix>-]<profile_id>-TP-<r>[-DP-][-PP-][-EP-][-<STAGE>].trace.json.gz
            "trace_name.parts": ("sglang.srt.managers.scheduler_components.profiler_manager",
                                 r'filename_parts = \[self\.profile_id, f"TP-\{get_parallel\(\)\.tp_rank\}"\]', None),
            "trace_name.dp": ("sglang.srt.managers.scheduler_components.profiler_manager", r'filename_parts\.append\(f"DP-', None),
            "trace_name.pp": ("sglang.srt.managers.scheduler_components.profiler_manager", r'filename_parts\.append\(f"PP-', None),
            "trace_name.ep": ("sglang.srt.managers.scheduler_components.profiler_manager", r'filename_parts\.append\(f"EP-', None),
            "trace_name.prefix": ("sglang.srt.managers.scheduler_components.profiler_manager",
                                  r'stage_prefix = self\.profile_prefix \+ "-"', None),
            "trace_name.stage_suffix": ("sglang.srt.managers.scheduler_components.profiler_manager",
                                        r'stage_suffix = f"-\{stage\.name\}" if stage else ""', "SchedulerProfilerManager._stop_profile"),
            "trace_name.extension": ("sglang.srt.managers.scheduler_components.profiler_manager", r'\+ "\.trace\.json\.gz"',
                                     "SchedulerProfilerManager._stop_profile"),
            "trace_name.not_on_npu": ("sglang.srt.managers.scheduler_components.profiler_manager", r"if not _is_npu:",
                                      "SchedulerProfilerManager._stop_profile"),
            "trace_handler.npu": ("sglang.srt.managers.scheduler_components.profiler_manager",
                                  r"torch_npu\.profiler\.tensorboard_trace_handler\(", None),
            "npu.fixed_level": ("sglang.srt.managers.scheduler_components.profiler_manager",
                                r"profiler_level=torch_npu\.profiler\.ProfilerLevel\.Level1", None),
            "profile.default_output_dir": ("sglang.srt.managers.scheduler_components.profiler_manager",
                                           r'output_dir = os\.getenv\("SGLANG_TORCH_PROFILER_DIR", "/tmp"\)', None),
            "profile.default_activities": ("sglang.srt.managers.scheduler_components.profiler_manager",
                                           r'activities = \["CPU", "GPU"\]', None),
            "profile.profile_id_default": ("sglang.srt.managers.tokenizer_control_mixin",
                                           r"req\.profile_id = req\.profile_id or str\(time\.time\(\)\)", None),
            "profile.with_stack_env": ("sglang.srt.managers.tokenizer_control_mixin",
                                       r'get_bool_env_var\("SGLANG_PROFILE_WITH_STACK", "true"\)', None),
            "profile.merge_rank0": ("sglang.srt.managers.scheduler_components.profiler_manager",
                                    r"merger = ProfileMerger\(self\.torch_profiler_output_dir, self\.profile_id\)", None),
            # meta_info: when the timing keys are there, and their clocks
            "meta_info.timing_needs_enable_metrics": ("sglang.srt.managers.tokenizer_manager",
                                                      r"meta_info\.update\(scheduler_time_stats\.convert_to_output_meta_info\(\)\)",
                                                      "TokenizerManager._handle_batch_output"),
            "meta_info.e2e_latency": ("sglang.srt.managers.tokenizer_manager",
                                      r'meta_info\["e2e_latency"\] = state\.time_stats\.get_e2e_latency\(\)', None),
            "clock.monotonic_time": ("sglang.srt.observability.req_time_stats", r"^monotonic_time = time\.perf_counter", None),
            "clock.realtime_offset": ("sglang.srt.observability.req_time_stats",
                                      r"^global_diff_realtime_monotonic = time\.time\(\) - time\.perf_counter\(\)", None),
            "clock.to_realtime": ("sglang.srt.observability.req_time_stats",
                                  r"return time_value \+ global_diff_realtime_monotonic", "convert_time_to_realtime"),
            "clock.created_time": ("sglang.srt.observability.req_time_stats", r"ts = ts or time\.perf_counter\(\)",
                                   "APIServerReqTimeStats.set_created_time"),
            "clock.finished_time": ("sglang.srt.observability.req_time_stats", r"ts = ts or time\.perf_counter\(\)",
                                    "APIServerReqTimeStats.set_finished_time"),
            "clock.first_token_time": ("sglang.srt.managers.tokenizer_manager", r"first_output_time = time\.perf_counter\(\)",
                                       "TokenizerManager._handle_batch_output"),
            "clock.wait_queue_entry_time": ("sglang.srt.observability.req_time_stats", r"ts = ts or time\.perf_counter\(\)",
                                            "SchedulerReqTimeStats.set_wait_queue_entry_time"),
            "clock.forward_entry_time": ("sglang.srt.observability.req_time_stats", r"ts = ts or time\.perf_counter\(\)",
                                         "SchedulerReqTimeStats.set_forward_entry_time"),
            "stats.e2e_latency": ("sglang.srt.observability.req_time_stats", r"return self\.finished_time - self\.created_time",
                                  "APIServerReqTimeStats.get_e2e_latency"),
            "stats.queue_time": ("sglang.srt.observability.req_time_stats", r"return self\.queue_duration_s",
                                 "SchedulerReqTimeStats.get_queueing_time"),
            "stats.created_time_from_received_time": ("sglang.srt.managers.tokenizer_manager",
                                                      r"created_time = obj\.received_time", None),
        },
    },
}

_CLOCK = re.compile(r"\btime\.(time|monotonic|perf_counter)(_ns)?\b")
_ROUTE_METHODS = {"get", "post", "put", "delete", "patch"}


# ------------------------------------------------------------------------------ sources


def _normalise_async(tree: ast.Module) -> ast.Module:
    """Turn every `async def` into a FunctionDef marked `_msp_async`, so the torch_npu tool's
    resolve / _member / _callable (written for plain defs) find async methods too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.AsyncFunctionDef):
            node._msp_async = True  # type: ignore[attr-defined]
            node.__class__ = ast.FunctionDef
    return tree


class WheelSource(Source):
    """A downloaded wheel (zip), read like the torch_npu tool's Source, async defs included."""

    def __init__(self, wheel: Path):
        super().__init__(wheel)
        self.label = Path(wheel).name
        self._text: dict[str, list[str]] = {}

    def tree(self, module: str) -> ast.Module:
        if module not in self._trees:
            self._trees[module] = _normalise_async(ast.parse(self.text(self.path_of(module))))
        return self._trees[module]

    def text(self, path: str) -> str:
        return self.zip.read(path).decode("utf-8")

    def lines(self, module: str) -> list[str]:
        if module not in self._text:
            self._text[module] = self.text(self.path_of(module)).splitlines()
        return self._text[module]


class _DirZip:
    """The two ZipFile methods Source uses, over an unpacked source tree."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def namelist(self) -> list[str]:
        return [p.relative_to(self.root).as_posix() for p in self.root.rglob("*.py")]

    def read(self, name: str) -> bytes:
        return (self.root / name).read_bytes()


class DirSource(WheelSource):
    """An unpacked source tree (a test's hand-written package, or an unzipped wheel)."""

    def __init__(self, root: Path, label: str | None = None):  # noqa: D107 - no zip to open
        self.zip = _DirZip(root)  # type: ignore[assignment]
        self.names = set(self.zip.namelist())
        self._trees = {}
        self._text = {}
        self.label = label or Path(root).name


# ------------------------------------------------------------------------------ extraction


def _owner(src: WheelSource, module: str, cls: ast.ClassDef, name: str, depth: int = 0) -> str | None:
    """The module of the class that defines `name`: `cls` itself or an in-wheel base (what _member
    finds, whose module _callable does not return)."""
    if any(isinstance(n, ast.FunctionDef) and n.name == name for n in cls.body):
        return module
    for base in cls.bases:
        if isinstance(base, ast.Name) and depth < 8:
            try:
                base_module, base_cls = src.resolve(module, base.id)
            except KeyError:
                continue
            if isinstance(base_cls, ast.ClassDef):
                found = _owner(src, base_module, base_cls, name, depth + 1)
                if found:
                    return found
    return None


def _locate(src: WheelSource, module: str, path: tuple[str, ...]) -> tuple[str, ast.FunctionDef, bool]:
    """_callable, with the module the def is really in (a mixin's, for an inherited method)."""
    where, node, is_static = _callable(src, module, path)
    if len(path) > 1:
        cls_module, cls = src.resolve(module, path[0])
        where = _owner(src, cls_module, cls, path[1]) or where  # type: ignore[arg-type]
    return where, node, is_static


def _function_entry(src: WheelSource, module: str, path: tuple[str, ...]) -> dict[str, Any]:
    where, node, is_static = _locate(src, module, path)
    entry = {"file": src.path_of(where), "line": node.lineno, "staticmethod": is_static,
             "params": _signature(node, is_static)}
    if getattr(node, "_msp_async", False):
        entry["async"] = True
    for p, arg in zip(entry["params"], _all_args(node)):
        if arg.annotation is not None:
            p["annotation"] = ast.unparse(arg.annotation)
    return entry


def _all_args(fn: ast.FunctionDef) -> list[ast.arg]:
    """The args in the order _signature lists them."""
    a = fn.args
    out = list(a.posonlyargs) + list(a.args)
    if a.vararg:
        out.append(a.vararg)
    out += list(a.kwonlyargs)
    if a.kwarg:
        out.append(a.kwarg)
    return out


def _decorator_name(d: ast.expr) -> str:
    target = d.func if isinstance(d, ast.Call) else d
    return ast.unparse(target)


def _class_kind(src: WheelSource, module: str, cls: ast.ClassDef, depth: int = 0) -> str:
    """dataclass / pydantic-dataclass / msgspec / pydantic / enum / class, following in-wheel bases."""
    for d in cls.decorator_list:
        name = _decorator_name(d)
        if name in ("dataclass", "dataclasses.dataclass"):
            return "dataclass"
        if name in ("config", "pydantic.dataclasses.dataclass"):  # vllm's @config is a pydantic dataclass
            return "pydantic-dataclass"
    for base in cls.bases:
        name = ast.unparse(base)
        if name in ("msgspec.Struct", "Struct"):
            return "msgspec"
        if name in ("BaseModel", "pydantic.BaseModel"):
            return "pydantic"
        if name.split(".")[-1] in ("Enum", "IntEnum", "StrEnum"):
            return "enum"
        if isinstance(base, ast.Name) and depth < 8:
            try:
                base_module, base_cls = src.resolve(module, base.id)
            except KeyError:
                continue
            if isinstance(base_cls, ast.ClassDef):
                kind = _class_kind(src, base_module, base_cls, depth + 1)
                if kind != "class":
                    return kind
    return "class"


def _own_fields(cls: ast.ClassDef, kind: str) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = []
    for node in cls.body:
        if kind == "enum" and isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            fields.append({"name": node.targets[0].id, "line": node.lineno, **_default(node.value)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotation = ast.unparse(node.annotation)
            if annotation.startswith(("ClassVar", "typing.ClassVar")) or node.target.id.startswith("_"):
                continue
            fields.append({"name": node.target.id, "annotation": annotation, "line": node.lineno,
                           **_default(node.value)})
    return fields


def _class_entry(src: WheelSource, module: str, name: str, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    where, cls = src.resolve(module, name)
    if not isinstance(cls, ast.ClassDef):
        raise KeyError(f"{module}.{name} is not a class")
    kind = _class_kind(src, where, cls)
    fields = [{**f, "file": src.path_of(where)} for f in _own_fields(cls, kind)]
    # inherited fields (dataclass / msgspec / pydantic bases inside the wheel), base first as Python orders them
    inherited: list[dict[str, Any]] = []
    if kind != "enum":
        for base in cls.bases:
            if not isinstance(base, ast.Name):
                continue
            try:
                base_module, base_cls = src.resolve(where, base.id)
            except KeyError:
                continue
            if isinstance(base_cls, ast.ClassDef):
                base_file = src.path_of(base_module)
                for f in _own_fields(base_cls, _class_kind(src, base_module, base_cls)):
                    if all(f["name"] != g["name"] for g in fields + inherited):
                        inherited.append({**f, "defined_in": f"{base_module}.{base_cls.name}", "file": base_file})
    all_fields = inherited + fields
    if only is not None:
        all_fields = [f for f in all_fields if f["name"] in only]
    return {"file": src.path_of(where), "line": cls.lineno, "kind": kind,
            "bases": [ast.unparse(b) for b in cls.bases], "fields": all_fields}


def _instance_attributes(src: WheelSource, module: str, cls_name: str, method: str) -> list[str]:
    where, cls = src.resolve(module, cls_name)
    fn = _member(src, where, cls, method)
    return sorted({t.attr for t in ast.walk(fn) if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                   and t.value.id == "self" and isinstance(t.ctx, ast.Store)})


def _routes(src: WheelSource, module: str, paths: tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
    """FastAPI routes of `module` (`@router.post("/x")`, `@app.api_route("/x", methods=[...])`)."""
    found: dict[str, Any] = {}
    tree = src.tree(module)
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for d in node.decorator_list:
            if not (isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.args
                    and isinstance(d.args[0], ast.Constant) and d.args[0].value in paths):
                continue
            verb = d.func.attr
            if verb in _ROUTE_METHODS:
                methods = [verb.upper()]
            elif verb in ("api_route", "route"):
                kw = {k.arg: k.value for k in d.keywords}
                methods = sorted(ast.literal_eval(kw["methods"])) if "methods" in kw else ["GET"]
            else:
                continue
            params = _signature(node, False)
            for p, arg in zip(params, _all_args(node)):
                if arg.annotation is not None:
                    p["annotation"] = ast.unparse(arg.annotation)
            found[d.args[0].value] = {"file": src.path_of(module), "line": node.lineno, "handler": node.name,
                                      "router": ast.unparse(d.func.value), "methods": methods,
                                      "async": bool(getattr(node, "_msp_async", False)), "params": params}
    return found, [f"route:{p}" for p in paths if p not in found]


def _env_vars(src: WheelSource, module: str, names: tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
    """Where `module` defines each variable: a class attribute (SGLang's Envs), a dict key (vllm's
    environment_variables), else any string constant of that name."""
    try:
        tree, file = src.tree(module), src.path_of(module)
    except KeyError:
        return {}, [f"env:{n}" for n in names]
    found: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                target = item.targets[0] if isinstance(item, ast.Assign) else getattr(item, "target", None)
                value = getattr(item, "value", None)
                if isinstance(target, ast.Name) and target.id in names and target.id not in found:
                    found[target.id] = {"file": file, "line": item.lineno, "how": f"class {node.name} attribute",
                                        **({"default_src": ast.unparse(value)} if value is not None else {})}
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value in names and k.value not in found:
                    found[k.value] = {"file": file, "line": k.lineno, "how": "dict key", "default_src": ast.unparse(v)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in names and node.value not in found:
            found[node.value] = {"file": file, "line": node.lineno, "how": "string constant"}
    return found, [f"env:{n}" for n in names if n not in found]


def _dict_keys(fn: ast.FunctionDef, variables: tuple[str, ...]) -> dict[str, int]:
    """String keys written into the dicts named `variables`: v["k"] = ..., v = {"k": ...}, v.update({"k": ...})."""
    keys: dict[str, int] = {}

    def add(d: ast.Dict) -> None:
        for k in d.keys:
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                keys.setdefault(k.value, k.lineno)

    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in variables
                        and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str)):
                    keys.setdefault(t.slice.value, t.lineno)
                elif isinstance(t, ast.Name) and t.id in variables and isinstance(node.value, ast.Dict):
                    add(node.value)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
              and isinstance(node.func.value, ast.Name) and node.func.value.id in variables):
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    add(arg)
    return dict(sorted(keys.items()))


def _anchor(src: WheelSource, module: str, pattern: str, within: str | None) -> dict[str, Any]:
    """The first line of `module` (or of the def `within`, "Class.method" / "function") matching `pattern`."""
    lo, hi = 1, None
    if within:
        module, node, _ = _locate(src, module, tuple(within.split(".")))
        lo, hi = node.lineno, node.end_lineno or node.lineno
    lines = src.lines(module)
    hi = hi or len(lines)
    rx = re.compile(pattern)
    for no in range(lo, hi + 1):
        text = lines[no - 1]
        if rx.search(text):
            clocks = [f"time.{m.group(1)}{m.group(2) or ''}" for m in _CLOCK.finditer(text)]
            return {"file": src.path_of(module), "line": no, "text": text.strip(), "clocks": clocks}
    raise KeyError(f"{pattern!r} not found in {module}" + (f" ({within})" if within else ""))


def _version(src: WheelSource, path: str) -> str | None:
    if path not in src.names:
        return None
    for node in ast.parse(src.text(path)).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__version__" for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def extract(src: WheelSource, spec: dict[str, Any]) -> dict[str, Any]:
    """The snapshot of one engine release: `src` (WheelSource / DirSource), `spec` one ENGINES entry."""
    functions: dict[str, Any] = {}
    absent: list[str] = []
    for public, (module, path) in spec.get("callables", {}).items():
        try:
            functions[public] = _function_entry(src, module, path)
        except KeyError:
            if public in spec.get("required", ()):
                raise
            absent.append(public)
    classes: dict[str, Any] = {}
    wanted = {k: (v, None) for k, v in spec.get("classes", {}).items()}
    wanted.update({k: (v, only) for k, (v, only) in spec.get("class_fields_only", {}).items()})
    for public, ((module, name), only) in wanted.items():
        try:
            classes[public] = _class_entry(src, module, name, tuple(only) if only else None)
            if only:
                classes[public]["fields_selected"] = sorted(only)
        except KeyError:
            absent.append(public)
    attrs: dict[str, list[str]] = {}
    for public, (module, cls, method) in spec.get("instance_attributes", {}).items():
        try:
            attrs[public] = _instance_attributes(src, module, cls, method)
        except KeyError:
            absent.append(public)
    routes: dict[str, Any] = {}
    if spec.get("routes"):
        try:
            routes, missing = _routes(src, spec["routes"]["module"], tuple(spec["routes"]["paths"]))
        except KeyError:
            missing = [f"route:{p}" for p in spec["routes"]["paths"]]
        absent += missing
    env: dict[str, Any] = {}
    if spec.get("env_vars"):
        env, missing = _env_vars(src, spec["env_vars"]["module"], tuple(spec["env_vars"]["names"]))
        absent += missing
    dict_keys: dict[str, Any] = {}
    for public, (module, path, variables) in spec.get("dict_keys", {}).items():
        try:
            where, node, _ = _locate(src, module, path)
        except KeyError:
            absent.append(f"dict_keys:{public}")
            continue
        dict_keys[public] = {"file": src.path_of(where), "line": node.lineno, "variables": list(variables),
                             "keys": _dict_keys(node, tuple(variables))}
    anchors: dict[str, Any] = {}
    for key, (module, pattern, within) in spec.get("anchors", {}).items():
        try:
            anchors[key] = _anchor(src, module, pattern, within)
        except KeyError:
            absent.append(f"anchor:{key}")
    return {
        "schema": 1,
        "package": spec["package"],
        "version": _version(src, spec["version_file"]) if spec.get("version_file") else None,
        "wheel": src.label,
        "generated_by": "tools/extract_engine_signatures.py (ast, no import)",
        "functions": functions,
        "absent": sorted(absent),
        "classes": classes,
        "instance_attributes": attrs,
        "routes": routes,
        "env_vars": env,
        "dict_keys": dict_keys,
        "anchors": anchors,
    }


# ------------------------------------------------------------------------------ writing, downloads


def snapshot_name(engine: str, version: str) -> str:
    return f"{engine}-{version}.json"


def download(engine: str, version: str | None, dest: Path) -> Path:
    """pip download one wheel, never installed (--no-deps): cp311 manylinux x86_64, else this platform."""
    package = ENGINES[engine]["package"]
    spec = f"{package}=={version}" if version else package
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(dest)]
    for cmd in (base + ["--python-version", "3.11", "--platform", "manylinux_2_34_x86_64", "--platform",
                        "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64", spec],
                base + [spec]):
        if subprocess.run(cmd).returncode == 0:
            break
    wheels = sorted(dest.glob(f"{package.replace('-', '_')}-{version or ''}*.whl"))
    if not wheels:
        raise SystemExit(f"pip download produced no wheel for {spec} in {dest}")
    return wheels[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", required=True, choices=sorted(ENGINES))
    ap.add_argument("--version", help="release to download (default: newest)")
    ap.add_argument("--wheel", type=Path, help="a downloaded wheel")
    ap.add_argument("--source-dir", type=Path, help="an unpacked source tree instead of a wheel")
    ap.add_argument("--wheel-dir", type=Path, help="where downloaded wheels are kept and reused")
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR)
    ap.add_argument("--out", type=Path, help="write here instead of <data-dir>/<engine>-<version>.json")
    args = ap.parse_args(argv)
    if args.source_dir:
        src: WheelSource = DirSource(args.source_dir)
    else:
        wheel = args.wheel
        if wheel is None:
            wheel_dir = args.wheel_dir or Path(tempfile.mkdtemp(prefix=f"{args.engine}_"))
            wheel_dir.mkdir(parents=True, exist_ok=True)
            have = sorted(wheel_dir.glob(f"{ENGINES[args.engine]['package']}-{args.version}-*.whl")) if args.version else []
            wheel = have[0] if have else download(args.engine, args.version, wheel_dir)
        if not wheel.is_file():
            raise SystemExit(f"--wheel {wheel}: no such file")
        src = WheelSource(wheel)
    snap = extract(src, ENGINES[args.engine])
    out = args.out or args.data_dir / snapshot_name(args.engine, snap["version"] or "unknown")
    write_json(out, snap)
    print(f"wrote {out} ({len(snap['functions'])} functions, {len(snap['classes'])} classes, "
          f"absent: {', '.join(snap['absent']) or '-'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
