"""The npu backend against a fake torch_npu built from the real torch-npu signatures.

torch_npu cannot run here (no CANN, no NPU; installing it breaks `import torch`). tests/fake_torch_npu.py
binds every call against the signatures extracted from the torch-npu wheel (see
tools/extract_torch_npu_signatures.py), so a keyword the real API lacks fails these tests.
"""
from __future__ import annotations

import copy
import json
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from fake_torch_npu import FakeTorchNpu, load_snapshot
from mindspeed_profiler import IntegratedProfiler
from mindspeed_profiler._state import STATE
from mindspeed_profiler.backends import select_backend
from profiler_testutil import capture_dirs, meta_of, profile_config, rel_names, train

def fake_steps(d: Path) -> list[str]:
    return json.loads((d / "FRAMEWORK" / "fake_steps.json").read_text())


def test_auto_picks_npu_when_torch_npu_works(fake_torch_npu):
    assert select_backend("auto").name == "npu"
    fake_torch_npu.npu_available = False
    assert select_backend("auto").name == "torch"


def test_auto_falls_back_to_torch_without_torch_npu():
    assert "torch_npu" not in sys.modules
    assert select_backend("auto").name == "torch"


def test_npu_window_capture(tmp_path, fake_torch_npu):
    cfg = profile_config(tmp_path, backend="auto", profile_step_start=2, profile_step_end=4, warmup_steps=1, mstx=True,
                         profile_level="level1", profile_analysis=True, aic_metrics="PipeUtilization",
                         profile_with_memory=True, profile_record_shapes=True, profile_with_module=True,
                         profile_export_type="db", mstx_domain_include=["train"])
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    train(prof, 5)
    assert rel_names(tmp_path) == ["all/actor_rank0_step2-3"]
    (d,) = capture_dirs(tmp_path)
    assert d.name.endswith("_ascend_pt")
    assert fake_steps(d) == ["ProfilerStep#2", "ProfilerStep#3"]  # warmup iteration 1 not recorded
    meta = meta_of(d)
    assert meta["status"] == "ok" and meta["backend"] == "npu" and meta["device"] == "npu"
    assert meta["trace_files"] == ["ASCEND_PROFILER_OUTPUT/trace_view.json"]
    (init,) = fake_torch_npu.calls_to("torch_npu.profiler.profile.__init__")
    assert [a.name for a in init["activities"]] == ["CPU", "NPU"]
    assert (init["record_shapes"], init["profile_memory"], init["with_modules"]) == (True, True, True)
    (exp,) = fake_torch_npu.calls_to("torch_npu.profiler._ExperimentalConfig.__init__")
    snap = load_snapshot()["enums"]
    assert exp["profiler_level"] == snap["ProfilerLevel"]["Level1"]
    assert exp["aic_metrics"] == snap["AiCMetrics"]["PipeUtilization"]
    assert exp["export_type"] == snap["ExportType"]["Db"]
    assert exp["mstx"] is True and exp["mstx_domain_include"] == ["train"]
    (handler,) = fake_torch_npu.calls_to("torch_npu.profiler.tensorboard_trace_handler")
    assert handler == {"dir_name": str(tmp_path / "all"), "worker_name": d.name.rsplit("_", 4)[0], "analyse_flag": True}
    assert fake_torch_npu.calls_to("torch_npu.profiler.schedule.__init__") == [{"wait": 0, "warmup": 1, "active": 2, "repeat": 1}]


def test_npu_stage_and_step_list(tmp_path, fake_torch_npu):
    prof = IntegratedProfiler(profile_config(tmp_path, backend="auto", stage="actor_generate", profile_steps=[1, 3]), role="actor", rank=3, world_size=4)
    train(prof, 4, repeat={("actor_generate", 3): 2})
    assert rel_names(tmp_path) == ["actor_generate/actor_rank3_step1-1", "actor_generate/actor_rank3_step3-3",
                                   "actor_generate/actor_rank3_step3-3_c2"]
    for d in capture_dirs(tmp_path):
        assert fake_steps(d) == [f"ProfilerStep#{meta_of(d)['steps'][0]}"]
    assert STATE.device is None  # reset by stop()


