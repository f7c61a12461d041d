"""Backends own their options: a backend-specific option set on a backend that does not honour it is
a note in each capture's metadata (`options.notes`) and one warning per process per (backend, field);
what an older torch_npu release lacks is noted the same way; defaults say nothing. Also: the marker
kinds are a registry a new kind joins with one line, and the backends import no config at runtime."""
from __future__ import annotations

import subprocess
import sys

import pytest

from fake_torch_npu import FakeTorchNpu
from mindspeed_profiler import IntegratedProfiler, load_config, mstx_mark, mstx_range
from mindspeed_profiler.backends import Backend, register_backend
from mindspeed_profiler.backends.honour import BACKEND_OPTIONS, unhonoured
from mindspeed_profiler.backends.marker_kinds import MARKERS, MarkerKind, register_marker_kind
from mindspeed_profiler.backends.npu import NpuBackend
from mindspeed_profiler.backends.torch import TorchBackend
from profiler_testutil import capture_dirs, meta_of, profile_config, train

NPU_ONLY = dict(l2_cache=True, aic_metrics="PipeUtilization", profile_export_type="db")


def not_honoured(meta: dict, backend: str) -> list[str]:
    return [n for n in meta["options"]["notes"] if f"not honoured by the {backend} backend" in n]


def test_a_torch_capture_notes_the_npu_only_options(tmp_path, clean_state, runtime_warnings):
    cfg = profile_config(tmp_path, profile_steps=[1, 3], **NPU_ONLY)
    train(IntegratedProfiler(cfg, role="actor", rank=0, world_size=1), 3)
    train(IntegratedProfiler(cfg, role="ref", rank=0, world_size=1), 3)   # a second profiler, same process
    metas = [meta_of(d) for d in capture_dirs(tmp_path)]
    assert len(metas) == 4 and all(m["status"] == "ok" and m["backend"] == "torch" for m in metas)
    for m in metas:
        notes = not_honoured(m, "torch")
        assert [n.split(":")[0] for n in notes] == ["l2_cache", "aic_metrics", "profile_export_type"]
        l2, aic, db = notes
        assert l2.startswith("l2_cache: true is not honoured by the torch backend (torch.profiler has no L2 cache")
        assert "only the npu backend" in l2
        assert aic.startswith("aic_metrics: PipeUtilization is not honoured")
        assert db.startswith("profile_export_type: db is not honoured") and "no db export" in db
    # the capture itself is the usual Kineto trace
    assert all(m["trace_files"] and m["trace_files"][0].endswith(".pt.trace.json.gz") for m in metas)
    # one warning per (backend, field) in this process, however many captures and profilers
    warned = runtime_warnings("not honoured by the torch backend")
    assert sorted(w.split("mindspeed-profiler: ")[1].split(":")[0] for w in warned) == \
        ["aic_metrics", "l2_cache", "profile_export_type"]


def test_defaults_produce_no_note(tmp_path, clean_state, runtime_warnings):
    train(IntegratedProfiler(profile_config(tmp_path), role="actor", rank=0, world_size=1), 2)
    (d,) = capture_dirs(tmp_path)
    assert not_honoured(meta_of(d), "torch") == [] and runtime_warnings("not honoured") == []
    default = load_config({}).integrated
    assert unhonoured(TorchBackend, default) == [] and unhonoured(NpuBackend, default) == []


def test_each_backend_says_what_it_honours():
    every = load_config({"integrated": {**NPU_ONLY, "data_simplification": False, "profile_analysis": True,
                                        "export_after_run": True}}).integrated
    # export_after_run is the torch backend's (a held torch.profiler session); the others torch_npu's
    assert [n.split(":")[0] for n in unhonoured(NpuBackend, every)] == ["export_after_run"]
    notes = unhonoured(TorchBackend, every)
    assert [n.split(":")[0] for n in notes] == [o.field for o in BACKEND_OPTIONS if o.field != "export_after_run"]
    assert any(n.startswith("data_simplification: false is not honoured") for n in notes)
    assert any(n.startswith("profile_analysis: true") and "mindspeed-profiler analyse" in n for n in notes)


def test_a_backend_cannot_claim_an_unknown_option():
    class Typo(Backend):
        name, suffix, honours = "typo", "pt", frozenset({"l2cache"})

        def open(self, spec):
            raise NotImplementedError
    with pytest.raises(ValueError, match="l2cache"):
        register_backend(Typo)


def test_an_older_torch_npu_release_notes_what_it_lacks(tmp_path, clean_state, runtime_warnings):
    """torch_npu 2.3.1: no mstx domain filter in _ExperimentalConfig and no domain on mstx.range_start;
    both are in every capture's metadata, the first one also warned once. l2_cache is the npu
    backend's own: no note that it is not honoured."""
    fake = FakeTorchNpu.for_version("2.3.1.post6").install()
    try:
        cfg = profile_config(tmp_path, backend="auto", profile_steps=[1, 3], mstx=True, mstx_domain_exclude=["noisy"],
                             l2_cache=True)
        train(IntegratedProfiler(cfg, role="actor", rank=0, world_size=1), 3)
    finally:
        fake.uninstall()
    metas = [meta_of(d) for d in capture_dirs(tmp_path)]
    assert [m["status"] for m in metas] == ["ok", "ok"] and all(m["backend"] == "npu" for m in metas)
    for m in metas:
        notes = m["options"]["notes"]
        assert not_honoured(m, "npu") == []
        (lacks,) = [n for n in notes if "not honoured" in n]
        assert "torch_npu 2.3.1.post6" in lacks and "integrated.mstx_domain_exclude=['noisy']" in lacks
        assert any("range_start has no domain" in n and "2.3.1.post6" in n for n in notes)
    (warning,) = runtime_warnings("not honoured")
    assert "mstx_domain_exclude" in warning and "2.3.1.post6" in warning


class ListMarkers:
    """A marker kind that appends what it is asked to draw."""

    calls: list = []

    def start(self, name, domain, stream):
        self.calls.append(("start", name))
        return name

    def end(self, token, domain):
        self.calls.append(("end", token))

    def mark(self, message, domain, stream):
        self.calls.append(("mark", message))


def test_a_new_marker_kind_is_one_registration(clean_state):
    register_marker_kind(MarkerKind("test_list", ListMarkers))
    try:
        clean_state.mstx_enabled, clean_state.markers = True, ("test_list",)  # what a backend naming it sets
        with mstx_range("work"):
            mstx_mark("here")
        assert ListMarkers.calls == [("start", "work"), ("mark", "here"), ("end", "work")]
    finally:
        MARKERS.entries.pop("test_list", None)
        ListMarkers.calls.clear()
    with pytest.raises(TypeError):
        register_marker_kind("nvtx")


def test_the_backends_import_no_config_at_runtime():
    """config imports the backend registry: the backends need its types for annotations only."""
    code = ("import sys, mindspeed_profiler.backends.npu, mindspeed_profiler.backends.torch, "
            "mindspeed_profiler.backends.markers, mindspeed_profiler.backends.marker_kinds as k; list(k.MARKERS); "
            "print(sorted(m for m in sys.modules if m.startswith('mindspeed_profiler.config')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
