"""The asynchronous mode of the GRPO example (`grpo.mode=async`, docs/async.md), on the Ray driver.

A rollout group (RolloutWorker) generates batch k+1 while the actor group trains on batch k. Batch
b is trained by update b, on the policy of version b - 1 (the updates before it); the rollout may
start it with weights of version v only when (b - 1) - v <= `grpo.max_staleness` (0: no overlap,
on-policy). After each update actor rank 0 gathers its weights and the rollout loads them (queued
after the generation it is running: Ray runs one actor's calls in order), in three phases
(async_workers.py). Per iteration the driver writes one row of `async/*` metrics
(mindspeed_profiler/metrics/async_rl.py) to `<save>/metrics/driver_rank0.jsonl`, once every
rollout call that ran inside the iteration has returned its times.
"""
from __future__ import annotations

import json
from pathlib import Path
import time
from typing import Any

from examples.common import task, vllm_rollout
from examples.common.async_workers import CAT_ASYNC, RolloutWorker
from mindspeed_profiler.core import formats
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.metrics.async_rl import async_row
from mindspeed_profiler.tracing import trace_span

MODES = ("sync", "async")
ASYNC_DEFAULTS = {"mode": "sync", "max_staleness": 1, "rollout_delay_ms": 0, "update_delay_ms": 0}
MAX_STALENESS = 1000
MAX_DELAY_MS = 600_000


def check_async(settings: dict[str, Any], section: str) -> list[str]:
    """The async settings' problems, all at once (an empty list: fine): `mode` (sync | async),
    `max_staleness` (a whole number >= 0), `rollout_delay_ms` / `update_delay_ms` (ms >= 0)."""
    problems = []
    mode = settings.get("mode", ASYNC_DEFAULTS["mode"])
    if mode not in MODES:
        problems.append(f"{section}.mode={mode!r} must be one of {', '.join(MODES)}")
    s = settings.get("max_staleness", ASYNC_DEFAULTS["max_staleness"])
    if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= MAX_STALENESS:
        problems.append(f"{section}.max_staleness={s!r} must be a whole number from 0 to {MAX_STALENESS} "
                        "(policy versions a trained sample may lag; 0: on-policy)")
    problems += [p for p in (delay_problem(settings, section, k) for k in ("rollout_delay_ms", "update_delay_ms")) if p]
    return problems


def delay_problem(settings: dict[str, Any], section: str, key: str) -> str | None:
    """A delay knob's problem (`<section>.<key>`, absent: 0): milliseconds from 0 to MAX_DELAY_MS."""
    v = settings.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_DELAY_MS:
        return f"{section}.{key}={v!r} must be a number of milliseconds from 0 to {MAX_DELAY_MS}"
    return None


def is_async(settings: dict[str, Any]) -> bool:
    return settings.get("mode", ASYNC_DEFAULTS["mode"]) == "async"


class DriverRows:
    """The driver's metrics file (`<save>/metrics/driver_rank0.jsonl`, a tracker file to the
    analysis): one row per iteration; the run's first row starts the file afresh (a rerun into the
    same save path). A file that cannot be written is a warning: training goes on."""

    def __init__(self, path: Path | None):
        self.path = path
        self._fresh = True

    def write(self, row: dict) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w" if self._fresh else "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row, separators=(",", ":")) + "\n")
            self._fresh = False
        except OSError as exc:
            warn_once(("driver-metrics", str(self.path)), "could not write the driver's metrics to %s: %s: %s; "
                      "training goes on", self.path, type(exc).__name__, exc)


class Rows:
    """The iterations' async rows waiting for the rollout's times, written in order once known."""

    def __init__(self, path: Path | None, max_staleness: int):
        self.path, self.max_staleness = path, max_staleness
        self.out = DriverRows(path)
        self.gens: dict[int, Any] = {}       # batch -> its generate_batch ObjectRef
        self.loads: dict[int, Any] = {}      # version -> its load_weights ObjectRef
        self.waiting: list[dict] = []        # per iteration: what its row is made of
        self._gen_end: dict[int, float] = {}    # batch -> when its generation ended (once known)
        self._load_end: dict[int, float] = {}   # version -> when its load ended
        self._last_end = float("-inf")

    def add(self, **parts: Any) -> None:
        # every rollout call submitted so far: those that may have run inside the iteration
        parts.update(gens=dict(self.gens), loads=dict(self.loads))
        parts["needs"] = list(self.gens.values()) + list(self.loads.values())
        self.waiting.append(parts)

    def flush(self, cluster: Any, wait: bool) -> list[dict]:
        """Write the rows whose rollout calls have all returned (all of them when `wait`)."""
        import ray

        out = []
        while self.waiting:
            parts = self.waiting[0]
            if not wait:
                ready, _ = ray.wait(parts["needs"], num_returns=len(parts["needs"]), timeout=0)
                if len(ready) < len(parts["needs"]):
                    break
            self.waiting.pop(0)
            out.append(self._row(cluster, parts))
        self._forget(self.waiting[0]["window"][0] if self.waiting else None)
        return out

    def _forget(self, before: float | None) -> None:
        """Drop the calls that ended before `before` (the oldest unwritten window's start; None: the
        last written window's end): no later row needs them, and their batches leave the object store."""
        cut = before if before is not None else self._last_end
        for calls, ends in ((self.gens, self._gen_end), (self.loads, self._load_end)):
            for key in [k for k in calls if ends.get(k, float("inf")) <= cut]:
                del calls[key]

    def _row(self, cluster: Any, p: dict) -> dict:
        gens = cluster.get(list(p["gens"].values()))
        loads = cluster.get(list(p["loads"].values()))
        self._gen_end.update((b, g["end"]) for b, g in zip(p["gens"], gens))
        self._load_end.update((v, ld["load"][1]) for v, ld in zip(p["loads"], loads))
        self._last_end = p["window"][1]
        busy = [(g["start"], g["end"]) for g in gens] + [span for ld in loads for span in (ld["transfer"], ld["load"])]
        load = cluster.get(p["loads"][p["version"]])
        sync = {phase: end - start for phase, (start, end) in p["phases"].items()}   # gather (and convert)
        sync.update(transfer=load["transfer"][1] - load["transfer"][0], load=load["load"][1] - load["load"][0])
        row = {"iteration": p["iteration"], "timing_s/iteration": p["window"][1] - p["window"][0],
               **async_row(p["window"], p["wait_s"], busy, sync, p["exposed_s"], p["version"] - 1,
                           p["sample_versions"], self.max_staleness)}
        self.out.write(row)
        return row


