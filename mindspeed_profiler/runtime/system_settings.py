"""The Ray launch settings of one worker (driver side, pure): whether its group is wrapped, and the
per-actor `runtime_env` that wraps it.

    runtime_env = worker_runtime_env(cfg, "actor", rank)      # None: not wrapped
    Worker.options(runtime_env=runtime_env).remote(...)

`py_executable` makes Ray start that actor's worker process through our launcher (launch.py), which
execs into `<tool ...> <python ...>` on the worker's node; `env_vars` carry the settings to the
worker (formats.SYSTEM_ENV) and the tool's environment (ROCPROFSYS_OUTPUT_PATH, ...; the user's
`system.env` wins). Ray merges a per-actor `env_vars` with the job's, and keeps the job's
`working_dir`: this works on a local cluster and under RAY_ADDRESS alike.
"""
from __future__ import annotations

import dataclasses
import shlex
import sys
from typing import Any, Iterable, Mapping, Sequence

from mindspeed_profiler.core import formats
from mindspeed_profiler.system.backends import system_backend
from mindspeed_profiler.system.launch import MODULE
from mindspeed_profiler.system.spec import WorkerSpec

ALL = "all"


def group_selected(worker_groups: Any, group: str, aliases: Iterable[str] = ()) -> bool:
    """`system.worker_groups` (None, "all" or names) selects this group under its name or an alias
    (the examples' `actor` group is also `ActorGroup`, its tracer name)."""
    if not worker_groups:
        return False
    if worker_groups == ALL:
        return True
    return any(name in worker_groups for name in (group, *aliases))


def unmatched_groups(worker_groups: Any, started: Mapping[str, Sequence[str]]) -> list[str]:
    """Names in `system.worker_groups` that no started group answers to (`started`: group name ->
    its aliases): most likely typos, since those workers ran unwrapped."""
    if not worker_groups or worker_groups == ALL:
        return []
    known = {n for g, aliases in started.items() for n in (g, *aliases)}
    return [name for name in worker_groups if name not in known]


def wrapped(cfg: Any, group: str, aliases: Iterable[str] = ()) -> bool:
    s = getattr(cfg, "system", None)
    return bool(s is not None and s.enabled and group_selected(s.worker_groups, group, aliases))


def worker_runtime_env(cfg: Any, group: str, rank: int, *, aliases: Iterable[str] = (),
                       python: str = sys.executable) -> dict[str, Any] | None:
    """The per-actor runtime_env wrapping rank `rank` of `group`, or None when the group is not
    wrapped (system section absent or disabled, or the group not listed).

    `python`: the interpreter on the worker's nodes (default: the driver's; on a cluster whose nodes
    keep it elsewhere, pass theirs)."""
    if not wrapped(cfg, group, aliases):
        return None
    s = cfg.system
    backend = system_backend(s.backend)
    spec = WorkerSpec.from_config(cfg, group, rank)
    env = {**backend.env(spec), **s.env}   # the user's environment wins over what we derive
    token = dataclasses.replace(spec, env=env).encode()
    return {"py_executable": " ".join(shlex.quote(t) for t in (python, "-m", MODULE, token, "--", python)),
            "env_vars": {**env, formats.SYSTEM_ENV: token}}
