"""Moved to `mindspeed_profiler.analysis.merge` (merging is offline work; this name keeps the
documented `tracing.merge.build_timeline` / `write_timeline` working)."""
from mindspeed_profiler.analysis.merge import (  # noqa: F401
    TIMELINE_NAME,
    build_timeline,
    read_timeline_file,
    resolve_timeline_dir,
    write_timeline,
)

load_timeline = read_timeline_file  # its name before the move
