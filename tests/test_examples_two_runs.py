"""The GRPO example run twice into one directory, as a MindSpeed-RL user runs a trainer file
(`python examples/grpo/train_grpo.py`): the runs are never mixed, each process has one name, and
the driver's own work is on the timeline. Slow (two Ray runs): `./run test -m slow`."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

pytestmark = pytest.mark.slow


def _train_file(save, iterations: int) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PYTHONPATH", "MINDSPEED_PROFILER_RUN_ID")}
    out = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "grpo" / "train_grpo.py"), "--no-analyse",
                          f"grpo.iterations={iterations}", f"profiler_config.integrated.profile_save_path={save}"],
                         cwd="/", env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads((save / "run.json").read_text())["run_id"]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    save = tmp_path_factory.mktemp("prof")
    return save, _train_file(save, 4), _train_file(save, 5)


def test_two_runs_are_analysed_apart(two_runs):
    save, a, b = two_runs
    summary, code = analyse_directory(save, jobs=1, progress=False, write=False)
    assert code == 0 and summary["runs"] == [a, b]
    assert any("2 runs" in w for w in summary["warnings"])
    tl_cap = next(c for c in summary["captures"] if c["kind"] == "timeline")
    assert [(r["run_id"], r["n_iterations"]) for r in tl_cap["timeline_runs"]] == [(a, 4), (b, 5)]
    # no iteration lasts across the two runs (each lasts well under a second here)
    assert max(it["dur_us"] for r in tl_cap["timeline_runs"] for it in r["iterations"]) < 30e6
    assert {c["run_id"] for c in summary["captures"] if c["kind"] == "torch"} == {a, b}
    one, code = analyse_directory(save, jobs=1, progress=False, write=False, run=a)
    assert code == 0 and one["runs"] == [a] and one["timeline"]["n_iterations"] == 4
    assert {c["run_id"] for c in one["captures"] if c["kind"] == "torch"} == {a}


def test_one_name_per_process_and_driver_work_on_the_timeline(two_runs):
    save, a, b = two_runs
    summary, _ = analyse_directory(save, jobs=1, progress=False, write=False, run=b)
    tl = summary["timeline"]
    workers = {r["worker"] for r in tl["stage_worker"]}
    assert workers == {"actor:0", "actor:1", "reference:0", "driver:0"}
    by_worker = {}
    for r in tl["stage_worker"]:
        by_worker.setdefault(r["worker"], set()).add(r["stage"])
    assert {"reward", "compute_advantage"} <= by_worker["driver:0"]
    # capture identities use the same names as the timeline
    assert {f"{c['role']}:{c['rank']}" for c in summary["captures"] if c["kind"] == "torch"} == {"actor:0", "actor:1", "reference:0"}
