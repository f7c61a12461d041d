"""record_samples on the profiler and for code without one: the file and its lines exactly as
docs/rollout.md documents them, when it records (also with profile: false), the per-iteration
bound, a failed write as a warning, bad arguments as ValueErrors, the MindSpeed-RL drop-in export.
Plain sample dicts only; the engines' objects are tests/test_rollout_record_engines.py's."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

import mindspeed_profiler
from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.core import formats
from mindspeed_profiler.rollout import record_samples
from mindspeed_profiler.rollout.checks import SAMPLE_KEYS

BATCH_KEYS = ["type", "v", "role", "rank", "run_id", "iteration", "stage", "samples", "dropped", "recorded_ns",
              "source", "clock", "problems", "pid", "attempt"]
DOC = Path(__file__).resolve().parents[1] / "docs" / "rollout.md"


def make(tmp_path, *, profile=False, metrics=True, role="actor", rank=0, **integrated) -> IntegratedProfiler:
    cfg = load_config({"integrated": {"profile": profile, "profile_save_path": str(tmp_path), **integrated},
                       "metrics": {"enable": metrics}})
    return IntegratedProfiler(cfg, role=role, rank=rank, world_size=rank + 1)


def samples(n: int, base: float | None = None, prefix: str = "s") -> list[dict]:
    base = time.time() - 10 if base is None else base
    return [{"id": f"{prefix}{i}", "prompt_tokens": 16, "response_tokens": 32 + i, "start": base, "first_token": base + 0.1,
             "end": base + 1 + i * 0.01, "finish_reason": "stop"} for i in range(n)]


def read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture
def no_run_id(monkeypatch):
    monkeypatch.setenv(formats.RUN_ID_ENV, "")   # restored after the test, also when start_run set it
    for var in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        monkeypatch.delenv(var, raising=False)


def test_file_layout_and_lines_as_documented(tmp_path, clean_state, no_run_id):
    p = make(tmp_path, rank=3)
    p.start()
    before = time.time_ns()
    assert p.record_samples(samples(2)) == 2
    assert not (tmp_path / formats.SAMPLES_DIR).exists()       # nothing written on the training thread
    p.step()
    p.record_samples(samples(1, prefix="t"), stage="actor_generate")
    p.stop()
    path = tmp_path / formats.SAMPLES_DIR / formats.samples_file_name("actor", 3)
    assert path.name == "actor_rank3.jsonl"
    lines = read(path)
    assert [x["type"] for x in lines] == ["batch", "sample", "sample", "batch", "sample"]
    first = lines[0]
    assert list(first) == BATCH_KEYS
    assert first == {"type": formats.SAMPLE_BATCH, "v": formats.SAMPLES_SCHEMA, "role": "actor", "rank": 3, "run_id": None,
                     "iteration": 1, "stage": "actor_generate", "samples": 2, "dropped": 0, "recorded_ns": first["recorded_ns"],
                     "source": "dict", "clock": "wall", "problems": [], "pid": os.getpid(), "attempt": first["attempt"]}
    assert before <= first["recorded_ns"] <= time.time_ns()
    assert all(list(x) == list(SAMPLE_KEYS) for x in lines if x["type"] == "sample")
    assert [x["iteration"] for x in lines] == [1, 1, 1, 2, 2]
    # every key of the documented table is a key of the lines, and the other way round
    table = {k for row in re.findall(r"^\| ((?:`\w+`(?:, )?)+) \| (?:both|batch|sample) \|", DOC.read_text(), re.M)
             for k in re.findall(r"`(\w+)`", row)}
    assert table == set(BATCH_KEYS) | set(SAMPLE_KEYS)


def test_the_batch_line_carries_the_run_id(tmp_path, clean_state, no_run_id):
    from mindspeed_profiler import start_run

    cfg = start_run(load_config({"integrated": {"profile_save_path": str(tmp_path)}, "metrics": {"enable": True}}))
    p = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    p.start()
    p.record_samples(samples(1))
    p.stop()
    assert read(tmp_path / "samples" / "actor_rank0.jsonl")[0]["run_id"] == cfg.run_id is not None


def test_records_with_profile_false_and_nothing_when_everything_is_off(tmp_path, clean_state, runtime_warnings):
    on = make(tmp_path / "on", profile=False, metrics=True)
    off = make(tmp_path / "off", profile=False, metrics=False)
    for p in (on, off):
        p.start()
        p.record_samples(samples(1))
        p.stop()
    assert (tmp_path / "on" / "samples" / "actor_rank0.jsonl").is_file()
    assert not (tmp_path / "off" / "samples").exists()
    assert runtime_warnings("all off: samples are not recorded")


def test_a_profiler_not_running_records_nothing_and_says_so(tmp_path, clean_state, runtime_warnings):
    p = make(tmp_path)
    assert p.record_samples(samples(1)) == 0
    assert runtime_warnings("is not running")


def test_an_iterable_that_raises_is_a_warning_not_an_error(tmp_path, clean_state, runtime_warnings):
    def broken():
        yield samples(1)[0]
        raise OSError("stream closed")

    p = make(tmp_path)
    p.start()
    assert p.record_samples(broken()) == 0
    assert p.record_samples(samples(2)) == 2
    p.stop()
    assert runtime_warnings("record_samples failed for actor rank 0 (training goes on, these samples are not recorded): "
                            "OSError: stream closed")
    assert [x["samples"] for x in read(tmp_path / "samples" / "actor_rank0.jsonl") if x["type"] == "batch"] == [2]


def test_the_bound_per_worker_and_iteration(tmp_path, clean_state, monkeypatch):
    monkeypatch.setattr(formats, "MAX_SAMPLES_PER_ITERATION", 5)
    p = make(tmp_path)
    p.start()
    assert p.record_samples(samples(3)) == 3
    assert p.record_samples(iter(samples(4))) == 2        # a generator too: the rest counted, not read
    p.step()
    assert p.record_samples(samples(6)) == 5              # a new iteration, a new budget
    p.stop()
    batches = [x for x in read(tmp_path / "samples" / "actor_rank0.jsonl") if x["type"] == "batch"]
    assert [(b["iteration"], b["samples"], b["dropped"]) for b in batches] == [(1, 3, 0), (1, 2, 2), (2, 5, 1)]


def test_a_failed_write_is_one_warning_and_training_goes_on(tmp_path, clean_state, runtime_warnings):
    (tmp_path / "samples" / "actor_rank0.jsonl").mkdir(parents=True)   # a directory where the file should be
    p = make(tmp_path)
    p.start()
    for _ in range(3):
        p.record_samples(samples(2))
        p.step()
    p.stop()
    assert len(runtime_warnings("record_samples: could not write")) == 1


def test_a_fresh_run_starts_the_file_and_a_resumed_one_appends(tmp_path, clean_state, monkeypatch):
    from mindspeed_profiler.rollout import recorder

    for start in (1, 1, 4):   # two fresh runs, then one resumed at iteration 4 (each its own process)
        monkeypatch.setattr(recorder, "WRITTEN", set())
        p = make(tmp_path)
        p.start(iteration=start)
        p.record_samples(samples(1))
        p.stop()
    its = [x["iteration"] for x in read(tmp_path / "samples" / "actor_rank0.jsonl") if x["type"] == "batch"]
    assert its == [1, 4]


@pytest.mark.parametrize("kwargs, argument, allowed", [
    ({"stage": "actor_genrate"}, "stage", "actor_generate"),
    ({"stage": None}, "stage", "register_stage"),
    ({"clock": "cuda"}, "clock", "'monotonic'"),
])
def test_bad_arguments_name_the_argument_value_and_what_is_allowed(tmp_path, clean_state, kwargs, argument, allowed):
    p = make(tmp_path)
    p.start()
    with pytest.raises(ValueError) as err:
        p.record_samples(samples(1), **kwargs)
    text = str(err.value)
    assert f"record_samples({argument}=...)" in text and repr(next(iter(kwargs.values()))) in text and allowed in text
    p.stop()


@pytest.mark.parametrize("items", [5, None, "abc", {"id": 1}])
def test_items_that_are_not_an_iterable_of_samples(items, clean_state):
    with pytest.raises(ValueError, match=r"record_samples\(items=\.\.\.\): a \w+ is not an iterable of samples; allowed"):
        record_samples(items)


def test_a_registered_stage_is_accepted(tmp_path, clean_state):
    from mindspeed_profiler.capture.stages import register_stage, scoped_stages

    with scoped_stages():
        register_stage("rollout_partial")
        p = make(tmp_path)
        p.start()
        assert p.record_samples(samples(1), "rollout_partial") == 1
        p.stop()
    assert read(tmp_path / "samples" / "actor_rank0.jsonl")[0]["stage"] == "rollout_partial"


def test_module_level_function_without_a_profiler(tmp_path, clean_state, runtime_warnings):
    assert record_samples(samples(2)) == 0                       # none running: a warning, nothing recorded
    assert record_samples(samples(2)) == 0
    assert len(runtime_warnings("no profiler is running")) == 1
    p = make(tmp_path, role="rollout")
    p.start()
    assert record_samples(samples(2), "actor_generate") == 2     # the running one
    p.stop()
    assert read(tmp_path / "samples" / "rollout_rank0.jsonl")[0]["samples"] == 2


def test_module_level_function_with_a_profiler_given(tmp_path, clean_state):
    p = make(tmp_path, role="ref")
    p.start()
    assert record_samples(samples(1), profiler=p) == 1
    with pytest.raises(ValueError, match=r"record_samples\(profiler=\.\.\.\): a int is not a profiler"):
        record_samples(samples(1), profiler=3)
    p.stop()
    assert (tmp_path / "samples" / "ref_rank0.jsonl").is_file()


def test_module_level_function_with_a_stage_call_profiler(tmp_path, clean_state):
    # what MindSpeed-style profiler_start(cfg, "actor_generate", profiler_iteration=N) returns: a StageShot
    from mindspeed_profiler.integrations.mindspeed_api import StageShot

    shot = StageShot(make(tmp_path), "actor_generate", 7)
    assert record_samples(samples(2), profiler=shot) == 2
    shot.step()                                                 # the stage call ends: its profiler stops, lines written
    batch = read(tmp_path / "samples" / "actor_rank0.jsonl")[0]
    assert (batch["iteration"], batch["samples"]) == (7, 2)


def test_the_public_and_mindspeed_rl_exports(tmp_path, clean_state):
    from mindspeed_profiler.integrations import mindspeed_rl
    from mindspeed_profiler.integrations.mindspeed_rl import get_grpo_profiler, profiler_step

    assert mindspeed_profiler.record_samples is record_samples
    assert mindspeed_rl.record_samples is record_samples and "record_samples" in mindspeed_rl.__all__
    # a MindSpeed-RL worker's profiler (get_grpo_profiler: profiler_start's worker-level call asks Ray
    # for the actor's name, which starts a local Ray outside one), then the line docs/rollout.md gives
    # for its generate_sequences
    cfg = {"role": "actor_rollout", "profile": True, "stage": "all", "profile_save_path": str(tmp_path),
           "backend": "markers", "profile_level": "level_none", "profile_step_start": 1, "profile_step_end": 3}
    prof = get_grpo_profiler(cfg)
    prof.start()
    assert mindspeed_rl.record_samples(samples(3), stage="actor_generate") == 3
    profiler_step(prof)
    prof.stop()
    lines = read(tmp_path / "samples" / "actor_rollout_rank0.jsonl")
    assert lines[0]["role"] == "actor_rollout" and lines[0]["samples"] == 3


def test_the_benchmark_runs(clean_state, capsys):
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_record_samples.py"
    spec = importlib.util.spec_from_file_location("bench_record_samples", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "plain dicts" in out and "vLLM RequestOutputs" in out and "SGLang result dicts" in out


def test_policy_version_of_the_call_for_items_that_give_none(tmp_path, clean_state):
    """record_samples(..., policy_version=V): a RequestOutput never says which weights made it (the
    rollout worker knows): V goes to every sample without its own; a dict's own version wins; a bad
    V is a ValueError naming it."""
    from mindspeed_profiler import record_samples
    from rollout_record_fakes import request_output

    cfg = load_config({"integrated": {"profile": False, "profile_save_path": str(tmp_path)}, "metrics": {"enable": True}})
    p = IntegratedProfiler(cfg, role="rollout", rank=0, world_size=1)
    p.start()
    assert record_samples([request_output("a"), {"id": "b", "policy_version": 1}, {"id": "c"}], profiler=p,
                          policy_version=4) == 3
    with pytest.raises(ValueError, match="policy_version=.*-1.*integer >= 0"):
        p.record_samples([{"id": "d"}], policy_version=-1)
    p.stop()
    lines = read(tmp_path / formats.SAMPLES_DIR / formats.samples_file_name("rollout", 0))
    assert {x["id"]: x["policy_version"] for x in lines if x["type"] == "sample"} == {"a": 4, "b": 1, "c": 4}
