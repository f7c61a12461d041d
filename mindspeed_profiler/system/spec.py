"""What one wrapped worker needs to know (`WorkerSpec`): which tool, which group and rank, where
its files go, which steps. The driver builds it from the config; it travels to the worker's node
encoded in one shell-safe token, on the launcher's command line and in the worker's environment
(formats.SYSTEM_ENV), so the launcher and the worker read the same settings. Standard library only:
the launcher imports this before the worker's interpreter starts."""
from __future__ import annotations

import base64
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mindspeed_profiler.core import formats


@dataclass(frozen=True)
class WorkerSpec:
    backend: str
    group: str
    rank: int
    output_dir: str                       # absolute: the node's view of system.output_dir
    steps: tuple[int, ...] | None = None  # 1-based iterations to capture; None = the whole process
    options: dict[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    args: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # what the settings add to the environment (user's win)
    run_id: str | None = None

    # ------------------------------------------------------------------ file names (formats.py)

    @property
    def base(self) -> str:
        return formats.system_base_name(self.group, self.rank)

    @property
    def meta_path(self) -> Path:
        return Path(self.output_dir) / formats.system_meta_name(self.group, self.rank)

    @property
    def iterations_path(self) -> Path:
        return Path(self.output_dir) / formats.system_iterations_name(self.group, self.rank)

    @property
    def report_path(self) -> Path:
        return Path(self.output_dir) / formats.system_report_name(self.backend, self.group, self.rank)

    # ------------------------------------------------------------------ the token

    def encode(self) -> str:
        """URL-safe base64 of the JSON: no character a shell or Ray's command line would touch."""
        data = json.dumps(asdict(self), separators=(",", ":"), sort_keys=True).encode()
        return base64.urlsafe_b64encode(data).decode("ascii")

    @classmethod
    def decode(cls, token: str) -> "WorkerSpec":
        d: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
        d["steps"] = tuple(d["steps"]) if d.get("steps") is not None else None
        d["flags"] = tuple(d.get("flags") or ())
        return cls(**d)

    @classmethod
    def from_config(cls, cfg: Any, group: str, rank: int, env: dict[str, str] | None = None) -> "WorkerSpec":
        """From a validated ProfilerConfig whose `system` section is present (`env`: what the launch
        settings add to the environment, recorded in the metadata)."""
        s = cfg.system
        return cls(backend=s.backend, group=group, rank=int(rank), output_dir=os.path.abspath(cfg.system_output_dir),
                   steps=tuple(s.steps) if s.steps else None, options=dict(s.options), flags=tuple(s.flags),
                   args=dict(s.args), env=dict(env or {}), run_id=cfg.run_id)


def spec_from_env(environ: Any = os.environ) -> WorkerSpec | None:
    """This process's spec when the launch settings wrapped it, else None; a damaged value is None
    (the worker runs on as if unwrapped)."""
    token = environ.get(formats.SYSTEM_ENV)
    if not token:
        return None
    try:
        return WorkerSpec.decode(token)
    except Exception:
        return None
