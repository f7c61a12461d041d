"""Pure: the counts a training loop gives `IntegratedProfiler.step()` about the iteration that is
ending (tokens=, samples=, prompt_tokens=, response_tokens=, any other name), checked."""
from __future__ import annotations

import operator
import re
from typing import Any

COUNT_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def check_count(name: str, value: Any) -> int:
    """`value` as an int when it is a non-negative integral number: an int, a NumPy integer, a
    one-element integer tensor (anything with __index__), never a bool; else ValueError."""
    count = None
    if not _is_flag(value):
        try:
            count = operator.index(value)
        except Exception:   # TypeError as a rule; an odd __index__ may raise anything, step() raises only ValueError
            count = None
    if count is None or count < 0:
        raise ValueError(f"step({name}=...): got {_short_repr(value)} ({type(value).__name__}); expected a non-negative "
                         f"integer (an int, a NumPy integer or a one-element integer tensor: the "
                         f"{name.replace('_', ' ')} of the iteration that is ending), or leave it out")
    return count


def _is_flag(value: Any) -> bool:
    """True, np.True_, torch.tensor(True): a flag, not a count (bool is an int, a bool tensor has __index__)."""
    if isinstance(value, bool):
        return True
    dtype = getattr(value, "dtype", None)
    return dtype is not None and str(dtype).rsplit(".", 1)[-1] in ("bool", "bool_")


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"a {type(value).__name__} whose repr() fails"
    return text if len(text) <= 100 else text[:97] + "..."


def check_step_counts(tokens: Any, samples: Any, counts: dict[str, Any]) -> dict[str, int]:
    """{name: count} of what step() was given: each a non-negative integer, as an int (a count given
    as None is left out), each named like a keyword argument; else ValueError naming the argument, the value
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