def test_unknown_keyword_fails(tmp_path):
    """Drop a parameter from the snapshot: our backend's call must now fail (as it would on a
    torch_npu release without that parameter), proving the fake checks what we pass."""
    snap = copy.deepcopy(load_snapshot())
    params = snap["functions"]["torch_npu.profiler._ExperimentalConfig.__init__"]["params"]
    snap["functions"]["torch_npu.profiler._ExperimentalConfig.__init__"]["params"] = [p for p in params if p["name"] != "data_simplification"]
    fake = FakeTorchNpu(snap).install()
    try:
        prof = IntegratedProfiler(profile_config(tmp_path, backend="auto", profile_step_start=1, profile_step_end=2), role="a", rank=0, world_size=1)
        train(prof, 2)
    finally:
        fake.uninstall()
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["status"] == "failed" and meta["errors"][0]["phase"] == "start"
    assert "TypeError" in meta["errors"][0]["error"] and "data_simplification" in meta["errors"][0]["error"]


def test_unknown_attribute_fails(tmp_path):
    snap = copy.deepcopy(load_snapshot())
    snap["instance_attributes"]["torch_npu.profiler.profile"].remove("_step_num_offset")
    fake = FakeTorchNpu(snap).install()
    try:
        prof = IntegratedProfiler(profile_config(tmp_path, backend="auto"), role="a", rank=0, world_size=1)
        train(prof, 1, stages=())
    finally:
        fake.uninstall()
    meta = meta_of(capture_dirs(tmp_path)[0])
    assert meta["status"] == "failed" and "_step_num_offset" in meta["errors"][0]["error"]


def test_torch_npu_failure_is_not_fatal(tmp_path, fake_torch_npu):
    fake_torch_npu.fail["torch_npu.profiler.profile.step"] = RuntimeError("device lost")
    prof = IntegratedProfiler(profile_config(tmp_path, backend="auto", profile_steps=[1, 2, 4]), role="a", rank=0, world_size=1)
    prof.start()
    for it in range(1, 5):
        with prof.stage("actor_update"):
            pass
        prof.step()
        if it == 2:
            fake_torch_npu.fail.clear()  # the device recovers
    prof.stop()
    statuses = [(m["steps"], m["status"], [e["phase"] for e in m["errors"]]) for m in prof.captures]
    assert statuses == [([1, 2], "failed", ["step"]), ([4, 4], "ok", [])]


@pytest.mark.parametrize("phase", ["start", "step", "stop"])
def test_failed_capture_leaves_one_directory(tmp_path, fake_torch_npu, phase):
    """An abandoned capture is never exported, but stopping torch_npu still writes the directory it
    made at start: the failed metadata goes into that one, not into a second directory."""
    fake_torch_npu.fail[f"torch_npu.profiler.profile.{phase}"] = RuntimeError("device lost")
    prof = IntegratedProfiler(profile_config(tmp_path, backend="auto", profile_step_start=1, profile_step_end=3), role="a", rank=0, world_size=1)
    train(prof, 3)
    (d,) = (tmp_path / "all").iterdir()
    meta = meta_of(d)
    assert meta["status"] == "failed" and [e["phase"] for e in meta["errors"]] == [phase]
    assert prof.captures[0]["directory"] == str(d) and d.name.endswith("_ascend_pt")
    # the fake torch_npu made its directory (with FRAMEWORK/) when the capture started; with a
    # failed start there is none, and the metadata has a directory of its own
    assert (d / "FRAMEWORK").is_dir() == (phase != "start")