def start_rollout(cluster: Any, model: dict, seed: int, settings: dict[str, Any]) -> Any:
    """The rollout group apart from the actors (the async mode's, and a vLLM rollout's in either
    mode): one rank, a Megatron model (its own torch.distributed group of one) or, with
    `<trainer>.rollout=vllm`, a vLLM engine (vllm_rollout.py)."""
    if vllm_rollout.is_vllm(settings):
        return cluster.group(vllm_rollout.VllmRolloutWorker, 1, model, seed=seed)[0]
    return cluster.group(RolloutWorker, 1, model, seed=seed)[0]


def run_iterations(trainer: Any, cluster: Any, actors: list[Any], ref: Any, rollout: Any, settings: dict[str, Any],
                   cfg: Any) -> list[dict[str, Any]]:
    """The async loop (the module docstring). Returns the per-iteration rows (printed as they end)."""
    g = settings
    n_iter, bound = int(g["iterations"]), int(g.get("max_staleness", ASYNC_DEFAULTS["max_staleness"]))
    rows = Rows(tracker_path(cfg), bound)
    sent, next_batch, history = 0, 1, []
    pending: dict[int, Any] = {}   # batch -> its generation, until trained (rows.gens may forget it sooner)
    async_rows: dict[int, dict] = {}
    for it in range(1, n_iter + 1):
        t0 = time.time()
        with trace_span("iteration", cat="iteration", args={"iteration": it}):
            # every batch the bound allows with the weights sent so far (Ray runs them after those loads)
            while next_batch <= n_iter and (next_batch - 1) - sent <= bound:
                prompts = task.make_prompts(int(g["prompts_per_iteration"]), int(g["prompt_len"]), trainer.gen)
                pending[next_batch] = rows.gens[next_batch] = rollout.generate_batch.remote(
                    prompts, g["samples_per_prompt"], g["response_len"], g["temperature"], next_batch)
                next_batch += 1
            tw = time.time()
            with trace_span("wait_rollout", cat=CAT_ASYNC, args={"iteration": it}):
                batch = cluster.get(pending.pop(it))
            wait_s = time.time() - tw
            row = trainer.train_on(cluster, actors, ref, it, batch["tokens"], batch["lengths"])
            cluster.get([w.end_iteration.remote() for w in actors + [ref]])
            ts = time.time()
            with trace_span("weight_sync", cat=CAT_ASYNC, args={"policy_version": it}):
                gathered = cluster.get(actors[0].gather_weights.remote(it, hf=vllm_rollout.is_vllm(g)))
                rows.loads[it] = rollout.load_weights.remote(gathered["ref"], it)
            exposed_s = time.time() - ts
            sent = it
        t1 = time.time()
        rows.add(iteration=it, window=(t0, t1), wait_s=wait_s, exposed_s=exposed_s, version=it,
                 phases=gathered["phases"], sample_versions=[batch["policy_version"]] * len(batch["lengths"]))
        for r in rows.flush(cluster, wait=False):
            async_rows[r["iteration"]] = r
        row = {"iteration": it, **row, "version_gap": it - 1 - batch["policy_version"], "wait_s": wait_s,
               "seconds": t1 - t0}
        history.append(row)
        print(f"iter {it:3d}  {trainer.format_row(row)}  gap {row['version_gap']}  wait {wait_s:.2f}s  "
              f"{row['seconds']:.2f}s", flush=True)
    for r in rows.flush(cluster, wait=True):
        async_rows[r["iteration"]] = r
    for row in history:
        row["async"] = async_rows.get(row["iteration"], {})
    return history


def tracker_path(cfg: Any) -> Path | None:
    """The driver's metrics file (a tracker file to the analysis), when `metrics.enable`."""
    if not cfg.metrics.enable:
        return None
    out = cfg.metrics.output_dir or str(Path(cfg.integrated.profile_save_path) / formats.METRICS_DIR)
    return Path(out) / formats.metrics_file_name("driver", 0)
