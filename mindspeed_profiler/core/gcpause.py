"""`collector_paused()`: the cyclic garbage collector off for a block, back on (if it was) after.

For work that makes millions of short-lived objects and no reference cycles (refcounting frees
them all): the collector's passes would walk every live object again and again for nothing (the
timeline merge: ~10% of its time; a trace's parse). Also for a block that reads two clocks back to
back, where a full collection in a big process (~290 ms at 580k objects on a slow box) would part them.
"""
from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic GC disabled inside the block; re-enabled after only if it was enabled before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