def test_long_role_and_host_fit_torch_npu_worker_name_limit(tmp_path, fake_torch_npu, monkeypatch):
    """torch_npu names the directory after the host when worker_name is too long (the fake follows
    its rule and the snapshot's limit): ours is shortened so the capture is still found."""
    import socket

    from mindspeed_profiler.backends import layout

    host = "node-" + "x" * 38 + ".cluster.example.com"  # 63 characters (Linux allows 64)
    monkeypatch.setattr(socket, "gethostname", lambda: host)
    role = "actor_" + "r" * 160
    prof = IntegratedProfiler(profile_config(tmp_path, backend="auto", profile_step_start=2, profile_step_end=4), role=role, rank=12, world_size=16)
    train(prof, 4)
    (d,) = capture_dirs(tmp_path)
    assert meta_of(d)["status"] == "ok" and fake_steps(d) == ["ProfilerStep#2", "ProfilerStep#3"]
    (handler,) = fake_torch_npu.calls_to("torch_npu.profiler.tensorboard_trace_handler")
    assert len(handler["worker_name"]) < load_snapshot()["constants"]["MAX_WORKER_NAME_LENGTH"]
    assert len(d.name) <= 255
    parsed = layout.parse_capture_dir_name(d.name)
    assert (parsed["role"], parsed["rank"], parsed["first"], parsed["last"]) == (role, 12, 2, 3)
    assert parsed["host"].startswith("node-xxx")
    assert handler["worker_name"] == layout.worker_name(role, 12, 2, 3, host=host)  # deterministic


def test_worker_name_shortening_keeps_rank_steps_and_call():
    from mindspeed_profiler.backends import layout

    assert layout.worker_name("actor", 0, 3, 3, 2, "node-1") == "actor_rank0_step3-3_c2_node-1"  # short: unchanged
    huge_role = "a" * 300
    name = layout.worker_name(huge_role, 7, 10, 19, 2, "h" * 300)
    assert len(name) <= layout.MAX_WORKER_NAME and "_rank7_step10-19_c2_" in name
    parsed = layout.parse_capture_dir_name(layout.capture_dir_name(name, "ascend_pt"))
    assert (parsed["rank"], parsed["first"], parsed["last"], parsed["call"]) == (7, 10, 19, 2)
    assert parsed["role"].startswith("aaa")
    assert layout.worker_name("a" * 299 + "b", 7, 10, 19, 2, "h" * 300) != name  # the hash keeps long names apart


def test_snapshot_covers_what_we_call():
    snap = load_snapshot()
    assert snap["version"] and snap["wheel"].startswith("torch_npu-")
    for name in ("torch_npu.profiler.profile.__init__", "torch_npu.profiler.schedule.__init__",
                 "torch_npu.profiler.tensorboard_trace_handler", "torch_npu.profiler._ExperimentalConfig.__init__",
                 "torch_npu.npu.mstx.mark", "torch_npu.npu.mstx.range_start", "torch_npu.npu.mstx.range_end",
                 "torch_npu.profiler.profiler.analyse"):
        assert name in snap["functions"], name
    assert set(snap["enums"]["ProfilerActivity"]) == {"CPU", "NPU"}
    assert set(snap["enums"]["ProfilerLevel"]) == {"Level_none", "Level0", "Level1", "Level2"}
    from mindspeed_profiler.config import AIC_METRICS

    assert set(AIC_METRICS) == set(snap["enums"]["AiCMetrics"])  # every config spelling exists in torch_npu


def test_mstx_signatures_for_markers(fake_torch_npu):
    import torch_npu

    rid = torch_npu.npu.mstx.range_start("span", None, domain="d")
    torch_npu.npu.mstx.range_end(rid, domain="d")
    torch_npu.npu.mstx.mark("m")
    with pytest.raises(TypeError, match="range_end"):
        torch_npu.npu.mstx.range_end(rid, stream=None)  # range_end takes no stream
    assert [e[0] for e in fake_torch_npu.mstx_events] == ["range_start", "range_end", "mark"]


