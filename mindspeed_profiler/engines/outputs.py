"""Where an inference engine's capture lands in our layout: the files (or torch_npu directories)
one engine session wrote are grouped by engine worker, and each worker's share becomes one capture
directory `<save>/<stage>/<role>_rank<R>_step<A>-<A>[_c<K>]_<host>_<pid>_<time>_<suffix>` with our
mindspeed_profiler_meta.json, so `mindspeed-profiler analyse` reads it like any capture (the torch
kind for Kineto JSON, `_pt`; the ascend kind for a torch_npu directory, renamed `_ascend_pt`).

One capture per worker, not one per session: the analysis reads one trace per capture, and an
engine of 8 tensor-parallel workers is 8 traces. What a worker is comes from each engine's trace
names (vllm_engine.worker_of, sglang_engine.worker_of).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mindspeed_profiler.backends import layout
from mindspeed_profiler.core import fileio, formats

ASCEND_SUFFIX = "_ascend_pt"   # torch_npu's capture directories (vllm-ascend, SGLang on Ascend)


@dataclass(frozen=True)
class Worker:
    """One engine worker's share of a session, as its output's name tells it."""

    key: str                      # groups the outputs: "rank3", "frontend", "tp0-decode"; "" when unknown
    rank: int | None = None       # the worker's rank, written in the capture's name (None: the session's)
    role_suffix: str = ""         # added to the role: "-frontend", "-extend", "-decode"
    identity: tuple[tuple[str, int], ...] = ()   # (dp, 0), (tp, 1), ... as named by the engine


UNKNOWN = Worker("")


@dataclass
class Session:
    """One engine capture: a selected stage call, from the engine's start to the placement of what
    it wrote."""

    engine: str                   # vllm | vllm-ascend | sglang
    save_dir: Path                # <save_path>/<stage>
    role: str                     # the engine's role in capture names (e.g. actor-vllm)
    rank: int                     # the rank of a worker whose outputs do not name one
    iteration: int
    call: int
    host: str
    prefix: str                   # the session's profile prefix (its outputs' names begin with it)
    raw_dir: Path                 # where the engine writes this session's outputs
    meta: dict[str, Any]          # the metadata every capture of the session starts from
    start_task: Any = None        # the start still queued on the loop running in the training thread
    stopped: bool = False         # stop_profile returned (its outputs may still be on their way)
    placed: list[dict[str, Any]] = field(default_factory=list)


def group_outputs(paths: list[Path], worker_of: Callable[[str], Worker | None]) -> dict[Worker, list[Path]]:
    """Pure on names: the outputs by worker, in name order. Names no rule recognises go with the
    first recognised worker (a side file is not a capture of its own), under UNKNOWN when none is."""
    groups: dict[Worker, list[Path]] = {}
    for p in sorted(paths, key=lambda p: p.name):
        groups.setdefault(worker_of(p.name) or UNKNOWN, []).append(p)
    if UNKNOWN in groups and len(groups) > 1:
        strays = groups.pop(UNKNOWN)
        groups[next(iter(groups))].extend(strays)
    return groups


def is_ascend_dir(path: Path) -> bool:
    return path.name.endswith(ASCEND_SUFFIX) and path.is_dir()


def place(session: Session, outputs: list[Path], worker_of: Callable[[str], Worker | None],
          errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Move the session's outputs into capture directories (one per worker) and write their
    metadata; with no output, one metadata-only capture saying why. Returns the metadata written.
    Raises OSError only for a capture directory that cannot be made at all."""
    metas: list[dict[str, Any]] = []
    groups = group_outputs(outputs, worker_of)
    if not groups:
        meta = _meta_for(session, UNKNOWN, errors, files=False)
        meta["status"] = "failed"
        meta["errors"].append({"phase": "collect", "time": fileio.utc_now_iso(),
                               "error": f"no trace of this engine session (prefix {session.prefix!r}) found in "
                                        f"{session.raw_dir}: the engine writes on its own host (use a save path "
                                        "every host shares), or it was not built with engine_profiler_args"})
        directory = layout.make_capture_dir(session.save_dir, _worker_name(session, UNKNOWN), "pt")
        metas.append(_write(directory, meta, []))
    for worker, paths in groups.items():
        meta = _meta_for(session, worker, errors)
        ascend = [p for p in paths if is_ascend_dir(p)]
        name = _worker_name(session, worker)
        if ascend:   # torch_npu wrote a capture directory: it becomes ours, renamed; the rest goes inside
            directory = _free_dir(session.save_dir, name, "ascend_pt")
            os.replace(ascend[0], directory)
            rest = [p for p in paths if p is not ascend[0]]
        else:
            directory = layout.make_capture_dir(session.save_dir, name, "pt")
            rest = paths
        for src in rest:
            shutil.move(str(src), directory / src.name)
        # trace_files lists Kineto files only: an Ascend capture is read from its own layout
        files = [] if ascend else [p.name for p in rest]
        metas.append(_write(directory, meta, files))
    session.placed.extend(metas)
    return metas


def _worker_name(session: Session, worker: Worker) -> str:
    rank = worker.rank if worker.rank is not None else session.rank
    return layout.worker_name(session.role + worker.role_suffix, rank, session.iteration, session.iteration,
                              session.call, session.host)


def _free_dir(save_dir: Path, worker: str, suffix: str) -> Path:
    """A capture directory name not taken yet (made by os.replace, not here)."""
    made = layout.make_capture_dir(save_dir, worker, suffix)
    made.rmdir()
    return made


def _meta_for(session: Session, worker: Worker, errors: list[dict[str, Any]], files: bool = True) -> dict[str, Any]:
    meta = {**session.meta, "errors": list(errors), "notes": list(session.meta["notes"])}
    meta["role"] = session.role + worker.role_suffix
    meta["rank"] = worker.rank if worker.rank is not None else session.rank
    engine = dict(meta["options"]["engine"])
    engine["worker"] = dict(worker.identity) or None
    meta["options"] = {**meta["options"], "engine": engine}
    if worker is UNKNOWN and files:
        meta["notes"].append("the engine's output names no worker: its rank here is the attaching worker's "
                             "(tp_rank when given)")
    if errors:
        meta["status"] = "failed"
    return meta


def _write(directory: Path, meta: dict[str, Any], files: list[str]) -> dict[str, Any]:
    meta["trace_files"] = files
    meta["end_time"] = fileio.utc_now_iso()
    meta["directory"] = str(directory)
    fileio.write_json_atomic(directory / formats.META_FILE, {k: v for k, v in meta.items() if k != "directory"})
    return meta


ENGINE_DIR = "engine"   # <save_path>/engine/<engine>/: where an engine writes before its outputs are placed


def engine_dir(save_path: str | os.PathLike, engine: str) -> Path:
    """The directory an engine built with engine_profiler_args writes its traces into (absolute:
    vLLM makes it so anyway, and the engine's processes may run elsewhere)."""
    return Path(os.path.abspath(save_path)) / ENGINE_DIR / engine
