"""`profiler_config.metrics`: each field declared once (schema, defaults, docs row), every mistake
reported at once with its path, the bad value and what is allowed, the `enabled` alias, and the
writability check of its output directory only when it is on."""
from __future__ import annotations

import re
from dataclasses import fields

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler import load_config
from mindspeed_profiler.config import METRICS_FIELDS, SECTION_SCHEMAS, SECTIONS, MetricsConfig, ProfilerConfigError
from mindspeed_profiler.config import schema as config_schema
from mindspeed_profiler.config.schema import FIELD_ALIASES

DOCS = REPO_ROOT / "docs" / "config.md"


def problems(block, **kw) -> dict[str, str]:
    with pytest.raises(ProfilerConfigError) as e:
        load_config(block, **kw)
    return dict(e.value.problems)


def test_the_section_is_declared_once_with_its_defaults():
    assert "metrics" in SECTIONS and SECTION_SCHEMAS["metrics"] is METRICS_FIELDS
    declared = [(f.name, f.metadata[config_schema._CHECK]) for f in fields(MetricsConfig)]
    assert list(METRICS_FIELDS.items()) == declared
    m = load_config(None).metrics
    assert (m.enable, m.output_dir, m.peak_tflops, m.parameters, m.tensorboard) == (False, None, None, None, False)
    for f in fields(MetricsConfig):
        found: list = []
        assert f.metadata[config_schema._CHECK](getattr(m, f.name), f.name, found) == getattr(m, f.name) and not found


def test_good_values_normalised(tmp_path):
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path)},
                       "metrics": {"enabled": True, "peak_tflops": 2, "parameters": 7_000_000_000, "tensorboard": True}})
    assert cfg.metrics == MetricsConfig(enable=True, output_dir=None, peak_tflops=2.0, parameters=7_000_000_000,
                                        tensorboard=True)
    assert cfg.metrics_output_dir == str(tmp_path / "metrics")
    assert load_config({"metrics": {"output_dir": str(tmp_path / "m")}}).metrics_output_dir == str(tmp_path / "m")
    assert FIELD_ALIASES["metrics"] == {"enabled": "enable"}


def test_every_bad_field_reported_at_once_with_path_value_and_allowed():
    got = problems({"metrics": {"enable": "yes", "output_dir": 3, "peak_tflops": 0, "parameters": 0.5,
                                "tensorboard": 1}})
    p = "profiler_config.metrics."
    assert set(got) == {p + k for k in ("enable", "output_dir", "peak_tflops", "parameters", "tensorboard")}
    assert "'yes' (str)" in got[p + "enable"] and "true or false" in got[p + "enable"]
    assert "3 (int)" in got[p + "output_dir"] and "directory path or null" in got[p + "output_dir"]
    assert "got 0" in got[p + "peak_tflops"] and "> 0" in got[p + "peak_tflops"]
    assert "0.5 (float)" in got[p + "parameters"] and "integer >= 1 or null" in got[p + "parameters"]
    assert "1 (int)" in got[p + "tensorboard"] and "true or false" in got[p + "tensorboard"]


@pytest.mark.parametrize("field,value,words", [
    ("peak_tflops", -1.5, ["got -1.5", "> 0"]),
    ("peak_tflops", "fast", ["'fast' (str)", "finite number or null"]),
    ("peak_tflops", float("inf"), ["inf", "finite number"]),
    ("peak_tflops", True, ["True (bool)", "finite number"]),
    ("parameters", 0, ["got 0", "integer >= 1 or null"]),
    ("parameters", -10, ["got -10", ">= 1"]),
    ("parameters", "7B", ["'7B' (str)", "integer >= 1"]),
    ("parameters", True, ["True (bool)", "integer"]),
    ("enable", None, ["None", "true or false"]),
])
def test_one_bad_value(field, value, words):
    got = problems({"metrics": {field: value}})
    msg = got[f"profiler_config.metrics.{field}"]
    assert all(w in msg for w in words), msg


def test_unknown_key_alias_twice_and_a_field_of_another_section():
    got = problems({"metrics": {"peak_tflop": 1, "enabled": True, "enable": False, "gzip": True}})
    assert "did you mean 'peak_tflops'" in got["profiler_config.metrics.peak_tflop"]
    assert "valid keys: enable, output_dir, peak_tflops, parameters, tensorboard" in got["profiler_config.metrics.peak_tflop"]
    assert "given twice" in got["profiler_config.metrics.enable"]
    assert "profiler_config.tracer" in got["profiler_config.metrics.gzip"]
    got = problems({"metric": {"enable": True}})          # a typo of the section is not silently ignored
    assert "did you mean 'metrics'" in got["profiler_config.metric"]
    assert "got [1] (list); expected a mapping" in problems({"metrics": [1]})["profiler_config.metrics"]


def test_overrides_and_hyphens(tmp_path):
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path)}},
                      ["metrics.enable=true", "profiler_config.metrics.peak-tflops=0.5"])
    assert cfg.metrics.enable and cfg.metrics.peak_tflops == 0.5
    assert "profiler_config.metrics.parameters" in problems(None, overrides=["metrics.parameters=-1"])


def test_output_dir_must_be_writable_only_when_on(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = str(blocker / "metrics")
    assert "profiler_config.metrics.output_dir" in problems({"metrics": {"enable": True, "output_dir": out}})
    assert load_config({"metrics": {"enable": False, "output_dir": out}}).metrics.output_dir == out
    assert load_config({"metrics": {"enable": True, "output_dir": out}}, check_paths=False).metrics.enable
    # the default under profile_save_path is checked too
    got = problems({"integrated": {"profile_save_path": str(blocker)}, "metrics": {"enable": True}})
    assert "profiler_config.metrics.output_dir" in got


def test_round_trip_through_to_dict(tmp_path):
    cfg = load_config({"metrics": {"enable": True, "peak_tflops": 0.5, "parameters": 3}}, check_paths=False)
    assert cfg.to_dict()["profiler_config"]["metrics"] == {"enable": True, "output_dir": None, "peak_tflops": 0.5,
                                                            "parameters": 3, "tensorboard": False, "oom_snapshot": False,
                                                            "oom_snapshot_entries": 100_000, "oom_snapshot_stacks": "python",
                                                            "host_memory_watermark": 0.9}
    assert load_config(cfg.to_dict(), check_paths=False) == cfg
    assert load_config(cfg, check_paths=False) == cfg


def test_a_training_yaml_s_own_metrics_key_is_not_our_block():
    # `metrics:` at the top of a training YAML is the trainer's own (no profiler_config there): profiling stays off
    cfg = load_config({"trainer": {"epochs": 3}, "metrics": {"log_every": 10}})
    assert cfg.metrics == MetricsConfig() and not cfg.integrated.profile
    # alone, or beside another section, it is ours
    assert load_config({"metrics": {"enable": True}}, check_paths=False).metrics.enable
    assert load_config({"tracer": {}, "metrics": {"enabled": True}}, check_paths=False).metrics.enable
    assert "profiler_config.metrics.log_every" in problems({"integrated": {}, "metrics": {"log_every": 10}})


def test_docs_table_rows_match_the_schema():
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## `metrics`", 1)[1].split("\n## ", 1)[0]
    documented = {name for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")
                  for name in re.findall(r"`(\w+)`", line.split("|")[1])}
    assert documented == set(METRICS_FIELDS)
