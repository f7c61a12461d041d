"""The process's resident memory, for the per-capture host memory budget (captures.py): one read
of /proc/self/statm (a few microseconds), only while a capture records. None where there is no
/proc (macOS, Windows): the budget is then not enforced, and the capture says so."""
from __future__ import annotations

import os

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_STATM = "/proc/self/statm"


def rss_bytes() -> int | None:
    """Resident set size of this process in bytes, or None when it cannot be read."""
    try:
        with open(_STATM, "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None
