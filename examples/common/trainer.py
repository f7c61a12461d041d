"""The example trainers' shared loop, run on the Ray driver: Ray cluster, worker groups, the
iteration loop under the tracer, and the post-run merge and analysis."""
from __future__ import annotations

import os
from pathlib import Path
import time
from typing import Any, Sequence

import yaml

from examples.common import async_loop, vllm_rollout
from examples.common.mcore_cpu import ModelShape
from mindspeed_profiler import load_config, start_run
from mindspeed_profiler.config import ProfilerConfig
from mindspeed_profiler.core.formats import RUN_ID_ENV
from mindspeed_profiler.core import ray_local
from mindspeed_profiler.tracing import init_tracer, merge_timeline, shutdown_tracer, trace_span

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


def check_straggler(settings: dict[str, Any], ranks: int, section: str) -> None:
    """`straggler_rank` (an actor rank, or null: off) and `straggler_ms` (>= 0): the delay before that
    rank's gradient all-reduce (workers.PolicyWorker._all_reduce_grads)."""
    rank = settings.get("straggler_rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < ranks):
        raise ValueError(f"{section}.straggler_rank={rank!r} must be an actor rank from 0 to {ranks - 1} "
                         f"({section}.actor_ranks={ranks}), or null (no straggler)")
    problem = async_loop.delay_problem(settings, section, "straggler_ms")
    if problem:
        raise ValueError(problem)


LONG_TAIL_MAX_TOKENS = 4096   # the model gets a position per token: a bound on its size
LONG_TAIL_TOKENS = 64         # long_tail_tokens when a config does not say
SFT_MAX_STEPS = 10_000
# the generation settings a trainer section may leave out: their defaults (off)
GENERATION_DEFAULTS = {"long_tail_every": 0, "long_tail_tokens": LONG_TAIL_TOKENS, "sft_steps": 0}


def _check_whole(settings: dict[str, Any], section: str, key: str, lo: int, hi: int, meaning: str) -> None:
    value = settings.get(key, GENERATION_DEFAULTS[key])
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{section}.{key}={value!r} must be a whole number from {lo} to {hi} ({meaning})")


def check_generation(settings: dict[str, Any], section: str) -> None:
    """`long_tail_every` (K; 0: off) and `long_tail_tokens` (T): one sample in K of each actor rank's
    batch ignores the end token and runs to T tokens (generation.plan); `sft_steps`: the actors'
    supervised warm start (workers.ActorWorker.warm_start; 0: none)."""
    _check_whole(settings, section, "long_tail_every", 0, 1_000_000,
                 f"one sample in that many runs to {section}.long_tail_tokens; 0: off")
    _check_whole(settings, section, "long_tail_tokens", 1, LONG_TAIL_MAX_TOKENS, "the long-tail samples' length")
    _check_whole(settings, section, "sft_steps", 0, SFT_MAX_STEPS, "supervised steps before training; 0: none")


def oom_at_problem(settings: dict[str, Any], section: str) -> str | None:
    """`oom_at` (an iteration from 1 to `iterations`, or null: off): the reference runs out of device
    memory in its log-prob stage of that iteration (workers.PolicyWorker.compute_log_prob)."""
    at, last = settings.get("oom_at"), settings.get("iterations")
    if at is not None and (isinstance(at, bool) or not isinstance(at, int) or not isinstance(last, int) or not 1 <= at <= last):
        return (f"{section}.oom_at={at!r} must be an iteration from 1 to {section}.iterations={last!r}, or null "
                "(no out-of-memory error made on purpose)")
    return None


def check_even_shards(items: int, what: str, ranks: int, section: str) -> None:
    """Each data-parallel actor rank must get an equal, non-empty shard: a rank without one never joins
    the gradient all-reduce (the others wait on it), and unequal shards bias the averaged gradient."""
    if ranks < 1 or items < ranks or items % ranks:
        raise ValueError(f"{section}.{what}={items} must be a positive multiple of {section}.actor_ranks={ranks} "
                         f"(each actor rank takes an equal shard of the batch)")


# the old names of what moved to the library (tests and users' scripts may import them from here)
RAY_START_ATTEMPTS = ray_local.RAY_START_ATTEMPTS
_init_ray = ray_local.init_local_ray


class RayCluster:
    """A Ray connection for one training run: local by default, RAY_ADDRESS for a real cluster.

    Worker groups listed in `profiler_config.system.worker_groups` run wrapped in the system profiler
    (process-level capture); they are shut down gracefully at exit so that their reports are written."""

    SYSTEM_FINISH_TIMEOUT_S = float(os.environ.get("EXAMPLE_SYSTEM_FINISH_TIMEOUT_S", "300"))

    def __init__(self, cfg: ProfilerConfig, num_cpus: int | None = None):
        from mindspeed_profiler.integrations.ray import SystemCapture

        self.cfg = cfg
        self.num_cpus = num_cpus
        self._handles: list[Any] = []
        self.system = SystemCapture(cfg)

    def __enter__(self) -> "RayCluster":
        import ray

        env_vars = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": _QUIET_WARNINGS}
        if self.cfg.run_id:  # every worker process of this run knows the run's id (also in its config)
            env_vars[RUN_ID_ENV] = self.cfg.run_id
        kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=True)
        address = os.environ.get("RAY_ADDRESS")
        if address:
            # a real cluster: ship this checkout (examples + mindspeed_profiler) to every node; use an
            # absolute, shared profile_save_path so that all captures land in one place
            kwargs["address"] = address
            kwargs["runtime_env"] = {"working_dir": str(REPO_ROOT), "env_vars": env_vars,
                                     "excludes": [".git", ".venv*", "profiler_data*", "*.egg-info", "__pycache__"]}
        else:
            # a cluster of our own, never one that happens to run on this machine (ray.init() would
            # join it, and refuse num_cpus)
            kwargs["address"] = "local"
            ray_local.prepare_local_cluster_env()   # Ray's metrics export off (core/ray_local.py says why)
            kwargs["num_cpus"] = self.num_cpus or max(2, os.cpu_count() or 2)
            kwargs["runtime_env"] = {"env_vars": dict(env_vars, PYTHONPATH=_pythonpath())}
        ray_local.init_local_ray(ray, kwargs, local=not address)
        return self

    def __exit__(self, *exc: Any) -> None:
        import ray

        try:  # wrapped workers exit gracefully first: a killed one loses its system profiler report
            self.system.finish(timeout_s=self.SYSTEM_FINISH_TIMEOUT_S)
        except Exception as err:
            print(f"process-level capture: finishing the wrapped workers failed: {type(err).__name__}: {err}", flush=True)
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
        """Start `size` ranks of a worker class as Ray actors sharing one torch.distributed group.

        Rank 0 opens the rendezvous store on its own node (the group may span nodes; the store holds
        its port from then on, so nothing can take it before the group meets), then every rank joins
        it and builds its model, profiler and tracer. The group's name for `system.worker_groups` is
        the workers' `role` (actor, reference); the RLinf-style class name (ActorGroup,
        ReferenceGroup) is accepted too."""
        import ray

        group = worker_cls.role
        aliases = (getattr(worker_cls, "group", None) or group.title().replace("_", "") + "Group",)
        remote_cls = ray.remote(worker_cls)
        handles = []
        for rank in range(size):
            env = self.system.runtime_env(group, rank, aliases)  # None unless the group is wrapped
            options = dict(num_cpus=0.5, **({"runtime_env": env} if env else {}))
            handles.append(remote_cls.options(**options).remote(self.cfg.to_dict(), rank, size, model, seed))
        self._handles += handles
        self.system.add(group, handles, aliases)
        addr, port = self.get(handles[0].rendezvous.remote())
        self.get([h.setup.remote(addr, port) for h in handles])
        self.system.check()  # a tool missing on a node: said once here and in run.json; the worker runs unwrapped
        return handles

    def sync_clocks(self) -> None:
        """Align every worker's tracer clock to the driver's (when the tracer is on)."""
        if not self.cfg.tracer.enable or not self.cfg.tracer.clock_sync:
            return
        from mindspeed_profiler.tracing.ray_support import sync_actor_clocks

        sync_actor_clocks(self._handles, rounds=self.cfg.tracer.clock_sync_rounds)

    def shutdown_workers(self, timeout_s: float = 120.0) -> list[Any]:
        """Stop every worker's profiler and tracer (exporting open captures). Best effort: a dead
        worker is skipped, so a failed run still keeps what the others recorded."""
        import ray

        refs = [h.shutdown.remote() for h in self._handles]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        out = []
        for ref in done:
            try:
                out.append(ray.get(ref, timeout=1))
            except Exception as exc:  # the worker died: its error was already reported by Ray
                out.append(exc)
        return out


