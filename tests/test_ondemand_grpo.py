"""On-demand capture of the real GRPO example (issue 13): a 60-iteration run on a local Ray
cluster with `dynamic: true` and `profile: false`, triggered twice from another process
(`python -m mindspeed_profiler.cli trigger`) while it trains, plus a malformed request in between.
The captures are exactly the requested iterations, stages and ranks, and the losses equal those
of the same run without any request. Slow (two Ray runs): `./run test -m slow`."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.ondemand import transport as tp
from profiler_testutil import capture_dirs, meta_of

# the module's fixture trains twice, 60 iterations each, inside the first test's time limit: under
# pytest.ini's 300 s on the usual 2-core box, over it on one slowed ~3x (1.5 s an iteration against
# ~0.5: a CI run here timed out in the second training, 266 s after the first began): 1200 s
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

# 60, not 40: "the next N" lands where the trigger predicts every worker can still reach, its poll cycle
# plus two seconds of slack ahead (about 8 iterations at this pace on a quiet box, 17 on a loaded CI
# runner); a request at iteration 25 must still resolve inside the run
ITERATIONS = 60
ROW = re.compile(r"^iter\s+(\d+)\s+reward (\S+)\s+loss (\S+)\s+kl (\S+)")
YAML_STAGES = {"actor": ("actor_generate", "actor_compute_log_prob", "actor_update"),
               "reference": ("reference_compute_log_prob",)}


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PYTHONPATH", "MINDSPEED_PROFILER_RUN_ID")}


def _train(save: Path, actions: dict[int, callable] | None = None) -> dict[int, str]:
    """Run the example; call actions[i] once iteration i was printed; return {iteration: row}."""
    proc = subprocess.Popen(
        # twice the example's work per iteration (about 0.5 s here): nearer a real job's pace, where a
        # request's poll-and-boundary latency is a few iterations, not twenty
        [sys.executable, str(REPO_ROOT / "examples" / "grpo" / "train_grpo.py"), "--no-analyse", f"grpo.iterations={ITERATIONS}",
         "grpo.prompts_per_iteration=16", "grpo.update_epochs=8",
         f"profiler_config.integrated.profile_save_path={save}", "profiler_config.integrated.profile=false",
         "profiler_config.integrated.dynamic=true"],
        cwd="/", env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rows: dict[int, str] = {}
    tail: list[str] = []
    try:
        for line in proc.stdout:
            tail = (tail + [line])[-60:]
            m = ROW.match(line)
            if m:
                it = int(m.group(1))
                rows[it] = " ".join(m.group(2, 3, 4))  # reward, loss, kl: not the seconds
                if actions and it in actions:
                    actions.pop(it)()
        assert proc.wait(timeout=600) == 0, "".join(tail)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert sorted(rows) == list(range(1, ITERATIONS + 1)), "".join(tail)
    return rows


def _trigger(save: Path, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", "trigger", str(save), "--json", *args],
                         env=_env(), capture_output=True, text=True, timeout=120, cwd=str(REPO_ROOT))
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("untriggered")
    save = tmp_path_factory.mktemp("triggered")
    sent: list[dict] = []

    def malformed():
        (save / "requests").mkdir(exist_ok=True)
        (save / "requests" / "bad.json").write_text('{"steps": 2, "integrated": {"stage": ')

    actions = {
        10: lambda: sent.append(_trigger(save, "--steps", "2")),
        17: malformed,
        25: lambda: sent.append(_trigger(save, "--steps", "2", "--stage", "actor_update", "--ranks", "0", "--roles", "actor")),
    }
    triggered = _train(save, actions)
    untriggered = _train(base)
    return save, sent, triggered, untriggered


def test_captures_are_exactly_the_requested_ones(runs):
    save, sent, _, _ = runs
    assert len(sent) == 2
    first, second = sent
    for req in sent:  # resolved to absolute iterations from the workers' heartbeats, within the run
        a, b = req["iterations"]
        assert b == a + 1 and b <= ITERATIONS, req
    assert first["iterations"][0] > 10 and second["iterations"][0] > 25
    expected = set()
    for it in range(first["iterations"][0], first["iterations"][1] + 1):
        for role, ranks in (("actor", (0, 1)), ("reference", (0,))):
            for rank in ranks:
                for stage in YAML_STAGES[role]:  # the job's stage list (grpo.yaml), level1
                    expected.add((role, rank, stage, it, first["id"]))
    for it in range(second["iterations"][0], second["iterations"][1] + 1):
        expected.add(("actor", 0, "actor_update", it, second["id"]))
    got = set()
    for d in capture_dirs(save):
        m = meta_of(d)
        assert m["status"] == "ok" and m["steps"][0] == m["steps"][1], (d, m["errors"])
        got.add((m["role"], m["rank"], m["stage"], m["steps"][0], m.get("request_id")))
        assert m["level"] == "level1"  # the job's level (grpo.yaml): no request changed it
    assert got == expected
    # every request recorded in run.json, in order
    run = json.loads((save / "run.json").read_text())
    assert [r["id"] for r in run["requests"]] == [first["id"], second["id"]]


def test_every_worker_says_what_it_did(runs):
    save, sent, _, _ = runs
    first, second = sent
    states = tp.read_worker_states(save)
    assert set(states) == {"actor_rank0", "actor_rank1", "reference_rank0"}
    for key, st in states.items():
        reqs = st["requests"]
        assert reqs["bad"]["state"] == "rejected" and "not valid JSON" in reqs["bad"]["reason"], (key, reqs["bad"])
        assert reqs[first["id"]]["state"] == "done" and reqs[first["id"]]["iterations"] == first["iterations"]
        assert st["heartbeat"]["listening"] is False and st["heartbeat"]["iteration"] == ITERATIONS + 1
    assert states["actor_rank0"]["requests"][second["id"]]["state"] == "done"
    assert states["actor_rank1"]["requests"][second["id"]]["state"] == "skipped"
    assert "rank 1 not selected" in states["actor_rank1"]["requests"][second["id"]]["reason"]
    assert "role 'reference'" in states["reference_rank0"]["requests"][second["id"]]["reason"]


def test_training_is_unaffected(runs):
    _, _, triggered, untriggered = runs
    assert triggered == untriggered  # same seed: the same rewards, losses and KL, iteration by iteration


def test_the_analysis_reads_the_on_demand_captures(runs):
    save, sent, _, _ = runs
    summary, code = analyse_directory(save, jobs=1, progress=False, write=False)
    torch_caps = [c for c in summary["captures"] if c["kind"] == "torch"]
    assert code == 0 and len(torch_caps) == 2 * (3 + 3 + 1) + 2
    assert all(c["status"] == "ok" for c in torch_caps)
