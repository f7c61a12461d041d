"""The metrics tracker (metrics/, `profiler_config.metrics`): one JSON line per iteration with the
stage and iteration wall times, tokens/s and MFU, checked against times measured here around known
sleeps; metrics off writes nothing; a write failure never reaches training. The slow test runs the
GRPO example and holds the rows to the merged timeline of the same run.

Two clocks read back to back can differ by whatever runs between them: another thread taking the
GIL, the OS's scheduler, a garbage collection. So a comparison of two measurements of one interval
holds the order that is certain exactly (a stage's span lies inside the tracker's stage timer) and
the closeness within TOL_S; and the loops run without the cyclic GC, which by this point of the
suite scans ~580k objects (a full collection: ~290 ms on a slow 2-core box)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler import IntegratedProfiler
from mindspeed_profiler.core import formats
from mindspeed_profiler.core.gcpause import collector_paused
from mindspeed_profiler import load_config, tracing
from mindspeed_profiler.analysis.timeline import merge
from mindspeed_profiler.metrics import PEAKS, ModelSize, from_megatron, from_module, peak_tflops
from mindspeed_profiler.metrics import tracker as tracker_module

TOL_S = 0.005   # the brief: a stage's time within 5 ms of what the test measured around it
SLEEPS = {"actor_generate": 0.02, "actor_update": 0.03}
PEAK = 2.0      # TFLOPS, given in the config
N = 1_000_000   # parameters, given to set_model


def metrics_cfg(tmp_path: Path, **metrics):
    return load_config({"integrated": {"profile_save_path": str(tmp_path)},
                        "metrics": {"enable": True, "peak_tflops": PEAK, **metrics}})


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_loop(prof, iters: int, tokens=lambda it: 100 * it, samples=lambda it: 4 * it):
    """Stages with known sleeps; returns what the test measured itself per iteration: the stage
    times and the iteration wall (from start / step to the next step)."""
    with collector_paused():
        measured = []
        prof.start()
        began = time.perf_counter()
        for it in range(1, iters + 1):
            stages = {}
            for name, seconds in SLEEPS.items():
                t0 = time.perf_counter()
                with prof.stage(name):
                    time.sleep(seconds)
                stages[name] = time.perf_counter() - t0
            ended = time.perf_counter()
            prof.step(tokens=tokens(it), samples=samples(it), prompt_tokens=40 * it, response_tokens=60 * it)
            measured.append({"stages": stages, "wall": ended - began})
            began = time.perf_counter()
        prof.stop()
        return measured


def test_one_row_per_iteration_with_times_throughput_and_mfu(tmp_path, clean_state):
    prof = IntegratedProfiler(metrics_cfg(tmp_path), role="actor", rank=0, world_size=1)
    assert prof.metrics() == {}                                   # before the first iteration
    assert prof.set_model(parameters=N) == ModelSize(parameters=N)
    measured = run_loop(prof, 3)
    path = tmp_path / formats.METRICS_DIR / "actor_rank0.jsonl"
    rows = rows_of(path)
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    for it, (row, m) in enumerate(zip(rows, measured), start=1):
        assert row["perf/tokens"] == 100 * it and row["perf/samples"] == 4 * it
        assert row["perf/prompt_tokens"] == 40 * it and row["perf/response_tokens"] == 60 * it
        wall = row["timing_s/iteration"]
        assert abs(wall - m["wall"]) < TOL_S, (wall, m["wall"])
        assert row["perf/throughput"] == pytest.approx(row["perf/tokens"] / wall, rel=1e-12)
        for stage, seconds in m["stages"].items():
            t = row[f"timing_s/{stage}"]
            assert abs(t - seconds) < TOL_S, (stage, t, seconds)
            assert t >= SLEEPS[stage]
            assert row[f"perf/throughput/{stage}"] == pytest.approx(row["perf/tokens"] / t, rel=1e-12)
            per_token = 6 * N if stage == "actor_update" else 2 * N   # "update" in the name: forward + backward
            assert row[f"perf/mfu/{stage}"] == pytest.approx(row["perf/tokens"] * per_token / (t * PEAK * 1e12), rel=1e-12)
        assert "perf/max_memory_allocated_gb" not in row or row["perf/max_memory_allocated_gb"] >= 0
    assert prof.metrics() == rows[-1]                               # the same keys and values
    prof.metrics()["iteration"] = 99                                # a copy: the caller cannot change it
    assert prof.metrics()["iteration"] == 3


def test_key_order_and_a_stage_called_twice_is_summed(tmp_path, clean_state):
    prof = IntegratedProfiler(metrics_cfg(tmp_path), role="actor", rank=0, world_size=1)
    prof.set_model(parameters=N)
    prof.start()
    spent = 0.0
    with collector_paused():
        for _ in range(2):
            t0 = time.perf_counter()
            with prof.stage("actor_generate"):
                time.sleep(0.01)
            spent += time.perf_counter() - t0
    prof.step(tokens=10)
    prof.stop()
    (row,) = rows_of(tmp_path / "metrics" / "actor_rank0.jsonl")
    assert abs(row["timing_s/actor_generate"] - spent) < TOL_S
    assert list(row) == ["iteration", "timing_s/actor_generate", "timing_s/iteration", "perf/tokens",
                         "perf/throughput", "perf/throughput/actor_generate", "perf/mfu/actor_generate",
                         "perf/model_parameters", "perf/peak_tflops", "perf/max_host_memory_gb",
                         "perf/max_host_memory_gb/actor_generate"]   # the host's resident peaks (issue 47; no device here)


def test_metrics_work_with_profile_false_and_the_tracer_s_iteration_spans_agree(tmp_path, clean_state):
    cfg = load_config({"integrated": {"profile": False, "profile_save_path": str(tmp_path)},
                       "tracer": {"enable": True, "output_dir": str(tmp_path / "timeline")},
                       "metrics": {"enable": True}})
    tracing.init_tracer(cfg, role="actor", rank=0)
    try:
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
        run_loop(prof, 3)
    finally:
        tracing.shutdown_tracer()
    rows = rows_of(tmp_path / "metrics" / "actor_rank0.jsonl")
    events = [e for e in merge.build_timeline(str(tmp_path / "timeline"))["traceEvents"] if e.get("ph") == "X"]
    spans = {e["args"]["iteration"]: e["dur"] / 1e6 for e in events if e.get("cat") == formats.CAT_ITERATION}
    stage_spans = {(e["name"], e["args"]["iteration"]): e["dur"] / 1e6 for e in events if e.get("cat") == formats.CAT_STAGE}
    assert sorted(spans) == [1, 2, 3]
    for row in rows:
        # the window and the span open and close in adjacent actions (runtime/boundary.py's ORDER)
        assert abs(row["timing_s/iteration"] - spans[row["iteration"]]) < TOL_S
        for stage in SLEEPS:
            # the tracker's timer encloses the span (STAGE_ENTRY: observers, then span); 1 us: the
            # span's microsecond duration
            timer, span = row[f"timing_s/{stage}"], stage_spans[(stage, row["iteration"])]
            assert span <= timer + 1e-6 and timer - span < TOL_S, (stage, row["iteration"], timer, span)
        # no model size: no MFU; no peak on a CPU either (none given here)
        assert not any(k.startswith("perf/mfu/") for k in row)
        assert "perf/throughput" in row


def test_metrics_off_writes_nothing(tmp_path, clean_state):
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path)}, "metrics": {"peak_tflops": 1.0}})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.set_model(parameters=N)
    run_loop(prof, 2)
    assert prof.metrics() == {}
    assert not (tmp_path / "metrics").exists() and list(tmp_path.iterdir()) == []
    # the integrated section alone carries no metrics section: no tracker either
    on = metrics_cfg(tmp_path / "b")
    prof = IntegratedProfiler(on.integrated, role="actor", rank=0, world_size=1)
    run_loop(prof, 1)
    assert prof.metrics() == {} and not (tmp_path / "b").exists()


def test_a_write_failure_is_reported_once_and_training_goes_on(tmp_path, clean_state, runtime_warnings):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the metrics directory should be")
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path)},
                       "metrics": {"enable": True, "output_dir": str(blocker / "metrics")}}, check_paths=False)
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    run_loop(prof, 3)                                             # no exception
    assert prof.metrics()["iteration"] == 3                       # the rows are still made
    msgs = runtime_warnings("could not write the iteration metrics")
    assert len(msgs) == 1 and str(blocker) in msgs[0] and "training goes on" in msgs[0]


def test_bad_counts_are_a_value_error_naming_the_argument(tmp_path, clean_state):
    prof = IntegratedProfiler(metrics_cfg(tmp_path), role="actor", rank=0, world_size=1)
    prof.start()
    for kwargs, words in [({"tokens": -1}, ["tokens", "-1", "non-negative integer"]),
                          ({"samples": 2.5}, ["samples", "2.5", "float", "non-negative integer"]),
                          ({"tokens": True}, ["tokens", "True", "bool"]),
                          ({"prompt_tokens": "12"}, ["prompt_tokens", "'12'", "str"]),
                          ({"bad name": 1}, ["'bad name'", "letters, digits"])]:
        with pytest.raises(ValueError) as e:
            prof.step(**kwargs)
        assert all(w in str(e.value) for w in words), (kwargs, str(e.value))
    assert prof.iteration == 1                                    # a refused step() did not step
    prof.step()                                                   # the plain step() as before
    prof.step(tokens=0, samples=None)                             # zero is a count; None: not given
    assert prof.iteration == 3 and prof.metrics()["perf/tokens"] == 0 and "perf/samples" not in prof.metrics()
    prof.stop()
    with pytest.raises(ValueError):                               # checked even when not running
        prof.step(tokens=-5)


def test_the_last_iteration_counts_at_stop_only_if_a_stage_ran(tmp_path, clean_state):
    prof = IntegratedProfiler(metrics_cfg(tmp_path), role="actor", rank=0, world_size=1)
    prof.start()
    with prof.stage("actor_update"):
        pass
    prof.step(tokens=5)
    prof.stop()                                                   # iteration 2 ran no stage: no row
    assert [r["iteration"] for r in rows_of(tmp_path / "metrics" / "actor_rank0.jsonl")] == [1]
    prof = IntegratedProfiler(metrics_cfg(tmp_path), role="actor", rank=0, world_size=1)
    prof.start()
    prof.step()
    with prof.stage("actor_update"):
        pass
    prof.stop()                                                   # a stage ran in iteration 2: its row, no counts
    rows = rows_of(tmp_path / "metrics" / "actor_rank0.jsonl")    # a new run (start at 1) starts the file again
    assert [r["iteration"] for r in rows] == [1, 2] and "perf/tokens" not in rows[1]


def test_a_resumed_run_appends(tmp_path, clean_state):
    prof = IntegratedProfiler(metrics_cfg(tmp_path), role="actor", rank=0, world_size=1)
    prof.start()
    prof.step(tokens=1)
    prof.stop()
    prof = IntegratedProfiler(metrics_cfg(tmp_path), role="actor", rank=0, world_size=1)
    prof.start(iteration=5)
    prof.step(tokens=2)
    prof.stop()
    assert [r["iteration"] for r in rows_of(tmp_path / "metrics" / "actor_rank0.jsonl")] == [1, 5]


def test_config_parameters_win_over_set_model(tmp_path, clean_state):
    prof = IntegratedProfiler(metrics_cfg(tmp_path, parameters=500), role="actor", rank=0, world_size=1)
    prof.set_model(parameters=N)
    prof.start()
    with prof.stage("actor_generate"):
        time.sleep(0.005)
    prof.step(tokens=1000)
    prof.stop()
    row = prof.metrics()
    assert row["perf/mfu/actor_generate"] == pytest.approx(1000 * 2 * 500 / (row["timing_s/actor_generate"] * PEAK * 1e12))


def test_no_peak_no_mfu_and_the_device_peak_is_used_when_known(tmp_path, clean_state, monkeypatch):
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path)}, "metrics": {"enable": True}})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.set_model(parameters=N)
    run_loop(prof, 1)
    assert not any(k.startswith("perf/mfu/") for k in prof.metrics())   # a CPU: no peak unless given
    monkeypatch.setattr(tracker_module, "device_name", lambda: "NVIDIA H100 80GB HBM3")
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.set_model(parameters=N)
    run_loop(prof, 1)
    row = prof.metrics()
    t = row["timing_s/actor_update"]
    assert row["perf/mfu/actor_update"] == pytest.approx(row["perf/tokens"] * 6 * N / (t * 989.0e12))


def test_max_memory_from_the_device_module_when_it_was_used(monkeypatch):
    fake_cuda = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                                      max_memory_allocated=lambda: 3 * 2**30, get_device_name=lambda: "NVIDIA A100-SXM4-80GB",
                                      max_memory_reserved=lambda: 4 * 2**30, current_device=lambda: 0,
                                      get_device_properties=lambda i: types.SimpleNamespace(total_memory=80 * 2**30))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=fake_cuda))
    assert tracker_module.max_memory_allocated_gb() == 3.0
    assert peak_tflops(tracker_module.device_name()) == 312.0
    assert tracker_module.device_memory_gb() == {"max_memory_reserved_gb": 4.0, "memory_capacity_gb": 80.0}
    fake_cuda.is_initialized = lambda: False          # a process that never used the GPU: nothing asked
    assert tracker_module.max_memory_allocated_gb() is None and tracker_module.device_name() is None
    assert tracker_module.device_memory_gb() == {}
    row = tracker_module.iteration_row(1, 1.0, {}, {}, None, None, 1.5, {"max_memory_reserved_gb": 2.0, "memory_capacity_gb": 64.0})
    assert row["perf/max_memory_allocated_gb"] == 1.5
    assert row["perf/max_memory_reserved_gb"] == 2.0 and row["perf/memory_capacity_gb"] == 64.0


def test_tensorboard_missing_is_one_warning_and_the_lines_are_still_written(tmp_path, clean_state, runtime_warnings,
                                                                           monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)   # import fails, as without tensorboard
    prof = IntegratedProfiler(metrics_cfg(tmp_path, tensorboard=True), role="actor", rank=0, world_size=1)
    run_loop(prof, 2)
    assert len(rows_of(tmp_path / "metrics" / "actor_rank0.jsonl")) == 2
    assert len(runtime_warnings("metrics.tensorboard is true")) == 1


def test_tensorboard_scalars_when_it_imports(tmp_path, clean_state, monkeypatch):
    written: list = []

    class Writer:
        def __init__(self, log_dir):
            written.append(("dir", log_dir))

        def add_scalar(self, key, value, step):
            written.append((key, value, step))

        def flush(self):
            pass

        def close(self):
            written.append(("closed",))

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=Writer))
    prof = IntegratedProfiler(metrics_cfg(tmp_path, tensorboard=True), role="actor", rank=0, world_size=1)
    run_loop(prof, 2)
    assert written[0] == ("dir", str(tmp_path / "metrics" / "tensorboard" / "actor_rank0")) and written[-1] == ("closed",)
    rows = rows_of(tmp_path / "metrics" / "actor_rank0.jsonl")
    scalars = [w for w in written if len(w) == 3]
    assert scalars == [(k, v, r["iteration"]) for r in rows for k, v in r.items() if k != "iteration"]


# ------------------------------------------------------------------------------ model size and peaks


def test_megatron_formula_by_hand():
    cfg = types.SimpleNamespace(num_layers=2, hidden_size=64, num_attention_heads=4, ffn_hidden_size=256)
    h, layer = 64, 4 * 64 * 64 + 2 * 64 * 256 + 4 * 64             # attention 4h^2, MLP 2hf, 2 norms of 2h
    assert from_megatron(cfg).parameters == 2 * layer + 2 * h        # no vocabulary known: no embedding
    assert from_megatron(cfg, 32).parameters == 2 * layer + 2 * h + 32 * h
    assert from_megatron(cfg, 32, tied_embeddings=False).parameters == 2 * layer + 2 * h + 2 * 32 * h
    gqa = types.SimpleNamespace(num_layers=1, hidden_size=64, num_attention_heads=4, num_query_groups=1,
                                gated_linear_unit=True, ffn_hidden_size=128)
    # Q and out 2h^2, K and V of one group of 16 channels 2 * 64 * 16, SwiGLU 3hf
    assert from_megatron(gqa).parameters == 2 * 64 * 64 + 2 * 64 * 16 + 3 * 64 * 128 + 4 * 64 + 2 * 64
    moe = types.SimpleNamespace(num_layers=1, hidden_size=64, num_attention_heads=4, ffn_hidden_size=128,
                                num_moe_experts=8, moe_router_topk=2)
    assert from_megatron(moe).parameters == 4 * 64 * 64 + 2 * 2 * 64 * 128 + 4 * 64 + 2 * 64   # the 2 routed experts
    size = from_megatron(cfg, 32)
    assert size.flops_per_token(train=True) == 6 * size.parameters and size.flops_per_token(train=False) == 2 * size.parameters
    with pytest.raises(TypeError):
        from_megatron(object())


def test_from_module_and_set_model_forms(tmp_path, clean_state):
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    assert from_module(net).parameters == 16 * 32 + 32 + 32 + 1
    prof = IntegratedProfiler(metrics_cfg(tmp_path), role="actor", rank=0, world_size=1)
    assert prof.set_model(net).source == "module"
    assert prof.set_model(layers=2, hidden=64, heads=4, vocab=32).parameters == from_megatron(
        types.SimpleNamespace(num_layers=2, hidden_size=64, num_attention_heads=4), 32).parameters
    assert prof.set_model(net, parameters=7) == ModelSize(parameters=7, source="given")
    assert prof.model_size.parameters == 7
    with pytest.raises(ValueError):
        prof.set_model()
    with pytest.raises(ValueError):
        prof.set_model(parameters=0)


@pytest.mark.parametrize("name,tflops", [
    ("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 PCIe", 756.0), ("NVIDIA H100 NVL", 835.0),
    ("NVIDIA H200", 989.0), ("NVIDIA H20", 148.0), ("NVIDIA H800", 989.0), ("NVIDIA A100-SXM4-80GB", 312.0),
    ("NVIDIA A800 80GB PCIe", 312.0), ("NVIDIA L40S", 362.05), ("Tesla V100-SXM2-32GB", 125.0),
    ("Tesla V100-PCIE-16GB", 112.0), ("NVIDIA B200", 2250.0), ("NVIDIA GB200", 2500.0),
    ("AMD Instinct MI300X", 1307.4), ("AMD Instinct MI250X/MI250", 383.0),
    ("Ascend910B2", 376.0), ("Ascend910B3", 313.0), ("Ascend910B4", 280.0), ("Ascend910B1", 414.0),
    ("Ascend910B", 354.0), ("Ascend910_9392", 376.0), ("Ascend 910C", 752.0),
    ("cpu", None), ("Intel(R) Xeon(R) CPU", None), ("", None), (None, None),
])
def test_peak_table(name, tflops):
    assert peak_tflops(name) == tflops


def test_every_peak_row_has_a_source_and_no_row_is_hidden_by_an_earlier_one():
    for i, (key, tflops, source) in enumerate(PEAKS):
        assert tflops > 0 and len(source) > 10, key
        assert peak_tflops(key) == tflops, f"{key} is shadowed by an earlier row"
        assert not any(k.lower() in key.lower() for k, _, _ in PEAKS[:i]), key


# ------------------------------------------------------------------------------ the GRPO example, end to end


@pytest.mark.parametrize("override,words", [
    ("grpo.straggler_rank=2", ["grpo.straggler_rank=2", "from 0 to 1"]),      # 2 actor ranks: 0 and 1
    ("grpo.straggler_rank=-1", ["grpo.straggler_rank=-1"]),
    ("grpo.straggler_ms=-5", ["grpo.straggler_ms=-5", "milliseconds"]),
    ("grpo.log_prob_delay_ms=true", ["grpo.log_prob_delay_ms=True", "milliseconds"]),
    ("grpo.oom_at=0", ["grpo.oom_at=0", "from 1 to grpo.iterations=40"]),     # issue 47's knob
    ("grpo.oom_at=41", ["grpo.oom_at=41"]),
    ("grpo.oom_at=true", ["grpo.oom_at=True", "or null"]),
])
def test_a_bad_straggler_is_refused_before_ray(monkeypatch, override, words):
    import examples.grpo.train_grpo as grpo

    def no_ray(*a, **k):
        raise AssertionError("Ray was started for a config that cannot run")

    monkeypatch.setattr("examples.common.trainer.RayCluster", no_ray)
    with pytest.raises(ValueError) as e:
        grpo.run(grpo.DEFAULT_CONFIG, [override], analyse=False)
    assert all(w in str(e.value) for w in words), str(e.value)


def _timeline_spans(save: Path, process: str) -> tuple[dict[int, float], dict[int, float]]:
    """(iteration -> its span's seconds, iteration -> the actor_update stage spans' seconds summed)
    of one process ("actor:0") of the merged timeline."""
    tl = json.loads((save / "timeline" / "timeline.json").read_text())
    pids = {e["pid"] for e in tl["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"
            and e["args"]["name"] == process}
    iters: dict[int, float] = {}
    update: dict[int, float] = {}
    for e in tl["traceEvents"]:
        if e.get("ph") != "X" or e.get("pid") not in pids:
            continue
        if e.get("cat") == formats.CAT_ITERATION:
            iters[e["args"]["iteration"]] = e["dur"] / 1e6
        elif e.get("cat") == formats.CAT_STAGE and e["name"] == "actor_update":
            it = e["args"]["iteration"]
            update[it] = update.get(it, 0.0) + e["dur"] / 1e6
    return iters, update


STRAGGLER_MS = 150


@pytest.mark.slow
def test_grpo_example_rows_agree_with_its_timeline(tmp_path):
    save = tmp_path / "prof"
    iters = 3
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("RAY_ADDRESS", None)
    # actor rank 1 a straggler: 150 ms before each of its update_epochs (4) gradient all-reduces (the
    # issue's figure; 50 ms fell under the advisor's 5% on a loaded machine, where the profiled step is slow)
    out = subprocess.run([sys.executable, "-m", "examples.grpo.train_grpo", "--no-analyse", f"grpo.iterations={iters}",
                          "grpo.straggler_rank=1", f"grpo.straggler_ms={STRAGGLER_MS}",
                          f"profiler_config.integrated.profile_save_path={save}"],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    g = {"prompts": 8, "samples": 4, "prompt_len": 6, "response_len": 10, "ranks": 2}   # grpo.yaml
    per_rank = g["prompts"] // g["ranks"] * g["samples"]
    for rank in range(g["ranks"]):
        rows = rows_of(save / "metrics" / f"actor_rank{rank}.jsonl")
        assert [r["iteration"] for r in rows] == list(range(1, iters + 1))        # one row per iteration
        spans, update = _timeline_spans(save, f"actor:{rank}")
        for row in rows:
            it = row["iteration"]
            assert row["perf/samples"] == per_rank
            assert row["perf/tokens"] == row["perf/prompt_tokens"] + row["perf/response_tokens"]
            assert per_rank <= row["perf/response_tokens"] <= per_rank * g["response_len"]
            assert row["perf/prompt_tokens"] == per_rank * g["prompt_len"]
            assert row["timing_s/actor_update"] == pytest.approx(update[it], rel=0.02)
            assert row["timing_s/iteration"] == pytest.approx(spans[it], rel=0.02)
            assert row["perf/throughput"] == pytest.approx(row["perf/tokens"] / spans[it], rel=0.02)
            assert 0 < row["perf/mfu/actor_update"] <= 1
            # the straggler's delay is inside actor_update, before the all-reduce: rank 0 waits it out there
            assert row["timing_s/actor_update"] >= 4 * STRAGGLER_MS / 1e3
            print(f"actor rank {rank} iteration {it}: actor_update {row['timing_s/actor_update']:.4f} s "
                  f"(timeline {update[it]:.4f}), iteration {row['timing_s/iteration']:.4f} s (timeline {spans[it]:.4f}), "
                  f"{row['perf/throughput']:.1f} tokens/s, MFU actor_update {row['perf/mfu/actor_update']:.2e}")
    # the advisor (issue 20's must-show): its top finding names actor rank 1 the straggler of
    # actor_update, with what it cost rank 0
    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

    from mindspeed_profiler.analysis.results.facade import RunAnalysis

    summary, _ = analyse_directory(save, jobs=1, html=False, progress=False, write=False)
    why = ([(c["path"], c["status"], c.get("rank"), c.get("wall_us"), c.get("error")) for c in summary["captures"]],
           list(RunAnalysis.from_summary(summary).stragglers()))
    assert summary["findings"], why
    top = summary["findings"][0]
    assert top["id"] == "straggler" and top["title"].startswith(
        "actor rank 1 is the straggler of actor_update: actor rank 0 waited"), summary["findings"]
    assert top["evidence"]["victim_net_us"] >= 0.5 * 4 * STRAGGLER_MS * 1e3   # at least half the injected 4 x 150 ms
    print("top finding:", top["title"])
    ref = rows_of(save / "metrics" / "reference_rank0.jsonl")
    assert [r["iteration"] for r in ref] == list(range(1, iters + 1))
    n = g["prompts"] * g["samples"]   # the reference scores every actor rank's sequences
    assert all(r["perf/tokens"] == r["perf/prompt_tokens"] + r["perf/response_tokens"]
               and n <= r["perf/response_tokens"] <= n * g["response_len"] for r in ref)
