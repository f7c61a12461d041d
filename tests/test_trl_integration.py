"""TRL, real: GRPOTrainer and DPOTrainer of TRL (the `trl` extra, beside vLLM in .venv) train a
tiny model built here on the CPU with `profile_trainer(trainer, cfg)` (examples/trl/), and
everything the integration promises is on disk and read back by `analyse`: captures of the
selected stages on the step window, the timeline with TRL's stages, the metrics tracker's rows
(and our keys in TRL's own log), per-sample records of GRPO's generations.

A slow test holds the recorded names (integrations/trl_stages.py: the methods TRL 1.16 has for
each stage, what `_generate` returns) against the installed TRL, so that a TRL release that
renames one fails here first, and checks that a trainer lacking a method gets a note, not a crash.
Without TRL these skip, saying why (a failure under MSP_REQUIRE_FRAMEWORKS=1, as CI runs).
"""
from __future__ import annotations

import ast
import inspect
import json
import textwrap
from pathlib import Path

import pytest

from frameworks import need_module
from mindspeed_profiler.config import load_config

CONFIG = Path(__file__).resolve().parents[1] / "examples" / "trl" / "profiler.yaml"
# TRL 1.16 names the vLLM releases it was tested with (0.22-0.31); the CPU build here is 0.32
pytestmark = pytest.mark.filterwarnings("ignore:TRL currently supports vLLM versions:UserWarning")


def _cfg(save: Path):
    return load_config(CONFIG, [f"integrated.profile_save_path={save}"])


# ------------------------------------------------------------------ the recorded names against the installed TRL


@pytest.mark.slow   # importing TRL imports vLLM: 20-30 s on 2 cores
def test_recorded_stage_methods_are_the_installed_trls():
    need_module("trl", "trl")
    import trl

    from mindspeed_profiler.integrations.trl_stages import GENERATE_RETURNS, STAGE_METHODS

    missing = [(sm.method, name) for sm in STAGE_METHODS for name in sm.trainers
               if not callable(getattr(getattr(trl, name), sm.method, None))]
    assert missing == [], f"TRL {trl.__version__} lacks these: update integrations/trl_stages.py"
    # the arguments the wrappers read
    logps = inspect.signature(trl.GRPOTrainer._get_per_token_logps_and_entropies)
    assert list(logps.parameters)[:2] == ["self", "model"]
    assert list(inspect.signature(trl.GRPOTrainer.compute_loss).parameters)[:3] == ["self", "model", "inputs"]
    assert list(inspect.signature(trl.DPOTrainer.compute_loss).parameters)[:3] == ["self", "model", "inputs"]
    # what _generate returns: its last `return a, b, ...`, names as recorded
    tree = ast.parse(textwrap.dedent(inspect.getsource(trl.GRPOTrainer._generate)))
    returns = [n for n in ast.walk(tree) if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple)]
    assert tuple(e.id for e in returns[-1].value.elts) == GENERATE_RETURNS


def test_a_trainer_without_a_method_gets_a_note_not_a_crash(caplog):
    """A TRL release without `_calculate_rewards` (a stand-in trainer with the real method names
    minus that one): the other stages are marked, that one is a note and a warning."""
    need_module("transformers", "test")
    from mindspeed_profiler.integrations.trl_stages import StageHooks

    calls = []

    class Model:
        training = True

    class Profiler:
        iteration = 1

        def stage(self, name):
            calls.append(("stage", name))
            return _Scope(calls, name)

        def record_samples(self, items, stage):
            calls.append(("samples", len(items)))

    GRPOTrainer = type("GRPOTrainer", (), {
        "model": Model(), "ref_model": None, "eos_token_ids": [0],
        "_generate": lambda self, prompts: ([[1, 2]] * len(prompts), [[3, 0]] * len(prompts)),
    })
    trainer = GRPOTrainer()
    hooks = StageHooks(trainer, Profiler())
    notes = hooks.install()
    assert any("has no _calculate_rewards" in n for n in notes) and any("has no compute_loss" in n for n in notes)
    assert trainer._generate(["a", "b"]) == ([[1, 2]] * 2, [[3, 0]] * 2)
    assert calls == [("stage", "actor_generate"), ("exit", "actor_generate"), ("samples", 2)]
    assert hooks.taken() == (8, 2)
    hooks.uninstall()
    assert "_generate" not in trainer.__dict__


