"""End to end: `grpo.mode=async` of the GRPO example on a real local Ray cluster (actor group, reference,
a rollout group apart; the real Megatron-core policy), profiled, then analysed (docs/async.md).

- it learns the task (reward rises over 40 iterations, as the synchronous mode);
- every `async/*` metric of the driver's tracker file equals a recomputation from the merged
  timeline's spans (driver iterations and waits, the rollout's generation and weight spans, actor
  rank 0's gather);
- staleness from the records: each trained sample's version gap (the updates finished before its
  batch's update, from the timeline, minus the policy_version in its sample record) is <=
  grpo.max_staleness, and the version each record carries is the number of weight loads the rollout
  finished before it generated the batch;
- `grpo.rollout_delay_ms` makes the advisor say rollout_bound, `grpo.update_delay_ms` trainer_bound.
Slow (the learning run about 80 s, each knob run about 35 s on 2 cores): `./run test -m slow`."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler.metrics.async_rl import busy_seconds

pytestmark = pytest.mark.slow

MAX_STALENESS = 1   # grpo.yaml's
CLOCK_S = 0.03      # the driver's time.time() and the workers' vs the tracer's aligned clock, on a busy box


def _run(tmp_path: Path, *overrides: str) -> tuple[subprocess.CompletedProcess, Path]:
    save = tmp_path / "prof"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-m", "examples.grpo.train_grpo", "grpo.mode=async", *overrides,
                          f"profiler_config.integrated.profile_save_path={save}"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out, save


def _spans(save: Path) -> dict[tuple[str, str], list[tuple[float, float, dict]]]:
    """(process, span name) -> [(start s, end s, args)] of the merged timeline (json, not our reader)."""
    tl = json.loads((save / "timeline" / "timeline.json").read_text())
    procs = {e["pid"]: e["args"]["name"] for e in tl["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"}
    out: dict[tuple[str, str], list] = {}
    for e in tl["traceEvents"]:
        if e.get("ph") == "X":
            out.setdefault((procs.get(e["pid"]), e["name"]), []).append(
                (e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, e.get("args") or {}))
    return out


def _by(spans: list, key: str) -> dict:
    return {a[key]: (t0, t1) for t0, t1, a in spans if key in a}


def _findings(save: Path) -> dict[str, dict]:
    return {f["id"]: f for f in json.loads((save / "analysis" / "summary.json").read_text())["findings"]}


def test_async_grpo_learns_and_its_metrics_are_the_timelines_and_records(tmp_path):
    out, save = _run(tmp_path)
    rewards = [float(x) for x in re.findall(r"^iter\s+\d+\s+reward ([0-9.]+)", out.stdout, re.M)]
    assert len(rewards) == 40
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last >= first + 0.15, (first, last)   # measured: 0.17 -> 0.54 (docs/async.md)

    rows = [json.loads(line) for line in (save / "metrics" / "driver_rank0.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == list(range(1, 41))
    sp = _spans(save)
    iters = _by(sp[("driver", "iteration")], "iteration")
    waits = _by(sp[("driver", "wait_rollout")], "iteration")
    exposed = _by(sp[("driver", "weight_sync")], "policy_version")
    gather = _by(sp[("actor:0", "weight_sync/gather")], "policy_version")
    transfer = _by(sp[("rollout:0", "weight_sync/transfer")], "policy_version")
    load = _by(sp[("rollout:0", "weight_sync/load")], "policy_version")
    busy = [(t0, t1) for name in ("rollout_generate", "weight_sync/transfer", "weight_sync/load")
            for t0, t1, _ in sp[("rollout:0", name)]]
    dur = lambda span: span[1] - span[0]   # noqa: E731
    for r in rows:
        it, window = r["iteration"], iters[r["iteration"]]
        assert r["timing_s/iteration"] == pytest.approx(dur(window), abs=CLOCK_S)
        assert r["async/trainer_wait_s"] == pytest.approx(dur(waits[it]), abs=CLOCK_S)
        assert r["async/trainer_idle_ratio"] == pytest.approx(dur(waits[it]) / dur(window), abs=0.05)
        assert r["async/rollout_busy_s"] == pytest.approx(busy_seconds(busy, window), abs=2 * CLOCK_S)
        assert r["async/rollout_idle_ratio"] == pytest.approx(1 - busy_seconds(busy, window) / dur(window), abs=0.1)
        for phase, spans in (("gather", gather), ("transfer", transfer), ("load", load)):
            assert r[f"async/weight_sync_{phase}_s"] == pytest.approx(dur(spans[it]), abs=CLOCK_S), (it, phase)
        assert r["async/weight_sync_s"] == pytest.approx(sum(dur(p[it]) for p in (gather, transfer, load)), abs=3 * CLOCK_S)
        assert r["async/weight_sync_exposed_s"] == pytest.approx(dur(exposed[it]), abs=CLOCK_S)

    # staleness from the records: the sample records of the rollout (its iteration = the batch)
    samples = [json.loads(line) for line in (save / "samples" / "rollout_rank0.jsonl").read_text().splitlines()]
    samples = [s for s in samples if s["type"] == "sample"]
    assert len(samples) == 40 * 32
    update_starts = {a["iteration"]: t0 for t0, _, a in sp[("driver", "actor_update")]}
    synced = sorted(t1 for t0, t1 in exposed.values())   # each update's weight sync, done
    loaded = sorted(t1 for t0, t1 in load.values())
    generated = {a["batch"]: t0 for t0, _, a in sp[("rollout:0", "rollout_generate")]}
    gaps: dict[int, list[int]] = {}
    for s in samples:
        b = s["iteration"]
        trained = sum(1 for t in synced if t <= update_starts[b])   # the updates before batch b's
        assert trained == b - 1
        assert s["policy_version"] == sum(1 for t in loaded if t <= generated[b])   # the weights it generated with
        gaps.setdefault(b, []).append(trained - s["policy_version"])
    assert all(0 <= g <= MAX_STALENESS for gs in gaps.values() for g in gs), gaps
    assert sum(g == MAX_STALENESS for gs in gaps.values() for g in gs) >= 30 * 32   # it did run one step off
    for r in rows:
        g = gaps[r["iteration"]]
        assert r["async/staleness_mean"] == pytest.approx(sum(g) / len(g))
        assert (r["async/staleness_min"], r["async/staleness_max"]) == (min(g), max(g))
        assert r["async/stale_samples"] == sum(x > 0 for x in g) and r["async/samples"] == len(g) == 32
        assert {k: v for k, v in r.items() if k.startswith("async/staleness_count/")} == {
            f"async/staleness_count/{x}": g.count(x) for x in set(g)}
        assert r["async/policy_version"] == r["iteration"] - 1 and r["async/max_staleness"] == MAX_STALENESS
        assert r["async/over_bound_samples"] == 0

    # both groups' stages overlap on the timeline: the rollout generates while the actors update
    updates = [(t0, t1) for t0, t1, _ in sp[("actor:0", "actor_update")]]
    overlapping = sum(1 for t0, t1, _ in sp[("rollout:0", "rollout_generate")]
                      if busy_seconds(updates, (t0, t1)) > 0)
    assert overlapping >= 20, overlapping

    # the analysis: one async_iterations row per iteration, the weights' wait and no staleness finding
    summary = json.loads((save / "analysis" / "summary.json").read_text())
    from mindspeed_profiler.analysis.analyzers.async_rl import ASYNC_ITERATIONS

    assert [r["iteration"] for r in ASYNC_ITERATIONS.rows(summary)] == list(range(1, 41))
    assert "staleness_past_bound" not in _findings(save)
    assert "Asynchronous RL: who waits for whom" in out.stdout   # the terminal's table (async_table.py)


def test_a_slow_rollout_makes_the_run_rollout_bound(tmp_path):
    # 1000 ms, not docs/async.md's 600 (trainer idle 46% on a quiet box, against the rule's 25%): the
    # update is CPU work, and at 600 ms a box 1.5x slower (a loaded CI) would bring the idle share to the
    # threshold; at 1000 ms it takes 2.5x
    out, save = _run(tmp_path, "grpo.iterations=8", "grpo.rollout_delay_ms=1000")
    found = _findings(save)
    assert "rollout_bound" in found and "trainer_bound" not in found, sorted(found)
    assert found["rollout_bound"]["evidence"]["trainer_idle_ratio"] >= 0.25


def test_a_slow_update_makes_the_run_trainer_bound(tmp_path):
    out, save = _run(tmp_path, "grpo.iterations=8", "grpo.update_delay_ms=100")
    found = _findings(save)
    assert "trainer_bound" in found and "rollout_bound" not in found, sorted(found)
    assert found["trainer_bound"]["evidence"]["rollout_idle_ratio"] >= 0.5
