"""The npu backend against fakes of every snapshotted torch-npu release.

torch_npu cannot run here (no CANN, no NPU; installing it breaks `import torch`). tests/fake_torch_npu.py
binds every call against the signatures extracted from each torch-npu wheel (see
tools/extract_torch_npu_signatures.py), so a keyword a release lacks fails these tests on that
release. The matrix runs each important capture on every release (SNAPSHOT_VERSIONS), once with
the signatures visible to `inspect` (as torch_npu's functools.wraps wrappers leave them) and once
hidden (the backend then relies on the release's snapshot in package data).
"""
from __future__ import annotations

import copy
import json
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from fake_torch_npu import SNAPSHOT_VERSIONS, FakeTorchNpu, load_snapshot
from mindspeed_profiler import IntegratedProfiler, mstx_mark, mstx_range
from mindspeed_profiler.core.state import STATE
from mindspeed_profiler.core.warn import reset_warnings
from mindspeed_profiler.backends import select_backend
from mindspeed_profiler.backends.npu import EXPERIMENTAL, NpuApi
from mindspeed_profiler.runtime.mstx import reset_marker_backends
from profiler_testutil import capture_dirs, meta_of, profile_config, rel_names, train

PINNED = ("2.5.1", "2.7.1")  # MindSpeed-RL 2.0.0 - 2.3.0, and its master


def fake_steps(d: Path) -> list[str]:
    return json.loads((d / "FRAMEWORK" / "fake_steps.json").read_text())


@pytest.fixture(params=[pytest.param((v, insp), id=f"{v}-{'inspect' if insp else 'snapshot'}")
                        for v in SNAPSHOT_VERSIONS for insp in (True, False)])
def release(request):
    """The fake torch_npu of one release (signatures inspectable, or hidden), installed for the test."""
    version, inspectable = request.param
    reset_marker_backends()
    reset_warnings()
    fake = FakeTorchNpu.for_version(version, inspectable=inspectable).install()
    try:
        yield fake
    finally:
        fake.uninstall()
        reset_marker_backends()
        reset_warnings()


def api_of(fake: FakeTorchNpu) -> NpuApi:
    return NpuApi.from_snapshot(fake.snap)


def test_every_snapshot_is_in_the_matrix():
    assert set(PINNED) <= set(SNAPSHOT_VERSIONS) and len(SNAPSHOT_VERSIONS) >= 13
    lines = {tuple(v.split(".")[:2]) for v in SNAPSHOT_VERSIONS}
    assert {("2", str(m)) for m in (1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)} <= lines


def test_auto_picks_npu_when_torch_npu_works(fake_torch_npu):
    assert select_backend("auto").name == "npu"
    fake_torch_npu.npu_available = False
    assert select_backend("auto").name == "torch"


def test_auto_falls_back_to_torch_without_torch_npu():
    assert "torch_npu" not in sys.modules
    assert select_backend("auto").name == "torch"


def test_npu_window_capture(tmp_path, release):
    cfg = profile_config(tmp_path, backend="auto", profile_step_start=2, profile_step_end=4, warmup_steps=1, mstx=True,
                         profile_level="level1", profile_analysis=True, aic_metrics="PipeUtilization",
                         profile_with_memory=True, profile_record_shapes=True, profile_with_module=True,
                         profile_export_type="db", mstx_domain_include=["train"])
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    train(prof, 5)
    assert rel_names(tmp_path) == ["all/actor_rank0_step2-3"]
    (d,) = capture_dirs(tmp_path)
    assert d.name.endswith("_ascend_pt")
    assert fake_steps(d) == ["ProfilerStep#2", "ProfilerStep#3"]  # warmup iteration 1 not recorded, on every release
    meta = meta_of(d)
    assert meta["status"] == "ok" and meta["backend"] == "npu" and meta["device"] == "npu", meta["errors"]
    assert meta["trace_files"] == ["ASCEND_PROFILER_OUTPUT/trace_view.json"]
    assert meta["options"]["torch_npu"]["version"] == release.version
    (init,) = release.calls_to("torch_npu.profiler.profile.__init__")
    assert [a.name for a in init["activities"]] == ["CPU", "NPU"]
    assert (init["record_shapes"], init["profile_memory"], init["with_modules"]) == (True, True, True)
    (exp,) = release.calls_to(EXPERIMENTAL)
    snap = release.snap["enums"]
    assert exp["profiler_level"] == snap["ProfilerLevel"]["Level1"]
    assert exp["aic_metrics"] == snap["AiCMetrics"]["PipeUtilization"]
    assert exp["export_type"] == snap["ExportType"]["Db"]
    api = api_of(release)
    notes = meta["options"]["notes"]
    if api.accepts(EXPERIMENTAL, "mstx"):
        assert exp["mstx"] is True and "msprof_tx" not in exp
    else:  # 2.3.1 - 2.5.1.post1: the older switch
        assert exp["msprof_tx"] is True and "mstx" not in exp
        assert any("msprof_tx=True" in n and release.version in n for n in notes)
    if api.accepts(EXPERIMENTAL, "mstx_domain_include"):
        assert exp["mstx_domain_include"] == ["train"]
        assert not [n for n in notes if "not honoured" in n]
    else:
        assert "mstx_domain_include" not in exp
        (note,) = [n for n in notes if "not honoured" in n]
        assert "integrated.mstx_domain_include" in note and f"torch_npu {release.version}" in note
    (handler,) = release.calls_to("torch_npu.profiler.tensorboard_trace_handler")
    assert handler == {"dir_name": str(tmp_path / "all"), "worker_name": d.name.rsplit("_", 4)[0], "analyse_flag": True}
    (sched,) = release.calls_to("torch_npu.profiler.schedule.__init__")
    offset = "_step_num_offset" in release.snap["instance_attributes"]["torch_npu.profiler.profile"]
    # releases without _step_num_offset start the profile at step `begin` and skip that many steps
    assert sched == {"wait": 0, "warmup": 1, "active": 2, "repeat": 1, **({} if offset else {"skip_first": 1})}
    assert meta["options"]["torch_npu"]["passed"]["step_naming"] == ("offset" if offset else "skip_first")