class _Scope:
    def __init__(self, calls, name):
        self.calls, self.name = calls, name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.calls.append(("exit", self.name))
        return False


# ------------------------------------------------------------------ real training runs (slow)


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _summary(save: Path) -> dict:
    return json.loads((save / "analysis" / "summary.json").read_text())


def _stage_spans(save: Path) -> set[str]:
    trace = json.loads((save / "timeline" / "timeline.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return {e["name"] for e in events if e.get("cat") == "stage"}


def _captures(save: Path, stage: str) -> list[dict]:
    return [json.loads((d / "mindspeed_profiler_meta.json").read_text()) for d in sorted((save / stage).glob("*_pt"))]


@pytest.mark.slow
def test_grpo_trainer_run_is_profiled_end_to_end(tmp_path):
    need_module("trl", "trl")
    from examples.trl.train_grpo import main

    save = tmp_path / "prof"
    assert main(["--steps", "4", "--config", str(CONFIG), "--save", str(save), "--out", str(tmp_path / "out")]) == 0
    # captures of the generation and the update, one per call, on the window [2, 4)
    for stage in ("actor_generate", "actor_update"):
        metas = _captures(save, stage)
        assert [m["steps"] for m in metas] == [[2, 2], [3, 3]], stage
        assert all(m["status"] == "ok" and m["stage"] == stage for m in metas)
    assert _stage_spans(save) >= {"actor_generate", "compute_rm_score", "reference_compute_log_prob", "actor_update"}
    rows = _read_jsonl(save / "metrics" / "actor_rank0.jsonl")
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    assert all(r["timing_s/actor_generate"] > 0 and r["timing_s/actor_update"] > 0 for r in rows)
    assert all(r["perf/samples"] == 4 and r["perf/tokens"] > 0 for r in rows)
    samples = [r for r in _read_jsonl(save / "samples" / "actor_rank0.jsonl") if r["type"] == "sample"]
    assert len(samples) == 16 and {s["iteration"] for s in samples} == {1, 2, 3, 4}
    assert all(0 < s["response_tokens"] <= 8 and s["start_ns"] < s["end_ns"] for s in samples)
    kinds = {c["kind"]: c["status"] for c in _summary(save)["captures"]}
    assert {k: kinds.get(k) for k in ("torch", "timeline", "tracker", "samples")} == dict.fromkeys(
        ("torch", "timeline", "tracker", "samples"), "ok")


@pytest.mark.slow
def test_dpo_trainer_run_is_profiled_end_to_end(tmp_path):
    need_module("trl", "trl")
    from examples.trl.train_dpo import main

    save = tmp_path / "prof"
    assert main(["--steps", "4", "--config", str(CONFIG), "--save", str(save), "--out", str(tmp_path / "out")]) == 0
    metas = _captures(save, "actor_update")
    assert [m["steps"] for m in metas] == [[2, 2], [3, 3]] and all(m["status"] == "ok" for m in metas)
    assert not (save / "actor_generate").exists()   # DPO generates nothing
    assert _stage_spans(save) >= {"actor_update", "reference_compute_log_prob"}
    rows = _read_jsonl(save / "metrics" / "actor_rank0.jsonl")
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    # the reference's forward runs inside DPO's update: its time is part of the update's
    assert all(0 < r["timing_s/reference_compute_log_prob"] < r["timing_s/actor_update"] for r in rows)
    assert all(r["perf/samples"] == 8 for r in rows)   # 4 pairs: chosen and rejected
    kinds = {c["kind"]: c["status"] for c in _summary(save)["captures"]}
    assert {k: kinds.get(k) for k in ("torch", "timeline", "tracker")} == dict.fromkeys(("torch", "timeline", "tracker"), "ok")


@pytest.mark.slow
def test_our_metrics_go_into_trls_log_beside_its_own(tmp_path):
    need_module("trl", "trl")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from examples.trl.tiny_model import build_tiny_model, prompts
    from examples.trl.train_grpo import reward_words
    from mindspeed_profiler.integrations.trl import profile_trainer

    trainer = GRPOTrainer(
        model=str(build_tiny_model(tmp_path / "model")), reward_funcs=reward_words,
        train_dataset=Dataset.from_dict({"prompt": prompts(16)}),
        args=GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=4, max_steps=2, logging_steps=1, report_to=[], use_cpu=True,
                        save_strategy="no", bf16=False))
    cfg = load_config({"integrated": {"profile": False, "profile_save_path": str(tmp_path / "p")}, "metrics": {"enable": True}})
    from transformers import TrainerCallback

    seen = []

    class Logger(TrainerCallback):   # what a `report_to` logger (wandb, TensorBoard) is given
        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append(dict(logs))

    trainer.add_callback(Logger())
    callback = profile_trainer(trainer, cfg)
    assert trainer.callback_handler.callbacks[0] is callback
    trainer.train()
    logged = [row for row in seen if "loss" in row]
    assert len(logged) == 2
    for row in logged:
        assert row["timing_s/actor_generate"] > 0 and row["timing_s/actor_update"] > 0 and "reward" in row
    assert not callback.notes and not (tmp_path / "p" / "actor_update").exists()


@pytest.mark.slow
def test_grpo_with_vllm_colocated_generation_is_profiled(tmp_path, monkeypatch):
    """TRL generating with the real vLLM (the CPU build in .venv) in colocate mode: the stages are
    marked and every completion has a record. TRL 1.16 builds its LLM with vLLM's request stats
    off, so the records take the generation call's timing (a warning says so)."""
    need_module("trl", "trl")
    from vllm_testutil import need_vllm

    need_vllm()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port), "VLLM_CPU_KVCACHE_SPACE": "1"}.items():
        monkeypatch.setenv(key, value)   # TRL's colocated vLLM runs as torch.distributed's external launcher
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from examples.trl.tiny_model import build_tiny_model, prompts
    from examples.trl.train_grpo import reward_words
    from mindspeed_profiler.integrations.trl import profile_trainer

    trainer = GRPOTrainer(
        model=str(build_tiny_model(tmp_path / "model")), reward_funcs=reward_words,
        train_dataset=Dataset.from_dict({"prompt": prompts(16)}),
        args=GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=8, max_steps=2, logging_steps=1, report_to=[], use_cpu=True,
                        save_strategy="no", bf16=False, use_vllm=True, vllm_mode="colocate", vllm_max_model_length=128,
                        vllm_gpu_memory_utilization=0.1))
    save = tmp_path / "p"
    cfg = load_config({"integrated": {"profile": False, "profile_save_path": str(save)}, "metrics": {"enable": True},
                       "tracer": {"enable": True}})
    callback = profile_trainer(trainer, cfg)
    try:
        trainer.train()
    finally:
        llm = trainer.vllm_generation.llm
        llm.llm_engine.engine_core.shutdown()
    assert callback.notes == []
    rows = _read_jsonl(save / "metrics" / "actor_rank0.jsonl")
    assert [r["iteration"] for r in rows] == [1, 2] and all(r["timing_s/actor_generate"] > 0 for r in rows)
    samples = [r for r in _read_jsonl(save / "samples" / "actor_rank0.jsonl") if r["type"] == "sample"]
    assert len(samples) == 8 and all(s["start_ns"] < s["end_ns"] and s["response_tokens"] > 0 for s in samples)
    assert _stage_spans(save) >= {"actor_generate", "compute_rm_score", "actor_update"}
