"""Text formatting shared by the charts, the tables and the templates."""
from __future__ import annotations


def ms(us: float | None) -> str:
    """Microseconds as milliseconds with thousands separators; empty when unknown."""
    return "" if us is None else f"{us / 1e3:,.3f}"


def short(text, n: int) -> str:
    """At most n characters, cutting the middle (both the start and the end of a name tell something)."""
    text = "" if text is None else str(text)
    return text if len(text) <= n else text[: n // 2 - 1] + "…" + text[-(n - n // 2):]
