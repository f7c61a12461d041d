"""pipeline/forked.py (issue 34): one function computed in a forked child while the caller works;
the same result as computing it here, and computed here where the child fails. Its two users: the
memory block of a lone capture's Kineto trace (inputs/kineto.py), and report.html written while
the analyse command prints its tables (commands/analyse.py)."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from mindspeed_profiler.core import reaper
from mindspeed_profiler.analysis.analyzers import memory_peaks as mp
from mindspeed_profiler.analysis.inputs import kineto as kin
from mindspeed_profiler.analysis.parsing import split_parse
from mindspeed_profiler.analysis.pipeline import forked
from mindspeed_profiler.commands import analyse as analyse_cmd
from test_memory_one_pass import RANGES, _write
from test_memory_peaks import HAND_EVENTS, _mem

pytestmark = pytest.mark.skipif(not forked.available(), reason="no fork on this platform")


def _pid_and(x):
    return os.getpid(), x * 2


def test_result_comes_from_a_child():
    p = forked.start(_pid_and, 21)
    pid, value = p.result()
    assert value == 42 and pid != os.getpid()


def test_no_fork_computes_here():
    assert forked.start(_pid_and, 1, fork=False).result() == (os.getpid(), 2)


def _fails_in_child(parent: int):
    if os.getpid() != parent:
        raise RuntimeError("child only")
    return "here"


def test_a_failed_child_is_computed_here():
    assert forked.start(_fails_in_child, os.getpid()).result() == "here"


def _dies_in_child(parent: int):
    if os.getpid() != parent:
        os._exit(3)
    return "here"


def test_a_dead_child_is_computed_here():
    assert forked.start(_dies_in_child, os.getpid()).result() == "here"


def _unpicklable(parent: int):
    return (lambda: 0) if os.getpid() != parent else "here"


def test_an_unpicklable_result_is_computed_here():
    assert forked.start(_unpicklable, os.getpid()).result() == "here"


def _raises(_):
    raise ValueError("bad input")


def test_an_error_is_raised_here():
    with pytest.raises(ValueError, match="bad input"):
        forked.start(_raises, 0).result()


def _large(n: int):
    return bytes(n)


def test_a_result_larger_than_a_pipe():
    assert forked.start(_large, 5 << 20).result() == bytes(5 << 20)


def test_cancel_reaps_the_child():
    p = forked.start(time.sleep, 60)
    pid = p.pid
    t = time.perf_counter()
    with p:
        pass   # an exception in the caller (a time limit) leaves the block the same way
    assert time.perf_counter() - t < 10 and p.pid is None
    reaper.reap_all()   # killed: collected at once (core/reaper.py), not after its 60 s
    assert time.perf_counter() - t < 10
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, 0)


def _memory_trace(tmp_path: Path) -> Path:
    return _write(tmp_path, HAND_EVENTS + RANGES + [_mem(39.75, 7, 1500)])


def test_memory_block_in_a_child_is_the_one_here(tmp_path, monkeypatch):
    p = _memory_trace(tmp_path)
    want, _ = kin.analyse_trace_file(p, mp.TOP_N, False)
    pids = []
    real = kin.table_memory

    def spy(*a):
        out = real(*a)
        return {**out, "pid": os.getpid()}
    monkeypatch.setattr(kin, "table_memory", spy)
    monkeypatch.setattr(kin, "FORK_MEMORY_MIN", 1)
    with split_parse.helpers(1):   # a core to spare: the child computes it
        got, _ = kin.analyse_trace_file(p, mp.TOP_N, False)
    pids.append(got["memory_records"].pop("pid"))
    assert pids[0] != os.getpid()
    assert got == want
    got, _ = kin.analyse_trace_file(p, mp.TOP_N, False)   # no core to spare: here
    assert got["memory_records"].pop("pid") == os.getpid() and got == want


REAL = Path(__file__).resolve().parent / "data" / "hta" / "trace_diff" / "control" / "control.json.gz"   # HTA, MIT


def test_op_rows_in_a_child_are_the_ones_here(monkeypatch):
    """A trace without [memory] records, a core to spare: its op rows by a forked child, the same
    summary (a real GPU trace, HTA's trace_diff control)."""
    want, _ = kin.analyse_trace_file(REAL, mp.TOP_N, False)
    pids = []
    real = kin.op_rows

    def spy(ct):
        pids.append(os.getpid())
        return real(ct)
    monkeypatch.setattr(kin, "op_rows", spy)
    monkeypatch.setattr(kin, "FORK_OPS_MIN", 1)
    with split_parse.helpers(1):
        got, _ = kin.analyse_trace_file(REAL, mp.TOP_N, False)
    assert got == want and want["top_ops"]
    assert pids == [], "computed here, not in the child"   # (the child's call is in its own copy)
    monkeypatch.setattr(kin, "FORK_OPS_MIN", 10**9)   # too few events: here
    with split_parse.helpers(1):
        got, _ = kin.analyse_trace_file(REAL, mp.TOP_N, False)
    assert got == want and pids == [os.getpid()]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_command_writes_the_same_report(tmp_path, capsys, jobs):
    p = _memory_trace(tmp_path)
    assert analyse_cmd.main([str(p.parent), "-j", jobs]) == 0
    printed = capsys.readouterr().out
    report = tmp_path / "analysis" / "report.html"
    assert report.is_file() and "report.html" in printed   # listed: written before the list
    from mindspeed_profiler.analysis.results.report import render
    summary = json.loads((tmp_path / "analysis" / "summary.json").read_text())
    assert report.read_text() == render(summary, report.parent)


def test_command_no_html(tmp_path, capsys):
    p = _memory_trace(tmp_path)
    assert analyse_cmd.main([str(p.parent), "-j", "2", "--no-html", "-q"]) == 0
    assert not (tmp_path / "analysis" / "report.html").exists()


def test_command_report_unwritable(tmp_path, capsys):
    p = _memory_trace(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.html").mkdir()   # a directory where the page goes: the write fails
    assert analyse_cmd.main([str(p.parent), "-j", "2", "-o", str(tmp_path / "out")]) == 2
    assert "cannot write the outputs" in capsys.readouterr().err


@pytest.mark.parametrize("load, helpers", [(0.0, 1), (64.0, 0)])
def test_a_lone_capture_splits_only_onto_an_idle_core(tmp_path, monkeypatch, load, helpers):
    """The second process (split parse, forked children) only where a core is idle: on a busy box
    it would take CPU from the others and add its own (fork, second inflate, pickling)."""
    from mindspeed_profiler.analysis.pipeline import collect

    _memory_trace(tmp_path)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(forked, "runnable_others", lambda: int(load))   # what runs now says the same
    seen = []

    def fn(root, cap, top_n, want_events):
        seen.append(split_parse.HELPERS)
        return {"capture": {**cap, "status": "ok"}, "events": None}
    collect.collect_here(tmp_path, collect.CollectOptions(jobs=2, fn=fn, idle_only=True))   # as the command
    collect.collect_here(tmp_path, collect.CollectOptions(jobs=2, fn=fn))   # the Python API: as before
    assert seen == [helpers, 1]
    assert forked.core_idle() is (load == 0.0)


def test_the_report_child_only_onto_an_idle_core(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (64.0, 64.0, 64.0))
    monkeypatch.setattr(forked, "runnable_others", lambda: 64)
    p = analyse_cmd._start_report({}, "/nonexistent", fork=True)
    assert p.pid is None   # no child: written here when waited for
    p.cancel()


@pytest.mark.parametrize("now, load, idle", [(0, 64.0, True), (1, 0.0, True), (1, 64.0, False), (None, 64.0, False),
                                             (None, 0.0, True)])
def test_an_idle_core_by_what_runs_now_or_the_load_average(monkeypatch, now, load, idle):
    """Either says idle: the load average lags a minute behind what runs now (an idle box after a
    busy minute), and what runs now may be unknown (no /proc)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(forked, "runnable_others", lambda: now)
    assert forked.core_idle() is idle


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _least_others(seconds: float = 1.0) -> int:
    """The fewest others' runnable tasks seen in `seconds` (the box's own blips aside)."""
    seen, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        seen.append(forked.runnable_others())
        time.sleep(0.01)
    return min(seen)


@pytest.mark.skipif(not os.path.exists(f"/proc/self/task/{os.getpid()}/children"), reason="Linux /proc with children lists")
def test_what_runs_now_counts_others_not_our_children():
    if _least_others() != 0:
        pytest.skip("this box is never idle for a second: nothing to tell apart")
    child = os.fork()
    if child == 0:   # our own child, running: not another's task
        try:
            _spin(3)
        finally:
            os._exit(0)
    try:
        assert _least_others() == 0
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:   # its child outlives it: a task of another parent (init's), running
        try:
            if os.fork() == 0:
                os.close(r)
                os.write(w, str(os.getpid()).encode())
                os.close(w)
                _spin(3)
        finally:
            os._exit(0)
    os.close(w)
    orphan = int(os.read(r, 32))
    os.close(r)
    os.waitpid(middle, 0)
    try:
        assert _least_others(0.5) >= 1
    finally:
        os.kill(orphan, signal.SIGKILL)
