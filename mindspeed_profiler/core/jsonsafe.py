"""Values that JSON in UTF-8 can carry, from values that came in leniently: a lone surrogate (a
JSON escape `"\\ud800"` alone, which Python's json accepts but orjson and UTF-8 refuse; a non-UTF-8
file name through os.fsdecode) becomes its backslash escape, as text (visible, and nothing else of
the value is lost); an integer outside orjson's range becomes what the caller says. Shared by the
tracer's segments, the analysis' lenient readers and its outputs. Standard library only."""
from __future__ import annotations

import json
import re
from typing import Any, Callable

# where a lenient parse may have made a lone surrogate: a JSON escape of one (a valid pair, too: rare)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def utf8(s: str) -> str:
    """`s`, each lone surrogate (which UTF-8 cannot hold) written as its backslash escape."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def carried(v: Any, big_int: Callable[[int], Any] | None = None, int_range: tuple[int, int] = (-2**63, 2**64),
            found: list[tuple[str, str]] | None = None, where: str = "") -> Any:
    """`v` with every text (values and dict keys, in dicts, lists and tuples) passed through
    utf8(), and with `big_int`, every int outside `int_range` replaced by big_int(it). `found` gets
    (JSON pointer, "text" or "int") for each value replaced, for a warning. Nested containers
    are copied (tuples become lists); other values are returned as they are."""
    if isinstance(v, str):
        out = utf8(v)
        if out is not v and found is not None:
            found.append((where or "/", "text"))
        return out
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        if big_int is None or int_range[0] <= v < int_range[1]:
            return v
        if found is not None:
            found.append((where or "/", "int"))
        return big_int(v)
    if isinstance(v, dict):
        copy = {}
        for k, x in v.items():
            at = f"{where}/{utf8(str(k))[:40]}"
            copy[carried(k, big_int, int_range, found, at)] = carried(x, big_int, int_range, found, at)
        return copy
    if isinstance(v, (list, tuple)):
        return [carried(x, big_int, int_range, found, f"{where}/{i}") for i, x in enumerate(v)]
    return v


def loads_lenient(text: str) -> Any:
    """Python's json.loads (NaN, Infinity and integers of any size accepted, where orjson refuses
    them), each lone surrogate it made from a JSON escape written as text (utf8()). Raises
    ValueError (RecursionError for nesting past Python's limit) as json.loads does."""
    obj = json.loads(text)
    return carried(obj) if _SURROGATE_ESCAPE.search(text) else obj
