"""The process-wide profiling session: every running profiler and live capture of this process,
and the marker state (`core/state.STATE`) derived from all of them.

Colocated roles (actor and reference in one process) each have a profiler, but torch.profiler /
torch_npu.profiler allow one capture per process, markers are per process, and run.json is per
run: what must be shared lives here, owned by no single profiler.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import time
import weakref
from typing import TYPE_CHECKING, Any

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.state import STATE

if TYPE_CHECKING:  # the profiler imports this module: its Protocol, not its class
    from mindspeed_profiler.runtime.protocols import Profiler
    from mindspeed_profiler.runtime.spans import Spans

# Started, not yet stopped profilers of this process (enabled or tracer-only).
RUNNING: "weakref.WeakSet[Profiler]" = weakref.WeakSet()
# Captures recording in this process, across all profilers: a second session would steal the
# first's, and exporting the first then crashes the interpreter, so an overlapping capture is
# not opened.
LIVE_CAPTURES: "weakref.WeakSet[Any]" = weakref.WeakSet()
# profile_save_path directories whose run.json this process has written.
MANIFESTS_WRITTEN: set[str] = set()
# The highest `_c<K>` given out per (stage dir, role, rank, first, last) in this process. A profiler
# counts its own stage calls, but two profilers of one name (profiler_start(..., profiler_iteration=N)
# called twice in an iteration builds one per call) would otherwise share a capture name.
_CALLS_USED: dict[tuple[Any, ...], int] = {}


_SYSTEM_CHECKED = False


def follow_system_capture() -> None:
    """A worker wrapped by process-level capture (the launch settings set formats.SYSTEM_ENV in its
    environment) follows its iterations: read once, at the first profiler start of the process
    (IntegratedProfiler.start), so that importing the runtime imports nothing of system/."""
    global _SYSTEM_CHECKED
    if _SYSTEM_CHECKED:
        return
    _SYSTEM_CHECKED = True
    from mindspeed_profiler.core.formats import SYSTEM_ENV

    if os.environ.get(SYSTEM_ENV):
        try:
            from mindspeed_profiler.system.worker import install

            install()
        except Exception as exc:
            from mindspeed_profiler.core.warn import warn_once

            warn_once(("system-listener",), "process-level capture: the worker could not follow its iterations "
                      "(it runs on unchanged): %s: %s", type(exc).__name__, exc)


def claim_call(key: tuple[Any, ...], call: int) -> int:
    """`call`, or the next K not yet used for this capture name in this process."""
    call = max(call, _CALLS_USED.get(key, 0) + 1)
    _CALLS_USED[key] = call
    return call


def sync_state() -> None:
    """STATE's marker fields from every running enabled profiler, not from the last one started:
    markers are on if any of them wants them (for its rank), with the domains any of them selects;
    the device and its markers are those of the preferred backend (registry priority); a capture
    is active if any capture of this process is live."""
    running = [p for p in RUNNING if p.enabled]
    marking = [p for p in running if p.cfg.mstx and p.rank_selected]
    backends = sorted((p.backend for p in running if p.backend is not None), key=lambda b: -b.priority)
    STATE.mstx_enabled = bool(marking)
    STATE.device = backends[0].device if backends else None
    STATE.markers = tuple(dict.fromkeys(k for b in backends for k in b.markers)) if backends else None
    STATE.capture_markers = tuple(dict.fromkeys(k for b in backends for k in b.capture_markers))
    STATE.mstx_domain_include, STATE.mstx_domain_exclude = union_of_domains(marking)
    STATE.capture_active = bool(LIVE_CAPTURES)


def sync_iteration() -> None:
    """After a profiler stops: the others of this process keep their stage and iteration."""
    if RUNNING:
        STATE.iteration = max((p.iteration for p in RUNNING if p.iteration is not None), default=None)
    else:
        STATE.stage = None
        STATE.iteration = None


def union_of_domains(profilers: list["Profiler"]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """One (include, exclude) pair selecting a domain when any profiler's pair selects it
    (torch_npu's rule: a non-empty include list wins, else everything not excluded)."""
    pairs = [(p.cfg.mstx_domain_include, p.cfg.mstx_domain_exclude) for p in profilers]
    included = {d for inc, _ in pairs for d in inc}
    open_ended = [set(exc) for inc, exc in pairs if not inc]
    if not open_ended:  # every profiler lists what it includes
        return tuple(sorted(included)), ()
    # excluded only where every open-ended profiler excludes it and no profiler includes it
    return (), tuple(sorted(set.intersection(*open_ended) - included))


def _after_fork_in_child() -> None:
    """A process forked from a profiled one (a DataLoader worker, a helper started with fork)
    inherits its running profilers and live captures. They are the parent's: the child never
    steps, exports or rewrites them (at its exit neither), and starts with none of its own."""
    for prof in list(RUNNING):
        with contextlib.suppress(Exception):
            prof.forget_after_fork()
    RUNNING.clear()
    LIVE_CAPTURES.clear()
    MANIFESTS_WRITTEN.clear()
    STATE.capture_active = False
    STATE.mstx_enabled = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# The capture sets (runtime/captures.Captures) with background exports not yet finished: an owner
# profiler's stop() and interpreter exit wait for all of them, on-demand children's included.
EXPORTING: "weakref.WeakSet[Any]" = weakref.WeakSet()
# stop() waits at most this long for background exports, whatever export_wait_s says: a SIGTERM
# lowers it, since schedulers (Kubernetes, Slurm) send SIGKILL ~30 s after SIGTERM by default
EXPORT_WAIT_CAP_S = float("inf")
SIGTERM_EXPORT_WAIT_S = 20.0


def flush_held(why: str, spans: Spans | None = None) -> None:
    """export_after_run: torch's stop and write of the process's held session now, on this thread;
    its windows are cut and completed on the background writer (backends/held_session.py). With
    `spans` and the tracer on, that time is a profiler_export span on the timeline (args:
    held_session, why), as a window's own export is."""
    # imported here: the markers' path imports this module and needs no backend (import time)
    from mindspeed_profiler.backends import held_session
    from mindspeed_profiler.runtime import export_writer

    held = held_session.current()
    if held is None:
        return
    held_session.set_current(None)
    span = spans.enter(formats.SPAN_PROFILER_EXPORT, formats.CAT_PROFILER, {"held_session": True, "why": why}) \
        if spans is not None and STATE.tracer is not None else None
    try:
        held.flush(lambda name, run: export_writer.WRITER.submit(name, run)[0])
    finally:
        if span is not None:
            spans.exit(span)


def wait_exports(why: str, timeout: float | None = None, spans: Spans | None = None) -> None:
    """Wait for every pending background export of this process (the held session flushed first,
    shown by `spans`): each capture set at most its own export_wait_s (or `timeout`), never past
    EXPORT_WAIT_CAP_S in all; what is not done by then is said by each set (its warning, its
    captures' metadata)."""
    with contextlib.suppress(Exception):
        flush_held(why, spans)
    deadline = time.monotonic() + EXPORT_WAIT_CAP_S if EXPORT_WAIT_CAP_S != float("inf") else None
    for captures in list(EXPORTING):
        bound = captures.wait_s if timeout is None else timeout
        if deadline is not None:
            bound = max(0.0, min(bound, deadline - time.monotonic()))
        with contextlib.suppress(Exception):
            captures.wait_exports(bound, why)


def stop_all_on_sigterm() -> None:
    """SIGTERM: stop every profiler, waiting at most SIGTERM_EXPORT_WAIT_S for their exports."""
    global EXPORT_WAIT_CAP_S
    EXPORT_WAIT_CAP_S = min(EXPORT_WAIT_CAP_S, SIGTERM_EXPORT_WAIT_S)
    stop_all()


@atexit.register
def stop_all() -> None:
    """Export whatever is still open when the interpreter exits."""
    for prof in list(RUNNING):
        try:
            prof.stop()
        except Exception:
            pass
    wait_exports("the process exited")
