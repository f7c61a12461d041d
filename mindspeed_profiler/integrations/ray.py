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

from mindspeed_profiler.runtime.profiler import IntegratedProfiler
from mindspeed_profiler.runtime.ranks import resolve_rank

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


# ------------------------------------------------------------------------------------------------
# Process-level capture (profiler_config.system): wrap chosen worker groups in nsys / rocprof-sys /
# msprof / py-spy, and finish them cleanly. docs/system-profiling.md.
# ------------------------------------------------------------------------------------------------


def system_runtime_env(cfg: Any, group: str, rank: int, aliases: Sequence[str] = (), **kwargs: Any) -> dict[str, Any] | None:
    """The per-actor runtime_env that wraps rank `rank` of worker group `group` (or None: not
    wrapped). `Worker.options(runtime_env=env).remote(...)`; see runtime/system_settings.py."""
    from mindspeed_profiler.runtime.system_settings import worker_runtime_env

    return worker_runtime_env(cfg, group, rank, aliases=aliases, **kwargs)


def system_worker_status(actors: Sequence[Any], timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """How each actor was launched: {group, rank, status "wrapped" | "unwrapped", reason, host,
    node_id, meta, report, ...} ({} for an actor that is not wrapped). Asked inside the actor through
    Ray's `__ray_call__`, so any actor class works; an actor that does not answer gets status "error"."""
    from mindspeed_profiler.system.worker import worker_status

    out = call_group([_RayCall(a) for a in actors], "status", worker_status, timeout_s=timeout_s)
    return [e["result"] if e["status"] == "ok" else {"status": "error", "reason": e.get("error")} for e in out]


class _RayCall:
    """`actor.__ray_call__` under a name call_group can look up (`status`)."""

    def __init__(self, actor: Any):
        self.status = actor.__ray_call__


def shutdown_system_workers(actors: Sequence[Any], statuses: Sequence[dict[str, Any]] | None = None,
                            timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """Shut wrapped actors down gracefully and wait, bounded, until each one's report is complete.

    System profilers write their report only when the wrapped process exits normally: `ray.kill`
    loses it. This ends each actor with `__ray_terminate__` (pending calls finish first), then waits
    until the watcher marked each worker's metadata "complete" or "incomplete", or `timeout_s`
    passes ("timeout"): on the driver's node by reading the file, on another node with a zero-CPU
    Ray task pinned there (no shared filesystem needed).
    `statuses`: from system_worker_status (asked here when not given). Returns one entry per actor:
    the status merged with its final metadata. Never raises."""
    import ray

    statuses = list(statuses) if statuses is not None else system_worker_status(actors)
    refs = []
    for actor, st in zip(actors, statuses):
        if st.get("meta"):
            try:
                refs.append(actor.__ray_terminate__.remote())
            except Exception:
                pass
    if refs:
        try:
            ray.wait(refs, num_returns=len(refs), timeout=timeout_s)  # they end as "actor died": the intended exit
        except Exception:
            pass
    by_node: dict[Any, list[int]] = {}
    for i, st in enumerate(statuses):
        if st.get("meta"):
            by_node.setdefault(st.get("node_id"), []).append(i)
    finished: list[dict[str, Any]] = [dict(st) for st in statuses]
    here = _driver_node_id()
    waits = []
    for node_id, idx in by_node.items():
        paths = [statuses[i]["meta"] for i in idx]
        # the driver's own node is read here; another node's files are read there (no shared filesystem needed)
        try:
            waits.append((idx, paths if node_id == here else _wait_task(node_id).remote(paths, timeout_s)))
        except Exception as exc:
            waits.append((idx, exc))
    from mindspeed_profiler.system.finish import wait_for_reports

    for idx, job in waits:
        try:
            if isinstance(job, Exception):
                raise job
            metas = wait_for_reports(job, timeout_s) if isinstance(job, list) else ray.get(job, timeout=timeout_s + 60)
        except Exception as exc:
            metas = [{"status": "timeout", "reason": f"could not wait on the node: {type(exc).__name__}: {exc}"}] * len(idx)
        for i, meta in zip(idx, metas):
            launched = finished[i].get("status")
            finished[i].update({k: v for k, v in meta.items() if v is not None or k not in finished[i]})
            if launched == "unwrapped":
                finished[i]["status"] = "unwrapped"
    return finished


def _driver_node_id() -> Any:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:
        return None


def _wait_task(node_id: Any) -> Any:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from mindspeed_profiler.system.finish import wait_for_reports

    task = ray.remote(num_cpus=0, max_retries=0)(wait_for_reports)
    if node_id is None:
        return task
    return task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False))


