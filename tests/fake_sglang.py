"""A fake SGLang 0.5.23 for the engine-capture tests: SGLang needs a GPU and cannot run here.

What keeps it honest: `Engine.__init__(self, **kwargs)` (sglang/srt/entrypoints/engine.py:278),
`Engine.start_profile(self, **kwargs)` (:1548), `Engine.stop_profile(self)` (:1552) and
`Engine.generate` (:433) take exactly the parameters of SGLang 0.5.23, rebuilt from
mindspeed_profiler/data/sglang-0.5.23.json (read from the released wheel's sources), every call bound
against them (fake_engine_base.Bound); start_profile's keywords become a `ProfileReq` whose fields
come from the same snapshot (io_struct.py:2374; an unknown one is a TypeError, as the msgspec
Struct's constructor raises), `activities` among CPU, GPU, MEM, RPD, CUDA_PROFILER. The server's
POST /start_profile takes a ProfileReq body (unknown fields refused), POST /stop_profile ends it.
tests/test_engine_capture_fakes.py compares all of it with the snapshot.

Behaviour, a small model of SchedulerProfilerManager: output_dir defaults to
$SGLANG_TORCH_PROFILER_DIR or /tmp, profile_id to str(time.time()); a start while profiling fails;
a stop while not profiling fails; with `num_steps` the profiler stops by itself after that many
forward steps (generate() calls here); a stop writes, per TP rank,
`[<prefix>-]<profile_id>-TP-<tp>[-EXTEND|-DECODE].trace.json.gz` (a real Kineto trace recorded on
the CPU; with profile_by_stage one per stage) into output_dir.
"""
from __future__ import annotations

import os
import sys
import time
import types
from pathlib import Path
from typing import Any

from fake_engine_base import Bound, CpuTrace, FakeServer, class_fields, load_snapshot, some_work

SNAPSHOT = load_snapshot("sglang-0.5.23.json")
VERSION: str = SNAPSHOT["version"]
PROFILE_REQ_FIELDS = [f for f in class_fields(SNAPSHOT, "sglang.srt.managers.io_struct.ProfileReq")
                      if f not in ("rid", "http_worker_ipc", "req_type")]   # BaseReq's and the request type
ACTIVITIES = ("CPU", "GPU", "MEM", "RPD", "CUDA_PROFILER")
ENGINE_QN = "sglang.srt.entrypoints.engine.Engine"


def profile_req(**kwargs: Any) -> dict[str, Any]:
    """ProfileReq(**kwargs) as a dict of every field (defaults None / False)."""
    unknown = sorted(set(kwargs) - set(PROFILE_REQ_FIELDS))
    if unknown:
        raise TypeError(f"ProfileReq: unexpected keyword argument(s) {unknown}")
    req = {f: None for f in PROFILE_REQ_FIELDS} | {"profile_by_stage": False, "merge_profiles": False} | kwargs
    bad = [a for a in req["activities"] or () if a not in ACTIVITIES]
    if bad:
        raise ValueError(f"unknown activities {bad}: known {ACTIVITIES}")
    return req


class _Profiler:
    """The scheduler's profiler manager, as the fake runs it."""

    def __init__(self, tp_size: int):
        self.tp_size = tp_size
        self.active: tuple[dict[str, Any], CpuTrace] | None = None
        self.steps = 0
        self.sessions: list[dict[str, Any]] = []

    def start(self, req: dict[str, Any]) -> None:
        if self.active is not None:
            raise RuntimeError("Profiling is already in progress. Call /stop_profile first.")
        req = {**req, "output_dir": req["output_dir"] or os.environ.get("SGLANG_TORCH_PROFILER_DIR", "/tmp"),
               "profile_id": req["profile_id"] or str(time.time()), "activities": req["activities"] or ["CPU", "GPU"]}
        self.sessions.append(req)
        self.steps = 0
        self.active = (req, CpuTrace(with_stack=bool(req["with_stack"]), record_shapes=bool(req["record_shapes"])))

    def forward(self) -> None:
        some_work()
        if self.active is not None:
            self.steps += 1
            if self.active[0]["num_steps"] and self.steps >= self.active[0]["num_steps"]:
                self.stop()

    def stop(self) -> None:
        if self.active is None:
            raise RuntimeError("Profiling is not in progress. Call /start_profile first.")
        req, trace = self.active
        self.active = None
        head = f"{req['profile_prefix']}-" if req["profile_prefix"] else ""
        stages = ("-EXTEND", "-DECODE") if req["profile_by_stage"] else ("",)
        out = Path(req["output_dir"])
        trace.stop([out / f"{head}{req['profile_id']}-TP-{tp}{st}.trace.json.gz" for tp in range(self.tp_size)
                    for st in stages])


class FakeSglang:
    """The fake sglang package: `Engine`, installable as sys.modules["sglang"]."""

    def __init__(self, *, tp_size: int = 1):
        self.bound = Bound(SNAPSHOT, "sglang")
        self.tp_size = tp_size
        self.engines: list[Any] = []
        self.Engine = self._build()
        self.module = types.ModuleType("sglang")
        self.module.__version__ = VERSION  # type: ignore[attr-defined]
        self.module.Engine = self.Engine  # type: ignore[attr-defined]
        self._saved: Any = None

    def install(self) -> "FakeSglang":
        self._saved = sys.modules.get("sglang")
        sys.modules["sglang"] = self.module
        return self

    def uninstall(self) -> None:
        sys.modules.pop("sglang", None)
        if self._saved is not None:
            sys.modules["sglang"] = self._saved

    def _build(self) -> type:
        m, fake = self.bound.method, self

        def init(self: Any, **kwargs: Any) -> None:
            self.server_args = kwargs
            self.profiler = _Profiler(fake.tp_size)
            fake.engines.append(self)

        def generate_impl(self: Any, prompt: Any = None, sampling_params: Any = None, *args: Any, **kwargs: Any) -> list:
            self.profiler.forward()
            return []

        class Engine:
            __init__ = m(f"{ENGINE_QN}.__init__", init)
            start_profile = m(f"{ENGINE_QN}.start_profile", lambda self, **kw: self.profiler.start(profile_req(**kw)))
            stop_profile = m(f"{ENGINE_QN}.stop_profile", lambda self: self.profiler.stop())
            generate = m(f"{ENGINE_QN}.generate", generate_impl)

        Engine.__module__, Engine.__qualname__ = "sglang.srt.entrypoints.engine", "Engine"
        return Engine

    def server(self, **server_args: Any) -> FakeServer:
        """An SGLang server over an Engine: POST /start_profile (a ProfileReq body; None: defaults),
        POST /stop_profile (http_server.py:1223, :1234)."""
        engine = self.Engine(**server_args)

        def start(body: Any) -> Any:
            engine.start_profile(**(body or {}))
            return {"success": True}

        def stop(body: Any) -> Any:
            engine.stop_profile()
            return {"success": True}
        srv = FakeServer({"/start_profile": start, "/stop_profile": stop})
        srv.engine = engine  # type: ignore[attr-defined]
        return srv
