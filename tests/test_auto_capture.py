"""Automatic capture of the slow iteration (`integrated.auto_capture`, issue 34): the config and its
errors, the running median, a real in-process training loop (the stage timed, the budget, a request
another rank posted), the finding `slow_iteration_captured`; two real gloo ranks sharing one run
directory are in tests/test_auto_capture_ranks.py.

Times: each iteration sleeps BASE_S (its median), the slow one SLOW_S, the factor 4: a loaded
machine's jitter stays far below SLOW_S / BASE_S = 15, and min_time_s keeps its stalls of an ordinary
iteration from firing."""
from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path

import pytest

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.config import ProfilerConfigError
from mindspeed_profiler.core import auto_reason
from mindspeed_profiler.analysis.analyzers import advisor
from mindspeed_profiler.analysis.analyzers import auto_capture_rules as rules
from mindspeed_profiler.ondemand import listener as lst
from mindspeed_profiler.ondemand import transport as tp
from mindspeed_profiler.ondemand.auto_capture import AutoCapture, RunningMedian, is_slow
from profiler_testutil import capture_dirs, meta_of

BASE_S, SLOW_S = 0.02, 0.3
MIN_TIME_S = 0.15   # a loaded box's stall of an ordinary iteration (4 x BASE_S is only 80 ms) never fires


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(lst, "POLL_INTERVAL_S", 0.02)


def auto_config(save: Path, **auto):
    settings = {"factor": 4, "iterations": 2, "max_captures": 1, "min_history": 4, "min_time_s": MIN_TIME_S, **auto}
    return load_config({"integrated": {"profile": False, "profile_save_path": str(save), "backend": "torch",
                                       "auto_capture": settings}})


# ---------------------------------------------------------------------------------------------- config


def test_auto_capture_is_off_by_default_and_true_takes_every_default():
    assert load_config({"integrated": {}}).integrated.auto_capture is None
    assert load_config({"integrated": {"auto_capture": False}}).integrated.auto_capture is None
    assert load_config({"integrated": {"auto_capture": {"enable": False, "factor": 5}}}).integrated.auto_capture is None
    on = load_config({"integrated": {"auto_capture": True}}).integrated.auto_capture
    assert dict(on) == {"factor": 3.0, "stage": None, "iterations": 2, "max_captures": 2, "min_history": 10,
                        "window": 100, "lead_iterations": 0, "min_time_s": 0.0}
    got = load_config({"integrated": {"auto_capture": {"stage": "actor_update", "iterations": 3}}}).integrated.auto_capture
    assert (got["stage"], got["iterations"], got["factor"]) == ("actor_update", 3, 3.0)


def test_every_bad_value_is_reported_at_load_naming_field_value_and_what_is_allowed():
    with pytest.raises(ProfilerConfigError) as err:
        load_config({"integrated": {"auto_capture": {"factor": 1, "stage": "actor_updat", "iterations": 0,
                                                     "max_captures": -1, "min_history": "10", "lead_iterations": 2000,
                                                     "min_time_s": float("nan"), "windw": 5}}})
    problems = dict(err.value.problems)
    p = "profiler_config.integrated.auto_capture."
    assert set(problems) == {p + k for k in ("factor", "stage", "iterations", "max_captures", "min_history",
                                             "lead_iterations", "min_time_s", "windw")}
    assert "got 1; expected a number > 1.0" in problems[p + "factor"]
    assert "'actor_updat'" in problems[p + "stage"] and "did you mean 'actor_update'" in problems[p + "stage"]
    assert "expected an integer >= 1 and <= 1000" in problems[p + "iterations"]
    assert "unknown key 'windw'" in problems[p + "windw"] and "did you mean 'window'" in problems[p + "windw"]
    with pytest.raises(ProfilerConfigError, match="need min_history <= window"):
        load_config({"integrated": {"auto_capture": {"min_history": 50, "window": 20}}})
    with pytest.raises(ProfilerConfigError, match=r"auto_capture: got 'yes' \(str\); expected true, false or a mapping"):
        load_config({"integrated": {"auto_capture": "yes"}})


