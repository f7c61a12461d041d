"""schedule.py: pure capture planning (windows, step lists, warmup, DPO, stage mode)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindspeed_profiler import load_config
from mindspeed_profiler.capture.schedule import Window, make_plan, plan_from_config, plan_windows, runs, schedule_args


def test_runs_groups_consecutive_steps():
    assert runs([5, 1, 2, 3, 9, 10]) == [(1, 3), (5, 5), (9, 10)]
    assert runs([]) == []


def test_window_from_config_is_half_open():
    cfg = load_config({"integrated": {"profile": True, "profile_step_start": 3, "profile_step_end": 6}}).integrated
    plan = plan_from_config(cfg)
    assert plan.continuous
    assert plan.windows == (Window(3, 5, 0, 0),)
    assert [i for w in plan.windows for i in w.steps] == [3, 4, 5]


def test_step_list_one_window_per_run():
    plan = make_plan([2, 3, 7, 9, 10], warmup=0)
    assert [(w.first, w.last) for w in plan.windows] == [(2, 3), (7, 7), (9, 10)]


def test_warmup_precedes_and_is_clamped():
    ws = plan_windows([3, 4, 6, 20], warmup=2)
    assert [(w.begin, w.first, w.last, w.warmup) for w in ws] == [
        (1, 3, 4, 2),    # iterations 1-2 warm up
        (5, 6, 6, 1),    # only iteration 5 lies between the previous window and this one
        (18, 20, 20, 2),
    ]
    # first step 1: nothing before it to warm up on
    assert plan_windows([1, 2], warmup=3)[0].warmup == 0


def test_dpo_semantic_end_minus_start_plus_one_iterations():
    # MindSpeed DPO: one warmup step, so end - start + 1 iterations run under the profiler
    cfg = load_config("configs/profiler_config/dpo.yaml").integrated
    assert cfg.warmup_steps == 1
    for start, end in [(2, 3), (3, 6), (10, 12)]:
        w = plan_windows(range(start, end), warmup=1)[0]
        assert w.profiled_iterations == end - start + 1
        assert (w.begin, w.first, w.last) == (start - 1, start, end - 1)
        assert schedule_args(w) == {"wait": 0, "warmup": 1, "active": end - start, "repeat": 1}


def test_stage_mode_one_capture_per_selected_call():
    plan = make_plan([2, 3], stages=("actor_update",))
    assert not plan.continuous and plan.windows == ()
    assert plan.stage_call_recorded("actor_update", 2)
    assert not plan.stage_call_recorded("actor_generate", 2)
    assert not plan.stage_call_recorded("actor_update", 4)


def test_resume_mid_window():
    plan = make_plan([3, 4, 5], warmup=1)
    assert plan.window_resumed_at(4) == Window(4, 5, 0, 1)
    assert plan.window_resumed_at(2) == Window(3, 5, 1, 1)
    assert plan.window_resumed_at(6) is None


def test_bad_inputs():
    with pytest.raises(ValueError, match="warmup"):
        plan_windows([1], warmup=-1)
    with pytest.raises(ValueError, match="1-based"):
        plan_windows([0, 1])


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(1, 60), min_size=1, max_size=15), st.integers(0, 5))
def test_recorded_steps_are_exactly_the_configured_ones(steps, warmup):
    ws = plan_windows(steps, warmup)
    recorded = [s for w in ws for s in w.steps]
    assert recorded == sorted(steps)
    prev_last = 0
    for w in ws:
        assert w.begin >= 1 and w.begin > prev_last  # warmup never overlaps a recorded step
        assert 0 <= w.warmup <= warmup
        prev_last = w.last
    plan = make_plan(sorted(steps), warmup)
    assert [i for w in plan.windows for i in w.steps] == sorted(steps)


# --- profile_steps_continuous: false (verl's profile_continuous_steps: false): one capture per step ---


def opened(plan, iterations: int) -> list[Window]:
    """The windows a profiler opens over iterations 1..N, as IntegratedProfiler does: the window
    resumed at start, then at each step (the open one closes after its last iteration)."""
    out, current = [], plan.window_resumed_at(1)
    if current is not None:
        out.append(current)
    for it in range(2, iterations + 1):
        if current is not None and it - 1 >= current.last:
            current = None
        if current is None:
            current = plan.window_beginning_at(it)
            if current is not None:
                out.append(current)
    return out


def test_per_step_windows_for_a_list():
    steps = [2, 3, 4, 7]
    assert [(w.first, w.last) for w in opened(make_plan(steps), 10)] == [(2, 4), (7, 7)]
    per_step = make_plan(steps, continuous_steps=False)
    assert [(w.first, w.last) for w in opened(per_step, 10)] == [(2, 2), (3, 3), (4, 4), (7, 7)]
    assert per_step.windows == make_plan(steps).windows   # kept per run: cut as they are reached


def test_per_step_warmup_only_before_a_run():
    plan = make_plan([3, 4, 6], warmup=2, continuous_steps=False)
    assert [(w.begin, w.first, w.last, w.warmup) for w in opened(plan, 8)] == [(1, 3, 3, 2), (4, 4, 4, 0), (5, 6, 6, 1)]


def test_per_step_from_config_and_resume():
    cfg = load_config({"integrated": {"profile": True, "profile_step_start": 3, "profile_step_end": 6,
                                      "profile_steps_continuous": False}}).integrated
    plan = plan_from_config(cfg)
    assert [(w.first, w.last) for w in opened(plan, 8)] == [(3, 3), (4, 4), (5, 5)]
    assert plan.window_resumed_at(4) == Window(4, 4, 0, 0)
    assert plan.window_resumed_at(2) is None and plan.window_resumed_at(6) is None
    # stage mode is one capture per stage call already: the setting changes nothing there
    staged = make_plan([3, 4], stages=("actor_update",), continuous_steps=False)
    assert staged.windows == () and staged.stage_call_recorded("actor_update", 4)


def test_per_step_huge_window_costs_nothing():
    cfg = load_config({"integrated": {"profile": True, "profile_step_start": 1, "profile_step_end": 10**9,
                                      "profile_steps_continuous": False}}).integrated
    plan = plan_from_config(cfg)
    assert len(plan.windows) == 1
    assert plan.window_beginning_at(5 * 10**8) == Window(5 * 10**8, 5 * 10**8, 0, 0)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(1, 60), min_size=1, max_size=15), st.integers(0, 5))
def test_per_step_records_exactly_the_configured_steps_one_per_capture(steps, warmup):
    ws = opened(make_plan(sorted(steps), warmup, continuous_steps=False), 61)
    assert [w.first for w in ws] == sorted(steps) and all(w.first == w.last for w in ws)
    prev_last = 0
    for w in ws:
        assert w.begin > prev_last and 0 <= w.warmup <= warmup   # a warm-up never overlaps a recorded step
        prev_last = w.last
