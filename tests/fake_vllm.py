"""A fake vLLM 0.33.0 for the engine-capture tests: vLLM needs a GPU and cannot run here.

What keeps it honest: its methods take exactly the parameters that vLLM 0.33.0 has, rebuilt from
mindspeed_profiler/data/vllm-0.33.0.json (read from the released wheel's sources,
tools/extract_engine_signatures.py), and every call is bound against them first (fake_engine_base.Bound):
`LLM.__init__` (vllm/entrypoints/llm.py:177), `LLM.start_profile(profile_prefix=None, *,
delay_iterations=None, max_iterations=None, profiler_kwargs=None)` (:800), `LLM.stop_profile()` (:829),
`LLM.generate` (:417), `AsyncLLM.start_profile` / `stop_profile` as coroutines
(vllm/v1/engine/async_llm.py:1136, :1173). `profiler_config` is checked as `ProfilerConfig` checks it
(its fields from the snapshot, extra keys refused, `torch_profiler_dir` required for "torch"); the
server's POST /start_profile body as `StartProfileRequest` (its fields, extra keys ignored);
tests/test_engine_capture_fakes.py compares all of it with the snapshot.

Behaviour, a small model of the real code: a start without a configured profiler fails, a second
start fails (ProfilerAlreadyActiveError); profiler_kwargs are merged over the config's
torch.profiler flags; stop writes, per worker, `<prefix>_dp<d>_pp0_tp<t>_dcp0_ep0_rank<g>.<ns>.pt.trace.json.gz`
into `torch_profiler_dir` (a real Kineto trace, CPU activity plus CUDA on a GPU, the same recording under each
worker's name), its `.profiler_out.txt`, and for AsyncLLM the frontend's
`<prefix>_<host>_<pid>.async_llm.<ns>.pt.trace.json.gz`. `ascend=True` models vllm-ascend: the same API, and
per worker a torch_npu directory `<trace name>_<pid>_<time>_ascend_pt/` (raw FRAMEWORK/ data) instead.

    fake = FakeVllm(tp_size=2).install()   # sys.modules["vllm"] (LLM, AsyncLLM, __version__)
    llm = fake.LLM("m", profiler_config={...}); ...; fake.uninstall()
    with fake.server(profiler_config={...}) as srv: srv.url   # `vllm serve`'s profile routes
"""
from __future__ import annotations

import os
import socket
import sys
import time
import types
from pathlib import Path
from typing import Any

from fake_engine_base import Bound, CpuTrace, FakeServer, class_fields, load_snapshot, some_work

SNAPSHOT = load_snapshot("vllm-0.33.0.json")
VERSION: str = SNAPSHOT["version"]
PROFILER_FIELDS = class_fields(SNAPSHOT, "vllm.config.profiler.ProfilerConfig")
START_BODY_FIELDS = class_fields(SNAPSHOT, "vllm.entrypoints.serve.profile.api_router.StartProfileRequest")
_DEFAULTS = {f["name"]: f.get("default") for f in SNAPSHOT["classes"]["vllm.config.profiler.ProfilerConfig"]["fields"]}
LLM_QN = "vllm.entrypoints.llm.LLM"
ASYNC_QN = "vllm.v1.engine.async_llm.AsyncLLM"


def check_profiler_config(cfg: Any) -> dict[str, Any] | None:
    """ProfilerConfig's checks (vllm/config/profiler.py): a dict of its fields only."""
    if cfg is None:
        return None
    unknown = sorted(set(cfg) - set(PROFILER_FIELDS))
    if unknown:
        raise ValueError(f"ProfilerConfig: extra fields not permitted: {unknown}")
    out = {**_DEFAULTS, **cfg}
    if out["profiler"] == "torch" and not out["torch_profiler_dir"]:
        raise ValueError("torch_profiler_dir must be set when profiler is 'torch'")
    if out["torch_profiler_dir"]:
        out["torch_profiler_dir"] = os.path.abspath(os.path.expanduser(out["torch_profiler_dir"]))
    return out


