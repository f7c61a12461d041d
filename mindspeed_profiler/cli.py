"""`mindspeed-profiler` console script: one registry from subcommand to the module that runs it.

Each command module defines `add_arguments(parser)` and `run(args) -> int` (the exit code), and a
one-line module docstring used as the help text. Modules are imported only when needed.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

COMMANDS: dict[str, str] = {
    "check-config": "mindspeed_profiler.commands.check_config",
    "analyse": "mindspeed_profiler.commands.analyse",
    "report": "mindspeed_profiler.commands.report",
    "compare": "mindspeed_profiler.commands.compare",
    "merge": "mindspeed_profiler.commands.merge",
    "trigger": "mindspeed_profiler.commands.trigger",
    "status": "mindspeed_profiler.commands.status",
}
ALIASES = {"analyze": "analyse"}


def _load(command: str):
    return importlib.import_module(COMMANDS[command])


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mindspeed-profiler",
        description="Profile and analyse RL post-training runs (Ascend NPU, CUDA, CPU).",
    )
    from mindspeed_profiler import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            # help for the other commands without importing them
            sub.add_parser(name, help=f"see `mindspeed-profiler {name} --help`")
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a command whose module is not installed/built
            if exc.name and module_name.startswith(exc.name):
                continue
            raise
        doc = (module.__doc__ or "").strip().splitlines()
        p = sub.add_parser(name, help=doc[0] if doc else None, description=(module.__doc__ or "").strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           aliases=[a for a, t in ALIASES.items() if t == name])
        module.add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv_given = argv
    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    first = ALIASES.get(first, first)
    only = first if first in COMMANDS else None
    parser = build_parser(only)
    args, extra = parser.parse_known_args(argv)
    command = ALIASES.get(args.command, args.command)
    if command is None:
        parser.print_help()
        return 2
    module = _load(command)
    # argparse cannot take options between the items of a `nargs="*"` positional; a command that
    # names such a positional in EXTRA_POSITIONALS gets the leftovers that are not options.
    target = getattr(module, "EXTRA_POSITIONALS", None)
    if extra:
        if target is None or any(e.startswith("-") for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        setattr(args, target, list(getattr(args, target) or []) + extra)
    code = int(module.run(args) or 0)
    if argv_given is None and getattr(module, "FAST_EXIT", False):   # the program itself, not a caller
        module.exit_now(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
