"""Robustness: bad files are reported with path and reason, the rest analysed; exit codes and messages
for bad command lines and outputs that cannot be written."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mindspeed_profiler.analysis.parsing import jsonscan
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory


def make_mixed(root: Path, data: Path) -> None:
    """One good trace (from the sample `data`) beside a truncated, an empty, a non-trace and a broken one."""
    shutil.copy(data / "kineto" / "gpu_rank0.json.gz", root / "good_rank0.json.gz")
    raw = gzip.decompress((data / "kineto" / "gpu_rank1.json.gz").read_bytes())
    (root / "truncated.pt.trace.json").write_bytes(raw[: len(raw) // 2])
    (root / "empty.json").write_bytes(b"")
    (root / "config.json").write_text(json.dumps({"lr": 1e-4, "layers": 12}))
    (root / "broken.json.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")


def test_mixed_directory_some_failed(tmp_path, shared_data):
    make_mixed(tmp_path, shared_data)
    summary, code = analyse_directory(tmp_path, jobs=2, progress=False)
    caps = {c["path"]: c for c in summary["captures"]}
    assert code == 1
    assert caps["good_rank0.json.gz"]["status"] == "ok"
    assert caps["good_rank0.json.gz"]["device"]["busy_us"] > 0
    assert caps["truncated.pt.trace.json"]["status"] == "failed"
    assert "truncated" in caps["truncated.pt.trace.json"]["error"]
    assert caps["empty.json"]["status"] == "failed" and "empty file" in caps["empty.json"]["error"]
    assert caps["config.json"]["status"] == "failed" and "traceEvents" in caps["config.json"]["error"]
    assert caps["broken.json.gz"]["status"] == "failed" and "cannot read" in caps["broken.json.gz"]["error"]
    assert summary["counts"] == {"found": 5, "ok": 1, "failed": 4, "unparsed": 0}
    on_disk = json.loads((tmp_path / "analysis" / "summary.json").read_text())
    assert {c["path"]: c["status"] for c in on_disk["captures"]} == {k: v["status"] for k, v in caps.items()}


def test_cli_exit_codes_and_messages(tmp_path, shared_data):
    make_mixed(tmp_path, shared_data)
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.analyse", str(tmp_path), "-j", "2"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 1, p.stderr
    out = p.stdout + p.stderr
    for name in ("truncated.pt.trace.json", "empty.json", "config.json"):
        assert name in out
    empty = tmp_path / "nothing"
    empty.mkdir()
    (empty / "notes.txt").write_text("no traces")
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.analyse", str(empty)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 3 and "nothing to analyse" in p.stderr
    assert not (empty / "analysis").exists()
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.analyse", str(tmp_path / "missing")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 3 and "does not exist" in p.stderr
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", "analyse", str(tmp_path), "-j", "0"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--jobs" in p.stderr


def test_analysis_does_not_import_torch(tmp_path, shared_data):
    shutil.copy(shared_data / "kineto" / "gpu_rank0.json.gz", tmp_path)
    code = ("import sys; from mindspeed_profiler.analysis.pipeline.batch import analyse_directory; "
            f"s, c = analyse_directory({str(tmp_path)!r}, jobs=1, progress=False); "
            "assert c == 0; assert 'torch' not in sys.modules and 'torch_npu' not in sys.modules, 'torch imported'")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_cli_bad_threshold_and_unwritable_output(tmp_path, shared_data):
    src = shared_data / "kineto" / "gpu_rank0.json.gz"
    (tmp_path / "weird.json").mkdir()            # a directory named *.json is walked, not read
    (tmp_path / "weird.json" / "r0.json.gz").write_bytes(src.read_bytes())
    run = lambda *a: subprocess.run([sys.executable, "-m", "mindspeed_profiler.analyse", str(tmp_path), "-q", *a],
                                    capture_output=True, text=True, timeout=120)
    p = run("--threshold", "0")
    assert p.returncode == 2 and "--threshold" in p.stderr
    p = run("-o", "/dev/null/out")               # cannot be created: a message, not a traceback
    assert p.returncode == 2 and "cannot write the outputs" in p.stderr and "Traceback" not in p.stderr
    p = run()
    assert p.returncode == 0, p.stderr
    caps = json.loads((tmp_path / "analysis" / "summary.json").read_text())["captures"]
    assert [(c["path"], c["status"]) for c in caps] == [("weird.json/r0.json.gz", "ok")]


@pytest.mark.parametrize("stream", [False, True])
def test_streaming_and_plain_loader_agree(stream, monkeypatch, shared_data):
    monkeypatch.setattr(jsonscan, "CHUNK", 4096)   # many chunk boundaries inside events and strings
    for f in (shared_data / "kineto" / "gpu_rank0.json.gz", shared_data / "kineto" / "cpu_only_rank34.pt.trace.json.gz",
              shared_data / "ascend" / "trace_view.json"):
        ref = json.loads(gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes())
        got: list = []
        rest = jsonscan.load_trace(f, got.extend, stream=stream)
        if isinstance(ref, list):
            assert got == ref and rest == {}
        else:
            assert got == ref.pop("traceEvents") and rest == ref


def test_streaming_tricky_strings_and_truncation(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonscan, "CHUNK", 7)
    obj = {"pre": "[{\"", "traceEvents": [{"name": "a\\\"}]{", "ph": "X"}, {"name": "b\\\\", "args": {"k": [1, {"z": "]"}]}}],
           "post": {"q": "}]"}}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(obj))
    got: list = []
    rest = jsonscan.load_trace(p, got.extend, stream=True)
    assert got == obj["traceEvents"] and rest == {"pre": obj["pre"], "post": obj["post"]}
    p.write_text(json.dumps(obj)[:60])
    with pytest.raises(jsonscan.TraceFormatError, match="truncated"):
        jsonscan.load_trace(p, [].extend, stream=True)
    p.write_text("")
    with pytest.raises(jsonscan.TraceFormatError, match="empty"):
        jsonscan.load_trace(p, [].extend, stream=True)
