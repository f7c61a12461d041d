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
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mindspeed_profiler.backends.torch import profile_options
from mindspeed_profiler.core.capture_options import KEYWORDS, CaptureSettings
from mindspeed_profiler.engines.calls import post_json
from mindspeed_profiler.engines.notes import EngineTool, flag_note, shared_notes
from mindspeed_profiler.engines.outputs import Worker

VLLM = "vllm"
VLLM_ASCEND = "vllm-ascend"
TOOLS = {VLLM: EngineTool(VLLM, "vLLM's torch.profiler"), VLLM_ASCEND: EngineTool(VLLM_ASCEND, "vllm-ascend's torch_npu profiler")}

# vllm/distributed/utils.py:787-789 (the worker's rank suffix), vllm/v1/engine/async_llm.py:237 (the frontend)
_WORKER_RE = re.compile(r"_dp(\d+)_pp(\d+)_tp(\d+)_dcp(\d+)_ep(\d+)_rank(\d+)(?=[._]|$)")
_FRONTEND = ".async_llm"
_DIMS = ("dp", "pp", "tp", "dcp", "ep")


def worker_of(name: str) -> Worker | None:
    """Pure: the worker a vLLM output's name tells (its global rank and parallel ranks), the
    frontend for AsyncLLM's own trace, None for a name of neither form."""
    m = _WORKER_RE.search(name)
    if m:
        ranks = tuple(int(g) for g in m.groups())
        return Worker(f"rank{ranks[-1]}", ranks[-1], "", tuple(zip(_DIMS + ("rank",), ranks)))
    if _FRONTEND in name:
        return Worker("frontend", None, "-frontend")
    return None


def profiler_config(cfg: CaptureSettings, directory: Path, *, ascend: bool = False) -> dict[str, Any]:
    """`LLM(..., profiler_config=...)` (or `--profiler-config.<field>`) for our config: the torch
    profiler writing into `directory`, the flags our level and fields mean (backends/torch.py's
    mapping), the activities (on CUDA; vllm-ascend sets its own)."""
    opts = profile_options(cfg, cuda=True)
    out: dict[str, Any] = {
        "profiler": "torch",
        "torch_profiler_dir": str(directory),
        "torch_profiler_with_stack": opts["with_stack"],
        "torch_profiler_with_flops": opts["with_flops"],
        "torch_profiler_record_shapes": opts["record_shapes"],
        "torch_profiler_with_memory": opts["profile_memory"],
        "torch_profiler_use_gzip": True,   # the torch capture's own format (.pt.trace.json.gz)
    }
    if not ascend:
        out["torch_profiler_activities"] = opts["activities"]
    return out


def session_options(cfg: CaptureSettings, *, ascend: bool = False) -> dict[str, Any]:
    """The keyword arguments of one start_profile besides the prefix: the torch.profiler flags as
    `profiler_kwargs` (merged over the engine's own for that session); none for vllm-ascend, whose
    worker's profile() takes none (vLLM forwards them only when set)."""
    if ascend:
        return {}
    opts = profile_options(cfg, cuda=True)
    return {"profiler_kwargs": {k: bool(opts[k]) for k in KEYWORDS}}


def notes(cfg: CaptureSettings, *, ascend: bool = False, warmup_steps: int = 0) -> list[str]:
    """What a vLLM (vllm-ascend) capture cannot honour of our config, one sentence each."""
    out = shared_notes(cfg, TOOLS[VLLM_ASCEND if ascend else VLLM], warmup_steps=warmup_steps)
    opts = profile_options(cfg, cuda=True)
    if ascend:
        if cfg.profile_level != "level1":
            out.append(f"profile_level: {cfg.profile_level}: vllm-ascend fixes torch_npu's Level1")
        for keyword, field in (("record_shapes", "profile_record_shapes"), ("profile_memory", "profile_with_memory"),
                               ("with_flops", "profile_with_flops"), ("with_modules", "profile_with_module")):
            if opts[keyword]:
                out.append(flag_note(field, True, "is not passed per capture: vllm-ascend's worker takes no "
                                                  "profiler_kwargs (the engine's build-time profiler_config applies)"))
        if opts["with_stack"]:
            out.append(flag_note("profile_with_stack", True, "is not honoured: vllm-ascend runs torch_npu with "
                                                             "with_stack=False (torch_profiler_with_stack turns on "
                                                             "with_modules instead)"))
        out.append("profile_with_cpu / profile_with_npu: vllm-ascend records CPU and NPU activity as it sets them")
        return out
    if cfg.profile_level in ("level1", "level2"):
        out.append(f"profile_level: {cfg.profile_level}: vLLM has no profiler levels; passed as the torch.profiler "
                   "flags it means here (profiler_kwargs)")
    out.append(f"profile_with_cpu / profile_with_npu (activities {', '.join(opts['activities'])}): vLLM's activities "
               "are set when the engine is built (engine_profiler_args: torch_profiler_activities), not per capture")
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

    def __init__(self, engine: Any, output_dir: Path, *, ascend: bool = False, timeout_s: float = 60.0):
        self.engine = engine
        self.name = VLLM_ASCEND if ascend else VLLM
        self.device = "npu" if ascend else "cuda"
        self.ascend = ascend
        self.output_dir = Path(output_dir)
        self.timeout_s = timeout_s
        self.stops_itself = False   # max_iterations only bounds the recording: stop_profile still ends it

    def raw_dir(self, prefix: str) -> Path:
        return self.output_dir   # fixed when the engine was built; the prefix tells the sessions apart

    def options(self, cfg: CaptureSettings) -> dict[str, Any]:
        return session_options(cfg, ascend=self.ascend)

    def notes(self, cfg: CaptureSettings, warmup_steps: int = 0, num_steps: int | None = None) -> list[str]:
        out = notes(cfg, ascend=self.ascend, warmup_steps=warmup_steps)
        if num_steps and self.ascend:
            out.append(f"num_steps: {num_steps} is not passed: vllm-ascend's worker takes no max_iterations; the "
                       "capture runs to the stage call's exit")
        elif num_steps:
            out.append(f"num_steps: {num_steps}: passed as max_iterations: vLLM stops recording after {num_steps} "
                       "engine iterations of the stage call")
        return out

    def start(self, prefix: str, options: dict[str, Any], num_steps: int | None) -> Any:
        if num_steps and not self.ascend:
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
