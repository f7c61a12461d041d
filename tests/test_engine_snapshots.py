"""The vLLM / SGLang API snapshots (mindspeed_profiler/data/vllm-*.json, sglang-*.json, written by
tools/extract_engine_signatures.py from the released wheels) load, hold every function, field,
route, env var, meta_info key and clock that docs/engines_api.md says we rely on, every `file.py:N`
the doc cites is a line the snapshot recorded, and the extractor reproduces the snapshots' entries
from small hand-written source trees (no wheel, no download: the trees copy the released
definitions we rely on, so the same source must give the same entries)."""
from __future__ import annotations

import json
import re
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT
from fake_torch_npu import signature_of

sys.path.insert(0, str(REPO_ROOT / "tools"))
try:
    import extract_engine_signatures as tool
finally:
    sys.path.pop(0)

DATA = REPO_ROOT / "mindspeed_profiler" / "data"
DOC = REPO_ROOT / "docs" / "engines_api.md"
SNAPSHOTS = {"vllm": "vllm-0.33.0.json", "sglang": "sglang-0.5.23.json"}

# What docs/engines_api.md says we rely on: public name -> names that must be there.
RELIED: dict[str, dict[str, Any]] = {
    "vllm": {
        "functions": {
            "vllm.entrypoints.llm.LLM.__init__": ["model", "profiler_config", "kwargs"],
            "vllm.entrypoints.llm.LLM.start_profile": ["profile_prefix", "delay_iterations", "max_iterations", "profiler_kwargs"],
            "vllm.entrypoints.llm.LLM.stop_profile": [],
            "vllm.v1.engine.async_llm.AsyncLLM.start_profile": ["profile_prefix", "delay_iterations", "max_iterations",
                                                                "profiler_kwargs"],
            "vllm.v1.engine.async_llm.AsyncLLM.stop_profile": [],
            "vllm.outputs.RequestOutput.__init__": ["request_id", "prompt", "prompt_token_ids", "outputs", "finished",
                                                    "metrics", "num_cached_tokens"],
        },
        "async": ["vllm.v1.engine.async_llm.AsyncLLM.start_profile", "vllm.v1.engine.async_llm.AsyncLLM.stop_profile"],
        "classes": {
            "vllm.config.profiler.ProfilerConfig": [
                "profiler", "torch_profiler_dir", "torch_profiler_activities", "torch_profiler_with_stack",
                "torch_profiler_with_flops", "torch_profiler_use_gzip", "torch_profiler_record_shapes",
                "torch_profiler_with_memory", "ignore_frontend", "delay_iterations", "max_iterations",
                "warmup_iterations", "active_iterations", "wait_iterations"],
            "vllm.entrypoints.serve.profile.api_router.StartProfileRequest": [
                "profile_prefix", "delay_iterations", "max_iterations", "profiler_kwargs"],
            "vllm.outputs.CompletionOutput": ["index", "text", "token_ids", "cumulative_logprob", "logprobs",
                                              "finish_reason", "stop_reason"],
            "vllm.v1.metrics.stats.RequestStateStats": ["arrival_time", "queued_ts", "scheduled_ts", "first_token_ts",
                                                        "last_token_ts", "first_token_latency"],
            "vllm.v1.metrics.stats.FinishedRequestStats": [
                "e2e_latency", "queued_time", "prefill_time", "decode_time", "inference_time",
                "mean_time_per_output_token", "num_prompt_tokens", "num_generation_tokens", "num_cached_tokens"],
            "vllm.engine.arg_utils.EngineArgs": ["disable_log_stats"],
        },
        "instance_attributes": {"vllm.outputs.RequestOutput": [
            "request_id", "prompt", "prompt_token_ids", "outputs", "finished", "metrics", "num_cached_tokens",
            "num_cache_creation_tokens"]},
        "routes": {"/start_profile": ["POST"], "/stop_profile": ["POST"]},
        "env_vars": [],
        "absent": ["env:VLLM_TORCH_PROFILER_DIR", "env:VLLM_TORCH_PROFILER_WITH_STACK", "env:VLLM_TORCH_PROFILER_RECORD_SHAPES",
                   "env:VLLM_TORCH_PROFILER_WITH_PROFILE_MEMORY", "env:VLLM_TORCH_PROFILER_WITH_FLOPS",
                   "env:VLLM_TORCH_CUDA_PROFILE", "env:VLLM_PROFILER_DELAY_ITERS", "env:VLLM_PROFILER_MAX_ITERS",
                   "vllm.sequence.RequestMetrics", "vllm.outputs.RequestMetrics"],
        "dict_keys": {},
        "clocks": {
            "clock.arrival_time.request": ["time.time"],
            "clock.arrival_time.input_processor": ["time.time"],
            "clock.engine_core_event": ["time.monotonic"],
            "clock.scheduled_timestamp": ["time.monotonic"],
            "clock.engine_core_outputs": ["time.monotonic"],
            "clock.iteration_timestamp": ["time.time"],
        },
    },
    "sglang": {
        "functions": {
            "sglang.srt.entrypoints.engine.Engine.__init__": ["kwargs"],
            "sglang.srt.entrypoints.engine.Engine.start_profile": ["kwargs"],
            "sglang.srt.entrypoints.engine.Engine.stop_profile": [],
            "sglang.srt.entrypoints.engine.Engine.generate": ["prompt", "sampling_params", "input_ids", "return_logprob",
                                                              "stream", "rid"],
            "sglang.srt.managers.tokenizer_manager.TokenizerManager.start_profile": ["req"],
            "sglang.srt.managers.tokenizer_manager.TokenizerManager.stop_profile": [],
        },
        "async": ["sglang.srt.managers.tokenizer_manager.TokenizerManager.start_profile"],
        "classes": {
            "sglang.srt.managers.io_struct.ProfileReq": [
                "output_dir", "start_step", "num_steps", "activities", "profile_by_stage", "with_stack", "record_shapes",
                "profile_id", "merge_profiles", "profile_prefix", "profile_stages", "detailed_annotations"],
            "sglang.srt.arg_groups.fields.observability.Observability": ["enable_metrics"],
        },
        "instance_attributes": {},
        "routes": {"/start_profile": ["GET", "POST"], "/stop_profile": ["GET", "POST"]},
        "env_vars": ["SGLANG_TORCH_PROFILER_DIR", "SGLANG_PROFILE_WITH_STACK", "SGLANG_PROFILE_RECORD_SHAPES",
                     "SGLANG_PROFILE_V2", "SGLANG_PROFILE_BY_STAGE_DECODE_MIN_BS", "SGLANG_MEM_PROFILE_MAX_ENTRIES"],
        "absent": ["sglang.srt.managers.io_struct.ProfileReqInput"],
        "dict_keys": {
            "sglang.srt.managers.tokenizer_manager.TokenizerManager._handle_batch_output": [
                "id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions", "completion_tokens",
                "cached_tokens", "reasoning_tokens", "e2e_latency", "text", "output_ids", "meta_info"],
            "sglang.srt.observability.req_time_stats.SchedulerReqTimeStats.convert_to_output_meta_info": [
                "queue_time", "forward_entry_time", "prefill_finished_time"],
            "sglang.srt.observability.req_time_stats.APIServerReqTimeStats.convert_to_output_meta_info": [
                "request_received_ts", "request_finished_ts", "api_server_dispatch_finish_ts", "response_sent_to_client_ts",
                "first_token_latency", "decode_throughput"],
        },
        "clocks": {
            "clock.monotonic_time": ["time.perf_counter"],
            "clock.realtime_offset": ["time.time", "time.perf_counter"],
            "clock.created_time": ["time.perf_counter"],
            "clock.finished_time": ["time.perf_counter"],
            "clock.first_token_time": ["time.perf_counter"],
            "clock.wait_queue_entry_time": ["time.perf_counter"],
            "clock.forward_entry_time": ["time.perf_counter"],
            "profile.profile_id_default": ["time.time"],
        },
    },
}


