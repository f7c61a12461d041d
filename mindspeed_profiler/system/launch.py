"""The launcher: runs on the worker's node as the worker's Python executable (Ray's
`runtime_env["py_executable"]`, set by the launch settings):

    <python> -m mindspeed_profiler.system.launch <settings token> -- <python> <Ray's worker args...>

It decodes the settings, removes this worker's files of an earlier run, looks the tool up on this
node's PATH, writes the metadata, runs the tool-wrapped command in a child (supervise.py: signals
passed on, the child dies with the launcher), forks the watcher of that child, and waits. When the
tool is missing, cannot be executed, or ends without ever running the worker (an unknown flag, a
mistyped option), it writes why in the metadata, says so once on stderr (the worker's log,
forwarded to the driver) and `exec`s the plain command: a tool never stops a worker from starting.
Standard library and the small system modules only: this runs before every wrapped worker.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import Callable, NoReturn, Sequence

from mindspeed_profiler.core import formats
from mindspeed_profiler.system import supervise
from mindspeed_profiler.system.backends import system_backend
from mindspeed_profiler.system.regroup import regrouped
from mindspeed_profiler.system.spec import WorkerSpec

MODULE = "mindspeed_profiler.system.launch"


@dataclass(frozen=True)
class Launch:
    """What to exec, and what to record about it (pure: `plan_launch`)."""

    argv: list[str]
    wrapped: bool
    tool: str
    tool_path: str | None
    reason: str | None


def find_tool(tool: str) -> str | None:
    """The tool on this node's PATH, else beside the interpreter running the launcher: pip puts a
    tool's console script there (py-spy in the training virtualenv, used without activating it)."""
    return shutil.which(tool) or shutil.which(tool, path=os.path.dirname(sys.executable))


def plan_launch(spec: WorkerSpec, command: Sequence[str], which: Callable[[str], str | None] = find_tool,
                host: str = "") -> Launch:
    """The tool-wrapped command when the tool is found (find_tool), else the plain command and why."""
    backend = system_backend(spec.backend)
    tool_path = which(backend.tool)
    if tool_path is None:
        return Launch(list(command), False, backend.tool, None,
                      f"{backend.tool} not found on PATH (nor beside {sys.executable}) on node {host or socket.gethostname()} "
                      f"(group {spec.group}, rank {spec.rank}): the worker runs unwrapped")
    worker = regrouped(command) if backend.report_after_worker else list(command)
    return Launch(backend.command(tool_path, spec, worker), True, backend.tool, tool_path, None)


def split_argv(argv: Sequence[str]) -> tuple[str, list[str]]:
    """(token, the worker's command) from `<token> -- <python> <args...>`."""
    if len(argv) < 3 or argv[1] != "--":
        raise ValueError(f"usage: python -m {MODULE} <settings> -- <python> [args...]; got {list(argv)[:3]}")
    return argv[0], list(argv[2:])


def main(argv: Sequence[str] | None = None) -> NoReturn:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        token, command = split_argv(argv)
    except ValueError as exc:
        print(f"mindspeed_profiler.system.launch: {exc}", file=sys.stderr)
        raise SystemExit(2)
    try:
        spec = WorkerSpec.decode(token)
        launch = plan_launch(spec, command)
    except Exception as exc:  # damaged settings: the worker still starts
        _exec_plain(command, f"unreadable process-level capture settings ({type(exc).__name__}: {exc})")
    _start(spec, launch, command)


def _start(spec: WorkerSpec, launch: Launch, command: list[str]) -> NoReturn:
    from mindspeed_profiler.system.meta import new_meta, remove_previous, update_meta, write_meta

    host = socket.gethostname()
    try:
        remove_previous(spec)
        meta = new_meta(spec, tool=launch.tool, tool_path=launch.tool_path, command=launch.argv,
                        status="running" if launch.wrapped else "unwrapped", reason=launch.reason, host=host,
                        launcher_pid=os.getpid(), launched_wall_ns=time.time_ns())
        write_meta(spec.meta_path, meta)
    except Exception as exc:  # an unwritable output directory: nothing can be recorded, run plain
        _exec_plain(command, f"cannot write into {spec.output_dir} on node {host}: {type(exc).__name__}: {exc}")
    if not launch.wrapped:
        _exec_plain(command, launch.reason or "")
    from mindspeed_profiler.system.watch import EXEC_FAILED, spawn_watcher

    # py-spy's time zero is its own start: the anchor is taken as late as possible, just before it
    update_meta(spec.meta_path, launched_wall_ns=time.time_ns())
    os.environ[formats.SYSTEM_STATUS_ENV] = json.dumps({"status": "wrapped", "tool_path": launch.tool_path})
    pid, failed = supervise.spawn(launch.argv)
    if pid is None:
        _fall_back(spec, command, f"could not start {launch.argv[0]} on node {host}: {failed}; the worker runs unwrapped")
    supervise.forward_signals(pid)
    status_fd = spawn_watcher(spec, launch.tool_path or launch.tool, pid)
    outcome = supervise.supervise(pid, command)
    if not outcome.ran_worker:
        if status_fd is not None:  # the watcher stands down: the metadata stays the launcher's
            os.write(status_fd, EXEC_FAILED)
            os.close(status_fd)
        _fall_back(spec, command, f"{launch.tool} ({launch.argv[0]}) on node {host}: {outcome.reason} (check "
                                  f"system.options / flags / args); the worker runs unwrapped")
    if status_fd is not None:
        os.close(status_fd)   # the watcher watches the tool from here on
    supervise.wait_and_exit(pid)


def _fall_back(spec: WorkerSpec, command: list[str], reason: str) -> NoReturn:
    from mindspeed_profiler.system.meta import update_meta

    try:
        update_meta(spec.meta_path, status="unwrapped", reason=reason)
    except Exception:   # the worker starts whatever the metadata's fate
        pass
    _exec_plain(command, reason)


def _exec_plain(command: list[str], reason: str) -> NoReturn:
    for sig in supervise.FORWARDED:
        signal.signal(sig, signal.SIG_DFL)   # the worker gets its signals as if started directly
    os.environ[formats.SYSTEM_STATUS_ENV] = json.dumps({"status": "unwrapped", "reason": reason})
    if reason:
        print(f"mindspeed-profiler: process-level capture: {reason}", file=sys.stderr, flush=True)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
