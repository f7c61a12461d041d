"""Text formatting shared by the charts, the tables and the templates."""
from __future__ import annotations


def ms(us: float | None) -> str:
    """Microseconds as milliseconds with thousands separators; empty when unknown."""
    return "" if us is None else f"{us / 1e3:,.3f}"
