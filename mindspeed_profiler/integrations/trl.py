"""TRL (GRPOTrainer, DPOTrainer): one line in a TRL script profiles its training (docs/trl.md).

    from mindspeed_profiler.integrations.trl import profile_trainer
    trainer = GRPOTrainer(...)
    profile_trainer(trainer, "profiler.yaml")   # our profiler_config (a YAML path, a dict, a DictConfig)
    trainer.train()

`profile_trainer` adds a `ProfilerCallback` to the trainer and marks TRL's stages from its own
methods (integrations/trl_stages.py). The callback alone (`trainer.add_callback(ProfilerCallback(cfg))`)
gives the iterations, captures of `stage: all`, the metrics and the timeline, but no stages.

What it drives, on each process of the run (its rank: TRL's `args.process_index`):

- the profiler: `start` at train-begin (iteration = TRL's global step + 1), `step` at each
  step-end with the step's tokens and samples, `stop` at train-end; a TRL step (one optimizer
  step) is an iteration;
- the stages (generation, rewards, reference and policy log-probs, the update), captured as the
  config's `stage` selects;
- the metrics tracker (`metrics.enable`): its keys also go into TRL's own logs (`report_to`:
  wandb, TensorBoard, ...) beside TRL's names (`loss`, `reward`, `kl`, ...);
- per-sample records of GRPO's generations (vLLM RequestOutputs in colocate mode, the
  generation call's own timing otherwise);
- the tracer (`tracer.enable`): its spans, and the merged timeline written at train-end by the
  main process.

Nothing here stops training: a failure is a warning and the step goes on.
"""
from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from mindspeed_profiler.config import ProfilerConfig, load_config
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.integrations.trl_stages import STAGE_METHODS, TRL_RELEASE, TRL_STAGES, StageHooks
from mindspeed_profiler.runtime.profiler import IntegratedProfiler

__all__ = ["ProfilerCallback", "profile_trainer", "STAGE_METHODS", "TRL_STAGES", "TRL_RELEASE"]

DEFAULT_ROLE = "actor"   # a TRL process trains and generates: the actor


def _as_config(config: Any) -> ProfilerConfig:
    return config if isinstance(config, ProfilerConfig) else load_config(config)


class ProfilerCallback(TrainerCallback):
    """A TRL / transformers callback running our profiler over `trainer.train()`.

    `config`: our profiler_config (a ProfilerConfig, a YAML path, a dict or a DictConfig; a whole
    training YAML with a `profiler_config` block too), loaded (and checked) here, before training.
    `role`: the profiler's role. `trainer`: the trainer, to mark its stages (profile_trainer passes
    it). `record_samples`: per-sample records of GRPO's generations."""

    def __init__(self, config: Any, role: str = DEFAULT_ROLE, *, trainer: Any = None, record_samples: bool = True):
        self.config = _as_config(config)
        self.role = role
        self.trainer = trainer
        self.record_samples = record_samples
        self.profiler: IntegratedProfiler | None = None
        self.hooks: StageHooks | None = None
        self.notes: list[str] = []
        self._tracer = False

    # ------------------------------------------------------------------ TrainerCallback events

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        rank, world = int(getattr(args, "process_index", 0)), int(getattr(args, "world_size", 1))
        try:
            if self.config.tracer.enable:
                from mindspeed_profiler.tracing.api import init_tracer

                self._tracer = init_tracer(self.config, role=self.role, rank=rank) is not None
            self.profiler = IntegratedProfiler(self.config, self.role, rank=rank, world_size=world)
            if model is not None:
                self.profiler.set_model(model)
        except Exception as exc:
            warn_once(("trl", "begin"), "TRL integration: the profiler could not start (%s: %s); training goes on",
                      type(exc).__name__, exc)
            self.profiler = None
            return
        if self.trainer is not None:
            self.hooks = StageHooks(self.trainer, self.profiler, self.record_samples)
            self.notes = self.hooks.install()
        self.profiler.start(iteration=int(state.global_step) + 1)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.profiler is None:
            return
        tokens = samples = None
        if self.hooks is not None:
            self.hooks.end_step()
            tokens, samples = self.hooks.taken()
        self.profiler.step(tokens=tokens or None, samples=samples or None)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        """Our last iteration's metrics into TRL's logs, beside its own (only keys TRL does not have)."""
        if self.profiler is None or logs is None:
            return
        for key, value in self.profiler.metrics().items():
            if key != "iteration" and key not in logs and isinstance(value, (int, float)):
                logs[key] = value

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.profiler is None:
            return
        if self.hooks is not None:
            self.hooks.uninstall()
        self.profiler.stop()
        if self._tracer:
            from mindspeed_profiler.tracing.api import merge_timeline, shutdown_tracer

            shutdown_tracer()
            if getattr(state, "is_world_process_zero", True):
                try:
                    merge_timeline(self.config)
                except Exception as exc:
                    warn_once(("trl", "merge"), "TRL integration: the timeline was not merged (%s: %s); run "
                                                "`mindspeed-profiler merge`", type(exc).__name__, exc)


def profile_trainer(trainer: Any, config: Any, role: str = DEFAULT_ROLE, *, record_samples: bool = True) -> ProfilerCallback:
    """Profile `trainer.train()` of a TRL trainer (GRPOTrainer, DPOTrainer, or any transformers
    Trainer: its stages are marked where it has TRL's methods) with our `config`. Returns the
    callback (its `notes`: the stages this TRL release could not mark, after train-begin).

    The callback goes first among the trainer's callbacks, so that TRL's loggers (`report_to`) see
    our metrics in the logs it adds to."""
    callback = ProfilerCallback(config, role, trainer=trainer, record_samples=record_samples)
    handler = getattr(trainer, "callback_handler", None)
    callbacks = getattr(handler, "callbacks", None)
    if isinstance(callbacks, list):
        callbacks.insert(0, callback)
    else:
        trainer.add_callback(callback)
    return callback