def load(engine: str) -> dict[str, Any]:
    return json.loads((DATA / SNAPSHOTS[engine]).read_text(encoding="utf-8"))


def cited_lines(snap: dict[str, Any]) -> set[tuple[str, int]]:
    """Every (file, line) a snapshot records: entries, fields, dict keys."""
    out: set[tuple[str, int]] = set()

    def walk(obj: Any, file: str | None) -> None:
        if isinstance(obj, dict):
            file = obj.get("file", file)
            if isinstance(obj.get("line"), int) and file:
                out.add((file, obj["line"]))
            if isinstance(obj.get("keys"), dict):
                out.update((file, n) for n in obj["keys"].values())
            for k, v in obj.items():
                if k != "keys":
                    walk(v, file)
        elif isinstance(obj, list):
            for v in obj:
                walk(v, file)

    walk(snap, None)
    return out


# ------------------------------------------------------------------------------ the shipped snapshots


@pytest.mark.parametrize("engine", sorted(SNAPSHOTS))
def test_snapshot_loads_and_is_well_formed(engine):
    snap = load(engine)
    assert snap["schema"] == 1 and snap["package"] == engine
    assert SNAPSHOTS[engine] == tool.snapshot_name(engine, snap["version"])
    assert snap["wheel"].startswith(f"{engine}-{snap['version']}-") and snap["wheel"].endswith(".whl")
    assert snap["absent"] == sorted(snap["absent"])
    for name, entry in snap["functions"].items():
        assert entry["file"].startswith(f"{engine}/") and entry["file"].endswith(".py") and entry["line"] > 0, name
        signature_of(entry)  # a valid signature: the fakes of the feature can bind calls against it
    for section in ("classes", "routes", "env_vars", "dict_keys", "anchors"):
        for name, entry in snap[section].items():
            assert entry["file"].startswith(f"{engine}/") and entry["line"] > 0, (section, name)


