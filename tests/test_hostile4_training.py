"""Issue 45, items 7, 8 and 9 on the training side: what a worker writes stays true when its export
is interrupted, when two processes share a role and rank, and when a run resumes after a crash.

- 7: an export interrupted after compression, during the memory-snapshot step (13 s on the issue's
  run): the metadata still listed the deleted raw trace.
- 8: two processes with the same role and rank (the rank defaults to 0: separate rollout actors)
  shared `samples/<role>_rank0.jsonl`; the later one's first write emptied it.
- 9: after a crash and a resume with the same run id (an elastic restart), the re-run iterations'
  samples mixed both attempts: a generation window spanning the restart gap.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.backends import memory_snapshot
from mindspeed_profiler.core import formats

# ------------------------------------------------------------------------------ 7. an interrupted export


def test_a_capture_interrupted_during_its_snapshot_step_lists_only_whole_files(clean_state, tmp_path, monkeypatch):
    """The background writer compresses the raw trace, then writes the memory snapshot (held here,
    as a slow one is): while it is in that step the metadata on disk lists the .gz, which is there,
    never the removed raw trace; a process killed then leaves a capture the analysis reads."""
    entered, release = threading.Event(), threading.Event()
    real = memory_snapshot.MemorySnapshot.write

    def slow_write(self, path):
        entered.set()
        release.wait(60)
        return real(self, path)
    monkeypatch.setattr(memory_snapshot.MemorySnapshot, "write", slow_write)
    cfg = load_config({"integrated": {"profile": True, "profile_level": "level1", "profile_with_memory": True,
                                      "profile_record_shapes": True, "profile_with_stack": True,
                                      "profile_save_path": str(tmp_path)}})   # the CPU snapshot: all three
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    torch.mm(torch.randn(8, 8), torch.randn(8, 8))
    prof.step()   # the window (iteration 1) closes: the export goes to the writer
    try:
        assert entered.wait(60), "the snapshot step never began"
        [meta] = prof.captures
        directory = Path(meta["directory"])
        on_disk = json.loads((directory / formats.META_FILE).read_text())
        assert on_disk["status"] == "exporting" and on_disk["trace_files"], on_disk
        for name in on_disk["trace_files"]:
            assert (directory / name).is_file(), (name, sorted(p.name for p in directory.iterdir()))
        assert all(name.endswith(".gz") for name in on_disk["trace_files"] if ".pt.trace." in name)
    finally:
        release.set()
        prof.stop()
    final = json.loads((directory / formats.META_FILE).read_text())
    assert final["status"] == "ok" and any(n.endswith(formats.MEMORY_SNAPSHOT_SUFFIX) for n in final["trace_files"])