class _Core:
    """The engine's workers' profilers (one session at a time), as the fake runs them."""

    def __init__(self, profiler_config: Any, tp_size: int, frontend: bool, ascend: bool = False):
        self.config = check_profiler_config(profiler_config)
        self.tp_size, self.frontend, self.ascend = tp_size, frontend, ascend
        self.active: tuple[str | None, CpuTrace] | None = None
        self.sessions: list[dict[str, Any]] = []   # what each session ran with

    def start(self, prefix: str | None, delay_iterations: int | None, max_iterations: int | None,
              profiler_kwargs: dict[str, Any] | None) -> None:
        cfg = self.config
        if cfg is None or cfg["profiler"] is None:
            raise RuntimeError("Profiling is not enabled: set profiler_config when the engine is built")
        if self.active is not None:
            raise RuntimeError("ProfilerAlreadyActiveError: a profiling session is already running")
        kwargs = {"record_shapes": cfg["torch_profiler_record_shapes"], "profile_memory": cfg["torch_profiler_with_memory"],
                  "with_stack": cfg["torch_profiler_with_stack"], "with_flops": cfg["torch_profiler_with_flops"]}
        kwargs.update(profiler_kwargs or {})
        self.sessions.append({"prefix": prefix, "kwargs": kwargs, "max_iterations": max_iterations,
                              "delay_iterations": delay_iterations})
        self.active = (prefix, None if self.ascend else CpuTrace(**kwargs))

    def stop(self) -> None:
        if self.active is None:
            return
        prefix, trace = self.active
        self.active = None
        cfg = self.config
        directory = Path(cfg["torch_profiler_dir"])
        ext = ".pt.trace.json.gz" if cfg["torch_profiler_use_gzip"] else ".pt.trace.json"
        names = [f"dp0_pp0_tp{t}_dcp0_ep0_rank{t}" for t in range(self.tp_size)]
        if self.frontend and not cfg["ignore_frontend"]:
            names.append(f"{socket.gethostname()}_{os.getpid()}.async_llm")
        names = [f"{prefix}_{n}" if prefix else n for n in names]
        if self.ascend:   # torch_npu's tensorboard_trace_handler(dir, worker_name=trace name): a directory per worker
            stamp = time.strftime("%Y%m%d%H%M%S") + f"{time.time_ns() // 10**6 % 1000:03d}"
            for n in names[:self.tp_size]:
                raw = directory / f"{n}_{os.getpid()}_{stamp}_ascend_pt" / "FRAMEWORK"
                raw.mkdir(parents=True)
                (raw / "torch.op_range").write_bytes(b"")
            return
        trace.stop([directory / f"{n}.{time.time_ns()}{ext}" for n in names])
        for n in names[:self.tp_size]:
            (directory / f"{n}.profiler_out.txt").write_text("Name  Self CPU total\n")


class FakeVllm:
    """The fake vllm package: `LLM`, `AsyncLLM` (classes), installable as sys.modules["vllm"]."""

    def __init__(self, *, tp_size: int = 1, ascend: bool = False):
        self.bound = Bound(SNAPSHOT, "vllm")
        self.tp_size, self.ascend = tp_size, ascend
        self.engines: list[Any] = []
        self.LLM, self.AsyncLLM = self._build()
        self.module = types.ModuleType("vllm")
        self.module.__version__ = VERSION  # type: ignore[attr-defined]
        self.module.LLM, self.module.AsyncLLM = self.LLM, self.AsyncLLM  # type: ignore[attr-defined]
        self._saved: Any = None

    def install(self) -> "FakeVllm":
        self._saved = sys.modules.get("vllm")
        sys.modules["vllm"] = self.module
        return self

    def uninstall(self) -> None:
        sys.modules.pop("vllm", None)
        if self._saved is not None:
            sys.modules["vllm"] = self._saved

    def _build(self) -> tuple[type, type]:
        m, fake = self.bound.method, self

        def init(self: Any, model: str, *, profiler_config: Any = None, **kwargs: Any) -> None:
            self.model, self.kwargs = model, kwargs
            self.core = _Core(profiler_config, fake.tp_size, frontend=isinstance(self, AsyncLLM), ascend=fake.ascend)
            fake.engines.append(self)

        def start(self: Any, profile_prefix: str | None = None, *, delay_iterations: int | None = None,
                  max_iterations: int | None = None, profiler_kwargs: dict[str, Any] | None = None) -> None:
            self.core.start(profile_prefix, delay_iterations, max_iterations, profiler_kwargs)

        def generate_impl(self: Any, prompts: Any, sampling_params: Any = None, **kwargs: Any) -> list[Any]:
            some_work()
            return []

        class LLM:
            __init__ = m(f"{LLM_QN}.__init__", init)
            start_profile = m(f"{LLM_QN}.start_profile", start)
            stop_profile = m(f"{LLM_QN}.stop_profile", lambda self: self.core.stop())
            generate = m(f"{LLM_QN}.generate", generate_impl)

        class AsyncLLM:   # built here with LLM's constructor: only its profile coroutines are recorded
            def __init__(self, model: str, *, profiler_config: Any = None, **kwargs: Any) -> None:
                init(self, model, profiler_config=profiler_config, **kwargs)

            start_profile = m(f"{ASYNC_QN}.start_profile", start)
            stop_profile = m(f"{ASYNC_QN}.stop_profile", lambda self: self.core.stop())

        LLM.__module__, LLM.__qualname__ = "vllm.entrypoints.llm", "LLM"
        AsyncLLM.__module__, AsyncLLM.__qualname__ = "vllm.v1.engine.async_llm", "AsyncLLM"
        return LLM, AsyncLLM

    def server(self, **llm_kwargs: Any) -> FakeServer:
        """`vllm serve` over an LLM built with `llm_kwargs`: POST /start_profile (a StartProfileRequest
        body: its fields, others ignored, as pydantic's extra="ignore") and /stop_profile; the routes
        exist only with a profiler configured (api_router.py:62)."""
        llm = self.LLM("served-model", **llm_kwargs)

        def start(body: Any) -> Any:
            fields = {k: v for k, v in (body or {}).items() if k in START_BODY_FIELDS}
            llm.start_profile(fields.pop("profile_prefix", None), **fields)
            return {}

        def stop(body: Any) -> Any:
            llm.stop_profile()
            return {}
        routes = {"/start_profile": start, "/stop_profile": stop} if llm.core.config and llm.core.config["profiler"] else {}
        srv = FakeServer(routes)
        srv.engine = llm  # type: ignore[attr-defined]
        return srv