@pytest.mark.parametrize("engine", sorted(SNAPSHOTS))
def test_snapshot_has_what_we_rely_on(engine):
    snap, relied = load(engine), RELIED[engine]
    for fn, params in relied["functions"].items():
        assert fn in snap["functions"], fn
        have = [p["name"] for p in snap["functions"][fn]["params"]]
        assert set(params) <= set(have), (fn, sorted(set(params) - set(have)))
    for fn in relied["async"]:
        assert snap["functions"][fn].get("async") is True, fn
    for cls, fields in relied["classes"].items():
        have = [f["name"] for f in snap["classes"][cls]["fields"]]
        assert set(fields) <= set(have), (cls, sorted(set(fields) - set(have)))
    for cls, attrs in relied["instance_attributes"].items():
        assert set(attrs) <= set(snap["instance_attributes"][cls]), cls
    assert {path: entry["methods"] for path, entry in snap["routes"].items()} == relied["routes"]
    assert set(relied["env_vars"]) <= set(snap["env_vars"])
    assert set(relied["absent"]) <= set(snap["absent"])
    for fn, keys in relied["dict_keys"].items():
        assert set(keys) <= set(snap["dict_keys"][fn]["keys"]), (fn, sorted(set(keys) - set(snap["dict_keys"][fn]["keys"])))
    for anchor, clocks in relied["clocks"].items():
        assert snap["anchors"][anchor]["clocks"] == clocks, anchor


def test_vllm_has_no_profiler_env_vars_and_sglang_no_profile_req_input():
    """The renames the doc warns about: vLLM's VLLM_TORCH_PROFILER_* became ProfilerConfig fields,
    SGLang's /start_profile body ProfileReqInput became ProfileReq."""
    vllm, sglang = load("vllm"), load("sglang")
    assert vllm["env_vars"] == {}
    assert "sglang.srt.managers.io_struct.ProfileReqInput" in sglang["absent"]
    assert "ProfileReq" in sglang["routes"]["/start_profile"]["params"][0]["annotation"]
    assert "StartProfileRequest" in vllm["routes"]["/start_profile"]["params"][1]["annotation"]


def test_doc_names_every_relied_name_and_cites_only_recorded_lines():
    doc = DOC.read_text(encoding="utf-8")
    for engine, relied in RELIED.items():
        snap = load(engine)
        assert snap["wheel"] in doc and snap["version"] in doc
        names = [fn.rsplit(".", 1)[-1] for fn in relied["functions"] if not fn.endswith("__init__")]
        names += [f for fields in relied["classes"].values() for f in fields]
        names += [a for attrs in relied["instance_attributes"].values() for a in attrs]
        names += list(relied["routes"]) + list(relied["env_vars"])
        names += [a.split(":", 1)[1] if a.startswith("env:") else a.rsplit(".", 1)[-1] for a in relied["absent"]]
        names += [k for keys in relied["dict_keys"].values() for k in keys]
        missing = sorted({n for n in names if f"`{n}`" not in doc and not re.search(rf"`[^`]*\b{re.escape(n)}\b[^`]*`", doc)})
        assert not missing, f"docs/engines_api.md does not name {missing} ({engine})"
        recorded = cited_lines(snap)
        cites = {(m.group(1), int(m.group(2))) for m in re.finditer(rf"\b({engine}/[\w/]+\.py):(\d+)", doc)}
        assert cites, engine
        assert not sorted(cites - recorded), f"docs/engines_api.md cites lines no {engine} snapshot entry has: {sorted(cites - recorded)}"