def test_extractor_reads_a_wheel(tmp_path):
    """The snapshot tool on a small synthetic wheel with the real package's module structure."""
    sys.path.insert(0, str(REPO_ROOT / "tools"))
    try:
        import extract_torch_npu_signatures as tool
    finally:
        sys.path.pop(0)
    files = {
        "torch_npu/version.py": "__version__ = '9.9.9'\n",
        "torch_npu/profiler/__init__.py": "from .profiler import profile, tensorboard_trace_handler\nfrom .scheduler import Schedule as schedule\n"
                                          "from .experimental_config import _ExperimentalConfig, ProfilerLevel, AiCMetrics, ExportType\n",
        "torch_npu/profiler/profiler.py": "class _Kineto:\n    def export_chrome_trace(self, output_path: str): ...\n"
                                          "    def add_metadata(self, key, value): ...\n    def add_metadata_json(self, key, value): ...\n"
                                          "class profile(_Kineto):\n    def __init__(self, *, activities=None, schedule=None, new_kw=1):\n"
                                          "        self.step_num = 0\n        self._step_num_offset = 0\n        x = ProfilerActivity.CPU\n"
                                          "    def start(self): ...\n    def stop(self): ...\n    def step(self): ...\n"
                                          "def tensorboard_trace_handler(dir_name=None, worker_name=None, analyse_flag=True): ...\n"
                                          "def analyse(profiler_path, max_process_number=Constant.N): ...\n",
        "torch_npu/profiler/scheduler.py": "class Schedule:\n    def __init__(self, wait, active, warmup=0, repeat=0, skip_first=0): ...\n",
        "torch_npu/profiler/experimental_config.py": "class ProfilerLevel:\n    Level0 = Constant.LEVEL0\n"
                                                     "class AiCMetrics:\n    AiCoreNone = Constant.AicMetricsNone\n"
                                                     "class ExportType:\n    Text = Constant.Text\n"
                                                     "class _ExperimentalConfig:\n    def __init__(self, profiler_level=Constant.LEVEL0, mstx=False): ...\n",
        "torch_npu/profiler/analysis/prof_common_func/_constant.py": "class Constant:\n    LEVEL0 = 'Level0'\n    AicMetricsNone = 'ACL_AICORE_NONE'\n"
                                                                      "    Text = 'text'\n    MAX_WORKER_NAME_LENGTH = 226\n    N = 4\n",
        "torch_npu/npu/__init__.py": "from .mstx import mstx\nfrom .utils import synchronize\ndef is_available():\n    return True\n",
        "torch_npu/npu/utils.py": "def synchronize(device=None): ...\n",
        "torch_npu/npu/mstx.py": "class mstx:\n" + "".join(
            f"    @staticmethod\n    def {n}({a}): ...\n" for n, a in [
                ("mark", "message, stream=None, domain='default'"), ("range_start", "message, stream=None, domain='default'"),
                ("range_end", "range_id, domain='default'"), ("range_push", "message, stream=None, domain='default'"),
                ("range_pop", "domain='default'")]),
    }
    wheel = tmp_path / "torch_npu-9.9.9-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    out = tmp_path / "snap.json"
    assert tool.main(["--wheel", str(wheel), "--out", str(out)]) == 0
    snap = json.loads(out.read_text())
    assert snap["version"] == "9.9.9"
    init = snap["functions"]["torch_npu.profiler.profile.__init__"]["params"]
    assert [(p["name"], p["kind"]) for p in init] == [("self", "POSITIONAL_OR_KEYWORD"), ("activities", "KEYWORD_ONLY"),
                                                      ("schedule", "KEYWORD_ONLY"), ("new_kw", "KEYWORD_ONLY")]
    assert snap["functions"]["torch_npu.profiler.profile.export_chrome_trace"]["params"][1]["name"] == "output_path"  # inherited
    assert snap["functions"]["torch_npu.npu.mstx.range_end"]["staticmethod"] is True
    assert snap["enums"]["ProfilerLevel"] == {"Level0": "Level0"} and snap["enums"]["ProfilerActivity"] == {"CPU": "CPU"}
    assert snap["instance_attributes"]["torch_npu.profiler.profile"] == ["_step_num_offset", "step_num"]
    assert snap["functions"]["torch_npu.profiler.profiler.analyse"]["params"][1]["default_src"] == "Constant.N"
