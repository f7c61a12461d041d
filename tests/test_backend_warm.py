"""torch.profiler's prepare_trace() imports torch._inductor (`hasattr(torch, "_inductor")`: 1.3 s on
the CPU box) the first time a process captures; the torch backend imports it at the profiler's start
instead, on ranks that capture (Backend.warm). Each case runs in a fresh interpreter, since the test
process may have imported it already."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _loaded_after_start(tmp_path: Path, profile_ranks: str) -> dict:
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(REPO)!r})
        import torch
        from mindspeed_profiler import IntegratedProfiler, load_config
        cfg = load_config({{"integrated": {{"profile": True, "profile_level": "level0", "profile_ranks": {profile_ranks},
                                            "profile_save_path": {str(tmp_path)!r}, "profile_step_start": 3,
                                            "profile_step_end": 4}}}})
        before = "torch._inductor" in sys.modules
        prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=2)
        prof.start()
        after = "torch._inductor" in sys.modules
        prof.stop()
        print(json.dumps({{"before": before, "after": after}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                         env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_capturing_rank_loads_what_torch_profiler_would_load_in_the_step_at_start(tmp_path):
    assert _loaded_after_start(tmp_path, "[0]") == {"before": False, "after": True}


def test_a_rank_that_does_not_capture_loads_nothing_more(tmp_path):
    assert _loaded_after_start(tmp_path, "[1]") == {"before": False, "after": False}
