"""Finding the captures of a run directory when it holds odd things: damaged capture metadata, a FIFO,
a broken symbolic link, a link to a capture directory elsewhere and a link cycle."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mindspeed_profiler.analysis.pipeline.batch import analyse_directory


def test_damaged_metadata_does_not_take_the_run_down(tmp_path, shared_data):
    src = shared_data / "kineto" / "gpu_rank0.json.gz"
    d = tmp_path / "actor_update" / "actor_rank0_step1-1_h_1_20260101000000000_pt"
    d.mkdir(parents=True)
    (d / "t.pt.trace.json.gz").write_bytes(src.read_bytes())
    (d / "mindspeed_profiler_meta.json").write_text(json.dumps(
        {"role": "actor", "rank": 0, "stage": ["a", "b"], "steps": "1-1", "trace_files": [None]}))
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False)
    c = summary["captures"][0]
    assert code == 0 and c["status"] == "ok" and c["files"] == [str(Path(d.relative_to(tmp_path)) / "t.pt.trace.json.gz")]
    assert isinstance(c["stage"], str) and c["step_range"] == [1, 1]


def test_fifo_broken_link_and_linked_capture_dir(tmp_path, shared_data):
    src = shared_data / "kineto" / "gpu_rank0.json.gz"
    root = tmp_path / "run"
    root.mkdir()
    os.mkfifo(root / "cluster_step_trace_time.csv")     # opening it for reading would block forever
    os.symlink(tmp_path / "gone.json", root / "gone.json")
    elsewhere = tmp_path / "elsewhere" / "actor_rank1_step1-1_h_1_20260101000000000_pt"
    elsewhere.mkdir(parents=True)
    (elsewhere / "t.pt.trace.json.gz").write_bytes(src.read_bytes())
    os.symlink(elsewhere, root / "linked_pt")
    os.symlink(root, root / "loop")                      # a link cycle must not loop
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.analyse", str(root), "-q", "-j", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    caps = {c["path"]: c for c in json.loads((root / "analysis" / "summary.json").read_text())["captures"]}
    assert caps["cluster_step_trace_time.csv"]["status"] == "failed"
    assert "not a regular file" in caps["cluster_step_trace_time.csv"]["error"]
    assert "broken symbolic link" in caps["gone.json"]["error"]
    assert caps["linked_pt"]["status"] == "ok" and caps["linked_pt"]["rank"] == 0   # distributedInfo.rank
