"""Pure capture planning: from (step window | step list, warmup, stage mode) to what happens when.

Iterations are 1-based. Iteration 1 begins at `IntegratedProfiler.start()`, iteration N+1 begins
at the N-th `step()` call. Nothing here touches a profiler, a file or a clock.

Rules (documented in docs/profiling.md):
- The recorded steps are exactly the configured ones: `[profile_step_start, profile_step_end)` or
  the explicit `profile_steps` list. Each run of consecutive steps is one capture (`stage: all`);
  with `profile_steps_continuous: false` each recorded step is its own capture (verl's
  `profile_continuous_steps: false`), warm-up only before the first step of a run.
- `warmup_steps` W: the profiler comes up W iterations before the first recorded step of a run,
  warms up over them (not recorded) and records the run. W is shortened where there are not enough
  iterations before the run (iteration 1, or the previous capture): never does a warmup overlap a
  recorded step. The DPO preset (W=1) therefore runs `end - start + 1` iterations under the
  profiler, MindSpeed's documented DPO semantic, whenever `start >= 2`.
- Named stages (`stage: <name>` or a list): one capture per call of a selected stage in a recorded
  iteration, no warmup (a stage call is not a repeating step the profiler could warm up on).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence


class PlanSettings(Protocol):
    """The `integrated` fields a plan is made from (config.IntegratedConfig has them; a Protocol,
    so that this layer imports nothing of config/)."""

    @property
    def step_runs(self) -> tuple[tuple[int, int], ...]: ...

    @property
    def warmup_steps(self) -> int: ...

    @property
    def stages(self) -> tuple[str, ...] | None: ...

    @property
    def profile_steps_continuous(self) -> bool: ...


@dataclass(frozen=True)
class Window:
    """One continuous capture: warm up over [begin, first), record [first, last]."""

    first: int
    last: int
    warmup: int = 0
    requested_warmup: int = 0

    @property
    def begin(self) -> int:
        """The iteration at whose start the profiler comes up."""
        return self.first - self.warmup

    @property
    def active(self) -> int:
        return self.last - self.first + 1

    @property
    def steps(self) -> tuple[int, ...]:
        return tuple(range(self.first, self.last + 1))

    @property
    def profiled_iterations(self) -> int:
        """Iterations run under the profiler (warmup + recorded)."""
        return self.warmup + self.active


@dataclass(frozen=True)
class Plan:
    """What one process does: continuous windows (`stage: all`) or per-call stage captures.

    The recorded iterations are kept as runs of consecutive ones, never listed: a window of 10**9
    iterations costs what a window of one does."""

    step_runs: tuple[tuple[int, int], ...]  # (first, last) inclusive, ascending, disjoint
    windows: tuple[Window, ...]  # empty in stage mode
    stages: tuple[str, ...] | None  # None = all (continuous mode)
    # each recorded step its own capture: a window is cut into one-step windows as it is reached
    per_step: bool = False

    def records(self, iteration: int) -> bool:
        """Whether `iteration` is a recorded one."""
        i = bisect.bisect_right(self.step_runs, (iteration, float("inf"))) - 1
        return i >= 0 and self.step_runs[i][0] <= iteration <= self.step_runs[i][1]

    @property
    def continuous(self) -> bool:
        return self.stages is None

    def window_beginning_at(self, iteration: int) -> Window | None:
        for w in self.windows:
            if w.begin == iteration:
                return Window(w.first, w.first, w.warmup, w.requested_warmup) if self.per_step else w
            if self.per_step and w.first < iteration <= w.last:
                return Window(iteration, iteration, 0, w.requested_warmup)
        return None

    def window_resumed_at(self, iteration: int) -> Window | None:
        """The window to open when the profiler starts at `iteration` (resuming mid-run allowed)."""
        for w in self.windows:
            if w.begin <= iteration <= w.last:
                first = max(w.first, iteration)
                last = first if self.per_step else w.last
                return Window(first, last, warmup=first - iteration, requested_warmup=w.requested_warmup)
        return None

    def stage_call_recorded(self, stage: str, iteration: int) -> bool:
        return self.stages is not None and stage in self.stages and self.records(iteration)


def runs(steps: Iterable[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive steps, as inclusive (first, last) pairs, ascending."""
    out: list[tuple[int, int]] = []
    for s in sorted(set(steps)):
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def plan_windows(steps: Iterable[int], warmup: int = 0) -> tuple[Window, ...]:
    """One Window per run of consecutive steps; each warmup clamped so it starts at >= 1 and
    never overlaps the previous window."""
    return windows_from_runs(runs(steps), warmup)


def windows_from_runs(step_runs: Sequence[tuple[int, int]], warmup: int = 0) -> tuple[Window, ...]:
    """plan_windows for steps given as ascending (first, last) runs."""
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    windows: list[Window] = []
    prev_last = 0
    for first, last in step_runs:
        if first < 1:
            raise ValueError(f"steps are 1-based iterations; got {first}")
        w = min(warmup, first - prev_last - 1)
        windows.append(Window(first, last, warmup=w, requested_warmup=warmup))
        prev_last = last
    return tuple(windows)


def make_plan(steps: Sequence[int], warmup: int = 0, stages: Sequence[str] | None = None,
              continuous_steps: bool = True) -> Plan:
    """The plan for one process. `stages=None` means `stage: all` (continuous captures);
    `continuous_steps=False`: one capture per recorded step instead of per run of consecutive ones."""
    return plan_from_runs(tuple(runs(steps)), warmup, stages, continuous_steps)


def plan_from_runs(step_runs: tuple[tuple[int, int], ...], warmup: int = 0, stages: Sequence[str] | None = None,
                   continuous_steps: bool = True) -> Plan:
    """make_plan for steps given as ascending, disjoint (first, last) runs."""
    if stages is None:
        return Plan(step_runs, windows_from_runs(step_runs, warmup), None, per_step=not continuous_steps)
    return Plan(step_runs, (), tuple(stages))


def plan_from_config(cfg: PlanSettings) -> Plan:
    """The plan for an IntegratedConfig (uses `.step_runs`, `.warmup_steps`, `.stages`,
    `.profile_steps_continuous`)."""
    return plan_from_runs(cfg.step_runs, cfg.warmup_steps, cfg.stages, cfg.profile_steps_continuous)


def schedule_args(window: Window) -> dict[str, int]:
    """Keyword arguments for `torch.profiler.schedule` / `torch_npu.profiler.schedule` that make a
    profiler started at `window.begin` warm up, record the window and save once."""
    return {"wait": 0, "warmup": window.warmup, "active": window.active, "repeat": 1}
