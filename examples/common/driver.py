"""Driver-side plumbing shared by the example trainers: Ray cluster, worker groups, post-run steps."""
from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Sequence

import yaml

from mindspeed_profiler.config import ProfilerConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
GET_TIMEOUT_S = float(os.environ.get("EXAMPLE_RAY_TIMEOUT_S", "300"))


def split_overrides(config_path: str | Path, section: str, overrides: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Read the trainer's own YAML section, apply `section.key=value` overrides to it, and return
    (trainer settings, the remaining overrides for the profiler config)."""
    with open(config_path, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh) or {}
    train = dict(doc.get(section) or {})
    rest: list[str] = []
    for text in overrides:
        key, sep, value = text.partition("=")
        if sep and key.startswith(section + "."):
            node = train
            parts = key.split(".")[1:]
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            if parts[-1] not in node:
                raise ValueError(f"{key}: unknown {section} setting; valid: {', '.join(sorted(node))}")
            node[parts[-1]] = yaml.safe_load(value)
        else:
            rest.append(text)
    return train, rest


def check_even_shards(items: int, what: str, ranks: int, section: str) -> None:
    """Each data-parallel actor rank must get an equal, non-empty shard: a rank without one never joins
    the gradient all-reduce (the others wait on it), and unequal shards bias the averaged gradient."""
    if ranks < 1 or items < ranks or items % ranks:
        raise ValueError(f"{section}.{what}={items} must be a positive multiple of {section}.actor_ranks={ranks} "
                         f"(each actor rank takes an equal shard of the batch)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayCluster:
    """A Ray connection for one training run: local by default, RAY_ADDRESS for a real cluster."""

    def __init__(self, cfg: ProfilerConfig, num_cpus: int | None = None):
        self.cfg = cfg
        self.num_cpus = num_cpus
        self._handles: list[Any] = []

    def __enter__(self) -> "RayCluster":
        import ray

        kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=True,
                                      runtime_env={"env_vars": {"PYTHONPATH": _pythonpath(),
                                                                "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
                                                                "OMP_NUM_THREADS": "1"}})
        address = os.environ.get("RAY_ADDRESS")
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = self.num_cpus or max(2, os.cpu_count() or 2)
        ray.init(**kwargs)
        return self

    def __exit__(self, *exc: Any) -> None:
        import ray

        for h in self._handles:  # a crashed run still releases its actors
            try:
                ray.kill(h)
            except Exception:
                pass
        ray.shutdown()

    def get(self, refs: Any) -> Any:
        import ray

        return ray.get(refs, timeout=GET_TIMEOUT_S)

    def group(self, worker_cls: type, size: int, model: dict, seed: int = 0) -> list[Any]:
        """Start `size` ranks of a worker class as Ray actors sharing one torch.distributed group."""
        import ray

        port = _free_port()
        remote_cls = ray.remote(worker_cls).options(num_cpus=0.5)
        handles = [remote_cls.remote(self.cfg.to_dict(), rank, size, port, model, seed) for rank in range(size)]
        self._handles += handles
        self.get([h.ready.remote() for h in handles])
        return handles

    def sync_clocks(self) -> None:
        """Align every worker's tracer clock to the driver's (when the tracer is on)."""
        if not self.cfg.tracer.enable or not self.cfg.tracer.clock_sync:
            return
        from mindspeed_profiler.tracing.ray_support import sync_actor_clocks

        sync_actor_clocks(self._handles, rounds=self.cfg.tracer.clock_sync_rounds)

    def shutdown_workers(self, handles: list[Any]) -> None:
        self.get([h.shutdown.remote() for h in handles])


def _pythonpath() -> str:
    parts = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(parts))


def analyse_and_merge(cfg: ProfilerConfig, analyse: bool) -> dict[str, Any]:
    """After a run: merge the timeline (Perfetto-ready) and run the offline analysis."""
    out: dict[str, Any] = {}
    if cfg.tracer.enable:
        from mindspeed_profiler.tracing.merge import write_timeline

        out["timeline"] = str(write_timeline(cfg.timeline_dir, gzip=cfg.tracer.gzip))
        print(f"timeline: {out['timeline']} (open it in https://ui.perfetto.dev)")
    if analyse and (cfg.integrated.profile or cfg.tracer.enable):
        from mindspeed_profiler.cli import main as cli_main

        out["analyse_rc"] = cli_main(["analyse", cfg.integrated.profile_save_path])
    return out