# ------------------------------------------------------------------------------ the extractor, on hand-written trees

VLLM_TREE = {
    "vllm/__init__.py": "",
    "vllm/_version.py": "__version__ = version = '0.33.0'\n__version_tuple__ = version_tuple = (0, 33, 0)\n",
    "vllm/config/__init__.py": "",
    "vllm/config/utils.py": "def config(cls):\n    return cls\n",
    "vllm/config/profiler.py": '''
        from typing import Any, Literal
        from pydantic import Field
        from vllm.config.utils import config

        ProfilerKind = Literal["torch", "cuda", "proton"]


        @config
        class ProfilerConfig:
            """Dataclass which contains profiler config for the engine."""

            profiler: ProfilerKind | None = None
            torch_profiler_dir: str = ""
            torch_profiler_with_stack: bool = True
            delay_iterations: int = Field(default=0, ge=0)
            max_iterations: int = Field(default=0, ge=0)
        ''',
    "vllm/engine/__init__.py": "",
    "vllm/engine/protocol.py": '''
        from abc import ABC


        class EngineClient(ABC):
            async def start_profile(
                self,
                profile_prefix: str | None = None,
                *,
                delay_iterations: int | None = None,
                max_iterations: int | None = None,
                profiler_kwargs: dict[str, Any] | None = None,
            ) -> None:
                ...
        ''',
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/llm.py": '''
        from typing import Any

        from vllm.config import ProfilerConfig


        class OfflineInferenceMixin:
            pass


        class LLM(OfflineInferenceMixin):
            def __init__(
                self,
                model: str,
                *,
                profiler_config: dict[str, Any] | ProfilerConfig | None = None,
                **kwargs: Any,
            ) -> None:
                if "disable_log_stats" not in kwargs:
                    kwargs["disable_log_stats"] = True

            def start_profile(
                self,
                profile_prefix: str | None = None,
                *,
                delay_iterations: int | None = None,
                max_iterations: int | None = None,
                profiler_kwargs: dict[str, Any] | None = None,
            ) -> None:
                self.llm_engine.start_profile(profile_prefix)

            def stop_profile(self) -> None:
                self.llm_engine.stop_profile()
        ''',
    "vllm/entrypoints/serve/__init__.py": "",
    "vllm/entrypoints/serve/profile/__init__.py": "",
    "vllm/entrypoints/serve/profile/api_router.py": '''
        from typing import Any

        from fastapi import APIRouter, Request
        from pydantic import BaseModel, ConfigDict

        router = APIRouter()


        class StartProfileRequest(BaseModel):
            model_config = ConfigDict(extra="ignore", strict=True)

            profile_prefix: str | None = None
            delay_iterations: int | None = None
            max_iterations: int | None = None
            profiler_kwargs: dict[str, Any] | None = None


        @router.post("/start_profile")
        async def start_profile(
            raw_request: Request, profile_request: StartProfileRequest | None = None
        ):
            pass


        @router.post("/stop_profile")
        async def stop_profile(raw_request: Request):
            pass
        ''',
    "vllm/envs.py": '''
        import os

        environment_variables = {
            "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
        }
        ''',
    "vllm/outputs.py": '''
        from collections.abc import Sequence as GenericSequence
        from dataclasses import dataclass


        @dataclass
        class CompletionOutput:
            index: int
            text: str
            token_ids: GenericSequence[int]
            finish_reason: str | None = None


        class RequestOutput:
            def __init__(self, request_id: str, prompt: str | None, prompt_token_ids: list[int] | None,
                         outputs: list[CompletionOutput], finished: bool, metrics=None) -> None:
                self.request_id = request_id
                self.prompt_token_ids = prompt_token_ids
                self.outputs = outputs
                self.finished = finished
                self.metrics = metrics
        ''',
    "vllm/v1/__init__.py": "",
    "vllm/v1/engine/__init__.py": '''
        import enum
        import time

        import msgspec


        class EngineCoreEventType(enum.IntEnum):
            QUEUED = 1
            SCHEDULED = 2
            PREEMPTED = 3


        class EngineCoreEvent(msgspec.Struct):
            type: EngineCoreEventType
            timestamp: float

            @classmethod
            def new_event(cls, event_type, timestamp=None):
                timestamp = time.monotonic() if timestamp is None else timestamp
                return cls(event_type, timestamp)
        ''',
    "vllm/v1/engine/async_llm.py": '''
        from vllm.engine.protocol import EngineClient


        class AsyncLLM(EngineClient):
            async def start_profile(
                self,
                profile_prefix: str | None = None,
                *,
                delay_iterations: int | None = None,
                max_iterations: int | None = None,
                profiler_kwargs: dict[str, Any] | None = None,
            ) -> None:
                pass

            async def stop_profile(self) -> None:
                pass
        ''',
    "vllm/v1/metrics/__init__.py": "",
    "vllm/v1/metrics/stats.py": '''
        import time
        from dataclasses import dataclass


        @dataclass
        class RequestStateStats:
            num_generation_tokens: int = 0
            arrival_time: float = 0.0
            queued_ts: float = 0.0
            first_token_ts: float = 0.0


        class IterationStats:
            def __init__(self):
                self.iteration_timestamp = time.time()
        ''',
}

SGLANG_TREE = {
    "sglang/__init__.py": "",
    "sglang/_version.py": "__version__ = version = '0.5.23'\n",
    "sglang/srt/__init__.py": "",
    "sglang/srt/environ.py": '''
        class Envs:
            SGLANG_PROFILE_WITH_STACK = EnvBool(True)
            SGLANG_PROFILE_RECORD_SHAPES = EnvBool(True)
            SGLANG_TORCH_PROFILER_DIR = EnvStr("/tmp")
        ''',
    "sglang/srt/entrypoints/__init__.py": "",
    "sglang/srt/entrypoints/engine.py": '''
        from sglang.srt.entrypoints.EngineBase import EngineBase
        from sglang.srt.managers.io_struct import ProfileReq, ProfileReqType


        class Engine(EngineBase):
            def __init__(self, **kwargs):
                pass

            def start_profile(self, **kwargs):
                req = ProfileReq(req_type=ProfileReqType.START_PROFILE, **kwargs)

            def stop_profile(self):
                pass
        ''',
    "sglang/srt/entrypoints/http_server.py": '''
        @app.api_route("/start_profile", methods=["GET", "POST"])
        @auth_level(AuthLevel.ADMIN_OPTIONAL)
        async def start_profile_async(obj: Annotated[Optional[ProfileReq], Body()] = None):
            pass


        @app.api_route("/stop_profile", methods=["GET", "POST"])
        @auth_level(AuthLevel.ADMIN_OPTIONAL)
        async def stop_profile_async():
            pass
        ''',
    "sglang/srt/managers/__init__.py": "",
    "sglang/srt/managers/io_struct.py": '''
        from enum import Enum
        from typing import List, Optional

        import msgspec


        class BaseReq(msgspec.Struct, tag=True, kw_only=True, array_like=True):
            rid: Optional[str] = None
            http_worker_ipc: Optional[str] = None


        class ProfileReqType(Enum):
            START_PROFILE = 1
            STOP_PROFILE = 2


        class ProfileReq(BaseReq, kw_only=True):
            req_type: ProfileReqType = ProfileReqType.START_PROFILE
            output_dir: Optional[str] = None
            num_steps: Optional[int] = None
            activities: Optional[List[str]] = None
            profile_by_stage: bool = False
            merge_profiles: bool = False
        ''',
    "sglang/srt/managers/tokenizer_control_mixin.py": '''
        import time


        class TokenizerControlMixin:
            async def start_profile(
                self: TokenizerManager,
                req: Optional[ProfileReq] = None,
            ):
                req.profile_id = req.profile_id or str(time.time())

            async def stop_profile(self: TokenizerManager):
                pass
        ''',
    "sglang/srt/managers/tokenizer_manager.py": '''
        from sglang.srt.managers.tokenizer_control_mixin import TokenizerControlMixin


        class TokenizerManager(TokenizerControlMixin):
            async def _handle_batch_output(self, recv_obj):
                for i, rid in enumerate(recv_obj.rids):
                    meta_info = {
                        "id": rid,
                        "finish_reason": recv_obj.finished_reasons[i],
                        "prompt_tokens": recv_obj.prompt_tokens[i],
                    }
                    meta_info.update(
                        {
                            "completion_tokens": recv_obj.completion_tokens[i],
                            "cached_tokens": recv_obj.cached_tokens[i],
                        }
                    )
                    out_dict = {
                        "text": state.get_text(),
                        "output_ids": state.output_ids.copy(),
                        "meta_info": meta_info,
                    }
                    meta_info["e2e_latency"] = state.time_stats.get_e2e_latency()
        ''',
    "sglang/srt/observability/__init__.py": "",
    "sglang/srt/observability/req_time_stats.py": '''
        import time
        from dataclasses import dataclass

        # Reduce system time calls by computing time.time() based on calibrated perf_counter() values.
        global_diff_realtime_monotonic = time.time() - time.perf_counter()

        real_time = time.time
        monotonic_time = time.perf_counter


        @dataclass
        class APIServerReqTimeStats:
            # get by time.perf_counter()
            created_time: float = 0.0
            finished_time: float = 0.0

            def set_created_time(self, ts=None):
                ts = ts or time.perf_counter()
                self.created_time = ts
        ''',
}

VLLM_SPEC_KEYS = {
    "callables": ["vllm.entrypoints.llm.LLM.start_profile", "vllm.entrypoints.llm.LLM.stop_profile",
                  "vllm.v1.engine.async_llm.AsyncLLM.start_profile", "vllm.v1.engine.async_llm.AsyncLLM.stop_profile",
                  "vllm.engine.protocol.EngineClient.start_profile"],
    "classes": ["vllm.config.profiler.ProfilerConfig", "vllm.entrypoints.serve.profile.api_router.StartProfileRequest",
                "vllm.outputs.CompletionOutput", "vllm.v1.metrics.stats.RequestStateStats", "vllm.v1.engine.EngineCoreEvent",
                "vllm.v1.engine.EngineCoreEventType", "vllm.sequence.RequestMetrics"],
    "anchors": ["metrics.llm_disables_log_stats", "clock.engine_core_event", "clock.iteration_timestamp"],
}
SGLANG_SPEC_KEYS = {
    "callables": ["sglang.srt.entrypoints.engine.Engine.__init__", "sglang.srt.entrypoints.engine.Engine.start_profile",
                  "sglang.srt.entrypoints.engine.Engine.stop_profile",
                  "sglang.srt.managers.tokenizer_manager.TokenizerManager.start_profile",
                  "sglang.srt.managers.tokenizer_manager.TokenizerManager.stop_profile"],
    "classes": ["sglang.srt.managers.io_struct.ProfileReq", "sglang.srt.managers.io_struct.ProfileReqType",
                "sglang.srt.managers.io_struct.ProfileReqInput"],
    "anchors": ["profile.profile_id_default", "meta_info.e2e_latency", "clock.monotonic_time", "clock.realtime_offset",
                "clock.created_time"],
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def sub_spec(engine: str, keys: dict[str, list[str]], env_names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The real ENGINES entry cut down to what the hand-written tree defines."""
    full = tool.ENGINES[engine]
    spec = {"package": full["package"], "version_file": full["version_file"], "required": (),
            "routes": full["routes"], "instance_attributes": full["instance_attributes"],
            "env_vars": {"module": full["env_vars"]["module"], "names": env_names or full["env_vars"]["names"]},
            "dict_keys": {k: v for k, v in full["dict_keys"].items() if "_handle_batch_output" in k}}
    for section, names in keys.items():
        spec[section] = {name: full[section][name] for name in names}
    return spec


def same_entry(got: dict[str, Any], shipped: dict[str, Any]) -> None:
    """Equal but for line numbers (the trees are shorter than the released files)."""
    def strip(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if k != "line"}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj
    assert strip(got) == strip(shipped)


def test_extractor_reproduces_vllm_entries(tmp_path):
    src = tool.DirSource(write_tree(tmp_path / "src", VLLM_TREE))
    snap = tool.extract(src, sub_spec("vllm", VLLM_SPEC_KEYS))
    shipped = load("vllm")
    assert snap["version"] == "0.33.0"
    for fn in VLLM_SPEC_KEYS["callables"]:
        same_entry(snap["functions"][fn], shipped["functions"][fn])
    assert snap["functions"]["vllm.v1.engine.async_llm.AsyncLLM.start_profile"]["async"] is True
    for cls in VLLM_SPEC_KEYS["classes"][:-1]:
        got, have = snap["classes"][cls], shipped["classes"][cls]
        assert got["kind"] == have["kind"], cls
        shipped_fields = {f["name"]: f for f in have["fields"]}
        for field in got["fields"]:  # the tree holds a subset of each class's fields
            same_entry(field, shipped_fields[field["name"]])
    assert snap["classes"]["vllm.config.profiler.ProfilerConfig"]["kind"] == "pydantic-dataclass"
    assert "vllm.sequence.RequestMetrics" in snap["absent"]
    assert set(snap["instance_attributes"]["vllm.outputs.RequestOutput"]) <= set(
        shipped["instance_attributes"]["vllm.outputs.RequestOutput"])
    for path in ("/start_profile", "/stop_profile"):
        same_entry(snap["routes"][path], shipped["routes"][path])
    assert snap["env_vars"] == {} and [a for a in snap["absent"] if a.startswith("env:")] == [
        a for a in shipped["absent"] if a.startswith("env:")]
    for key in VLLM_SPEC_KEYS["anchors"]:
        same_entry(snap["anchors"][key], shipped["anchors"][key])


def test_extractor_reproduces_sglang_entries(tmp_path):
    src = tool.DirSource(write_tree(tmp_path / "src", SGLANG_TREE))
    env = ("SGLANG_TORCH_PROFILER_DIR", "SGLANG_PROFILE_WITH_STACK", "SGLANG_PROFILE_RECORD_SHAPES")
    snap = tool.extract(src, sub_spec("sglang", SGLANG_SPEC_KEYS, env))
    shipped = load("sglang")
    for fn in SGLANG_SPEC_KEYS["callables"]:
        same_entry(snap["functions"][fn], shipped["functions"][fn])
    # an inherited method is recorded in its mixin's file, async
    start = snap["functions"]["sglang.srt.managers.tokenizer_manager.TokenizerManager.start_profile"]
    assert start["file"] == "sglang/srt/managers/tokenizer_control_mixin.py" and start["async"] is True
    req = snap["classes"]["sglang.srt.managers.io_struct.ProfileReq"]
    assert req["kind"] == "msgspec"
    shipped_fields = {f["name"]: f for f in shipped["classes"]["sglang.srt.managers.io_struct.ProfileReq"]["fields"]}
    for field in req["fields"]:
        same_entry(field, shipped_fields[field["name"]])
    assert req["fields"][0]["defined_in"] == "sglang.srt.managers.io_struct.BaseReq"  # inherited fields first
    assert "sglang.srt.managers.io_struct.ProfileReqInput" in snap["absent"]
    for path in ("/start_profile", "/stop_profile"):
        same_entry(snap["routes"][path], shipped["routes"][path])
    for name in env:
        same_entry(snap["env_vars"][name], shipped["env_vars"][name])
    fn = "sglang.srt.managers.tokenizer_manager.TokenizerManager._handle_batch_output"
    assert set(snap["dict_keys"][fn]["keys"]) == {"id", "finish_reason", "prompt_tokens", "completion_tokens",
                                                  "cached_tokens", "text", "output_ids", "meta_info", "e2e_latency"}
    assert set(snap["dict_keys"][fn]["keys"]) <= set(shipped["dict_keys"][fn]["keys"])
    for key in SGLANG_SPEC_KEYS["anchors"]:
        same_entry(snap["anchors"][key], shipped["anchors"][key])


def test_wheel_and_directory_give_the_same_snapshot(tmp_path):
    root = write_tree(tmp_path / "src", SGLANG_TREE)
    wheel = tmp_path / "sglang-0.5.23-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in sorted(root.rglob("*.py")):
            zf.write(path, path.relative_to(root).as_posix())
    spec = sub_spec("sglang", SGLANG_SPEC_KEYS)
    from_dir = tool.extract(tool.DirSource(root, label=wheel.name), spec)
    from_wheel = tool.extract(tool.WheelSource(wheel), spec)
    assert from_dir == from_wheel and from_wheel["wheel"] == wheel.name
    out = tmp_path / "out.json"
    tool.write_json(out, from_wheel)
    assert json.loads(out.read_text()) == from_wheel


def test_missing_required_callable_is_an_error(tmp_path):
    src = tool.DirSource(write_tree(tmp_path / "src", {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = '9'\n"}))
    with pytest.raises(KeyError):
        tool.extract(src, tool.ENGINES["vllm"])
