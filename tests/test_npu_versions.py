"""torch_npu releases: the snapshots, what differs between them, and how the npu backend adapts.

The option mapping (`profile_options`) and the version adaptation (`adapt_options(options, api)`)
are pure and tested here without any fake; the captures on every release are in
test_profiler_npu.py. Snapshots come from the real wheels (tools/extract_torch_npu_signatures.py);
set TORCH_NPU_WHEEL_DIR to a directory of downloaded wheels to re-extract and compare them all.
"""
from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from fake_torch_npu import DATA_DIR, SNAPSHOT_VERSIONS, FakeTorchNpu, load_snapshot
from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.core.warn import reset_warnings
from mindspeed_profiler.backends import npu
from mindspeed_profiler.backends.npu import (EXPERIMENTAL, HANDLER, MARK, PROFILE, RANGE_END, RANGE_START, NpuApi,
                                             adapt_options, installed_api, profile_options)
from mindspeed_profiler.runtime.mstx import reset_marker_backends
from profiler_testutil import capture_dirs, meta_of, profile_config, train

sys.path.insert(0, str(REPO_ROOT / "tools"))
try:
    import extract_torch_npu_signatures as tool
finally:
    sys.path.pop(0)


def integrated(**fields):
    return load_config({"integrated": {"profile": True, **fields}}).integrated


def api(version: str) -> NpuApi:
    return NpuApi.from_snapshot(load_snapshot(version))


LIGHTWEIGHT = dict(mstx=True, profile_level="level_none", profile_with_cpu=False, mstx_domain_include=["train"])


# ------------------------------------------------------------------------------ the snapshots


def test_index_lists_every_snapshot_file():
    index = json.loads((DATA_DIR / tool.INDEX_NAME).read_text())
    files = sorted(p.name for p in DATA_DIR.glob("torch_npu-*.json"))
    assert sorted(e["file"] for e in index["versions"].values()) == files
    assert index["order"] == sorted(index["versions"], key=tool.version_key) == SNAPSHOT_VERSIONS
    assert index["newest"] == index["order"][-1]
    assert index["versions"]["2.5.1"]["pinned_by"].startswith("MindSpeed-RL")
    assert index["versions"]["2.7.1"]["pinned_by"] == "MindSpeed-RL master"
    for v, entry in index["versions"].items():
        snap = load_snapshot(v)
        assert snap["version"] == v and entry["wheel"] == snap["wheel"] and entry["line"] == tool.line_of(v)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA_DIR.glob("torch_npu-*.json")) + [tool.INDEX_NAME])
def test_snapshots_are_deterministic_sorted_and_small(name):
    text = (DATA_DIR / name).read_text()
    assert text == tool.dumps(json.loads(text)) + "\n"  # what the extractor writes: sorted keys, one layout
    assert len(text) < 16_000


def test_newest_of_each_line_plus_the_pinned_releases():
    registry = ("2.14.0, 2.13.0, 2.12.0.post3, 2.12.0, 2.11.0.post3, 2.11.0, 2.10.0.post7, 2.10.0.post2, 2.10.0, 2.9.1, "
                "2.9.0.post9, 2.9.0, 2.8.0.post5, 2.8.0, 2.7.1.post11, 2.7.1.post2, 2.7.1, 2.6.0.post5, 2.6.0, 2.5.1.post1, "
                "2.5.1, 2.4.0.post4, 2.4.0, 2.3.1.post6, 2.3.1.post2, 2.1.0.post17, 2.1.0.post8, 2.0.1.post4, 2.15.0rc1").split(", ")
    assert tool.choose_versions(registry) == SNAPSHOT_VERSIONS  # what is in package data is what --all makes


def test_version_order():
    key = npu.version_key
    assert key("2.7.1") < key("2.7.1.post2") < key("2.7.1.post11") < key("2.8.0") < key("2.10.0")
    assert key("2.5.1+git9e105ea") == key("2.5.1") and key("garbage") == (-1,)
    assert [npu.version_key(v) for v in SNAPSHOT_VERSIONS] == [tool.version_key(v) for v in SNAPSHOT_VERSIONS]


def test_nearest_snapshot():
    assert npu.nearest_snapshot("2.5.1") == "2.5.1"
    assert npu.nearest_snapshot("2.5.1+gitabc") == "2.5.1"
    assert npu.nearest_snapshot("2.7.1.post4") == "2.7.1"  # the newest of its line not newer than it
    assert npu.nearest_snapshot("2.9.0.post2") == "2.8.0.post5"  # no older 2.9 snapshot: the newest older one
    assert npu.nearest_snapshot("2.0.1") == SNAPSHOT_VERSIONS[0]
    assert npu.nearest_snapshot("3.0.0") == npu.nearest_snapshot(None) == SNAPSHOT_VERSIONS[-1]