def test_npu_stage_and_step_list(tmp_path, release):
    prof = IntegratedProfiler(profile_config(tmp_path, backend="auto", stage="actor_generate", profile_steps=[1, 3]), role="actor", rank=3, world_size=4)
    train(prof, 4, repeat={("actor_generate", 3): 2})
    assert rel_names(tmp_path) == ["actor_generate/actor_rank3_step1-1", "actor_generate/actor_rank3_step3-3",
                                   "actor_generate/actor_rank3_step3-3_c2"]
    for d in capture_dirs(tmp_path):
        assert meta_of(d)["status"] == "ok"
        assert fake_steps(d) == [f"ProfilerStep#{meta_of(d)['steps'][0]}"]
    assert STATE.device is None  # reset by stop()


def test_npu_lightweight_level_none_mstx(tmp_path, release, runtime_warnings):
    """The lightweight preset (level_none + mstx) captures on every release: Level_none with the
    markers switch that release has (mstx=, else msprof_tx=)."""
    cfg = profile_config(tmp_path, backend="auto", profile_step_start=2, profile_step_end=4, mstx=True,
                         profile_level="level_none", profile_with_cpu=False)
    train(IntegratedProfiler(cfg, role="actor", rank=0, world_size=1), 4)
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["status"] == "ok", meta["errors"]
    (exp,) = release.calls_to(EXPERIMENTAL)
    assert exp["profiler_level"] == release.snap["enums"]["ProfilerLevel"]["Level_none"]
    switch = "mstx" if api_of(release).accepts(EXPERIMENTAL, "mstx") else "msprof_tx"
    assert exp[switch] is True
    (init,) = release.calls_to("torch_npu.profiler.profile.__init__")
    assert [a.name for a in init["activities"]] == ["NPU"]
    assert runtime_warnings("not honoured") == []  # nothing asked for that a release lacks
    assert fake_steps(d) == ["ProfilerStep#2", "ProfilerStep#3"]


def test_npu_level_none_turns_the_markers_switch_on(tmp_path, release):
    """torch_npu 2.6.0.post5, 2.7.1.post11 and 2.8+ force mstx on at Level_none (with a warning), the
    others do not; we ask for it, so every release records the markers."""
    train(IntegratedProfiler(profile_config(tmp_path, backend="auto", profile_level="level_none"), role="a", rank=0, world_size=1), 2)
    (exp,) = release.calls_to(EXPERIMENTAL)
    assert exp.get("mstx", exp.get("msprof_tx")) is True


def test_npu_db_export(tmp_path, release):
    train(IntegratedProfiler(profile_config(tmp_path, backend="auto", profile_export_type="db"), role="a", rank=0, world_size=1), 2)
    (exp,) = release.calls_to(EXPERIMENTAL)
    assert exp["export_type"] == release.snap["enums"]["ExportType"]["Db"]  # every release has it
    assert meta_of(capture_dirs(tmp_path)[0])["status"] == "ok"


def test_npu_markers_with_domains(tmp_path, release, clean_state, runtime_warnings):
    """mstx ranges and marks inside a capture: with their domain where the release's mstx takes one,
    without it (said once, naming the release) where it does not; the include list filters ours."""
    cfg = profile_config(tmp_path, backend="auto", profile_step_start=1, profile_step_end=3, mstx=True,
                         mstx_domain_include=["train"])
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    for _ in range(2):
        with prof.stage("actor_update"):
            with mstx_range("fwd", domain="train"):
                pass
            with mstx_range("noise", domain="other"):
                pass
            mstx_mark("tick", domain="train")
        prof.step()
    prof.stop()
    assert meta_of(capture_dirs(tmp_path)[0])["status"] == "ok"
    with_domain = "domain" in [p["name"] for p in release.snap["functions"]["torch_npu.npu.mstx.range_start"]["params"]]
    dom = "train" if with_domain else None
    assert [e for e in release.mstx_events if e[0] != "range_end"] == [("range_start", "fwd", dom), ("mark", "tick", dom)] * 2
    assert [e[2] for e in release.mstx_events if e[0] == "range_end"] == [dom] * 2
    ignored = runtime_warnings("mstx domains are ignored")
    if with_domain:
        assert ignored == []
    else:
        assert len(ignored) == 1 and f"torch_npu {release.version}" in ignored[0]


