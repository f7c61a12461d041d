"""Megatron parallel layout in the metadata, and selection by parallel coordinate (profile_parallel_ranks)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.runtime.megatron import parallel_layout, parallel_selected
from profiler_testutil import capture_dirs, meta_of, train


def test_parallel_selected_is_pure_and_defaults_missing_dims():
    lay = {"tp": [1, 2], "pp": [0, 2]}
    assert parallel_selected(lay, {"pp": (0,)})
    assert not parallel_selected(lay, {"tp": (0,)})
    assert parallel_selected(lay, {"tp": (0, 1), "ep": (0,)})  # no ep in the layout: rank 0 of 1


def test_without_megatron_state_the_filter_is_reported_not_applied(tmp_path, caplog):
    if parallel_layout() is not None:
        pytest.skip("Megatron parallel state is initialised in this process")
    cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path), "backend": "torch",
                                      "profile_parallel_ranks": {"tp": [0]}}})
    train(IntegratedProfiler(cfg, role="a", rank=0, world_size=1), 1, stages=())
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["parallel"] is None and any("not initialised" in n for n in meta["notes"])
    assert "not initialised" in caplog.text


@pytest.mark.slow
def test_tp2_group_only_tp_rank0_captures(tmp_path):
    """Two real processes, torch.distributed (gloo) + megatron.core parallel state with TP=2."""
    rendezvous = tmp_path.with_name(tmp_path.name + ".rendezvous")   # a file, not a port another process can take
    script = textwrap.dedent(f"""
        import os, torch, torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://{rendezvous}",
                                rank=int(os.environ["RANK"]), world_size=2)
        from megatron.core import parallel_state as ps
        ps.initialize_model_parallel(tensor_model_parallel_size=2)
        from mindspeed_profiler import IntegratedProfiler, load_config
        cfg = load_config({{"integrated": {{"profile": True, "profile_save_path": {str(tmp_path)!r}, "backend": "torch",
                           "profile_parallel_ranks": {{"tp": [0]}}, "profile_step_start": 1, "profile_step_end": 3}}}})
        prof = IntegratedProfiler(cfg, role="actor")  # rank and world size from torch.distributed
        prof.start()
        for _ in range(3):
            torch.ones(8).sum()
            prof.step()
        prof.stop()
        dist.barrier()
        dist.destroy_process_group()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(2)]
    outs = [p.communicate(timeout=150)[0].decode(errors="replace") for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    (d,) = capture_dirs(tmp_path)
    meta = meta_of(d)
    assert meta["rank"] == 0 and meta["world_size"] == 2
    assert meta["parallel"]["tp"] == [0, 2] and meta["parallel"]["dp"] == [0, 1]
    assert json.loads((tmp_path / "run.json").read_text())["writer"]["rank"] == 0
