"""The interface of a system backend: one tool that wraps a worker's Python process.

A backend says, as plain data, what the config may set for it (which of `options` / `flags` /
`args`, which keys it sets itself, how it honours `steps`), and, as pure functions, how it renders
the wrapped command line and environment from a `WorkerSpec`. It never runs anything: the launcher
(system/launch.py) does, on the worker's node.
"""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Mapping, Sequence

from mindspeed_profiler.system.render import render
from mindspeed_profiler.system.spec import WorkerSpec

# How a backend honours `system.steps`:
STEPS_PROFILER_API = "profiler_api"  # the worker opens / closes the CUDA profiler range around each listed step
STEPS_CUT = "cut"                    # the tool records the whole process; the report is cut to the steps' time ranges
FIELDS = ("options", "flags", "args")


class SystemBackend:
    name: ClassVar[str]            # the `system.backend` value
    tool: ClassVar[str]            # the executable, looked up on the worker's PATH
    title: ClassVar[str]           # how messages name the tool's command line ("nsys profile")
    fields: ClassVar[tuple[str, ...]]  # which of options / flags / args the backend reads
    short_keys: ClassVar[bool] = True  # one-letter keys and flags render -k (else always --key=value)
    reserved: ClassVar[frozenset[str]] = frozenset()  # option keys the backend sets itself
    steps_mode: ClassVar[str | None] = None
    no_steps: ClassVar[str] = ""   # why `steps` cannot work with this tool (steps_mode None)
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    clock_mark: ClassVar[bool] = False  # the worker runs a short, recognisable busy function to align the tool's clock
    # the tool (or, for rocprof-sys-python, a wrapper process around the worker) may write its report
    # after the worker has ended: the worker then runs in a process group of its own
    # (system/regroup.py), out of reach of Ray's cleanup of its group. False: the tool runs the
    # worker's command itself and regroup must stay out of it.
    report_after_worker: ClassVar[bool] = True

    def sample_rate_hz(self, spec: WorkerSpec) -> float | None:
        """How often the tool samples (for the clock mark's length), None when it does not sample."""
        return None

    @property
    def key_field(self) -> str | None:
        """The field holding this tool's key: value settings (options or args)."""
        return next((f for f in ("options", "args") if f in self.fields), None)

    def step_problems(self, options: Mapping[str, str], steps: Sequence[int]) -> list[tuple[str, str]]:
        """Backend-specific rules for `steps` with these options: (path under system, message) pairs."""
        return []

    def settings(self, spec: WorkerSpec) -> tuple[dict[str, str], tuple[str, ...]]:
        """(key: value settings, flags) as rendered: the user's, plus what the backend derives."""
        return dict(getattr(spec, self.key_field) if self.key_field else {}), tuple(spec.flags)

    def rendered(self, spec: WorkerSpec) -> list[str]:
        options, flags = self.settings(spec)
        return render(options, flags, short=self.short_keys)

    def command(self, tool_path: str, spec: WorkerSpec, wrapped: Sequence[str]) -> list[str]:
        """The whole command line: the tool, its settings, then the worker's own command."""
        raise NotImplementedError

    def env(self, spec: WorkerSpec) -> dict[str, str]:
        """Environment the backend derives from the spec (the user's `env` wins over it)."""
        return {}

    def report_complete(self, report: Path) -> bool:
        """Whether the tool left a report (checked after the tool exited)."""
        if report.is_dir():
            return any(p.is_file() for p in report.rglob("*"))
        return report.is_file() and report.stat().st_size > 0