def test_legacy_snapshot_is_reproduced_by_the_extractor():
    """torch_npu_signatures.json (the 2.14.0 snapshot made before the per-release ones) is kept for
    readers of the old path: everything in it is in the new 2.14.0 snapshot, unchanged."""
    legacy = json.loads((DATA_DIR / "torch_npu_signatures.json").read_text())
    new = load_snapshot("2.14.0")

    def contained(a, b, path="") -> list[str]:
        if isinstance(a, dict) and isinstance(b, dict):
            return [m for k in a for m in (contained(a[k], b[k], f"{path}/{k}") if k in b else [f"{path}/{k} missing"])]
        return [] if a == b else [f"{path}: {a!r} != {b!r}"]

    assert contained(legacy, new) == []


@pytest.mark.skipif(not os.environ.get("TORCH_NPU_WHEEL_DIR"), reason="set TORCH_NPU_WHEEL_DIR to the downloaded torch_npu wheels")
def test_snapshots_match_the_wheels():
    wheel_dir = Path(os.environ["TORCH_NPU_WHEEL_DIR"])
    for v in SNAPSHOT_VERSIONS:
        (wheel,) = wheel_dir.glob(f"torch_npu-{v}-*.whl")
        assert tool.extract(wheel) == load_snapshot(v), v


def test_docs_table_is_the_snapshots_table():
    docs = (REPO_ROOT / "docs" / "profiling.md").read_text()
    assert "## torch_npu versions" in docs
    assert tool.feature_table() in docs, "regenerate: python tools/extract_torch_npu_signatures.py --table"


# ------------------------------------------------------------------------------ what a release offers


@pytest.mark.parametrize("version", SNAPSHOT_VERSIONS)
def test_inspected_and_snapshot_descriptions_agree(version):
    """installed_api on the fake, reading the signatures (as on a real machine) or, hidden, falling
    back to the packaged snapshot of that release, says the same as the snapshot itself."""
    expected = api(version)
    for inspectable in (True, False):
        fake = FakeTorchNpu.for_version(version, inspectable=inspectable)
        got = installed_api(fake.modules["torch_npu"])
        assert got.version == version
        for fn in (PROFILE, EXPERIMENTAL, HANDLER, npu.SCHEDULE, MARK, RANGE_START, RANGE_END):
            assert got.keywords[fn] == expected.keywords[fn], (fn, inspectable)
        for enum in ("ProfilerLevel", "AiCMetrics", "ExportType", "ProfilerActivity"):
            assert got.enums[enum] >= expected.enums[enum]
        assert got.attributes == expected.attributes
        assert ("snapshot" in got.source) and (("hidden" in got.source) != inspectable)


def test_api_of_a_module_without_version_or_signatures():
    """Nothing tells (no __version__, opaque wrappers): assume the newest release."""
    import types

    mod = types.ModuleType("torch_npu")
    mod.npu = types.SimpleNamespace(mstx=types.SimpleNamespace(range_start=lambda *a, **k: 1))
    got = installed_api(mod)
    assert got.version is None and got.accepts(RANGE_START, "domain")
    assert not got.has(PROFILE) and not got.has(MARK)


# ------------------------------------------------------------------------------ the adaptation (pure)


def test_option_mapping_is_the_newest_api():
    opts = profile_options(integrated(**LIGHTWEIGHT))
    assert opts["activities"] == ["NPU"]
    assert opts["experimental"] == {"profiler_level": "Level_none", "l2_cache": False, "mstx": True, "data_simplification": True,
                                    "export_type": "Text", "mstx_domain_include": ["train"]}
    # Level_none records markers only: the switch is on even without mstx: true (as 2.8+ force it)
    assert profile_options(integrated(profile_level="level_none"))["experimental"]["mstx"] is True
    assert profile_options(integrated())["experimental"]["mstx"] is False


def test_lightweight_on_2_5_1_uses_msprof_tx_and_notes_the_domains():
    a = adapt_options(profile_options(integrated(**LIGHTWEIGHT)), api("2.5.1"))
    assert a.experimental == {"profiler_level": "Level_none", "msprof_tx": True, "export_type": "Text", "l2_cache": False,
                              "data_simplification": True}
    assert a.step_naming == "skip_first"  # no _step_num_offset before 2.5.1.post1
    switch, marker_domains, domains = a.notes
    assert switch.honoured and switch.field == "mstx" and "msprof_tx=True" in switch.message and "2.5.1" in switch.message
    # mstx.range_start takes no domain on 2.5.1: said in the metadata too, not only by the markers' log line
    assert marker_domains.field == "mstx" and "range_start has no domain" in marker_domains.message
    assert not domains.honoured and domains.field == "mstx_domain_include"
    assert "torch_npu 2.5.1" in domains.message and "integrated.mstx_domain_include=['train']" in domains.message


