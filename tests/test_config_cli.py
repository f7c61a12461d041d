"""`mindspeed-profiler check-config FILE [OVERRIDE ...]` through the installed console script."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT
from mindspeed_profiler.cli import main

PRESETS = REPO_ROOT / "configs" / "profiler_config"
DATA = Path(__file__).parent / "data"


def test_console_script_prints_normalized_yaml():
    exe = shutil.which("mindspeed-profiler") or str(Path(sys.executable).with_name("mindspeed-profiler"))
    out = subprocess.run([exe, "check-config", str(PRESETS / "actor_update.yaml"), "integrated.profile_ranks=[1]"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load(out.stdout)
    assert doc["profiler_config"]["integrated"]["stage"] == "actor_update"
    assert doc["profiler_config"]["integrated"]["profile_ranks"] == [1]
    assert doc["profiler_config"]["tracer"]["enable"] is False


def test_every_error_printed_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"profiler_config": {"integrated": {
        "stage": "actor_updat", "profile_ranks": "0,1", "profile_step_start": 3, "profile_step_end": 3}}}))
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    for path in ("integrated.stage", "integrated.profile_ranks", "integrated.profile_step_end"):
        assert f"profiler_config.{path}:" in err


def test_overrides_fix_errors(capsys):
    assert main(["check-config", str(DATA / "mindspeed_rl_grpo_integrated.yaml"), "--no-path-check",
                 "profiler_config.integrated.stage=critic_update"]) == 0
    assert "stage: critic_update" in capsys.readouterr().out


def test_missing_file(tmp_path, capsys):
    assert main(["check-config", str(tmp_path / "nope.yaml")]) == 2
    assert "not found" in capsys.readouterr().err


def test_check_config_usage_does_not_call_overrides_required(capsys):
    with pytest.raises(SystemExit):
        main(["check-config"])
    err = capsys.readouterr().err
    assert "file" in err and "OVERRIDE" not in err.split("required:")[-1]


def test_version_flag(capsys):
    from mindspeed_profiler import __version__

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and __version__ in capsys.readouterr().out