class SystemCapture:
    """The driver's side of process-level capture for one training run (a no-op unless
    `profiler_config.system` is enabled):

        capture = SystemCapture(cfg)
        env = capture.runtime_env("actor", rank)                 # None: this group is not wrapped
        actor = Worker.options(**({"runtime_env": env} if env else {})).remote(...)
        capture.add("actor", [actor, ...])                       # ranks in order
        capture.check()                                          # once the actors are up: names any missing tool
        ...                                                      # train
        capture.finish(timeout_s=120)                            # graceful exit, reports complete, run.json

    Failures (a tool missing on a node, a report that did not complete) are logged once on the
    driver and written into run.json's `system` entry; training is never stopped by them."""

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.groups: dict[str, tuple[str, ...]] = {}   # every group seen: name -> aliases
        self.actors: list[tuple[str, int, Any]] = []   # wrapped ones: (group, rank, handle)
        self.statuses: dict[int, dict[str, Any]] = {}  # index in actors -> status
        self.finished: list[dict[str, Any]] | None = None

    @property
    def enabled(self) -> bool:
        s = getattr(self.cfg, "system", None)
        return bool(s is not None and s.enabled)

    def runtime_env(self, group: str, rank: int, aliases: Sequence[str] = (), **kwargs: Any) -> dict[str, Any] | None:
        self.groups.setdefault(group, tuple(aliases))
        return system_runtime_env(self.cfg, group, rank, aliases, **kwargs) if self.enabled else None

    def add(self, group: str, actors: Sequence[Any], aliases: Sequence[str] = ()) -> None:
        from mindspeed_profiler.runtime.system_settings import wrapped

        self.groups.setdefault(group, tuple(aliases))
        if self.enabled and wrapped(self.cfg, group, self.groups[group]):
            self.actors += [(group, rank, a) for rank, a in enumerate(actors)]

    def check(self, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """Ask the wrapped actors not asked yet how they were launched; log and record failures."""
        todo = [i for i in range(len(self.actors)) if i not in self.statuses]
        if todo:
            for i, st in zip(todo, system_worker_status([self.actors[i][2] for i in todo], timeout_s)):
                group, rank, _ = self.actors[i]
                self.statuses[i] = dict(st, group=st.get("group", group), rank=st.get("rank", rank),
                                        backend=self.cfg.system.backend)
            self._report()
        return [self.statuses[i] for i in range(len(self.actors))]

    def finish(self, timeout_s: float = 120.0) -> list[dict[str, Any]]:
        """Gracefully end the wrapped actors and wait for their reports (see shutdown_system_workers)."""
        if self.finished is not None or not self.enabled:
            return self.finished or []
        statuses = self.check()
        self.finished = shutdown_system_workers([a for _, _, a in self.actors], statuses, timeout_s) if self.actors else []
        self._report()  # now every group of the run is known: names in worker_groups that matched none are said
        return self.finished

    def _report(self) -> None:
        from mindspeed_profiler.core.warn import warn_once
        from mindspeed_profiler.system.record import failures, record_in_run
        from mindspeed_profiler.runtime.system_settings import unmatched_groups

        workers = self.finished if self.finished is not None else [self.statuses[i] for i in sorted(self.statuses)]
        for line in failures(workers):
            warn_once(("system-capture", line), "process-level capture: %s", line)
        for name in unmatched_groups(self.cfg.system.worker_groups, self.groups) if self.finished is not None else ():
            warn_once(("system-group", name), "process-level capture: system.worker_groups lists %r, but no worker group "
                      "of this run has that name (groups: %s): nothing was wrapped for it", name,
                      ", ".join(f"{g} ({', '.join(a)})" if a else g for g, a in self.groups.items()))
        record_in_run(self.cfg.integrated.profile_save_path, self.cfg.system, workers)
