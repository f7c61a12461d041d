"""Every bad input gets its own clear error: the full path, the bad value, what is allowed."""
from __future__ import annotations

import os
import stat

import pytest

from mindspeed_profiler import load_config
from mindspeed_profiler.config import ProfilerConfigError


def problems(block, **kw):
    with pytest.raises(ProfilerConfigError) as e:
        load_config(block, **kw)
    assert isinstance(e.value, ValueError)
    return e.value.problems


def one(block, **kw):
    ps = problems(block, **kw)
    assert len(ps) == 1, ps
    return ps[0]


def I(**fields):
    return {"profiler_config": {"integrated": fields}}


def test_unknown_key_names_closest():
    path, msg = one(I(profle_level="level1"))
    assert path == "profiler_config.integrated.profle_level"
    assert "did you mean 'profile_level'" in msg


def test_key_in_wrong_section_is_pointed_out():
    path, msg = one({"tracer": {"profile_ranks": [0]}})
    assert path == "profiler_config.tracer.profile_ranks"
    assert "profiler_config.integrated" in msg


def test_unknown_section():
    path, msg = one({"profiler_config": {"integrated": {}, "tracr": {"enable": True}}})
    assert path == "profiler_config.tracr" and "did you mean 'tracer'" in msg


@pytest.mark.parametrize("field,value,expect", [
    ("profile", "yes", "expected true or false"),
    ("mstx", 1, "expected true or false"),
    ("profile_step_start", "1", "expected an integer"),
    ("profile_step_start", 1.5, "expected an integer"),
    ("profile_step_end", True, "expected an integer"),
    ("warmup_steps", -1, ">= 0"),
    ("trace_size_budget_mb", 0, "> 0.0"),
    ("profile_save_path", 7, "expected a directory path"),
])
def test_wrong_types(field, value, expect):
    path, msg = one(I(**{field: value}))
    assert path == f"profiler_config.integrated.{field}"
    assert repr(value) in msg and expect in msg


def test_unknown_stage_lists_valid_ones_and_suggests():
    path, msg = one(I(stage="actor_updte"))
    assert path == "profiler_config.integrated.stage"
    assert "'actor_updte'" in msg and "did you mean 'actor_update'" in msg
    for valid in ("actor_generate", "actor_compute_log_prob", "reference_compute_log_prob",
                  "critic_compute_values", "actor_update", "critic_update"):
        assert valid in msg


def test_unknown_stage_in_list():
    ps = problems(I(stage=["actor_update", "critic_updat", "bogus"]))
    assert [p for p, _ in ps] == ["profiler_config.integrated.stage"] * 2
    assert "critic_updat" in ps[0][1] and "bogus" in ps[1][1]


@pytest.mark.parametrize("value", [[], 5, None, ["all", "actor_update"]])
def test_bad_stage_shapes(value):
    path, _ = one(I(stage=value))
    assert path == "profiler_config.integrated.stage"


@pytest.mark.parametrize("value", ["0,1", "[0, 1]", -1, [0, "1"], [], 1.0, True, {"0": 1}])
def test_profile_ranks(value):
    path, msg = one(I(profile_ranks=value))
    assert path == "profiler_config.integrated.profile_ranks"
    assert "'all'" in msg and "[0, 1]" in msg
    if value == "0,1":
        assert "not a list" in msg


@pytest.mark.parametrize("start,end", [(2, 2), (3, 1), (0, 2)])
def test_step_window(start, end):
    ps = problems(I(profile_step_start=start, profile_step_end=end))
    assert any(p.startswith("profiler_config.integrated.profile_step_") for p, _ in ps)
    text = " ".join(m for _, m in ps)
    assert str(start) in text


def test_empty_window_message():
    path, msg = one(I(profile_step_start=5, profile_step_end=5))
    assert path == "profiler_config.integrated.profile_step_end"
    assert "profile_step_start < profile_step_end" in msg


@pytest.mark.parametrize("field,value", [("profile_level", "level3"), ("profile_export_type", "json"),
                                         ("backend", "cuda"), ("aic_metrics", "pipe")])
def test_enums(field, value):
    path, msg = one(I(**{field: value}))
    assert path == f"profiler_config.integrated.{field}"
    assert repr(value) in msg and "allowed:" in msg


