"""Ascend CANN msprof: `msprof --output=<dir>/<group>_rank<R>.msprof [--key=value ...] <python ...>`
(msprof options are always `--key=value`). msprof writes PROF_* directories under --output and parses
them when the application exits."""
from __future__ import annotations

from typing import Sequence

from mindspeed_profiler.system.backends import register_system_backend
from mindspeed_profiler.system.backends.base import SystemBackend
from mindspeed_profiler.system.spec import WorkerSpec


@register_system_backend
class Msprof(SystemBackend):
    name = "msprof"
    tool = "msprof"
    title = "msprof"
    fields = ("options",)
    short_keys = False
    reserved = frozenset({"output", "application"})
    no_steps = ("msprof records the whole application and mindspeed-profiler has no way to limit it to training "
                "steps (for step-limited Ascend captures use profiler_config.integrated)")

    def command(self, tool_path: str, spec: WorkerSpec, wrapped: Sequence[str]) -> list[str]:
        return [tool_path, f"--output={spec.report_path}", *self.rendered(spec), *wrapped]