# Megatron-core's notes that a CPU machine lacks Apex / Transformer Engine, printed by every worker:
# known and harmless here, they would bury the example's own output (other warnings still show).
_QUIET_WARNINGS = ",".join(f"ignore:{m}:UserWarning" for m in (
    "Transformer Engine and Apex are not installed", "Apex is not installed", "full scope is deprecated"))


def _pythonpath() -> str:
    parts = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(parts))


def analyse_and_merge(cfg: ProfilerConfig, analyse: bool) -> dict[str, Any]:
    """After a run: merge the timeline (Perfetto-ready) and run the offline analysis."""
    out: dict[str, Any] = {}
    if cfg.tracer.enable:
        out["timeline"] = str(merge_timeline(cfg))  # where tracer.output_dir says, gzip if tracer.gzip
        print(f"timeline: {out['timeline']} (open it in https://ui.perfetto.dev)")
    wrote = cfg.integrated.profile or cfg.integrated.dynamic or cfg.tracer.enable or (cfg.system is not None and cfg.system.enabled)
    if analyse and wrote:  # anything on disk: captures, on-demand captures, the timeline, system reports
        from mindspeed_profiler.cli import main as cli_main

        out["analyse_rc"] = cli_main(["analyse", cfg.integrated.profile_save_path])
    return out


