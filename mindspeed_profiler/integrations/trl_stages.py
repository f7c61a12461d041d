"""TRL's RL stages, marked from the trainer's own methods (TRL has no callback between generation
and update): each method TRL 1.16 has for a stage is wrapped on the trainer instance, found by
feature detection; a method a TRL release lacks is a note, never a crash (docs/trl.md).

| TRL method (1.16) | our stage |
|---|---|
| GRPOTrainer `_generate` | `actor_generate` (and its completions as per-sample records) |
| GRPOTrainer `_calculate_rewards` | `compute_rm_score` (the reward functions / models) |
| GRPOTrainer `_get_per_token_logps_and_entropies` | `reference_compute_log_prob` with the reference model, `actor_compute_log_prob` with the policy outside the loss |
| `compute_loss` (GRPO, DPO) | `actor_update`: opened at the step's first loss, closed at the step's end (forward, backward, optimizer step) |
| DPOTrainer: the reference model's forward (no method of its own) | `reference_compute_log_prob`, inside DPO's update (DPO scores the reference in its loss) |
| vLLM colocate: the trainer's `LLM.generate` | its `RequestOutput`s as per-sample records when they carry vLLM's request stats (TRL 1.16 builds its LLM with them off: then the plain records) |

Stages are marked only while the model trains (an evaluation's calls are not stages). Whatever
goes wrong here is reported once and TRL's call runs as if nothing were wrapped.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Callable

from mindspeed_profiler.capture import stages as _stages
from mindspeed_profiler.core.warn import warn_once

GENERATE, REWARD, ACTOR_LOGP, REF_LOGP, UPDATE = ("actor_generate", "compute_rm_score", "actor_compute_log_prob",
                                                  "reference_compute_log_prob", "actor_update")
TRL_RELEASE = "1.16.0"   # the release these names were read from; tests/test_trl_integration.py checks the installed one


@dataclass(frozen=True)
class StageMethod:
    method: str                 # TRL's method name
    stage: str | None           # our stage (None: decided at each call)
    trainers: tuple[str, ...]   # the TRL trainers that have it (TRL_RELEASE)
    what: str


STAGE_METHODS = (
    StageMethod("_generate", GENERATE, ("GRPOTrainer",), "generation (transformers or vLLM) of the completions"),
    StageMethod("_calculate_rewards", REWARD, ("GRPOTrainer",), "the reward functions and reward models"),
    StageMethod("_get_per_token_logps_and_entropies", None, ("GRPOTrainer",),
                "log-probs: the reference model's, and the policy's outside the loss"),
    StageMethod("compute_loss", UPDATE, ("GRPOTrainer", "DPOTrainer"),
                "the update: the step's losses, backward passes and optimizer step"),
)
# what GRPOTrainer._generate returns (TRL_RELEASE): the records read the first two
GENERATE_RETURNS = ("prompt_ids", "completion_ids", "tool_mask", "completions", "logprobs", "extra_fields", "images",
                    "tool_images")
TRL_STAGES = (GENERATE, REWARD, ACTOR_LOGP, REF_LOGP, UPDATE)


def register_trl_stages() -> None:
    """Our stage names for TRL's methods, known to configs (compute_rm_score is not built in); idempotent."""
    for name in TRL_STAGES:
        _stages.register_stage(name, owner="trl")


register_trl_stages()   # at import: a config loaded after `import ...integrations.trl` may select them


def _warn(key: str, message: str, *args: Any) -> None:
    warn_once(("trl", key), "TRL integration: " + message, *args)


