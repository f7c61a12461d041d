"""The tool as the launcher's child: a tool that cannot run the worker (it cannot be executed, or it
exits at once: an unknown flag, a mistyped option) must never take the worker with it, so the
launcher (the process Ray started) runs the tool in a child and, when the tool ends without ever
having run the worker, runs the worker itself.

- the tool is exec'd in a forked child; a close-on-exec pipe tells the launcher whether the exec
  succeeded (end of file) or why it failed;
- the child dies with the launcher (PR_SET_PDEATHSIG, SIGTERM: a tool still writes its report), and
  the launcher passes SIGTERM / SIGINT / SIGHUP / SIGQUIT / SIGUSR1 / SIGUSR2 on to it;
- a tool that ends within FAST_EXIT_S of its start while no process of the worker was seen among
  its descendants (/proc: the worker's interpreter as its executable, or the worker's command line
  exactly; the tool's own command line, which ends with the worker's, does not count, and Ray
  rewrites a worker's command line, never its executable) never ran the worker: the launcher runs
  it. Once such a process is seen, or the tool has run longer than that, the launcher waits for
  the tool and ends with the tool's status. The limit: a worker that starts and ends between two
  looks (20 ms apart in the first second, more on a loaded machine) under a tool that then ends
  too is taken for never started, and is run once more, unwrapped (a real worker lives longer).
Standard library only (this runs before every wrapped worker).
"""
from __future__ import annotations

import ctypes
import os
import signal
import time
from dataclasses import dataclass
from typing import NoReturn, Sequence

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
_PR_SET_PDEATHSIG = 1
POLL_S = 0.02          # how often the tool's descendants are looked at in the first second
SLOW_POLL_S = 0.1      # then, until FAST_EXIT_S
FAST_EXIT_S = 5.0      # a tool that ends this soon without the worker seen never ran it


@dataclass(frozen=True)
class Outcome:
    ran_worker: bool       # the worker was seen under the tool, or the tool ran FAST_EXIT_S (assumed)
    status: int | None     # the tool's wait status (os.waitpid), None while it runs
    reason: str | None = None


def spawn(argv: Sequence[str]) -> tuple[int | None, str | None]:
    """Fork and exec `argv`: (pid, None), or (None, why the exec failed). Never raises."""
    try:
        r, w = os.pipe()   # both ends close-on-exec: a successful exec closes the child's end
        parent = os.getpid()
        pid = os.fork()
    except OSError as exc:
        return None, f"fork failed: {exc}"
    if pid == 0:   # the child: dies with the launcher, then becomes the tool
        try:
            os.close(r)
            _die_with_parent(parent)
            os.execv(argv[0], list(argv))
        except BaseException as exc:   # OSError, and ValueError for a NUL byte in argv
            try:
                os.write(w, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:2000])
            except OSError:
                pass
        os._exit(127)
    os.close(w)
    err = b""
    while True:
        try:
            chunk = os.read(r, 4096)
        except InterruptedError:
            continue
        if not chunk:
            break
        err += chunk
    os.close(r)
    if err:
        os.waitpid(pid, 0)
        return None, err.decode("utf-8", "replace")
    return pid, None


def _die_with_parent(parent: int) -> None:
    """SIGTERM this process when the launcher dies (Linux; elsewhere a no-op)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:   # the launcher died before the setting took
        os._exit(0)


def forward_signals(pid: int) -> None:
    """Pass the signals a scheduler or Ray sends the launcher on to the tool."""
    def handler(signum, frame):
        try:
            os.kill(pid, signum)
        except OSError:
            pass
    for sig in FORWARDED:
        try:
            signal.signal(sig, handler)
        except (OSError, ValueError):
            pass


def _children(pid: int) -> list[int] | None:
    """The children of `pid` (/proc/<pid>/task/*/children), None where the kernel does not say."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out: list[int] = []
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children", "rb") as fh:
                out += [int(x) for x in fh.read().split()]
        except FileNotFoundError:
            return None   # a kernel without CONFIG_PROC_CHILDREN
        except (OSError, ValueError):
            continue
    return out


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode("utf-8", "replace") for a in fh.read().split(b"\0")[:-1]]
    except OSError:
        return []


def _exe(pid: int) -> str | None:
    try:
        return os.path.realpath(f"/proc/{pid}/exe")
    except OSError:
        return None


def runs_command(pid: int, command: Sequence[str]) -> bool | None:
    """Whether the worker runs under the tool `pid`: `pid` itself with the worker's command line
    exactly (a tool that execs it), or a descendant whose executable is the worker's interpreter or
    whose arguments are the worker's; None when this cannot be known (no /proc)."""
    args = list(command[1:])
    interpreter = os.path.realpath(command[0]) if command else None
    if _cmdline(pid) == list(command):
        return True
    todo, seen = _children(pid), {pid}
    if todo is None:
        return None
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        line = _cmdline(p)
        if (interpreter and _exe(p) == interpreter) or (args and line[1:] == args):
            return True
        todo.extend(_children(p) or ())
    return False


def supervise(pid: int, command: Sequence[str], started_s: float | None = None) -> Outcome:
    """Watch the tool `pid` until it runs the worker, or has run FAST_EXIT_S (then return, the
    tool running: Outcome.ran_worker True), or ends first without the worker seen (False, with
    its status)."""
    t0 = time.monotonic() if started_s is None else started_s
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return Outcome(False, 0, "the tool's process vanished")
        if done:
            return Outcome(False, status, f"it ended ({describe(status)}) without running the worker")
        seen = runs_command(pid, command)
        waited = time.monotonic() - t0
        if seen is None or seen or waited >= FAST_EXIT_S:
            return Outcome(True, None)   # no /proc: assume it did (the tool-wrapped start, as before)
        time.sleep(POLL_S if waited < 1.0 else SLOW_POLL_S)


def wait_and_exit(pid: int) -> NoReturn:
    """Wait for the tool and end this process the way it ended (its exit code, or its signal)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            os._exit(0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"
