"""core/reaper.py: a child let go is killed and collected later, never waited for where it is let
go; those already gone are collected at the next let_go, so zombies do not pile up."""
from __future__ import annotations

import os
import time

import pytest

from mindspeed_profiler.core import reaper

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="children by fork")


def _child(seconds: float) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            time.sleep(seconds)
        finally:
            os._exit(0)
    return pid


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rpartition(")")[2].split()[0]


def test_let_go_kills_and_does_not_wait():
    pid = _child(60)
    t = time.monotonic()
    reaper.let_go(pid)
    assert time.monotonic() - t < 1
    reaper.reap_all()
    assert time.monotonic() - t < 10 and not reaper._EXITING
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="a zombie's state read in /proc")
def test_the_children_already_gone_are_collected_at_the_next_let_go():
    reaper.reap_all()   # (those other tests let go)
    pids = [_child(0) for _ in range(20)]
    deadline = time.monotonic() + 10
    while any(_state(p) != "Z" for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    for p in pids:
        reaper.let_go(p)
    assert not reaper._EXITING   # every one collected without a wait
    for p in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(p, os.WNOHANG)

