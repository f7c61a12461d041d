"""Asynchronous RL's metrics and findings (docs/async.md): the pure definitions
(mindspeed_profiler/metrics/async_rl.py), the example's settings check, and the analysis of a real
tracker file of `async/*` rows (analysis/analyzers/async_rl.py: the async_iterations rows and the
rules rollout_bound, trainer_bound, weight_sync_exposed, staleness_past_bound), each rule with a
case that fires and one that does not. The example itself runs in tests/test_async_example.py (slow)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from examples.common.async_loop import check_async
from mindspeed_profiler.analysis.analyzers.async_rl import ASYNC_ITERATIONS
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.core import formats
from mindspeed_profiler.metrics.async_rl import ALIASES, async_row, busy_seconds, staleness

RULES = ("rollout_bound", "trainer_bound", "weight_sync_exposed", "staleness_past_bound")


def test_busy_seconds_is_the_union_of_spans_inside_the_window():
    assert busy_seconds([], (0, 10)) == 0
    assert busy_seconds([(1, 3), (2, 5), (7, 8)], (0, 10)) == pytest.approx(5.0)   # 1..5 and 7..8
    assert busy_seconds([(-5, 2), (9, 20)], (0, 10)) == pytest.approx(3.0)          # cut at the window
    assert busy_seconds([(11, 12)], (0, 10)) == 0


def test_async_row_follows_the_definitions():
    row = async_row((100.0, 102.0), 0.5, [(99.0, 100.5), (101.0, 101.5), (101.4, 101.6)],
                    {"gather": 0.1, "transfer": 0.2, "load": 0.05}, 0.12, 4, [3, 3, 2, 4], 1)
    assert row["async/trainer_wait_s"] == 0.5
    assert row["async/trainer_idle_ratio"] == pytest.approx(0.25)
    assert row["async/rollout_busy_s"] == pytest.approx(0.5 + 0.6)
    assert row["async/rollout_idle_ratio"] == pytest.approx(1 - 1.1 / 2)
    assert row["async/weight_sync_s"] == pytest.approx(0.35)
    assert row["async/weight_sync_exposed_s"] == 0.12
    assert staleness(4, [3, 3, 2, 4]) == [1, 1, 2, 0]
    assert row["async/staleness_mean"] == pytest.approx(1.0)
    assert (row["async/staleness_min"], row["async/staleness_max"]) == (0, 2)
    assert row["async/stale_samples"] == 3 and row["async/samples"] == 4
    assert row["async/over_bound_samples"] == 1   # the gap of 2 > max_staleness 1
    assert {k: v for k, v in row.items() if k.startswith("async/staleness_count/")} == {
        "async/staleness_count/0": 1, "async/staleness_count/1": 2, "async/staleness_count/2": 1}
    assert set(ALIASES) <= set(row), "every aliased key is one the row has"


def test_the_async_settings_are_checked_all_at_once():
    assert check_async({"mode": "sync", "max_staleness": 1}, "grpo") == []
    problems = check_async({"mode": "fast", "max_staleness": -1, "rollout_delay_ms": "x", "update_delay_ms": True}, "grpo")
    assert len(problems) == 4
    assert "grpo.mode='fast' must be one of sync, async" in problems[0]
    assert "grpo.max_staleness=-1" in problems[1] and "grpo.rollout_delay_ms='x'" in problems[2]
    assert "grpo.update_delay_ms=True" in problems[3]


def _rows(n: int, wait: float, rollout_busy: float, exposed: float = 0.01, gap: int = 1, bound: int = 1) -> list[dict]:
    """n iterations of 1 s each: the trainer waits `wait` s, the rollout is busy `rollout_busy` s."""
    out = []
    for it in range(1, n + 1):
        t0 = float(it)
        row = async_row((t0, t0 + 1.0), wait, [(t0, t0 + rollout_busy)], {"gather": exposed, "transfer": 0.02, "load": 0.01},
                        exposed, it - 1, [it - 1 - gap] * 8, bound)
        out.append({"iteration": it, "timing_s/iteration": 1.0, **row})
    return out


def write_async_tracker(root: Path, rows: list[dict] | None = None) -> Path:
    """A driver's tracker file of async rows under root/metrics/ (the example's layout); returns root.
    Default: a rollout-bound run (the trainer waits 60% of each iteration)."""
    d = root / formats.METRICS_DIR
    d.mkdir(parents=True, exist_ok=True)
    rows = _rows(6, 0.6, 0.95) if rows is None else rows
    (d / formats.metrics_file_name("driver", 0)).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def _analyse(root: Path) -> dict:
    summary, _ = analyse_directory(root, jobs=1, html=False, progress=False)
    return summary


def _ids(summary: dict) -> list[str]:
    return [f["id"] for f in summary["findings"]]


def test_a_rollout_bound_run(tmp_path):
    summary = _analyse(write_async_tracker(tmp_path))
    rows = ASYNC_ITERATIONS.rows(summary)
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert all(r["trainer_idle_ratio"] == pytest.approx(0.6) and r["role"] == "driver" for r in rows)
    found = {f["id"]: f for f in summary["findings"]}
    assert "rollout_bound" in found and "trainer_bound" not in found
    assert found["rollout_bound"]["impact"] == pytest.approx(0.6)
    assert found["rollout_bound"]["evidence"]["iterations"] == [2, 3, 4, 5]   # the steady ones
    assert "more rollout replicas" in found["rollout_bound"]["action"]
    assert "weight_sync_exposed" not in found and "staleness_past_bound" not in found


def test_a_trainer_bound_run(tmp_path):
    summary = _analyse(write_async_tracker(tmp_path, _rows(6, 0.02, 0.3)))
    found = {f["id"]: f for f in summary["findings"]}
    assert "trainer_bound" in found and "rollout_bound" not in found
    assert found["trainer_bound"]["impact"] == pytest.approx(0.7)
    assert "fewer update epochs" in found["trainer_bound"]["action"]


def test_balanced_groups_make_no_bottleneck_finding(tmp_path):
    assert not set(_ids(_analyse(write_async_tracker(tmp_path, _rows(6, 0.05, 0.9))))) & set(RULES)


def test_an_exposed_weight_sync_names_its_largest_phase(tmp_path):
    summary = _analyse(write_async_tracker(tmp_path, _rows(6, 0.05, 0.9, exposed=0.2)))
    f = next(f for f in summary["findings"] if f["id"] == "weight_sync_exposed")
    assert f["impact"] == pytest.approx(0.2) and f["evidence"]["largest_phase"] == "gather"


def test_staleness_past_the_bound(tmp_path):
    summary = _analyse(write_async_tracker(tmp_path, _rows(6, 0.05, 0.9, gap=2, bound=1)))
    f = next(f for f in summary["findings"] if f["id"] == "staleness_past_bound")
    assert f["evidence"]["over_bound_samples"] == 6 * 8 and f["impact"] == pytest.approx(1.0)
    within = _analyse(write_async_tracker(tmp_path / "ok", _rows(6, 0.05, 0.9, gap=2, bound=2)))
    assert "staleness_past_bound" not in _ids(within)


def test_the_terminal_table_gives_the_steady_means(tmp_path):
    from mindspeed_profiler.analysis.results.async_table import table_rows

    (row,) = table_rows(_analyse(write_async_tracker(tmp_path)))
    assert row[0] == "metrics/driver_rank0.jsonl" and row[1] == "4 of 6"
    assert row[3:5] == ["60%", "5%"] and row[8:] == ["1", "0"]


def test_report_html_has_the_async_table(tmp_path):
    root = write_async_tracker(tmp_path)
    analyse_directory(root, jobs=1, html=True, progress=False)
    html = (root / "analysis" / "report.html").read_text()
    assert "Asynchronous RL: who waits for whom</h2>" in html and 'id="async-rl"' in html
    assert ">metrics/driver_rank0.jsonl</td>" in html and ">60%</td>" in html and ">4 of 6</td>" in html


class _Got:
    """Stands in for the Ray cluster's get(): the values are already here (the rollout's returns)."""

    @staticmethod
    def get(refs):
        return refs


def _one_row(rows) -> list[dict]:
    gen = {"start": 10.0, "end": 10.4, "policy_version": 0}
    load = {"transfer": (10.5, 10.52), "load": (10.52, 10.53), "policy_version": 1}
    rows.gens[1], rows.loads[1] = gen, load
    rows.add(iteration=1, window=(10.0, 11.0), wait_s=0.3, exposed_s=0.01, version=1,
             phases={"gather": (10.48, 10.49), "convert": (10.49, 10.5)}, sample_versions=[0] * 4)
    return rows.flush(_Got, wait=True)


def test_the_driver_rows_are_written_and_a_write_failure_is_a_warning(tmp_path, caplog):
    from examples.common.async_loop import Rows

    path = tmp_path / "metrics" / "driver_rank0.jsonl"
    path.parent.mkdir()
    path.write_text("a previous run's line\n")
    (row,) = _one_row(Rows(path, 1))
    assert row["iteration"] == 1 and row["timing_s/iteration"] == pytest.approx(1.0)
    assert row["async/rollout_busy_s"] == pytest.approx(0.4 + 0.03) and row["async/weight_sync_gather_s"] == pytest.approx(0.01)
    assert row["async/weight_sync_convert_s"] == pytest.approx(0.01)
    assert row["async/weight_sync_s"] == pytest.approx(0.01 + 0.01 + 0.02 + 0.01)
    assert [json.loads(line) for line in path.read_text().splitlines()] == [row]   # a new run starts the file
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (row2,) = _one_row(Rows(blocked, 1))   # a directory where the file should be: warned, the row still made
    assert row2["iteration"] == 1 and "could not write the driver's metrics" in caplog.text


def test_the_rows_forget_the_calls_no_later_row_needs():
    from examples.common.async_loop import Rows

    rows = Rows(None, 1)
    _one_row(rows)   # generation 1 ended at 10.4, the load of version 1 at 10.53: before the window's end (11.0)
    assert rows.gens == {} and rows.loads == {}
