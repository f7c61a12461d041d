"""What a run and each capture say about themselves: run.json and the capture metadata
(formats.RUN_FILE, formats.META_FILE; the keys are formats.META_KEYS, described in docs/formats.md)."""
from __future__ import annotations

import dataclasses
import os
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable

from mindspeed_profiler.core import formats
from mindspeed_profiler.core import fileio
from mindspeed_profiler.config import IntegratedConfig, ProfilerConfig, plain


def split_config(cfg: Any) -> tuple[ProfilerConfig | None, IntegratedConfig]:
    """(whole ProfilerConfig or None, IntegratedConfig) from either."""
    if isinstance(cfg, ProfilerConfig):
        return cfg, cfg.integrated
    if isinstance(cfg, IntegratedConfig):
        return None, cfg
    raise TypeError(f"expected a ProfilerConfig or IntegratedConfig (from load_config), got {type(cfg).__name__}")


def versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": sys.version.split()[0]}
    for dist in ("mindspeed-profiler", "torch", "torch-npu", "ray", "megatron-core"):
        try:
            out[dist] = metadata.version(dist)
        except Exception:
            out[dist] = None
    return out


def config_dict(cfg: Any) -> dict[str, Any]:
    full, integ = split_config(cfg)
    if full is not None:
        return full.to_dict()
    return {"profiler_config": {"integrated": plain(integ)}}


def new_run_id() -> str:
    """`YYYYmmdd-HHMMSS.mmm-<6 hex>` (local time): sortable by start time, unique."""
    now = time.time()
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}-" + secrets.token_hex(3)


# what a launcher sets when it was given no job id, the same for every job: torchrun's rendezvous id
# defaults to "none" (its static rendezvous, `--master-port`, as Megatron and MindSpeed launch)
SHARED_LAUNCHER_IDS = frozenset({"", "none"})


def resolve_run_id(cfg: Any = None) -> tuple[str | None, str]:
    """(run id, where it came from) for this process: the config's (`start_run` on the driver put
    it there), else the MINDSPEED_PROFILER_RUN_ID environment, else the launcher's job id
    (TORCHELASTIC_RUN_ID, SLURM_JOB_ID) unless it is a value every job gets (SHARED_LAUNCHER_IDS);
    else (None, "none"): nothing tells the processes of one run apart from another's."""
    full = cfg if isinstance(cfg, ProfilerConfig) else None
    if full is not None and full.run_id:
        return full.run_id, "config"
    env = os.environ.get(formats.RUN_ID_ENV, "")
    if formats.RUN_ID_RE.match(env):
        return env, "environment"
    for var, prefix in (("TORCHELASTIC_RUN_ID", "torchelastic"), ("SLURM_JOB_ID", "slurm")):
        job = os.environ.get(var, "")
        value = f"{prefix}-{job}"
        if job.strip().lower() not in SHARED_LAUNCHER_IDS and formats.RUN_ID_RE.match(value):
            return value, var
    return None, "none"


def start_run(cfg: ProfilerConfig, *, role: str = "driver", rank: int = 0) -> ProfilerConfig:
    """On the driver, once per training run, before the workers start: a fresh run id, returned
    in the config (give that config to the workers), set in this process's environment (inherited
    by the processes it starts) and written with run.json when profiling or the tracer is on."""
    run_id = new_run_id()
    cfg = dataclasses.replace(cfg, run_id=run_id)
    os.environ[formats.RUN_ID_ENV] = run_id
    if cfg.integrated.profile or cfg.tracer.enable or cfg.integrated.dynamic:
        write_run_manifest(cfg, role=role, rank=rank)
    return cfg


def _manifest(cfg: Any, run_id: str | None, source: str, role: str, rank: int) -> dict[str, Any]:
    return {
        "schema": formats.RUN_SCHEMA,
        "run_id": run_id,
        "run_id_source": source,
        "config": config_dict(cfg),
        "versions": versions(),
        "start_time": fileio.utc_now_iso(),
        "writer": {"role": role, "rank": rank, "host": socket.gethostname(), "pid": os.getpid()},
    }


def write_run_manifest(cfg: Any, save_path: str | None = None, *, role: str = "driver", rank: int = 0) -> Path:
    """Write `<profile_save_path>/run.json` (run id, config, versions, start time) atomically."""
    _, integ = split_config(cfg)
    path = Path(save_path or integ.profile_save_path) / formats.RUN_FILE
    run_id, source = resolve_run_id(cfg)
    manifest = _manifest(cfg, run_id, source, role, rank)

    def change(old):
        if old and run_id is not None and old.get("run_id") == run_id:
            # a worker rewriting its run's run.json keeps what others added (the on-demand
            # requests, the process-level capture's `system` entry)
            return {**manifest, **{k: v for k, v in old.items() if k not in manifest}}
        return manifest
    return fileio.update_json(path, change)


