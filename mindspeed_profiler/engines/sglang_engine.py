"""SGLang driven from our config: the server arguments and environment the engine should be built
with, one capture per selected stage call (`Engine.start_profile(**ProfileReq fields)` /
`stop_profile()`, or a server's POST /start_profile with a ProfileReq body and /stop_profile), and
which worker wrote which trace.

Read from SGLang 0.5.23's sources (mindspeed_profiler/data/sglang-0.5.23.json, docs/engines_api.md):
ProfileReq's `output_dir`, `num_steps`, `activities` (CPU, GPU, MEM, ...), `profile_by_stage`,
`with_stack`, `record_shapes`; traces `[<prefix>-]<profile_id>-TP-<tp>[-DP-<dp>][-PP-<pp>][-EP-<ep>][-<STAGE>].trace.json.gz`
in `output_dir`; on Ascend torch_npu's `<host>_<pid>_<time>_ascend_pt` directories at a fixed Level1.
Unlike vLLM, the output directory is a per-request field: each session gets its own.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mindspeed_profiler.backends.torch import profile_options
from mindspeed_profiler.core.capture_options import FIELD_OF_KEYWORD, CaptureSettings
from mindspeed_profiler.engines.calls import post_json
from mindspeed_profiler.engines.notes import EngineTool, flag_note, shared_notes
from mindspeed_profiler.engines.outputs import Worker

SGLANG = "sglang"
TOOL = EngineTool(SGLANG, "SGLang's profiler")

# profiler_manager.py:344-358 (the name's parts), :338 (the stage suffix with profile_by_stage)
# (and a memory snapshot `...-TP-<tp>-memory.pickle` with activity MEM: that name is not in the snapshot)
_TRACE_RE = re.compile(r"-TP-(\d+)(?:-DP-(\d+))?(?:-PP-(\d+))?(?:-EP-(\d+))?(?:-([A-Z][A-Z_]*))?"
                       r"(?:\.trace\.json(?:\.gz)?|-memory\.pickle)$")
_ASCEND_RE = re.compile(r"_(\d+)_\d{17}_ascend_pt$")   # torch_npu's <host>_<pid>_<time>_ascend_pt
ASCEND_NOTE = ("SGLang on Ascend runs torch_npu at a fixed Level1 with text export and names its directories "
               "without ranks (profiler_manager.py:245-254): profile_level and the rank are not the engine's")


def worker_of(name: str) -> Worker | None:
    """Pure: the worker an SGLang trace's name tells: its TP rank (the capture's rank), DP / PP / EP
    ranks and the forward stage with profile_by_stage (both added to the role, so that each stays
    its own capture); a torch_npu directory by its pid; None for other names."""
    m = _TRACE_RE.search(name)
    if m:
        tp = int(m.group(1))
        dims = tuple((d, int(v)) for d, v in zip(("dp", "pp", "ep"), m.group(2, 3, 4)) if v is not None)
        phase = m.group(5)
        suffix = "".join(f"-{d}{v}" for d, v in dims) + (f"-{phase.lower()}" if phase else "")
        return Worker(f"tp{tp}{suffix}", tp, suffix, (("tp", tp),) + dims)
    m = _ASCEND_RE.search(name)
    if m:
        return Worker(f"pid{m.group(1)}", None, f"-pid{m.group(1)}")
    return None


def request_body(cfg: CaptureSettings, *, profile_by_stage: bool = False) -> dict[str, Any]:
    """The ProfileReq fields our config means (output_dir and num_steps are the session's)."""
    opts = profile_options(cfg, cuda=True)
    activities = [a for a, on in (("CPU", "CPU" in opts["activities"]), ("GPU", "CUDA" in opts["activities"]),
                                  ("MEM", opts["profile_memory"])) if on]
    return {"activities": activities, "with_stack": bool(opts["with_stack"]),
            "record_shapes": bool(opts["record_shapes"]), "profile_by_stage": profile_by_stage}


def server_env(cfg: CaptureSettings, directory: Path) -> dict[str, str]:
    """The SGLang environment for our config: the default output directory (a start_profile that
    names none, e.g. by hand), and the two switches that would otherwise force stack / shapes on
    (both default true: 'false' turns the request's option off)."""
    opts = profile_options(cfg, cuda=True)
    return {"SGLANG_TORCH_PROFILER_DIR": str(directory),
            "SGLANG_PROFILE_WITH_STACK": "true" if opts["with_stack"] else "false",
            "SGLANG_PROFILE_RECORD_SHAPES": "true" if opts["record_shapes"] else "false"}


UNTAKEN = ("with_flops", "with_modules")   # torch.profiler keywords SGLang's ProfileReq has no field for


def notes(cfg: CaptureSettings, *, num_steps: int | None = None, warmup_steps: int = 0) -> list[str]:
    """What an SGLang capture cannot honour of our config, one sentence each."""
    out = shared_notes(cfg, TOOL, warmup_steps=warmup_steps)
    opts = profile_options(cfg, cuda=True)
    if cfg.profile_level in ("level1", "level2"):
        out.append(f"profile_level: {cfg.profile_level}: SGLang has no profiler levels; passed as the flags it means "
                   "here that ProfileReq has (record_shapes, with_stack)")
    for keyword in UNTAKEN:
        if opts[keyword]:
            out.append(flag_note(FIELD_OF_KEYWORD[keyword], True, f"is not honoured: SGLang's ProfileReq has no {keyword}"))
    if opts["profile_memory"]:
        out.append(flag_note("profile_with_memory", True, "is passed as activity MEM (SGLang's allocator snapshot), "
                                                          "not as torch.profiler's memory events"))
    if opts["with_stack"] or opts["record_shapes"]:
        out.append("with_stack / record_shapes: SGLANG_PROFILE_WITH_STACK / SGLANG_PROFILE_RECORD_SHAPES=false in the "
                   "server's environment turn them off whatever the request says (engine_profiler_args sets both)")
    if num_steps:
        out.append(f"num_steps: {num_steps}: SGLang stopped by itself after {num_steps} forward steps, not at the "
                   "stage call's exit: the capture covers the first steps of the call only")
    return out


class SglangDriver:
    """Starts and stops one SGLang engine's captures: an `Engine` (its sync start_profile /
    stop_profile) or a server URL (POST /start_profile with a ProfileReq body, /stop_profile)."""

    ascend_note = ASCEND_NOTE

    def __init__(self, engine: Any, output_dir: Path, *, profile_by_stage: bool = False, num_steps: int | None = None,
                 timeout_s: float = 60.0):
        self.engine = engine
        self.name = SGLANG
        self.device = None   # CUDA or Ascend: told by what it writes
        self.output_dir = Path(output_dir)
        self.profile_by_stage = profile_by_stage
        self.timeout_s = timeout_s
        self.stops_itself = bool(num_steps)   # with num_steps SGLang stops by itself: no stop_profile

    def raw_dir(self, prefix: str) -> Path:
        return self.output_dir / prefix   # a directory per session: ProfileReq.output_dir

    def options(self, cfg: CaptureSettings) -> dict[str, Any]:
        return request_body(cfg, profile_by_stage=self.profile_by_stage)

    def notes(self, cfg: CaptureSettings, warmup_steps: int = 0, num_steps: int | None = None) -> list[str]:
        return notes(cfg, num_steps=num_steps, warmup_steps=warmup_steps)

    def start(self, prefix: str, options: dict[str, Any], num_steps: int | None) -> Any:
        body = {**options, "output_dir": str(self.raw_dir(prefix))}
        if num_steps:
            body["num_steps"] = num_steps
        self.raw_dir(prefix).mkdir(parents=True, exist_ok=True)
        if isinstance(self.engine, str):
            return post_json(self.engine, "/start_profile", body, self.timeout_s)
        return self.engine.start_profile(**body)

    def stop(self) -> Any:
        if isinstance(self.engine, str):
            return post_json(self.engine, "/stop_profile", None, self.timeout_s)
        return self.engine.stop_profile()

    def outputs(self, prefix: str) -> list[Path]:
        raw = self.raw_dir(prefix)
        return sorted(raw.iterdir()) if raw.is_dir() else []

    worker_of = staticmethod(worker_of)
