"""The watcher: a small detached process, forked by the launcher once the tool runs (as its child),
that waits for the tool to exit and then finishes the worker's metadata ("complete" when the report
is there, else "incomplete"; the tool's version too). The driver's wait reads that status, so it
knows when a report is whole without guessing from file sizes, on any node.

It is a grandchild re-parented away from the tool (double fork, own session): the tool never sees an
extra child, and a signal to the worker's process group does not reach it. Its life ends with the
tool's.
"""
from __future__ import annotations

import os
import select
import subprocess
import time
from typing import Sequence

from mindspeed_profiler.system.backends import system_backend
from mindspeed_profiler.system.meta import read_meta, size_of, update_meta
from mindspeed_profiler.system.spec import WorkerSpec

POLL_S = 0.5  # only where pidfd_open is missing (Linux < 5.3)
VERSION_TIMEOUT_S = 30.0


def tool_version(tool_path: str, args: Sequence[str]) -> str | None:
    """The first line the tool prints for its version flag, or None."""
    try:
        out = subprocess.run([tool_path, *args], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr or "").strip()
    return text.splitlines()[0].strip() if text else None


def spawn_watcher(spec: WorkerSpec, tool_path: str, target: int) -> int | None:
    """Fork the watcher of the tool's process `target`. Returns the write end of the status pipe:
    the launcher closes it once the tool runs the worker (the watcher reads EOF and finishes the
    metadata when the tool ends), or writes EXEC_FAILED to it when the tool ended without running
    the worker (the watcher leaves the metadata to the launcher). None when no watcher could be
    started. Never raises."""
    try:
        pidfd: int | None = os.pidfd_open(target)  # taken now: it cannot point at a reused pid later
    except (AttributeError, OSError):
        pidfd = None
    try:
        r, w = os.pipe()  # non-inheritable: the tool never holds it; the launcher writes EXEC_FAILED or closes it
        child = os.fork()
    except OSError:
        if pidfd is not None:
            os.close(pidfd)
        return None
    if child:
        os.close(r)
        os.waitpid(child, 0)  # the first child exits at once (a double fork): no zombie left to the launcher
        if pidfd is not None:
            os.close(pidfd)
        return w
    try:
        os.close(w)
        os.setsid()
        if os.fork():
            os._exit(0)
        _detach([fd for fd in (pidfd, r) if fd is not None])
        if os.read(r, 1) == EXEC_FAILED:
            os._exit(0)
        watch(spec, tool_path, target, pidfd)
    except BaseException:
        pass
    os._exit(0)


EXEC_FAILED = b"F"


def _detach(keep: list[int]) -> None:
    """Let go of the worker's files (its log files, sockets): stdio to /dev/null, the rest closed."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def watch(spec: WorkerSpec, tool_path: str, target: int, pidfd: int | None) -> None:
    backend = system_backend(spec.backend)
    update_meta(spec.meta_path, version=tool_version(tool_path, backend.version_args))
    _wait_for_exit(target, pidfd)
    meta = read_meta(spec.meta_path)
    if meta is None or meta.get("status") != "running":
        return
    report = spec.report_path
    done = backend.report_complete(report)
    update_meta(spec.meta_path, status="complete" if done else "incomplete", ended_wall_ns=time.time_ns(),
                report_bytes=size_of(report) if report.exists() else None,
                reason=None if done else f"{backend.tool} exited without writing {report.name} (killed, or it failed: "
                                         f"see the worker's log on {meta.get('host')})")


def _wait_for_exit(target: int, pidfd: int | None) -> None:
    if pidfd is not None:
        select.select([pidfd], [], [])  # readable once the process has exited
        return
    while True:
        try:
            os.kill(target, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        time.sleep(POLL_S)