# run_id_source of a run.json a listening worker wrote because nothing announced the run (claim_run)
LISTENER_SOURCE = "listener"


def claim_run(cfg: Any, save_path: str, *, role: str, rank: int, live: Callable[[dict[str, Any]], bool]) -> str | None:
    """For a listening worker (`integrated.dynamic`) of a run whose run.json nobody wrote (no
    start_run, `profile: false`): make the run findable by `trigger` / `status` and return the run
    id to use, the same on every rank. Under run.json's lock, so ranks starting together never
    clobber each other: an id from the config or the environment (resolve_run_id) is written when
    run.json is absent or names another run; without one, the first rank writes a fresh id
    (run_id_source "listener") and the others adopt it. A run.json a listener wrote for an earlier
    job that is over (`live(old)` false) is replaced, and so is one that names no run (a profiling
    job without an id wrote run_id null); any other is adopted (start_run's, or a profiling
    worker's)."""
    run_id, source = resolve_run_id(cfg)
    chosen: list[str | None] = [run_id]

    def change(old: dict[str, Any] | None) -> dict[str, Any] | None:
        adopted = old.get("run_id") if old is not None else None
        named = isinstance(adopted, str) and formats.RUN_ID_RE.match(adopted) is not None
        if old is not None and (adopted == run_id if run_id is not None
                                else named and (old.get("run_id_source") != LISTENER_SOURCE or live(old))):
            chosen[0] = adopted if named else run_id
            return None   # keep it as it is
        chosen[0] = run_id or new_run_id()
        return _manifest(cfg, chosen[0], source if run_id else LISTENER_SOURCE, role, rank)
    fileio.update_json(Path(save_path) / formats.RUN_FILE, change)
    return chosen[0]


def read_run_manifest(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """`<run_dir>/run.json` as a dict, or None when absent or unreadable."""
    return fileio.read_json_object(Path(run_dir) / formats.RUN_FILE)


def ray_node_id() -> str | None:
    """The Ray node this process runs on, when Ray is already imported and initialised here (a
    worker of a Ray job); never imports Ray for it."""
    ray = sys.modules.get("ray")
    if ray is None:
        return None
    try:
        if not ray.is_initialized():
            return None
        node_id = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - a half-imported or shutting-down Ray: no id
        return None
    return node_id if isinstance(node_id, str) else None


def capture_metadata(cfg: IntegratedConfig, *, run_id: str | None, role: str, stage: str | None, rank: int, world_size: int,
                     local_rank: int | None, first: int, last: int, warmup: int, requested_warmup: int,
                     backend: str, device: str | None, host: str, notes: list[str]) -> dict[str, Any]:
    """A capture's metadata as it starts (status, end time, files and errors are filled in later)."""
    from mindspeed_profiler.runtime.megatron import parallel_layout
    from mindspeed_profiler.runtime.own_memory import own_memory

    meta = {
        "schema": formats.META_SCHEMA,
        "run_id": run_id,
        "request_id": None,   # set for an on-demand capture: the request it answers (ondemand/)
        "role": role,
        "stage": stage or formats.ALL_DIR,
        "rank": rank,
        "world_size": world_size,
        "local_rank": local_rank,
        "parallel": parallel_layout(),
        "steps": [first, last],
        "warmup_steps": warmup,
        "requested_warmup_steps": requested_warmup,
        "profiled_iterations": [first - warmup, last],
        "backend": backend,
        "device": device,
        "level": cfg.profile_level,
        "export_type": cfg.profile_export_type,
        "mstx": bool(cfg.mstx),
        "host": host,
        "pid": os.getpid(),
        "node": {"host": host, "ray_node_id": ray_node_id()},
        "clock": {"wall_ns": time.time_ns(), "mono_ns": time.monotonic_ns()},
        "start_time": fileio.utc_now_iso(),
        "end_time": None,
        "status": "ok",
        "errors": [],
        "trace_files": [],
        "options": None,
        "notes": list(notes),
        "export_phases": {},     # seconds per export phase: stop, write, compress, snapshot, ... (captures.py)
        "stopped_early": None,   # why the capture ended before its last iteration, when it did
        "own_memory": own_memory(cfg),   # the profiler's own buffers and their bounds (runtime/own_memory.py)
    }
    return meta
