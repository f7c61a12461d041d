"""The first thing a tool-wrapped worker runs: puts the worker in a process group of its own, then
runs the worker's script as `__main__` in this same process (no exec: the tool goes on watching the
program it started, and Ray's worker is still the tool's child).

    <python> -m mindspeed_profiler.system.regroup <script> <args...>

Why: Ray (2.5x on; the raylet's `process_group_cleanup_enabled`, on by default) records a worker's
process group when the worker registers, and SIGKILLs that group as the worker exits (and when the
raylet stops). Started by a tool, the worker inherits the tool's group, shared with the launcher:
that kill took the tool while it was still writing its report after the worker's end (nsys and
msprof need seconds there; the report was lost). In a group of its own, Ray's cleanup reaches the
worker and what the worker starts, never the tool.

Standard library only (it runs before every wrapped worker).
"""
from __future__ import annotations

import os
import runpy
import sys
from typing import NoReturn, Sequence

MODULE = "mindspeed_profiler.system.regroup"


def regrouped(command: Sequence[str]) -> list[str]:
    """`command` ([python, script, args...]) run through this module; unchanged when it does not
    start with a script (interpreter options, `-m`, `-c`: nothing here could tell their layout)."""
    if len(command) < 2 or command[1].startswith("-"):
        return list(command)
    return [command[0], "-m", MODULE, *command[1:]]


def own_group() -> bool:
    """Make this process the leader of a new process group. True when it is in a group of its own
    (now or already); False where that cannot be done (not POSIX, a session leader). Never raises."""
    try:
        if os.getpgid(0) == os.getpid():
            return True
        os.setpgid(0, 0)
        return True
    except (AttributeError, OSError):
        return False


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(f"usage: python -m {MODULE} <script> [args...]", file=sys.stderr)
        raise SystemExit(2)
    own_group()
    script = os.path.abspath(args[0])
    sys.argv = [args[0], *args[1:]]
    sys.path[0] = os.path.dirname(script)   # as `python <script>` has it (-m put the working directory there)
    runpy.run_path(script, run_name="__main__")
    raise SystemExit(0)


if __name__ == "__main__":
    main()
