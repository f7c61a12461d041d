"""Collector sink for clusters without a shared filesystem: one Ray actor writes every segment.

Processes send it encoded batches (one call per flush, never per event) from their flusher
thread; it appends them to `<timeline_dir>/<segment name>` on its node (the head node when the
driver starts it there). Start it on the driver with `start_collector(cfg)` before the workers'
`init_tracer`; `init_tracer(role="driver")` with `sink: collector` starts it too.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from mindspeed_profiler.core.fileio import open_append

COLLECTOR_NAME = "mindspeed_profiler_trace_collector"


class TraceCollector:
    """The actor body (wrapped with ray.remote on demand, so Ray is imported only when used)."""

    def __init__(self, timeline_dir: str):
        self.timeline_dir = timeline_dir
        os.makedirs(timeline_dir, exist_ok=True)
        self._files: dict[str, Any] = {}
        self.batches = 0

    def write(self, name: str, data: bytes) -> int:
        if os.sep in name or name.startswith("."):
            raise ValueError(f"bad segment name {name!r}")
        fh = self._files.get(name)
        if fh is None:
            fh = self._files[name] = open_append(os.path.join(self.timeline_dir, name))
        fh.write(data)
        fh.flush()
        self.batches += 1
        return len(data)

    def directory(self) -> str:
        return self.timeline_dir

    def close(self) -> int:
        for fh in self._files.values():
            fh.close()
        self._files.clear()
        return self.batches


def start_collector(cfg_or_dir: Any, namespace: Optional[str] = None) -> Any:
    """Start (or find) the collector actor on this node; returns its handle. Needs `ray.init()` first."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    timeline_dir = cfg_or_dir if isinstance(cfg_or_dir, str) else cfg_or_dir.timeline_dir
    node_id = ray.get_runtime_context().get_node_id()
    cls = ray.remote(num_cpus=0)(TraceCollector)
    return cls.options(
        name=COLLECTOR_NAME,
        namespace=namespace,
        get_if_exists=True,
        max_concurrency=1,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
    ).remote(os.path.abspath(timeline_dir))


def get_collector(timeline_dir: str, create: bool = False) -> Optional[Any]:
    """The running collector, or None (Ray not initialised / no collector / lookup failed)."""
    try:
        import ray

        if not ray.is_initialized():
            return None
        try:
            return ray.get_actor(COLLECTOR_NAME)
        except ValueError:
            return start_collector(timeline_dir) if create else None
    except Exception:
        return None