class Trainer:
    """One RL algorithm's driver loop body. Subclasses set the class attributes and `iteration`."""

    section: str = ""            # the trainer's YAML section (grpo, dpo)
    batch_key: str = ""          # the setting that the actor ranks share evenly
    actor_cls: type
    ref_cls: type

    def __init__(self, settings: dict[str, Any]):
        self.s = settings
        self.rollout: list[Any] = []   # the vLLM rollout group (`rollout=vllm`, sync mode): its one rank

    def iteration(self, cluster: RayCluster, actors: list[Any], ref: Any, it: int) -> dict[str, float]:
        raise NotImplementedError

    def generate(self, cluster: RayCluster, actors: list[Any], prompts: Any, n_samples: int,
                 it: int) -> list[tuple[Any, Any]]:
        """`n_samples` responses per prompt in iteration `it`, as (tokens, lengths) shards: each actor
        rank generates its share of the prompts (recording `it` as the samples' version, as before),
        or the vLLM rollout the whole batch (`rollout=vllm`: it records the version it holds)."""
        s = self.s
        if self.rollout:
            return [cluster.get(self.rollout[0].generate.remote(prompts, n_samples, s["response_len"], s["temperature"]))]
        return cluster.get([a.generate.remote(p, n_samples, s["response_len"], s["temperature"], it)
                            for a, p in zip(actors, prompts.chunk(len(actors)))])

    def format_row(self, row: dict[str, float]) -> str:
        return "  ".join(f"{k} {v:.4f}" for k, v in row.items() if k not in ("iteration", "seconds"))

    def summary(self, history: list[dict[str, float]]) -> str:
        return ""


def _sync_iterations(trainer: Trainer, cluster: RayCluster, actors: list[Any], ref: Any, settings: dict[str, Any],
                     cfg: ProfilerConfig) -> list[dict[str, float]]:
    """The synchronous loop: each iteration generates, then trains (trainer.iteration); with a vLLM
    rollout, the updated weights are then synced into its engine (the driver's metrics row says
    how long each phase took)."""
    history = []
    rows = async_loop.DriverRows(async_loop.tracker_path(cfg)) if trainer.rollout else None
    for it in range(1, int(settings["iterations"]) + 1):
        t0 = time.perf_counter()
        with trace_span("iteration", cat="iteration", args={"iteration": it}):
            row = trainer.iteration(cluster, actors, ref, it)
            sync = vllm_rollout.sync_weights(cluster, actors[0], trainer.rollout[0], it) if trainer.rollout else {}
            cluster.get([w.end_iteration.remote() for w in actors + [ref] + trainer.rollout])
        if rows is not None:
            rows.write({"iteration": it, "timing_s/iteration": time.perf_counter() - t0, **sync})
        row = {"iteration": it, **row, "seconds": time.perf_counter() - t0}
        history.append(row)
        print(f"iter {it:3d}  {trainer.format_row(row)}  {row['seconds']:.2f}s", flush=True)
    return history


def worker_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """What every worker needs of a trainer's settings: the model, the sequence lengths, the warm
    start, the straggler and the long tail made on purpose (if any), the vLLM rollout's settings."""
    return dict(vllm_rollout.worker_model(settings), prompt_len=settings["prompt_len"],
                response_len=settings["response_len"], straggler_rank=settings.get("straggler_rank"),
                straggler_ms=settings.get("straggler_ms", 0), log_prob_delay_ms=settings.get("log_prob_delay_ms", 0),
                oom_at=settings.get("oom_at"),
                **{k: settings.get(k, v) for k, v in GENERATION_DEFAULTS.items()},
                rollout_delay_ms=settings.get("rollout_delay_ms", 0), update_delay_ms=settings.get("update_delay_ms", 0),
                vllm=vllm_rollout.vllm_settings(settings))