def test_lightweight_on_2_5_1_post1_keeps_domains_with_msprof_tx():
    a = adapt_options(profile_options(integrated(**LIGHTWEIGHT)), api("2.5.1.post1"))
    assert a.experimental["msprof_tx"] is True and a.experimental["mstx_domain_include"] == ["train"]
    assert "mstx" not in a.experimental and [n.honoured for n in a.notes] == [True]


@pytest.mark.parametrize("version", ["2.1.0.post17", "2.6.0.post5", "2.7.1", "2.14.0"])
def test_newer_releases_take_everything_as_configured(version):
    opts = profile_options(integrated(**LIGHTWEIGHT, profile_export_type="db", l2_cache=True))
    a = adapt_options(opts, api(version))
    assert a.experimental == opts["experimental"] and a.notes == () and a.step_naming == "offset"
    assert a.handler == {"analyse_flag": False}


def test_a_default_config_needs_no_note_anywhere():
    opts = profile_options(integrated())
    for v in SNAPSHOT_VERSIONS:
        assert adapt_options(opts, api(v)).notes == (), v


def test_missing_enum_members_and_keywords_fall_back_with_notes():
    snap = copy.deepcopy(load_snapshot("2.5.1"))
    del snap["enums"]["ProfilerLevel"]["Level_none"]
    del snap["enums"]["ExportType"]["Db"]
    snap["functions"][HANDLER]["params"] = [p for p in snap["functions"][HANDLER]["params"] if p["name"] != "analyse_flag"]
    snap["functions"][PROFILE]["params"] = [p for p in snap["functions"][PROFILE]["params"] if p["name"] != "with_modules"]
    opts = profile_options(integrated(profile_level="level_none", profile_export_type="db", profile_with_module=True,
                                      profile_analysis=False, l2_cache=True))
    a = adapt_options(opts, NpuApi.from_snapshot(snap))
    assert a.experimental["profiler_level"] == "Level0" and "export_type" not in a.experimental
    assert a.handler == {} and "with_modules" not in a.profile and a.experimental["l2_cache"] is True
    fields = sorted(n.field for n in a.notes if not n.honoured)
    assert fields == ["profile_analysis", "profile_export_type", "profile_level", "profile_with_module"]
    assert all("torch_npu 2.5.1" in n.message for n in a.notes)


def test_without_any_step_attribute_steps_count_from_zero_with_a_note():
    snap = copy.deepcopy(load_snapshot("2.5.1"))
    snap["instance_attributes"]["torch_npu.profiler.profile"].remove("current_action")
    a = adapt_options(profile_options(integrated()), NpuApi.from_snapshot(snap))
    assert a.step_naming == "none" and "ProfilerStep#N counts from 0" in a.notes[0].message


# ------------------------------------------------------------------------------ on the MindSpeed-RL pin, end to end


@pytest.fixture
def release_2_5_1(clean_state):
    reset_marker_backends()
    fake = FakeTorchNpu.for_version("2.5.1").install()
    try:
        yield fake
    finally:
        fake.uninstall()
        reset_marker_backends()


def test_lightweight_capture_on_2_5_1(tmp_path, release_2_5_1, runtime_warnings):
    """MindSpeed-RL's lightweight mode on its pinned torch_npu: the capture runs with the older switch
    (it failed with TypeError against the 2.14 API); the domain filter it cannot honour is a note in
    the metadata and one warning naming the feature, the field and the version."""
    cfg = profile_config(tmp_path, backend="auto", profile_steps=[2, 4], **LIGHTWEIGHT)
    train(IntegratedProfiler(cfg, role="actor", rank=0, world_size=1), 4)
    metas = [meta_of(d) for d in capture_dirs(tmp_path)]
    assert [(m["steps"], m["status"]) for m in metas] == [([2, 2], "ok"), ([4, 4], "ok")]
    exps = release_2_5_1.calls_to(EXPERIMENTAL)
    assert len(exps) == 2 and all(e["msprof_tx"] is True and "mstx" not in e for e in exps)
    for m in metas:
        assert m["options"]["torch_npu"]["version"] == "2.5.1"
        assert m["options"]["torch_npu"]["passed"]["experimental_config"]["msprof_tx"] is True
        assert any("msprof_tx=True" in n for n in m["options"]["notes"])
        assert any("integrated.mstx_domain_include" in n and "not honoured" in n for n in m["options"]["notes"])
    (warning,) = runtime_warnings("not honoured")  # once, although two captures could not honour it
    assert "torch_npu 2.5.1" in warning and "integrated.mstx_domain_include" in warning and "domain filter" in warning


