"""Raw Ascend captures (no ASCEND_PROFILER_OUTPUT yet).

- "not available" runs for real: torch_npu is not installed here, so the child import fails.
- "available" uses a FAKE torch_npu package (torch_npu cannot run without an NPU + CANN). The fake
  follows the real signature, read from the torch-npu 2.14.0 wheel source
  (torch_npu/profiler/profiler.py):
      def analyse(profiler_path: str, max_process_number: int = Constant.DEFAULT_PROCESS_NUMBER,
                  export_type: Optional[Union[str, list]] = None)
  with Constant.Text = "text", Constant.Db = "db"; and it writes what the real one writes:
  <capture>/ASCEND_PROFILER_OUTPUT/ (here: copies of the real trace_view.json / kernel_details.csv).
"""
from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

CAPTURE = "actor_update/actor_rank3_step2-2_node1_4321_20261129080000123_ascend_pt"


def make_raw(root: Path) -> Path:
    cap = root / CAPTURE
    (cap / "FRAMEWORK").mkdir(parents=True)
    (cap / "PROF_000001_20261129080000123_ABCDEF" / "device_0" / "data").mkdir(parents=True)
    (cap / "profiler_info_3.json").write_text("{}")
    (cap / "mindspeed_profiler_meta.json").write_text(json.dumps(
        {"schema": 1, "role": "actor", "stage": "actor_update", "rank": 3, "world_size": 8, "steps": [2, 2],
         "backend": "npu", "device": "npu", "status": "ok", "trace_files": []}))
    return cap


def test_raw_capture_without_torch_npu_is_reported(tmp_path, shared_data):
    try:
        import importlib.util
        if importlib.util.find_spec("torch_npu") is not None:
            pytest.skip("torch_npu is installed here")
    except Exception:  # noqa: BLE001
        pass
    cap = make_raw(tmp_path)
    shutil.copy(shared_data / "kineto" / "gpu_rank0.json.gz", tmp_path / "other.json.gz")
    summary, code = analyse_directory(tmp_path, jobs=2, progress=False)
    caps = {c["path"]: c for c in summary["captures"]}
    raw = caps[CAPTURE]
    assert code == 1
    assert raw["status"] == "unparsed" and raw["kind"] == "ascend_raw"
    assert "torch_npu" in raw["error"] and str(cap) in raw["error"] and "CANN" in raw["error"]
    assert (raw["role"], raw["rank"], raw["stage"]) == ("actor", 3, "actor_update")
    assert caps["other.json.gz"]["status"] == "ok"
    assert not (cap / "ASCEND_PROFILER_OUTPUT").exists()


FAKE = '''
import json, os, shutil, sys
from typing import Optional, Union

def analyse(profiler_path: str, max_process_number: int = os.cpu_count() // 2,
            export_type: Optional[Union[str, list]] = None):
    out = os.path.join(profiler_path, "ASCEND_PROFILER_OUTPUT")
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join({data!r}, "trace_view.json"), out)
    shutil.copy(os.path.join({data!r}, "kernel_details.csv"), out)
    with open(os.path.join({log!r}), "a") as f:
        f.write(json.dumps({{"path": profiler_path, "max_process_number": max_process_number,
                             "export_type": export_type,
                             "autoload": os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD")}}) + "\\n")
'''


def test_raw_capture_parsed_with_torch_npu(tmp_path, monkeypatch, shared_data):
    fake = tmp_path / "fake"
    (fake / "torch_npu" / "profiler").mkdir(parents=True)
    (fake / "torch_npu" / "__init__.py").write_text("")
    (fake / "torch_npu" / "profiler" / "__init__.py").write_text("")
    log = tmp_path / "calls.jsonl"
    (fake / "torch_npu" / "profiler" / "profiler.py").write_text(
        textwrap.dedent(FAKE.format(data=str(shared_data / "ascend"), log=str(log))))
    monkeypatch.setenv("PYTHONPATH", str(fake))
    root = tmp_path / "run"
    cap = make_raw(root)
    summary, code = analyse_directory(root, jobs=2, export_type="text", progress=False)
    c = summary["captures"][0]
    assert code == 0, c
    assert c["kind"] == "ascend" and c["status"] == "ok" and c["rank"] == 3
    assert c["device"]["n_activities"] == 276 and c["n_kernels"] == 29
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    assert calls == [{"path": str(cap), "max_process_number": 2, "export_type": "text", "autoload": "0"}]
