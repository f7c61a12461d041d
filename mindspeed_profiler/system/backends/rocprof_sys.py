"""AMD ROCm Systems Profiler: `rocprof-sys-python [args] -- <python ...>`, with the output place in
the environment (ROCPROFSYS_OUTPUT_PATH / ROCPROFSYS_OUTPUT_PREFIX, derived from the output
directory; the user's `env` wins, as in RLinf)."""
from __future__ import annotations

from typing import Sequence

from mindspeed_profiler.system.backends import register_system_backend
from mindspeed_profiler.system.backends.base import SystemBackend
from mindspeed_profiler.system.spec import WorkerSpec


@register_system_backend
class RocprofSys(SystemBackend):
    name = "rocprof_sys"
    tool = "rocprof-sys-python"
    title = "rocprof-sys-python"
    fields = ("args",)
    no_steps = ("rocprof-sys-python records the whole process and mindspeed-profiler has no way to limit it to "
                "training steps")

    def command(self, tool_path: str, spec: WorkerSpec, wrapped: Sequence[str]) -> list[str]:
        return [tool_path, *self.rendered(spec), "--", *wrapped]

    def env(self, spec: WorkerSpec) -> dict[str, str]:
        return {"ROCPROFSYS_OUTPUT_PATH": str(spec.report_path), "ROCPROFSYS_OUTPUT_PREFIX": f"{spec.base}_"}