def test_warn_once_per_feature_and_version(tmp_path, runtime_warnings):
    """The same feature on another release is a new warning; the same again is not."""
    reset_warnings()
    cfg = profile_config(tmp_path, backend="auto", mstx=True, mstx_domain_exclude=["noisy"])
    try:
        for version in ("2.4.0.post4", "2.4.0.post4", "2.3.1.post6"):
            fake = FakeTorchNpu.for_version(version).install()
            try:
                train(IntegratedProfiler(cfg.integrated, role="a", rank=0, world_size=1), 1, stages=())
            finally:
                fake.uninstall()
    finally:
        reset_warnings()
    found = runtime_warnings("integrated.mstx_domain_exclude")
    assert len(found) == 2 and "torch_npu 2.4.0.post4" in found[0] and "torch_npu 2.3.1.post6" in found[1]


def test_markers_on_2_5_1_drop_domain_and_stream(release_2_5_1, runtime_warnings):
    """_NpuMarkers on 2.5.1: range_start(message, stream) without domain, mark(message) without
    stream or domain; said once each, naming the release; markers are still emitted."""
    from mindspeed_profiler.runtime import mstx

    mstx.enable_markers(True, device="npu")
    stream = object()
    for _ in range(2):
        with mstx.mstx_range("gen", domain="rollout", stream=stream):
            pass
        mstx.mstx_mark("m", domain="rollout", stream=stream)
    starts = release_2_5_1.calls_to(RANGE_START)
    assert starts == [{"message": "gen", "stream": stream}] * 2
    assert release_2_5_1.calls_to(MARK) == [{"message": "m"}] * 2
    assert [c.keys() for c in release_2_5_1.calls_to(RANGE_END)] == [{"range_id"}] * 2
    (domains,) = runtime_warnings("mstx domains are ignored")
    assert "torch_npu 2.5.1" in domains and "'rollout'" in domains
    (streams,) = runtime_warnings("no stream keyword")
    assert "mstx.mark" in streams and "2.5.1" in streams


def test_markers_on_newer_releases_pass_domain_and_stream(clean_state, runtime_warnings):
    from mindspeed_profiler.runtime import mstx

    for version in ("2.5.1.post1", "2.14.0"):
        reset_marker_backends()
        fake = FakeTorchNpu.for_version(version).install()
        try:
            mstx.enable_markers(True, device="npu")
            with mstx.mstx_range("gen", domain="rollout", stream="s"):
                pass
            mstx.mstx_mark("m", domain="rollout")
        finally:
            fake.uninstall()
        assert fake.calls_to(RANGE_START) == [{"message": "gen", "stream": "s", "domain": "rollout"}]
        assert fake.calls_to(RANGE_END)[0]["domain"] == "rollout" and fake.calls_to(MARK)[0]["domain"] == "rollout"
    reset_marker_backends()
    assert runtime_warnings("mstx") == []


@pytest.mark.parametrize("version", SNAPSHOT_VERSIONS)
def test_fake_follows_its_release(version):
    """The fake of a release has exactly what the snapshot says: absent things are absent."""
    fake = FakeTorchNpu.for_version(version)
    root = fake.modules["torch_npu"]
    snap = fake.snap
    assert root.__version__ == version
    mstx = root.npu.mstx
    for name in ("range_push", "range_pop"):
        assert hasattr(mstx, name) == (f"torch_npu.npu.mstx.{name}" in snap["functions"])
    assert "torch_npu.profiler.dynamic_profile" in fake.modules
    exp_params = [p["name"] for p in snap["functions"][EXPERIMENTAL]["params"]][1:]
    if "mstx" not in exp_params:
        with pytest.raises(TypeError, match=f"torch-npu {version}.*mstx"):
            root.profiler._ExperimentalConfig(mstx=True)
    root.profiler._ExperimentalConfig(**{p: v for p, v in (("msprof_tx", True), ("export_type", "db")) if p in exp_params})
    if "domain" not in [p["name"] for p in snap["functions"][RANGE_START]["params"]]:
        with pytest.raises(TypeError, match="domain"):
            mstx.range_start("x", None, domain="d")
        with pytest.raises(TypeError):
            mstx.range_start("x", None, "d")  # positionally, as the 2.14-only backend did
