"""Inference-engine captures from our config: `attach_engine(profiler, engine)` makes the engine
(vLLM `LLM` / `AsyncLLM`, vllm-ascend, an SGLang `Engine`, or a server URL) capture the stage calls
the profiler's own plan selects, and `engine_profiler_args(cfg, engine=...)` says what the engine
must be built with for that (vLLM's profiler is configured only at start-up).

    args = engine_profiler_args(cfg, engine="vllm")          # {"kwargs": ..., "env": ..., "cli": ...}
    llm = vllm.LLM(model, **args["kwargs"])
    prof = IntegratedProfiler(cfg, role="actor")
    attach_engine(prof, llm)                                  # stage="actor_generate"
    with prof.stage("actor_generate"): llm.generate(...)      # a selected call: one engine capture

The handle is an observer (capture/observers.py) of the profiler: a stage call is captured when the
profiler's plan (capture/schedule.Plan: the step window, `stage`) and its rank gates select it, the
same decision the profiler makes for its own captures. The engine starts at the stage's entry and
stops at its exit (SGLang with `num_steps`: by itself); what it wrote is placed in our layout, one
capture per engine worker (engines/outputs.py), with our metadata: role `<role>-<engine>[-r<replica>]`,
the engine worker's rank, the step, the stage, `options.engine` (name, version, replica, tp_rank,
the worker's parallel ranks, what was requested) and a note for every option the engine cannot
honour. An engine failure (an exception, an HTTP error, a timeout) is a warning and a failed
capture's metadata: training goes on.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mindspeed_profiler.backends import layout
from mindspeed_profiler.capture.stages import check_stage_name
from mindspeed_profiler.engines.capture import EngineCapture
from mindspeed_profiler.engines.outputs import engine_dir
from mindspeed_profiler.engines.sglang_engine import SGLANG, SglangDriver, server_env
from mindspeed_profiler.engines.vllm_engine import VLLM, VLLM_ASCEND, VllmDriver, activities, engine_device, profiler_config
from mindspeed_profiler.runtime.manifest import split_config

ENGINES = (VLLM, VLLM_ASCEND, SGLANG)
DEFAULT_STAGE = "actor_generate"


def check_engine(name: object) -> str:
    if name not in ENGINES:
        raise ValueError(f"engine {name!r} is not supported: allowed: {', '.join(ENGINES)}")
    return name   # type: ignore[return-value]


def engine_profiler_args(cfg: Any, *, engine: str = VLLM, device: str | None = None) -> dict[str, Any]:
    """What the engine must be built with for our config (a ProfilerConfig or its `.integrated`) to
    drive its captures, as `{"kwargs": ..., "env": ..., "cli": ..., "notes": ...}`:
    - vllm / vllm-ascend: kwargs `profiler_config` (ProfilerConfig's fields: the torch profiler writing
      into `<save_path>/engine/<engine>/`, our flags, the activities the engine's `device` records:
      cpu | cuda | xpu, by default vLLM's own platform, else what torch sees here; a CPU engine gets
      CPU only, and `notes` says what was dropped) and `disable_log_stats=False` (LLM turns the
      per-request stats off otherwise, and the per-sample records need them): `LLM(model, **kwargs)`;
      cli: `vllm serve`'s `--profiler-config <json>`.
    - sglang: kwargs `enable_metrics=True` (the per-request timing in meta_info), env
      SGLANG_TORCH_PROFILER_DIR and the stack / shapes switches: set the env, then `Engine(**kwargs)`;
      cli: `--enable-metrics`.
    An unknown engine is a ValueError naming the allowed ones."""
    _, integ = split_config(cfg)
    name = check_engine(engine)
    directory = engine_dir(integ.profile_save_path, name)
    if name == SGLANG:
        return {"kwargs": {"enable_metrics": True}, "env": server_env(integ, directory), "cli": ["--enable-metrics"],
                "notes": []}
    ascend = name == VLLM_ASCEND
    kind = "cuda" if ascend else engine_device(device)   # vllm-ascend sets its own activities
    pc = profiler_config(integ, directory, ascend=ascend, device=kind)
    return {"kwargs": {"profiler_config": pc, "disable_log_stats": False}, "env": {},
            "cli": ["--profiler-config", json.dumps(pc)], "notes": [] if ascend else activities(integ, kind)[1]}


def engine_kind(engine: Any, kind: str | None = None) -> str:
    """The engine's name: `kind` when given; a URL is an SGLang server unless told (kind="vllm");
    an object by its package (vllm: vllm-ascend when vllm_ascend is imported; sglang)."""
    if kind is not None:
        return check_engine(kind)
    if isinstance(engine, str):
        return SGLANG
    root = type(engine).__module__.split(".")[0]
    if root == "vllm":
        return VLLM_ASCEND if "vllm_ascend" in sys.modules else VLLM
    if root == "sglang":
        return SGLANG
    raise ValueError(f"engine: a {type(engine).__module__}.{type(engine).__qualname__} is neither a vLLM LLM / AsyncLLM "
                     f"nor an SGLang Engine: pass kind= one of {', '.join(ENGINES)}, or a server URL")


def engine_version(engine: Any) -> str | None:
    """The engine package's version when its object's package is imported here (None for a URL)."""
    if isinstance(engine, str):
        return None
    module = sys.modules.get(type(engine).__module__.split(".")[0])
    version = getattr(module, "__version__", None)
    return version if isinstance(version, str) else None


def _check(name: str, value: Any, ok: bool, allowed: str) -> None:
    if not ok:
        raise ValueError(f"attach_engine: {name}={value!r} is not allowed: {allowed}")


def _non_negative(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def attach_engine(profiler: Any, engine: Any, *, stage: str = DEFAULT_STAGE, replica: int | None = None,
                  tp_rank: int | None = None, kind: str | None = None, role: str | None = None,
                  output_dir: str | os.PathLike | None = None, num_steps: int | None = None,
                  profile_by_stage: bool = False, in_process: bool = False,
                  loop: asyncio.AbstractEventLoop | None = None, timeout_s: float = 60.0,
                  device: str | None = None) -> EngineCapture:
    """Make `engine` capture the calls of `stage` that `profiler` (an IntegratedProfiler) selects;
    returns the handle (an observer of the profiler; `detach()` ends it).

    `engine`: a vLLM LLM / AsyncLLM, an SGLang Engine, or a server URL (`http://host:port`: SGLang,
    or vLLM with kind="vllm"). `kind`: vllm | vllm-ascend | sglang when the object does not tell.
    `replica`, `tp_rank`: which rollout replica / tensor-parallel rank this is (the metadata; the
    replica is in the role; tp_rank is the rank of an output that names none). `role`: the engine's
    role in capture names (default `<profiler role>-<engine>[-r<replica>]`). `output_dir`: where the
    engine was built to write (vLLM's torch_profiler_dir; default engine_profiler_args' directory).
    `num_steps`: SGLang stops by itself after that many forward steps (vLLM: max_iterations).
    `profile_by_stage`: SGLang traces prefill and decode apart. `in_process`: the engine's workers
    run in this process (MindSpeed-RL's integrated mode): skipped while our own capture records
    there (one torch profiler per process; that capture already holds the engine's ops). `loop`:
    the event loop an AsyncLLM runs on (engines/calls.settle); `timeout_s`: the most an HTTP call or a
    coroutine may take (a plain method call, e.g. LLM.stop_profile, is not bounded: it runs on this thread).
    `device`: the vLLM engine workers' device type (cpu | cuda | xpu) when the engine does not tell
    (a server URL); its activities are named in each capture's notes.
    Bad arguments are a ValueError naming the argument, its value and what is allowed."""
    name = engine_kind(engine, kind)
    check_stage_name(stage)
    _check("replica", replica, _non_negative(replica), "None or an int >= 0")
    _check("tp_rank", tp_rank, _non_negative(tp_rank), "None or an int >= 0")
    _check("num_steps", num_steps, num_steps is None or (_non_negative(num_steps) and num_steps > 0),
           "None or an int >= 1")
    _check("timeout_s", timeout_s, isinstance(timeout_s, (int, float)) and timeout_s > 0, "a number of seconds > 0")
    _check("profile_by_stage", profile_by_stage, not profile_by_stage or name == SGLANG,
           "true only for SGLang (vLLM traces prefill and decode together)")
    if isinstance(engine, str):
        _check("engine", engine, engine.startswith(("http://", "https://")), "a URL http(s)://host:port, or an engine")
    else:
        for method in ("start_profile", "stop_profile"):
            _check("engine", engine, callable(getattr(engine, method, None)), f"an object with {method}()")
    role = layout.check_role(role or f"{profiler.role}-{name}" + (f"-r{replica}" if replica is not None else ""))
    directory = Path(output_dir) if output_dir is not None else engine_dir(profiler.cfg.profile_save_path, name)
    if name == SGLANG:
        driver: Any = SglangDriver(engine, directory, profile_by_stage=profile_by_stage, num_steps=num_steps,
                                   timeout_s=timeout_s)
    else:
        driver = VllmDriver(engine, directory, ascend=name == VLLM_ASCEND, timeout_s=timeout_s, device=device)
    handle = EngineCapture(profiler, driver, stage=stage, role=role, replica=replica, tp_rank=tp_rank,
                           version=engine_version(engine), num_steps=num_steps, in_process=in_process, loop=loop,
                           timeout_s=timeout_s)
    profiler.add_observer(handle)
    return handle
