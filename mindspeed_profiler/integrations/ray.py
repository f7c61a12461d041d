"""Ray glue: the right profiler inside each actor, and group start / step / stop with timeouts.

    @ray.remote
    class ActorWorker(ProfilerWorkerMixin):
        def __init__(self, cfg, rank, world_size):
            self.init_profiler(cfg, role="actor", rank=rank, world_size=world_size)
        def update(self):
            with self.profiler.stage("actor_update"): ...

    workers = [ActorWorker.remote(cfg, r, n) for r in range(n)]
    start_profilers(workers, timeout_s=60)      # never raises: returns one status per actor
    ...
    stop_profilers(workers, timeout_s=300)

Ray is imported lazily (only the group helpers need it). Profiling failures never kill the group:
an actor that fails or does not answer in time is reported (warning + returned status) and skipped.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

from mindspeed_profiler.profiler import IntegratedProfiler
from mindspeed_profiler.ranks import resolve_rank

log = logging.getLogger("mindspeed_profiler")


def actor_role(default: str = "integrated") -> str:
    """The current Ray actor's name (named actors), made safe for directory names, else `default`."""
    try:
        import ray

        ctx = ray.get_runtime_context()
        name = ctx.get_actor_name() if ctx.get_actor_id() is not None else None
        return _safe(name) if name else default
    except Exception:
        return default


def _safe(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.\-]", "-", name).lstrip("-_.") or "integrated"


def build_actor_profiler(cfg: Any, role: str | None = None, rank: int | None = None,
                         world_size: int | None = None, **kwargs: Any) -> IntegratedProfiler:
    """The IntegratedProfiler for this actor: `role` (default: the Ray actor name, else
    "integrated"), rank / world size (default: torch.distributed, else RANK / WORLD_SIZE)."""
    rank, world_size, _ = resolve_rank(rank, world_size)
    return IntegratedProfiler(cfg, role or actor_role(), rank=rank, world_size=world_size, **kwargs)


class ProfilerWorkerMixin:
    """Mix into a Ray actor class: `init_profiler` inside the actor, and remote-callable
    profiler_start / profiler_step / profiler_stop used by the group helpers below."""

    _msp_profiler: IntegratedProfiler | None = None

    def init_profiler(self, cfg: Any, role: str | None = None, rank: int | None = None,
                      world_size: int | None = None, **kwargs: Any) -> dict[str, Any]:
        self._msp_profiler = build_actor_profiler(cfg, role, rank, world_size, **kwargs)
        p = self._msp_profiler
        return {"role": p.role, "enabled": p.enabled, "rank": getattr(p, "rank", rank)}

    @property
    def profiler(self) -> IntegratedProfiler:
        if self._msp_profiler is None:
            raise RuntimeError("call init_profiler(cfg, role, rank, world_size) in the actor first")
        return self._msp_profiler

    def profiler_start(self, iteration: int = 1) -> bool:
        self.profiler.start(iteration=iteration)
        return self.profiler.enabled

    def profiler_step(self) -> int | None:
        self.profiler.step()
        return self.profiler.iteration

    def profiler_stop(self) -> list[dict[str, Any]]:
        """Stop; returns the metadata of every capture this actor made."""
        self.profiler.stop()
        return list(getattr(self.profiler, "captures", []))


def call_group(actors: Sequence[Any], method: str, *args: Any, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """Call `actor.<method>.remote(*args)` on every actor and wait at most `timeout_s` for all.

    Returns one dict per actor, in order: {"index", "status": "ok" | "error" | "timeout", "result" | "error"}.
    Never raises for an actor's failure; logs one warning summarising the failures."""
    import ray

    refs = []
    out: list[dict[str, Any]] = []
    for i, actor in enumerate(actors):
        try:
            refs.append(getattr(actor, method).remote(*args))
            out.append({"index": i, "status": "pending"})
        except Exception as exc:  # e.g. the actor class has no such method
            refs.append(None)
            out.append({"index": i, "status": "error", "error": f"{type(exc).__name__}: {exc}"})
    live = [r for r in refs if r is not None]
    ready, _ = ray.wait(live, num_returns=len(live), timeout=timeout_s) if live else ([], [])
    ready_set = set(ready)
    for ref, entry in zip(refs, out):
        if ref is None:
            continue
        if ref not in ready_set:
            entry.update(status="timeout", error=f"no answer to {method} within {timeout_s} s")
            continue
        try:
            entry.update(status="ok", result=ray.get(ref, timeout=1.0))
        except Exception as exc:
            entry.update(status="error", error=f"{type(exc).__name__}: {exc}")
    failed = [e for e in out if e["status"] != "ok"]
    if failed:
        log.warning("%s failed on %d of %d actors (training goes on): %s", method, len(failed), len(out),
                    "; ".join(f"#{e['index']} {e['status']}: {e.get('error', '')[:200]}" for e in failed))
    return out


def start_profilers(actors: Sequence[Any], timeout_s: float = 60.0, iteration: int = 1) -> list[dict[str, Any]]:
    return call_group(actors, "profiler_start", iteration, timeout_s=timeout_s)


def step_profilers(actors: Sequence[Any], timeout_s: float = 60.0) -> list[dict[str, Any]]:
    return call_group(actors, "profiler_step", timeout_s=timeout_s)


def stop_profilers(actors: Sequence[Any], timeout_s: float = 300.0) -> list[dict[str, Any]]:
    """Stop (and export) every actor's profiler; exporting can take a while, hence the longer default."""
    return call_group(actors, "profiler_stop", timeout_s=timeout_s)
