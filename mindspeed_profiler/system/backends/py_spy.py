"""py-spy: `py-spy record --format chrometrace -o <dir>/<group>_rank<R>.py-spy.json --idle [flags] [args] -- <python ...>`.

Samples where each worker's Python time goes, on any machine. py-spy records the whole process:
with `steps`, the worker writes its iteration boundaries and the report is cut to the listed
iterations' time ranges when it is read (analysis).
"""
from __future__ import annotations

from typing import Sequence

from mindspeed_profiler.system.backends import register_system_backend
from mindspeed_profiler.system.backends.base import STEPS_CUT, SystemBackend
from mindspeed_profiler.system.spec import WorkerSpec


@register_system_backend
class PySpy(SystemBackend):
    name = "py_spy"
    tool = "py-spy"
    title = "py-spy record"
    fields = ("args", "flags")
    reserved = frozenset({"o", "output", "f", "format", "p", "pid"})
    steps_mode = STEPS_CUT
    clock_mark = True  # py-spy's `ts` counts from its own start, a few ms after the launcher's exec
    default_rate_hz = 100.0

    def sample_rate_hz(self, spec: WorkerSpec) -> float:
        for key in ("r", "rate"):
            try:
                return float(spec.args[key])
            except (KeyError, ValueError):
                continue
        return self.default_rate_hz

    def settings(self, spec: WorkerSpec) -> tuple[dict[str, str], tuple[str, ...]]:
        # --idle: without it py-spy skips idle samples and its merged frames stretch over the idle
        # gaps (a 100 ms busy call followed by 200 ms of sleep shows as ~250 ms of busy): times are wrong
        args, flags = super().settings(spec)
        return args, flags if "idle" in flags else ("idle",) + flags

    def command(self, tool_path: str, spec: WorkerSpec, wrapped: Sequence[str]) -> list[str]:
        return [tool_path, "record", "--format", "chrometrace", "-o", str(spec.report_path), *self.rendered(spec),
                "--", *wrapped]
