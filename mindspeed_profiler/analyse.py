"""`python -m mindspeed_profiler.analyse DIR` (and `python mindspeed_profiler/analyse.py DIR`):
the `analyse` command (commands/analyse.py) under the name users know."""
import sys

from mindspeed_profiler.commands.analyse import add_arguments, exit_now, main, run  # noqa: F401

if __name__ == "__main__":
    exit_now(main())
