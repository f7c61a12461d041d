"""capture_options.py: the one map profile() keyword <-> integrated field, read by the backends,
the on-demand requests and verl's dialect; the config has every field the backends read."""
from __future__ import annotations

import ast
from pathlib import Path

from mindspeed_profiler.core import capture_options as co
from mindspeed_profiler.backends import npu_options, torch as torch_backend
from mindspeed_profiler.config import IntegratedConfig, load_config
from mindspeed_profiler.config.dialects.verl import VERL_CONTENTS
from mindspeed_profiler.ondemand import requests


def _fields() -> set[str]:
    return set(IntegratedConfig.__dataclass_fields__) | {n for n in dir(IntegratedConfig) if not n.startswith("_")}


def test_every_mapped_field_and_every_read_setting_is_a_config_field():
    assert {f.field for f in co.FLAGS} <= _fields()
    read = {n for n, v in vars(co.CaptureSettings).items() if isinstance(v, property)}
    assert read and read <= _fields()


def test_the_readers_take_the_map_from_here():
    assert all(requests._NPU_BOOLS[k] == f for k, f in co.FIELD_OF_KEYWORD.items())
    assert all(npu_options._FIELD[k] == f for k, f in co.FIELD_OF_KEYWORD.items())
    assert VERL_CONTENTS["npu"]["memory"] == "profile_with_memory" and VERL_CONTENTS["torch"]["shapes"] == "profile_record_shapes"


def test_capture_options_from_a_config():
    cfg = load_config({"integrated": {"profile": True, "profile_with_memory": True, "profile_with_cpu": False}}).integrated
    opts = co.CaptureOptions.from_settings(cfg)
    assert (opts.level, opts.with_cpu, opts.with_device) == ("level0", False, True)
    assert list(opts.flags) == list(co.KEYWORDS) and opts.flags["profile_memory"] is True
    torch_opts = torch_backend.profile_options(cfg, cuda=False)
    assert [k for k in torch_opts if k in co.KEYWORDS] == list(co.KEYWORDS)   # the metadata's key order
    assert list(npu_options.profile_options(cfg))[1:6] == list(co.KEYWORDS)


def test_the_backends_import_nothing_of_the_config():
    pkg = Path(co.__file__).parent.parent
    for path in sorted((pkg / "backends").rglob("*.py")) + [pkg / "capture" / "schedule.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("mindspeed_profiler.config"), path
