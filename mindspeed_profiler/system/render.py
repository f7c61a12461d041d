"""Pure rendering of a tool's command-line settings (the RLinf seed's rules).

    flags first:  one letter -> `-x`, longer -> `--flag`
    then options: one letter -> `-k value`, longer -> `--key=value`

Some tools take only the long form (msprof: `--key=value` whatever the key's length):
`short=False` renders every flag `--flag` and every option `--key=value`.
"""
from __future__ import annotations

from typing import Mapping, Sequence


def render_flag(name: str, short: bool = True) -> str:
    return f"-{name}" if short and len(name) == 1 else f"--{name}"


def render_option(key: str, value: str, short: bool = True) -> list[str]:
    # a one-letter option takes its value as the next token (`-t cuda`): `-t=cuda` is not what
    # getopt-style parsers (nsys, py-spy's clap, rocprof-sys) read as the value `cuda`
    return [f"-{key}", str(value)] if short and len(key) == 1 else [f"--{key}={value}"]


def render(options: Mapping[str, str] = {}, flags: Sequence[str] = (), short: bool = True) -> list[str]:
    """The tokens of `flags` then `options`, in their given order."""
    tokens = [render_flag(f, short) for f in flags]
    for key, value in options.items():
        tokens += render_option(key, value, short)
    return tokens
