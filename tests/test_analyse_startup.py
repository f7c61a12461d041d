"""The analyse command as a process (issue 34): it loads numpy with one OpenBLAS thread (OpenBLAS
starts a thread per core at import, ~56 ms of a 2-core box's numpy import; the analysis does no
linear algebra), keeps a value the user set and leaves the environment of its child processes as
it found it; it ends without the interpreter's teardown (exit_now: atexit handlers run, output
flushed, a live thread waited for); report.html is written even when the reader of its output goes
away. Fresh interpreters: numpy is loaded once per process."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = ("import os, sys; from mindspeed_profiler.commands import analyse as a; a._load_numpy(); "
         "import numpy; threads = open('/proc/self/status').read().split('Threads:')[1].split()[0]; "
         "print(threads, os.environ.get('OPENBLAS_NUM_THREADS'))")


def _probe(**env: str) -> list[str]:
    e = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=e, capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="threads counted in /proc; one core gives one thread either way")
def test_numpy_loaded_with_one_thread_and_env_put_back():
    assert _probe() == ["1", "None"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2, reason="as above")
def test_the_users_setting_is_kept():
    assert _probe(OPENBLAS_NUM_THREADS="2") == ["2", "2"]


# -- the end of the process: exit_now (no interpreter teardown, 0.07-0.11 s of the command) --------
def _run(code: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, **kw)


def test_exit_now_runs_atexit_and_flushes():
    p = _run("import atexit, sys; from mindspeed_profiler.commands.analyse import exit_now; "
             "atexit.register(lambda: print('atexit ran')); sys.stdout.write('buffered '); exit_now(3)")
    assert p.returncode == 3 and p.stdout == "buffered atexit ran\n"


def test_exit_now_with_another_thread_waits_for_it(tmp_path):
    flag = tmp_path / "done"
    p = _run("import sys, threading, time, pathlib; from mindspeed_profiler.commands.analyse import exit_now; "
             "t = threading.Thread(target=lambda: (time.sleep(0.3), pathlib.Path(sys.argv[1]).write_text('x'))); "
             "t.start(); exit_now(4)", str(flag))
    assert p.returncode == 4 and flag.read_text() == "x"


@pytest.fixture
def trace_dir(tmp_path):
    from test_forked import _memory_trace
    return _memory_trace(tmp_path).parent


@pytest.mark.parametrize("entry", [["-m", "mindspeed_profiler.analyse"], ["-m", "mindspeed_profiler.cli", "analyse"]])
def test_the_command_as_a_process(trace_dir, entry):
    p = subprocess.run([sys.executable, *entry, str(trace_dir)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "report.html" in p.stdout and p.stdout.rstrip().endswith(")")   # the last line: how to open the trace
    assert (trace_dir / "analysis" / "report.html").is_file() and (trace_dir / "analysis" / "summary.json").is_file()


def test_report_written_when_the_reader_goes_away(trace_dir):
    """`analyse DIR | head -1`: the printing fails on a closed pipe; report.html (a child renders it
    meanwhile) is still written whole."""
    p = subprocess.Popen([sys.executable, "-m", "mindspeed_profiler.analyse", str(trace_dir)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdout.close()   # before anything is read
    p.wait(timeout=300)
    from mindspeed_profiler.analysis.results.report import render
    import json
    summary = json.loads((trace_dir / "analysis" / "summary.json").read_text())
    report = trace_dir / "analysis" / "report.html"
    assert report.read_text() == render(summary, report.parent)


class _FakeLibc:
    """Stands in for glibc through ctypes.CDLL(None): mallopt(int param, int value) -> int, as
    glibc declares it; gnu_get_libc_version marks glibc."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1

    def gnu_get_libc_version(self) -> bytes:
        return b"2.36"


def test_the_allocator_keeps_freed_memory_unless_the_user_said_otherwise(monkeypatch):
    import ctypes

    from mindspeed_profiler.commands import analyse as cmd

    libc = _FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    cmd._keep_freed_memory()
    assert libc.calls == [(-3, 256 << 20), (-1, 1 << 30)]   # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
    libc.calls.clear()
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    cmd._keep_freed_memory()
    assert libc.calls == []


def test_the_allocator_setting_lowers_a_first_parse_s_page_faults():
    """The reason for it, measured: a first parse of a real trace in a fresh interpreter, with and
    without the setting, in minor page faults (a count, not a time: not noisy)."""
    code = """
import resource, sys
from pathlib import Path
from mindspeed_profiler.commands import analyse as cmd
if sys.argv[1] == "on":
    cmd._keep_freed_memory()
from mindspeed_profiler.analysis.parsing import kineto_trace
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
kineto_trace.read_kineto_trace(Path(sys.argv[2]))
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
    from conftest import REPO_ROOT

    trace = REPO_ROOT / "tests/data/hta/trace_diff/control/control.json.gz"   # 1.8 MB of gzip (HTA, MIT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    faults = {}
    for mode in ("off", "on"):
        p = subprocess.run([sys.executable, "-c", code, mode, str(trace)], capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode == 0, p.stderr[-2000:]
        faults[mode] = int(p.stdout.split()[-1])
    assert faults["on"] < faults["off"] * 0.8, faults