class StageHooks:
    """The stage wrappers on one trainer: `install()` (returns its notes), `end_step()` at each
    optimizer step's end, `uninstall()`. `taken()` gives and resets the step's counts."""

    def __init__(self, trainer: Any, profiler: Any, record_samples: bool = True):
        self.trainer, self.profiler, self.record = trainer, profiler, record_samples
        self.notes: list[str] = []
        self.wrapped: list[str] = []
        self._hooks: list[Any] = []
        self._update: Any = None       # the open actor_update stage scope
        self._loss_depth = 0           # inside compute_loss (the policy's forward for the loss, DPO's reference)
        self._llm_recorded = False     # the last generation's samples came from vLLM's RequestOutputs
        self.tokens = self.samples = 0

    # ------------------------------------------------------------------ install / uninstall

    def install(self) -> list[str]:
        register_trl_stages()
        kind = type(self.trainer).__name__
        for sm in STAGE_METHODS:
            original = getattr(self.trainer, sm.method, None)
            if callable(original):
                setattr(self.trainer, sm.method, self._wrapper(sm, original))
                self.wrapped.append(sm.method)
            elif any(kind == t or _subclass_of(self.trainer, t) for t in sm.trainers):
                self.notes.append(f"{kind} has no {sm.method} in this TRL release (read from TRL {TRL_RELEASE}): "
                                  f"{sm.stage or 'its log-prob stages'} not marked ({sm.what})")
        if "_get_per_token_logps_and_entropies" not in self.wrapped:
            self._hook_reference_forward()
        self._wrap_vllm_generate()
        for note in self.notes:
            _warn(note, "%s", note)
        return self.notes

    def uninstall(self) -> None:
        self.close_update()
        for name in self.wrapped:
            self.trainer.__dict__.pop(name, None)
        self.wrapped = []
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        llm = _colocated_llm(self.trainer)
        if llm is not None:
            llm.__dict__.pop("generate", None)

    def _hook_reference_forward(self) -> None:
        """DPO computes the reference inside its loss, with no method of its own: the reference
        model's forward marks the stage (always_call: closed also when the forward raises)."""
        ref = getattr(self.trainer, "ref_model", None)
        if ref is None or not hasattr(ref, "register_forward_pre_hook"):
            if getattr(self.trainer, "ref_model", None) is None and hasattr(self.trainer, "ref_model"):
                self.notes.append("no reference model (PEFT adapters disabled, or beta 0): reference_compute_log_prob "
                                  "is not marked")
            return
        open_scopes: list[Any] = []

        def pre(module: Any, args: Any) -> None:
            if self._training():
                open_scopes.append(self._enter(REF_LOGP))

        def post(module: Any, args: Any, output: Any) -> None:
            if open_scopes:
                self._exit(open_scopes.pop())

        self._hooks.append(ref.register_forward_pre_hook(pre))
        self._hooks.append(ref.register_forward_hook(post, always_call=True))

    def _wrap_vllm_generate(self) -> None:
        """TRL's colocated vLLM: its RequestOutputs become the generation's per-sample records."""
        llm = _colocated_llm(self.trainer)
        if llm is None or not self.record:
            return
        original = llm.generate

        @functools.wraps(original)
        def generate(*args: Any, **kwargs: Any) -> Any:
            outputs = original(*args, **kwargs)
            try:
                if not self._training():
                    return outputs
                if outputs and getattr(outputs[0], "metrics", None) is None:
                    # TRL builds its LLM with vLLM's stats off: no per-request times in the outputs
                    _warn("vllm-stats", "TRL's vLLM engine keeps no request stats (disable_log_stats): the "
                                        "records take the generation call's own timing")
                    return outputs
                self.profiler.record_samples(outputs, GENERATE)
                self._llm_recorded = True
            except Exception as exc:
                _warn("vllm-records", "vLLM's outputs not recorded: %s: %s", type(exc).__name__, exc)
            return outputs

        llm.generate = generate

    # ------------------------------------------------------------------ the wrappers

    def _wrapper(self, sm: StageMethod, original: Callable) -> Callable:
        if sm.stage == UPDATE:
            return self._loss_wrapper(original)
        if sm.stage is None:
            return self._log_prob_wrapper(original)

        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not self._training():
                return original(*args, **kwargs)
            started = time.time()
            self._llm_recorded = False
            scope = self._enter(sm.stage)
            try:
                result = original(*args, **kwargs)
            finally:
                self._exit(scope)
            if sm.stage == GENERATE:
                self._generated(result, started, time.time())
            return result

        return call

    def _loss_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def compute_loss(model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            if not self._training():
                return original(model, inputs, *args, **kwargs)
            if self._update is None:
                self._update = self._enter(UPDATE)
            if "_generate" not in self.wrapped:   # DPO: the batch is the step's work
                self._count_batch(inputs)
            self._loss_depth += 1
            try:
                return original(model, inputs, *args, **kwargs)
            finally:
                self._loss_depth -= 1

        return compute_loss

    def _log_prob_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def log_probs(model: Any, *args: Any, **kwargs: Any) -> Any:
            if self._loss_depth or not self._training():
                return original(model, *args, **kwargs)   # the policy's forward for the loss: the update's
            stage = REF_LOGP if model is getattr(self.trainer, "ref_model", None) else ACTOR_LOGP
            scope = self._enter(stage)
            try:
                return original(model, *args, **kwargs)
            finally:
                self._exit(scope)

        return log_probs

    # ------------------------------------------------------------------ stages

    def _training(self) -> bool:
        model = getattr(self.trainer, "model", None)
        return bool(getattr(model, "training", True))

    def _enter(self, stage: str) -> Any:
        """Enter `stage` (a stage outside the loss first closes the open update: GRPO generating in
        the middle of an optimizer step's micro-batches); None when it could not be entered."""
        if stage != UPDATE and self._update is not None and not self._loss_depth:
            self.close_update()
        try:
            scope = self.profiler.stage(stage)
            scope.__enter__()
            return scope
        except Exception as exc:
            _warn("enter-" + stage, "stage %s not marked: %s: %s", stage, type(exc).__name__, exc)
            return None

    def _exit(self, scope: Any) -> None:
        if scope is not None:
            try:
                scope.__exit__(None, None, None)
            except Exception as exc:
                _warn("exit", "a stage did not close cleanly: %s: %s", type(exc).__name__, exc)

    def close_update(self) -> None:
        scope, self._update = self._update, None
        self._exit(scope)

    def end_step(self) -> None:
        """The optimizer step is done (TrainerCallback.on_step_end): the update closes."""
        self.close_update()

    # ------------------------------------------------------------------ counts and samples

    def taken(self) -> tuple[int, int]:
        """(tokens, samples) since the last call: what the step's generation (GRPO) or batches (DPO) held."""
        out = self.tokens, self.samples
        self.tokens = self.samples = 0
        return out

    def _count_batch(self, inputs: Any) -> None:
        try:
            mask = inputs.get("attention_mask") if hasattr(inputs, "get") else None
            if mask is not None:
                self.tokens += int(mask.sum())
                self.samples += int(mask.shape[0])
        except Exception:
            pass

    def _generated(self, result: Any, started: float, ended: float) -> None:
        """GRPOTrainer._generate's completions (GENERATE_RETURNS) as per-sample records, with the
        call's own timing: transformers generates the batch together, so each sample spans the call."""
        try:
            prompt_ids, completion_ids = result[0], result[1]
            prompts = [len(p) for p in prompt_ids]
            completions = [len(c) for c in completion_ids]
        except Exception:
            _warn("generate-shape", "_generate returned %s, not (prompt_ids, completion_ids, ...): no per-sample "
                                    "records", type(result).__name__)
            return
        self.tokens += sum(prompts) + sum(completions)
        self.samples += len(completions)
        if not self.record or self._llm_recorded:
            return
        eos = set(getattr(self.trainer, "eos_token_ids", None) or ())
        limit = getattr(getattr(self.trainer, "args", None), "max_completion_length", None)
        iteration = getattr(self.profiler, "iteration", None)
        items = [{"id": f"i{iteration}-{k}", "prompt_tokens": p, "response_tokens": c, "start": started, "end": ended,
                  "finish_reason": "stop" if ids and ids[-1] in eos else "length", "max_tokens": limit}
                 for k, (p, c, ids) in enumerate(zip(prompts, completions, completion_ids))]
        try:
            self.profiler.record_samples(items, GENERATE)
        except Exception as exc:
            _warn("records", "per-sample records not taken: %s: %s", type(exc).__name__, exc)


def _subclass_of(obj: Any, name: str) -> bool:
    return any(cls.__name__ == name for cls in type(obj).__mro__)


def _colocated_llm(trainer: Any) -> Any:
    """The vLLM LLM a GRPOTrainer generates with in colocate mode, or None."""
    generation = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
    llm = getattr(generation, "llm", None)
    return llm if llm is not None and callable(getattr(llm, "generate", None)) else None
