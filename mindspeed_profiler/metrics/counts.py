"""Pure: the counts a training loop gives `IntegratedProfiler.step()` about the iteration that is
ending (tokens=, samples=, prompt_tokens=, response_tokens=, any other name), checked."""
from __future__ import annotations

import re
from typing import Any

COUNT_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"step({name}=...): got {value!r} ({type(value).__name__}); expected a non-negative integer "
                         f"(the {name.replace('_', ' ')} of the iteration that is ending), or leave it out")
    return value


def check_step_counts(tokens: Any, samples: Any, counts: dict[str, Any]) -> dict[str, int]:
    """{name: count} of what step() was given: each a non-negative int (a count given as None is
    left out), each named like a keyword argument; else ValueError naming the argument, the value
    and what is allowed."""
    out: dict[str, int] = {}
    if tokens is not None:
        out["tokens"] = check_count("tokens", tokens)
    if samples is not None:
        out["samples"] = check_count("samples", samples)
    for name, value in counts.items():
        if not isinstance(name, str) or not COUNT_NAME_RE.match(name):
            raise ValueError(f"step(**counts): the name {name!r} is not allowed; a count is named like a keyword "
                             f"argument (letters, digits, '_', at most 64), e.g. prompt_tokens=, response_tokens=")
        if value is not None:
            out[name] = check_count(name, value)
    return out