def test_level_typo_suggests():
    _, msg = one(I(profile_level="levl1"))
    assert "did you mean 'level1'" in msg


def test_profile_steps_list():
    assert one(I(profile_steps=[0, 2]))[0] == "profiler_config.integrated.profile_steps"
    assert one(I(profile_steps=[2, 2]))[0] == "profiler_config.integrated.profile_steps"
    assert one(I(profile_steps="3"))[0] == "profiler_config.integrated.profile_steps"


def test_save_path_is_a_file(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    path, msg = one(I(profile=True, profile_save_path=str(f)))
    assert path == "profiler_config.integrated.profile_save_path" and "is a file" in msg
    path, msg = one(I(profile=True, profile_save_path=str(f / "sub")))
    assert "is a file" in msg
    # not checked when profiling is off (nothing will be written), nor with check_paths=False
    load_config(I(profile=False, profile_save_path=str(f)))
    load_config(I(profile=True, profile_save_path=str(f)), check_paths=False)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_save_path_not_writable(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        path, msg = one(I(profile=True, profile_save_path=str(d)))
        assert "not writable" in msg
    finally:
        d.chmod(stat.S_IRWXU)


def test_tracer_output_dir_is_a_file(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    path, msg = one({"tracer": {"enable": True, "output_dir": str(f)}})
    assert path == "profiler_config.tracer.output_dir" and "is a file" in msg


def test_domain_include_and_exclude_conflict():
    path, _ = one(I(mstx_domain_include=["a"], mstx_domain_exclude=["b"]))
    assert path == "profiler_config.integrated.mstx_domain_exclude"


def test_parallel_ranks():
    assert load_config(I(profile_parallel_ranks={"tp": 0, "pp": [1, 0]})).integrated.profile_parallel_ranks == {"tp": (0,), "pp": (0, 1)}
    path, msg = one(I(profile_parallel_ranks={"tq": [0]}))
    assert path == "profiler_config.integrated.profile_parallel_ranks.tq" and "did you mean 'tp'" in msg


def test_non_finite_numbers_rejected():
    found = dict(problems({"integrated": {"trace_size_budget_mb": float("inf")}, "tracer": {"flush_interval_s": float("inf")}},
                          check_paths=False))
    assert set(found) == {"profiler_config.integrated.trace_size_budget_mb", "profiler_config.tracer.flush_interval_s"}


# --- system (process-level capture: nsight / rocprof_sys / msprof / py_spy) -------------------
# The table of every backend's rules is in tests/test_system_config.py; these are the messages kept
# from when the section was validated only.


def S(**fields):
    """A system section (enabled, the default when the section is present)."""
    return {"profiler_config": {"system": fields}}


@pytest.mark.parametrize("section", [{"backend": "nsight"}, {"backend": "nsight", "enabled": True},
                                     {"backend": "rocprof_sys", "enabled": True}, {"backend": "msprof"},
                                     {"backend": "py_spy", "worker_groups": ["actor"]}])
def test_enabled_system_section_loads(section):
    # process-level capture is built: `enabled: true` (also the default) is no longer refused
    cfg = load_config({"profiler_config": {"system": section}})
    assert cfg.system.enabled is True and cfg.system.backend == section["backend"]
    assert load_config({"profiler_config": {"system": {**section, "enabled": False}}}).system.enabled is False


def test_system_mistakes_reported_with_other_mistakes():
    ps = problems({"profiler_config": {"system": {"backend": "nsight", "options": {"-t": "cuda"}}}})
    assert sorted(p for p, _ in ps) == ["profiler_config.system.options.-t"]
    ps = problems({"profiler_config": {"system": {"backend": "nsight", "enabled": True, "flags": ["--stats"]},
                                       "integrated": {"profile": "yes"}}})
    assert sorted(p for p, _ in ps) == ["profiler_config.integrated.profile", "profiler_config.system.flags"]


def test_system_bad_enabled_value_reported_once():
    (path, msg), = problems({"profiler_config": {"system": {"backend": "nsight", "enabled": "no"}}})
    assert path == "profiler_config.system.enabled" and "expected true or false" in msg


def test_system_backend_unknown_and_missing():
    path, msg = one(S(backend="nsys"))
    assert path == "profiler_config.system.backend"
    assert all(b in msg for b in ("nsight", "rocprof_sys", "msprof", "py_spy"))
    path, msg = one({"profiler_config": {"system": {"worker_groups": ["ActorGroup"]}}})
    assert path == "profiler_config.system.backend" and "required" in msg
    load_config(S(enabled=False))  # a disabled section may omit the backend


def test_nsight_stop_with_many_steps_is_the_rlinf_bug():
    path, msg = one(S(backend="nsight", steps=[3, 10, 50], options={"capture-range-end": "stop"}))
    assert path == "profiler_config.system.options.capture-range-end"
    assert "only step 3" in msg and "repeat:3" in msg and "repeat-shutdown:3" in msg
    # left out, the range end is repeat:N at run time (test_system_render.py checks the command line)
    assert "leave capture-range-end out: with steps it is repeat:3" in msg
    # one step with stop is fine; repeat is fine
    load_config(S(backend="nsight", steps=[3], options={"capture-range-end": "stop"}))
    load_config(S(backend="nsight", steps=[3, 10], options={"capture-range-end": "repeat:2"}))


def test_nsight_capture_range_must_be_profiler_api_with_steps():
    path, _ = one(S(backend="nsight", steps=[3], options={"capture-range": "nvtx"}))
    assert path == "profiler_config.system.options.capture-range"


def test_nsight_flag_option_conflicts():
    ps = problems(S(backend="nsight", options={"backtrace": "fp"}, flags=["backtrace", "--python-backtrace", "trace=cuda"]))
    msgs = " | ".join(m for _, m in ps)
    assert "both as a flag and as an option" in msgs
    assert "without dashes" in msgs
    assert "carries a value" in msgs


def test_backend_specific_fields():
    path, msg = one(S(backend="rocprof_sys", options={"t": "cuda"}))
    assert path == "profiler_config.system.options" and "args" in msg
    assert msg.startswith("options are nsys profile options (backend: nsight)")
    path, msg = one(S(backend="nsight", args={"T": "hip"}))
    assert path == "profiler_config.system.args" and msg.startswith("args are rocprof-sys-python arguments (backend: rocprof_sys)")
    path, msg = one(S(backend="nsight", options={"-t": "cuda"}))
    assert path == "profiler_config.system.options.-t" and "without dashes" in msg


def test_system_env_values_must_be_scalars():
    path, _ = one(S(backend="rocprof_sys", env={"ROCPROFSYS_SAMPLING_FREQ": [100]}))
    assert path == "profiler_config.system.env.ROCPROFSYS_SAMPLING_FREQ"
    cfg = load_config(S(backend="rocprof_sys", env={"ROCPROFSYS_SAMPLING_FREQ": 100}, args={"T": "hip"}))
    assert cfg.system.env["ROCPROFSYS_SAMPLING_FREQ"] == "100"


# --- all errors together ------------------------------------------------------------------

def test_three_mistakes_reported_together():
    ps = problems(I(stage="actor_updat", profile_ranks="0,1", profile_level="level9"))
    assert sorted(p for p, _ in ps) == [
        "profiler_config.integrated.profile_level",
        "profiler_config.integrated.profile_ranks",
        "profiler_config.integrated.stage",
    ]


def test_errors_across_sections_reported_together():
    ps = problems({"profiler_config": {"integrated": {"profile_step_start": 4, "profile_step_end": 2},
                                       "tracer": {"flush_every_events": 0},
                                       "system": {"backend": "perf", "enabled": False}}})
    assert {p.split(".")[1] for p, _ in ps} == {"integrated", "tracer", "system"}
    text = str(ProfilerConfigError(ps))
    assert text.startswith("3 problem(s) in profiler_config:")


def test_yaml_file_errors(tmp_path):
    assert "not found" in one(tmp_path / "missing.yaml")[1]
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiler_config: [1, 2\n")
    assert "not valid YAML" in one(bad)[1]
    notmap = tmp_path / "list.yaml"
    notmap.write_text("- 1\n- 2\n")
    assert "expected a mapping" in one(notmap)[1]
