"""Issue 45, items 1 and 11: `export_after_run` (backends/held_session.py) must not make the training
process pay for the rest of the run, and a flush that cannot write the windows keeps the one copy of
what was recorded. Real torch.profiler sessions on the CPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.backends import held_session
from mindspeed_profiler.runtime.host_memory import rss_bytes

pytestmark = pytest.mark.filterwarnings("ignore")
BUDGET_MB = 16
REPO = Path(__file__).resolve().parents[1]


def _allocations(n: int = 2000) -> None:
    """An iteration that allocates and frees n small tensors, each through a Python call: two
    [memory] events and a Python frame each while torch.profiler records memory or stacks."""
    def one() -> torch.Tensor:
        return torch.empty(64)
    for _ in range(n):
        one()


# a child process per measurement: in one process the memory an earlier session freed is reused
# by the next one, which hides growth from the resident size
_CHILD = """
import json, sys, tempfile, torch
sys.path.insert(0, {tests!r})
from test_hostile4_held_session import _allocations
from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.backends import held_session
from mindspeed_profiler.runtime.host_memory import rss_bytes

cfg = load_config({{"integrated": {{"profile": True, "profile_level": "level1", "profile_save_path": tempfile.mkdtemp(),
                                    "profile_step_start": 2, "profile_step_end": 3, "export_after_run": True,
                                    "capture_memory_budget_mb": {budget}, {flag!r}: True}}}})
prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
prof.start()
for _ in range(3):   # iterations 1-3: the window (2) closes at the second step()
    _allocations()
    prof.step()
_allocations()       # the allocator's arenas and the writer thread settle first
rss0 = rss_bytes()
for _ in range({after}):
    _allocations()
    prof.step()
grown = (rss_bytes() - rss0) / 2**20
held = held_session.current() is not None
prof.stop()
print(json.dumps({{"grown_mb": grown, "held": held}}))
"""


def _growth_after_the_window(flag: str, *lengths: int) -> list[dict]:
    """Per length, one window (iteration 2) recorded with `export_after_run` and `flag`, then that
    many iterations, in a fresh process each (run side by side): the resident growth (MB) over those
    iterations, measured before stop()."""
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD.format(tests=str(Path(__file__).parent), budget=BUDGET_MB,
                                                                    flag=flag, after=after)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO),
                              env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}) for after in lengths]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr[-3000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


@pytest.mark.parametrize("flag", ["profile_with_memory", "profile_with_stack"])
def test_a_held_session_grows_nothing_after_its_last_window_at_any_run_length(flag):
    """Item 1: with memory or stack recording the held session went on recording every allocation
    (Python call) after its window, for the rest of the run (543 MB for 300 small iterations with a
    16 MB budget; here 29 MB for 160 iterations, ~4x that of 40). Now the growth after the last
    window is within the budget at two run lengths, 4x apart: it does not depend on the run's length."""
    if rss_bytes() is None:
        pytest.skip("no /proc: the resident size cannot be read here")
    short, long = _growth_after_the_window(flag, 60, 240)
    assert short["grown_mb"] < BUDGET_MB and long["grown_mb"] < BUDGET_MB, (short, long)
    assert not short["held"] and not long["held"], "no session left open after the window"


def test_a_memory_capture_with_export_after_run_is_written_at_its_windows_end(clean_state, tmp_path):
    """Item 1, how: torch cannot stop recording memory (or Python calls) in a session it keeps open,
    so such a capture is not held: it is written at its window's end, as by default, and says why.
    A capture without them is still held (the default export_after_run behaviour)."""
    import json

    from mindspeed_profiler.core import formats

    cfg = load_config({"integrated": {"profile": True, "profile_level": "level1", "profile_with_memory": True,
                                      "profile_save_path": str(tmp_path), "profile_step_start": 1,
                                      "profile_step_end": 2, "export_after_run": True}})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    _allocations(10)
    prof.step()
    assert held_session.current() is None, "no session kept open past the window"
    [meta] = prof.captures
    assert meta["status"] in ("exporting", "ok") and meta["options"]["export_after_run"] is False
    assert any("export_after_run" in n and "profile_with_memory" in n for n in meta["options"]["notes"])
    prof.stop()
    on_disk = json.loads((Path(meta["directory"]) / formats.META_FILE).read_text())
    assert on_disk["status"] == "ok" and on_disk["trace_files"]
    plain = load_config({"integrated": {"profile": True, "profile_level": "level1", "profile_save_path": str(tmp_path / "p"),
                                        "profile_step_start": 1, "profile_step_end": 2, "export_after_run": True}})
    prof = IntegratedProfiler(plain, role="actor", rank=0, world_size=1)
    prof.start()
    _allocations(10)
    prof.step()
    assert held_session.current() is not None and prof.captures[0]["status"] == "held"
    prof.stop()


def test_a_non_held_capture_flushes_a_held_session_of_another_profiler_first(clean_state, tmp_path, caplog):
    """A held session (level1, actor) is open when a capture that cannot join it begins (memory on,
    so not held, ref): the held session is written first, both captures end ok."""
    actor = IntegratedProfiler(load_config({"integrated": {
        "profile": True, "profile_level": "level1", "profile_save_path": str(tmp_path / "a"), "profile_step_start": 1,
        "profile_step_end": 2, "export_after_run": True}}), role="actor", rank=0, world_size=1)
    ref = IntegratedProfiler(load_config({"integrated": {
        "profile": True, "profile_level": "level1", "profile_with_memory": True, "profile_save_path": str(tmp_path / "r"),
        "profile_step_start": 3, "profile_step_end": 4, "export_after_run": True}}), role="ref", rank=0, world_size=1)
    actor.start()
    ref.start()
    for _ in range(4):
        _allocations(10)
        actor.step()
        ref.step()
    assert "stopped and written now" in caplog.text
    ref.stop()
    actor.stop()
    import json

    from mindspeed_profiler.core import formats

    for m in actor.captures + ref.captures:
        on_disk = json.loads((Path(m["directory"]) / formats.META_FILE).read_text())
        assert on_disk["status"] == "ok" and on_disk["trace_files"], on_disk


def test_a_flush_whose_windows_cannot_be_written_keeps_the_session_trace_and_says_where(tmp_path):
    """Item 11: the windows' parts cannot be written (here a directory sits where each part goes; a
    full disk does the same): every capture fails, and the whole session trace, the only copy of what
    was recorded, is kept and named in each failure (it was deleted)."""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU])
    prof.prepare_trace()
    held = held_session.HeldSession(("k",), prof, [ProfilerActivity.CPU])
    done = []
    for name in ("a", "b"):
        window = held.open_window(name)
        torch.mm(torch.randn(2, 2), torch.randn(2, 2))
        held.close_window()
        raw = tmp_path / f"cap_{name}" / "actor_rank0.1.pt.trace.json"
        raw.mkdir(parents=True)   # open(raw, "wb") fails: IsADirectoryError
        held.hold(held_session.HeldWindow(window, raw, lambda files, note, phases: done.append((files, note)),
                                          lambda job: None))
    held.flush(lambda name, run: run())
    whole = tmp_path / "cap_a" / f"held_session.{os.getpid()}.json"
    assert len(done) == 2 and all(files == [] for files, _ in done), done
    assert whole.is_file(), "the session trace is the only copy: it is kept"
    for _, note in done:
        assert "could not be written" in note and str(whole) in note, note