@pytest.mark.parametrize("version", SNAPSHOT_VERSIONS)
def test_unknown_keyword_fails(tmp_path, version):
    """Drop a parameter from a release's snapshot and hide the signatures: our backend, going by the
    real snapshot of that release, passes it, and the call fails (as it would on a torch_npu release
    without that parameter), proving the fake checks what we pass."""
    snap = copy.deepcopy(load_snapshot(version))
    params = snap["functions"][EXPERIMENTAL]["params"]
    snap["functions"][EXPERIMENTAL]["params"] = [p for p in params if p["name"] != "data_simplification"]
    fake = FakeTorchNpu(snap, inspectable=False).install()
    try:
        prof = IntegratedProfiler(profile_config(tmp_path, backend="auto", profile_step_start=1, profile_step_end=2), role="a", rank=0, world_size=1)
        train(prof, 2)
    finally:
        fake.uninstall()
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["status"] == "failed" and meta["errors"][0]["phase"] == "start"
    assert "TypeError" in meta["errors"][0]["error"] and "data_simplification" in meta["errors"][0]["error"]


def test_inspected_signature_wins_over_the_snapshot(tmp_path, runtime_warnings):
    """The same modified release with its signatures visible: the backend reads them, leaves the
    keyword out, captures, and says once what it could not honour (field and version named)."""
    reset_warnings()
    snap = copy.deepcopy(load_snapshot("2.14.0"))
    params = snap["functions"][EXPERIMENTAL]["params"]
    snap["functions"][EXPERIMENTAL]["params"] = [p for p in params if p["name"] != "data_simplification"]
    fake = FakeTorchNpu(snap).install()
    try:
        cfg = profile_config(tmp_path, backend="auto", profile_steps=[1, 3], data_simplification=False)
        train(IntegratedProfiler(cfg, role="a", rank=0, world_size=1), 3)
    finally:
        fake.uninstall()
        reset_warnings()
    metas = [meta_of(d) for d in capture_dirs(tmp_path)]
    assert [m["status"] for m in metas] == ["ok", "ok"]
    assert all("data_simplification" not in c for c in fake.calls_to(EXPERIMENTAL))
    for m in metas:
        (note,) = m["options"]["notes"]
        assert "integrated.data_simplification=False" in note and "torch_npu 2.14.0" in note
    assert len(runtime_warnings("data_simplification")) == 1


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


@pytest.mark.parametrize("version", SNAPSHOT_VERSIONS)
def test_snapshot_covers_what_we_call(version):
    snap = load_snapshot(version)
    assert snap["version"] == version and snap["wheel"].startswith(f"torch_npu-{version}-")
    for name in ("torch_npu.profiler.profile.__init__", "torch_npu.profiler.schedule.__init__",
                 "torch_npu.profiler.tensorboard_trace_handler", "torch_npu.profiler._ExperimentalConfig.__init__",
                 "torch_npu.npu.mstx.mark", "torch_npu.npu.mstx.range_start", "torch_npu.npu.mstx.range_end",
                 "torch_npu.profiler.profiler.analyse", "torch_npu.profiler.dynamic_profile.init",
                 "torch_npu.profiler.dynamic_profile.step", "torch_npu.profiler.dynamic_profile.start"):
        assert name in snap["functions"], name
    assert set(snap["absent"]) <= {"torch_npu.npu.mstx.range_push", "torch_npu.npu.mstx.range_pop"}
    assert not set(snap["absent"]) & set(snap["functions"])
    assert set(snap["enums"]["ProfilerActivity"]) == {"CPU", "NPU"}
    assert set(snap["enums"]["ProfilerLevel"]) == {"Level_none", "Level0", "Level1", "Level2"}
    assert set(snap["enums"]["ExportType"]) == {"Text", "Db"}
    from mindspeed_profiler.config import AIC_METRICS

    assert set(AIC_METRICS) == set(snap["enums"]["AiCMetrics"])  # every config spelling exists in torch_npu
    exp = [p["name"] for p in snap["functions"][EXPERIMENTAL]["params"]]
    assert "msprof_tx" in exp or "mstx" in exp  # a markers switch on every release


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
    # what the synthetic release lacks is listed, not an error
    assert snap["absent"] == ["torch_npu.npu.mstx.mstx_range", "torch_npu.profiler.dynamic_profile.init",
                              "torch_npu.profiler.dynamic_profile.start", "torch_npu.profiler.dynamic_profile.step"]
    assert out.read_text() == tool.dumps(snap) + "\n"  # sorted keys, deterministic
