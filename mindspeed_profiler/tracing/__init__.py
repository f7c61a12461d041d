"""Cross-worker timeline tracer: cheap per-process spans, one clock-aligned Perfetto trace.

    from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span
    init_tracer(cfg, role="ActorGroup", rank=0)    # no-op unless profiler_config.tracer.enable
    with trace_span("compute_advantage", cat="driver"): ...
    shutdown_tracer()                              # also runs at interpreter exit

Merge after the run with `merge_timeline(cfg)` (honours tracer.gzip) or `mindspeed-profiler merge DIR`.
Under Ray, `tracing.ray_support.sync_actor_clocks(actors)` aligns the workers' clocks to the driver.
See docs/tracing.md.
"""
from mindspeed_profiler.tracing.api import (
    Span,
    flush_tracer,
    get_tracer,
    init_tracer,
    merge_timeline,
    shutdown_tracer,
    trace_begin,
    trace_end,
    trace_func,
    trace_complete,
    trace_instant,
    trace_span,
)

__all__ = [
    "Span",
    "flush_tracer",
    "get_tracer",
    "init_tracer",
    "merge_timeline",
    "shutdown_tracer",
    "trace_begin",
    "trace_end",
    "trace_func",
    "trace_complete",
    "trace_instant",
    "trace_span",
]