# ---------------------------------------------------------------------------------------------- pure


def test_running_median_is_the_median_of_the_last_window_values():
    rng = random.Random(3)
    med = RunningMedian(7)
    seen = []
    for _ in range(200):
        v = rng.choice([rng.random(), 0.5, 0.25])   # repeats: removal by value must take one of them
        med.add(v)
        seen.append(v)
        assert med.median() == pytest.approx(statistics.median(seen[-7:]))
    assert len(med) == 7 and RunningMedian(3).median() is None


def test_slow_needs_history_the_factor_and_the_floor():
    s = {"factor": 3.0, "min_history": 4, "min_time_s": 0.1}
    assert is_slow(0.4, 0.1, 4, s) and not is_slow(0.4, 0.1, 3, s) and not is_slow(0.3, 0.1, 4, s)
    assert not is_slow(0.09, 0.01, 10, s)   # 9x the median, under min_time_s
    assert not is_slow(1.0, None, 10, s) and not is_slow(1.0, 0.0, 10, s)


# ---------------------------------------------------------------------------------------------- a real loop


def train(prof: IntegratedProfiler, iters: int, slow: dict[int, str], settle: bool = False) -> list[float]:
    """A real torch loop: actor_generate then actor_update per iteration, each sleeping BASE_S / 2;
    `slow`: iteration -> the stage that sleeps SLOW_S in it."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    losses = []
    prof.start()
    for it in range(1, iters + 1):
        if settle:   # a request posted before this iteration has been polled
            want = prof._ondemand.polls_done + 2
            while prof._ondemand.polls_done < want:
                time.sleep(0.005)
        with prof.stage("actor_generate"):
            with torch.no_grad():
                model(x)
            time.sleep(SLOW_S if slow.get(it) == "actor_generate" else BASE_S / 2)
        with prof.stage("actor_update"):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            time.sleep(SLOW_S if slow.get(it) == "actor_update" else BASE_S / 2)
        prof.step()
    prof.stop()
    return losses


def captured(save: Path) -> list[tuple]:
    out = []
    for d in capture_dirs(save):
        m = meta_of(d)
        out.append((m["stage"], m["steps"], m["request_id"], m["status"], auto_reason.reason_of(m["notes"])))
    return sorted(out, key=lambda c: c[1])


def worker_requests(save: Path) -> dict:
    return json.loads((save / "requests" / "workers" / "actor_rank0.json").read_text())["requests"]


def test_the_stage_slow_once_captures_the_iterations_after_it_once(tmp_path):
    """stage: actor_update. Iteration 6's update is slow: 7-8 captured (every stage: the request's
    own stage is the job's, all); iteration 11's is slow too, beyond max_captures 1: nothing; a
    slow actor_generate (iteration 13) is not the stage timed."""
    prof = IntegratedProfiler(auto_config(tmp_path, stage="actor_update"), role="actor", rank=0, world_size=1)
    train(prof, 15, {6: "actor_update", 11: "actor_update", 13: "actor_generate"})
    (cap,) = captured(tmp_path)
    stage, steps, rid, status, why = cap
    assert (stage, steps, rid, status) == ("all", [7, 8], "auto-actor-i6", "ok")
    assert why["slow_iteration"] == 6 and why["stage"] == "actor_update" and why["iterations"] == [7, 8]
    assert why["factor"] == 4.0 and why["rank"] == 0 and why["role"] == "actor" and why["history"] == 5
    assert SLOW_S <= why["time_s"] < SLOW_S + 1.0 and why["median_s"] < SLOW_S / 4
    assert why["ratio"] == pytest.approx(why["time_s"] / why["median_s"], rel=1e-2)
    auto = next(o for o in prof.observers if isinstance(o, AutoCapture))
    assert auto.accepted_ids == ["auto-actor-i6"] and auto.passed == [11]
    reqs = worker_requests(tmp_path)
    assert list(reqs) == ["auto-actor-i6"] and reqs["auto-actor-i6"]["state"] == "done"
    assert reqs["auto-actor-i6"]["source"] == "auto"
    posted = json.loads((tmp_path / "requests" / "auto-actor-i6.json").read_text())   # for the other ranks
    assert posted["iterations"] == [7, 8] and posted["auto"]["slow_iteration"] == 6 and posted["roles"] == ["actor"]


def test_without_auto_capture_nothing_is_built_and_training_is_the_same(tmp_path):
    off = load_config({"integrated": {"profile": False, "profile_save_path": str(tmp_path / "off")}})
    prof = IntegratedProfiler(off, role="actor", rank=0, world_size=1)
    assert prof.observers == [] and prof._ondemand is None
    base = train(prof, 8, {5: "actor_update"})
    on = IntegratedProfiler(auto_config(tmp_path / "on"), role="actor", rank=0, world_size=1)
    assert [type(o).__name__ for o in on.observers] == ["AutoCapture", "Listener"]   # the maker told first
    assert train(on, 8, {5: "actor_update"}) == base
    assert capture_dirs(tmp_path / "off") == [] and not (tmp_path / "off" / "requests").exists()
    assert [c[1] for c in captured(tmp_path / "on")] == [[6, 7]]


def test_a_request_another_rank_posted_is_captured_and_counts_toward_max_captures(tmp_path):
    """Rank 1 saw iteration 3 slow (this rank did not) and posted its request for 6-7
    (lead_iterations 2); this rank captures 6-7 with rank 1's reason, and its own slow iteration
    9 is beyond max_captures 1."""
    cfg = auto_config(tmp_path, lead_iterations=2)
    reason = {"slow_iteration": 3, "time_s": 0.5, "median_s": 0.02, "ratio": 25.0, "factor": 4.0, "stage": None,
              "history": 4, "role": "actor", "rank": 1, "iterations": [6, 7]}
    tp.submit_file(tmp_path, {"id": auto_reason.request_id("actor", 3), "iterations": [6, 7], "roles": ["actor"],
                              "source": "auto", "auto": reason})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    train(prof, 12, {9: "actor_update"}, settle=True)
    (cap,) = captured(tmp_path)
    assert cap[1:4] == ([6, 7], "auto-actor-i3", "ok") and cap[4] == reason
    auto = next(o for o in prof.observers if isinstance(o, AutoCapture))
    assert auto.accepted_ids == ["auto-actor-i3"] and auto.passed == [9] and auto.fired == []


def test_a_slow_iteration_during_a_capture_is_not_timed_nor_fired_on(tmp_path):
    """The job's own static window (iterations 6-7 of actor_update, a capture per call) slows its iterations; a slow
    iteration inside it fires nothing; the first after it does."""
    cfg = load_config({"integrated": {"profile": True, "profile_step_start": 6, "profile_step_end": 8,
                                      "stage": ["actor_update"], "profile_save_path": str(tmp_path), "backend": "torch",
                                      "auto_capture": {"factor": 4, "iterations": 1, "min_history": 4,
                                                       "min_time_s": MIN_TIME_S}}})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    train(prof, 11, {7: "actor_update", 9: "actor_update"})
    auto = next(o for o in prof.observers if isinstance(o, AutoCapture))
    assert [r["slow_iteration"] for r in auto.fired] == [9] and auto.passed == []
    assert [(c[1], c[2]) for c in captured(tmp_path)] == [([6, 6], None), ([7, 7], None), ([10, 10], "auto-actor-i9")]
    assert len(auto.times) == 11 - 2 - 1   # every iteration but the two captured ones and the last (stop)


# ---------------------------------------------------------------------------------------------- the finding


def _cap(path: str, rank: int, why: dict | None, notes: list | None = None) -> dict:
    notes = notes if notes is not None else ([auto_reason.reason_note(why)] if why else [])
    return {"path": path, "role": "actor", "rank": rank, "stage": "all", "status": "ok", "kind": "torch",
            "meta": {"notes": notes, "request_id": auto_reason.request_id("actor", why["slow_iteration"]) if why else None}}


def test_slow_iteration_captured_names_the_iteration_its_time_and_the_capture_dirs():
    why0 = {"slow_iteration": 8, "time_s": 0.44, "median_s": 0.04, "ratio": 11.0, "factor": 4.0, "stage": None,
            "history": 7, "role": "actor", "rank": 0, "iterations": [9, 10]}
    why1 = dict(why0, rank=1, time_s=0.45)
    summary = {"captures": [_cap("all/actor_rank0_step9-10_pt", 0, why0), _cap("all/actor_rank1_step9-10_pt", 1, why1),
                            _cap("all/actor_rank0_step2-2_pt", 0, None),
                            _cap("all/x_pt", 0, None, notes=["auto_capture: {not json"])]}   # corrupt: no finding
    (f,) = [f for f in advisor.findings(summary) if f["id"] == "slow_iteration_captured"]
    assert f["title"].startswith("iteration 8 of actor was slow: the iteration took 0.44 s, 11.0x its running median "
                                 "0.04 s (factor 4.0); iterations 9-10 captured on 2 rank(s): all/actor_rank0_step9-10_pt, "
                                 "all/actor_rank1_step9-10_pt")
    ev = f["evidence"]
    assert ev["capture_dirs"] == ["all/actor_rank0_step9-10_pt", "all/actor_rank1_step9-10_pt"] and ev["ranks"] == [0, 1]
    assert (ev["slow_iteration"], ev["time_s"], ev["median_s"], ev["iterations"]) == (8, 0.44, 0.04, [9, 10])
    assert f["impact"] == pytest.approx(rules.IMPACT_WEIGHT * (0.44 - 0.04) / 0.44, abs=1e-4)
    assert f["docs"] == "docs/diagnosis.md#slow-iteration-captured"
    assert rules.slow_iteration_findings({"captures": [_cap("a", 0, None)]}) == []


def test_a_mapping_of_thousands_of_unknown_keys_is_reported_in_a_few_lines():
    with pytest.raises(ProfilerConfigError) as err:
        load_config({"integrated": {"auto_capture": {f"k{i}": i for i in range(5000)}}})
    assert len(err.value.problems) == 11 and "4990 more unknown key(s)" in err.value.problems[-1][1]


def test_the_stage_may_be_one_the_config_declares_when_the_checker_is_told():
    from mindspeed_profiler.config.checks import check_auto_capture
    from mindspeed_profiler.config.errors import BAD

    problems: list = []
    got = check_auto_capture({"stage": "my_stage_xyz"}, "p", problems, declared=("my_stage_xyz",))
    assert problems == [] and got["stage"] == "my_stage_xyz"
    assert check_auto_capture({"stage": "my_stage_xyz"}, "p", problems) is BAD and problems   # not declared: refused


def test_an_automatic_request_round_trips_and_a_bad_reason_is_rejected():
    from mindspeed_profiler.ondemand import requests as rq

    raw = {"id": "auto-actor-i3", "iterations": [4, 5], "roles": ["actor"], "source": "auto",
           "auto": {"slow_iteration": 3, "time_s": 1.0, "median_s": 0.1}}
    req = rq.parse_request(raw)
    assert req.source == "auto" and dict(req.auto) == raw["auto"] and rq.parse_request(req.to_dict()) == req
    with pytest.raises(rq.RequestError, match="auto: got str"):
        rq.parse_request(dict(raw, auto="slow"))
    with pytest.raises(rq.RequestError, match="at most 32 keys"):
        rq.parse_request(dict(raw, auto={str(i): i for i in range(100)}))


def test_auto_capture_stage_may_name_a_stage_the_config_itself_declares():
    from mindspeed_profiler import load_config

    cfg = load_config({"integrated": {"register_stages": ["my_rollout_stage"],
                                      "auto_capture": {"stage": "my_rollout_stage"}}})
    assert cfg.integrated.auto_capture["stage"] == "my_rollout_stage"
