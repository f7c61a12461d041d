"""The error every config problem becomes, and the words its messages share. Stdlib only."""
from __future__ import annotations

import difflib
from typing import Any, Callable, Iterable, Sequence

from mindspeed_profiler.core.formats import CONFIG_ROOT_KEY as ROOT_KEY
MISSING = "???"  # OmegaConf's mandatory-missing marker
SECTIONS = ("integrated", "tracer", "system", "metrics")

Problems = list  # list[tuple[str, str]]: (where, what is wrong)
Checker = Callable[[Any, str, Problems], Any]
BAD = object()  # what a checker returns for a value that failed its check


class ProfilerConfigError(ValueError):
    """Every problem found in a profiler_config, reported together.

    `problems` is a list of (path, message) pairs; str() lists them one per line.
    """

    def __init__(self, problems: Sequence[tuple[str, str]]):
        self.problems = list(problems)
        lines = [f"{len(self.problems)} problem(s) in {ROOT_KEY}:"] if len(self.problems) > 1 else []
        lines += [f"{path}: {msg}" for path, msg in self.problems]
        super().__init__("\n".join(lines))


def describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def hint(value: Any, candidates: Iterable[str]) -> str:
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, list(candidates), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