def run_trainer(trainer_cls: type[Trainer], config_path: str | Path, overrides: Sequence[str] = (),
                analyse: bool = True) -> dict[str, Any]:
    """Validate the config, start the worker groups, run the iterations under the tracer, stop the
    profilers, merge the timeline and analyse. Returns per-iteration stats and output locations."""
    settings, profiler_overrides = split_overrides(config_path, trainer_cls.section, overrides)
    cfg = load_config(config_path, profiler_overrides)  # config errors fail here, before any worker starts
    cfg = start_run(cfg)  # this run's id, carried to the workers in the config they receive
    n_actors = int(settings["actor_ranks"])
    check_even_shards(int(settings[trainer_cls.batch_key]), trainer_cls.batch_key, n_actors, trainer_cls.section)
    check_straggler(settings, n_actors, trainer_cls.section)
    check_generation(settings, trainer_cls.section)
    problems = async_loop.check_async(settings, trainer_cls.section)
    # log_prob_delay_ms: the delay inside every log-prob stage (workers.PolicyWorker.compute_log_prob)
    problems += filter(None, [async_loop.delay_problem(settings, trainer_cls.section, "log_prob_delay_ms"),
                              oom_at_problem(settings, trainer_cls.section)])
    if async_loop.is_async(settings) and getattr(trainer_cls, "async_actor_cls", None) is None:
        problems.append(f"{trainer_cls.section}.mode=async: this trainer has no asynchronous mode; allowed: sync")
    problems += vllm_rollout.check_rollout(settings, trainer_cls.section)
    try:   # the model every worker builds, checked here (a worker would fail later, with less to say)
        ModelShape.from_settings(vllm_rollout.worker_model(settings), where=f"{trainer_cls.section}.model")
    except ValueError as exc:
        problems.append(str(exc))
    if problems:
        raise ValueError("; ".join(problems))
    mode_async, on_vllm = async_loop.is_async(settings), vllm_rollout.is_vllm(settings)
    model = worker_settings(settings)
    trainer = trainer_cls(settings)
    history: list[dict[str, float]] = []
    wall = 0.0
    with RayCluster(cfg) as cluster:
        init_tracer(cfg, role="driver", rank=0)
        try:
            actors = cluster.group(trainer.async_actor_cls if mode_async else trainer.actor_cls, n_actors, model,
                                   seed=settings["seed"])
            ref = cluster.group(trainer.ref_cls, 1, model, seed=settings["seed"])[0]
            rollout = [async_loop.start_rollout(cluster, model, settings["seed"], settings)] if mode_async or on_vllm else []
            cluster.sync_clocks()
            # the reference, every actor rank (and the rollout) start as a copy of actor rank 0's initial
            # (warm-started) policy: a vLLM rollout builds its engine on it (version 0)
            weights = actors[0].get_weights.remote()
            cluster.get([w.set_weights.remote(weights) for w in actors[1:] + [ref] + ([] if on_vllm else rollout)])
            if on_vllm:
                vllm_rollout.start_engine(cluster, actors[0], rollout[0])
                trainer.rollout = [] if mode_async else rollout
            t_start = time.perf_counter()
            if mode_async:
                history = async_loop.run_iterations(trainer, cluster, actors, ref, rollout[0], settings=settings, cfg=cfg)
            else:
                history = _sync_iterations(trainer, cluster, actors, ref, settings=settings, cfg=cfg)
            wall = time.perf_counter() - t_start
        finally:
            cluster.shutdown_workers()  # export open captures even when the run failed
            shutdown_tracer()
    out: dict[str, Any] = {"history": history, "train_seconds": wall,
                           "profile_save_path": cfg.integrated.profile_save_path}
    out.update(analyse_and_merge(cfg, analyse))
    return out


def trainer_main(trainer_cls: type[Trainer], doc: str, default_config: Path, argv: Sequence[str] | None = None) -> int:
    """The command line shared by the example trainers."""
    import argparse

    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(default_config))
    p.add_argument("--no-analyse", action="store_true", help="skip the offline analysis after training")
    p.add_argument("overrides", nargs="*", help=f"dotted key=value (profiler_config.* or {trainer_cls.section}.*)")
    args = p.parse_intermixed_args(argv)  # overrides may come before or after the options
    result = run_trainer(trainer_cls, args.config, args.overrides, analyse=not args.no_analyse)
    print(f"{trainer_cls(dict()).summary(result['history'])} in {result['train_seconds']:.1f}s; "
          f"profiling data in {result['profile_save_path']}")
    return 0
