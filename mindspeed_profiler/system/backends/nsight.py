"""NVIDIA Nsight Systems: `nsys profile [flags] [options] --output=<dir>/<group>_rank<R> <python ...>`.

With `steps`, the capture range is the CUDA profiler API (the worker calls cudaProfilerStart/Stop
around each listed iteration) and the range end is `repeat:N`, so that every listed step is
captured: RLinf's `capture-range-end=stop`, and nsys's own default `stop-shutdown`, end the
collection after the first range.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence

from mindspeed_profiler.system.backends import register_system_backend
from mindspeed_profiler.system.backends.base import STEPS_PROFILER_API, SystemBackend
from mindspeed_profiler.system.spec import WorkerSpec

CAPTURE_RANGE = "capture-range"
CAPTURE_RANGE_END = "capture-range-end"
PROFILER_API = "cudaProfilerApi"
_REPEAT_RE = re.compile(r"^(repeat|repeat-shutdown)(?::(\d+))?$")


def default_range_end(steps: Sequence[int]) -> str:
    return f"repeat:{len(steps)}"


@register_system_backend
class Nsight(SystemBackend):
    name = "nsight"
    tool = "nsys"
    title = "nsys profile"
    fields = ("options", "flags")
    reserved = frozenset({"o", "output"})
    steps_mode = STEPS_PROFILER_API

    def step_problems(self, options: Mapping[str, str], steps: Sequence[int]) -> list[tuple[str, str]]:
        out = []
        cr = options.get(CAPTURE_RANGE)
        if cr is not None and cr != PROFILER_API:
            out.append((f"options.{CAPTURE_RANGE}", f"got {cr!r}; with steps set, the capture range is driven by "
                        f"cudaProfilerStart/Stop around each step, so it must be {PROFILER_API} (or left out)"))
        end = options.get(CAPTURE_RANGE_END)
        n = len(steps)
        keep = f"use repeat:{n} or repeat-shutdown:{n} (or leave {CAPTURE_RANGE_END} out: with steps it is {default_range_end(steps)})"
        if end in ("stop", "stop-shutdown") and n > 1:
            # RLinf's bug: after the first range nsys stops collecting, so only the first step is captured
            out.append((f"options.{CAPTURE_RANGE_END}", f"got {end!r} with {n} steps {list(steps)}: nsys ignores every "
                        f"capture range after the first, so only step {steps[0]} would be captured; {keep}"))
        elif end == "none":
            out.append((f"options.{CAPTURE_RANGE_END}", f"got 'none' with steps {list(steps)}: nsys would ignore the end of "
                        f"each range and capture from step {steps[0]} to the end of the process; {keep}"))
        elif end is not None:
            m = _REPEAT_RE.match(end)
            if m and m.group(2) is not None and int(m.group(2)) < n:
                out.append((f"options.{CAPTURE_RANGE_END}", f"got {end!r} with {n} steps {list(steps)}: nsys captures "
                            f"only the first {m.group(2)} range(s), so steps {list(steps[int(m.group(2)):])} would be "
                            f"missing; {keep}"))
        return out

    def settings(self, spec: WorkerSpec) -> tuple[dict[str, str], tuple[str, ...]]:
        options, flags = super().settings(spec)
        if spec.steps:
            options.setdefault(CAPTURE_RANGE, PROFILER_API)
            options.setdefault(CAPTURE_RANGE_END, default_range_end(spec.steps))
        return options, flags

    def command(self, tool_path: str, spec: WorkerSpec, wrapped: Sequence[str]) -> list[str]:
        out = str(spec.report_path)[: -len(".nsys-rep")]  # nsys appends the extension itself
        return [tool_path, "profile", *self.rendered(spec), f"--output={out}", *wrapped]
