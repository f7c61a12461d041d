"""The `torch` backend: real torch.profiler captures on CUDA or CPU, Kineto JSON (gzip) per capture.

What `profile_level` means here (torch has no levels of its own; this is our mapping):

| level      | activities                      | adds                                                   |
|------------|---------------------------------|--------------------------------------------------------|
| level_none | CPU (+CUDA) while recording     | the exported trace keeps only annotations: user ranges |
|            |                                 | (mstx / record_function / stages) and ProfilerStep#N   |
| level0     | CPU ops (profile_with_cpu) +    | nothing: op names and durations, kernels on CUDA       |
|            | device (profile_with_npu, CUDA) |                                                        |
| level1     | as level0                       | record_shapes, with_flops                              |
| level2     | as level0                       | record_shapes, with_flops, profile_memory, with_stack  |

Explicit flags (`profile_record_shapes`, `profile_with_memory`, `profile_with_module`,
`profile_with_stack`, `profile_with_flops`) add to the level (level_none ignores them: it keeps
annotations only). torch cannot record annotations without recording ops, so level_none is small
on disk, not free in time (see docs/perf_profiler.md).
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from mindspeed_profiler.backends import layout
from mindspeed_profiler.core import formats
from mindspeed_profiler.core.capture_options import CaptureOptions, CaptureSettings
from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.backends import held_session
from mindspeed_profiler.backends.base import Backend, CaptureHandle, CaptureSpec, WindowedCapture
from mindspeed_profiler.backends.memory_snapshot import MemorySnapshot, snapshot_kind
from mindspeed_profiler.backends.registry import register_backend
from mindspeed_profiler.backends.trace_files import Deferred, check_whole_json, compress_step, timed

_LEVEL_ADDS = {
    "level_none": {},
    "level0": {},
    "level1": {"record_shapes": True, "with_flops": True},
    "level2": {"record_shapes": True, "with_flops": True, "profile_memory": True, "with_stack": True},
}
ANNOTATION_CATS = frozenset({"user_annotation", "gpu_user_annotation"})
HELD_NOT_WITH = ("export_after_run: not held past its window with profile_with_memory or profile_with_stack (level2 "
                 "has both): torch cannot stop recording allocations and Python calls in a session it keeps open, so "
                 "this capture is written at its window's end, as without export_after_run")


def profile_options(cfg: CaptureSettings, cuda: bool) -> dict[str, Any]:
    """Pure: the torch.profiler.profile options a config means (activities by name) plus notes."""
    opts = CaptureOptions.from_settings(cfg)
    level = opts.level
    notes: list[str] = []
    activities = []
    if opts.with_cpu or level == "level_none":
        activities.append("CPU")
    if opts.with_device and cuda:
        activities.append("CUDA")
    if not activities:
        # CPU-only machine with profile_with_cpu false: nothing would be recorded at all.
        activities.append("CPU")
        notes.append("profile_with_cpu is false and no CUDA device: recording CPU activity anyway")
    if level == "level_none" and not opts.with_cpu:
        notes.append("level_none records CPU activity to see annotations; the trace keeps annotations only")
    flags = dict(opts.flags)
    if level == "level_none":
        flags = dict.fromkeys(flags, False)
    else:
        for k, v in _LEVEL_ADDS[level].items():
            flags[k] = flags[k] or v
    held = bool(cfg.export_after_run)
    if held and (flags["profile_memory"] or flags["with_stack"]):
        # torch's collection toggle turns off ops and device activity only: a session kept open would
        # record every allocation and Python call for the rest of the run (issue 45; measured:
        # benchmarks/bench_held_session.py, docs/perf_capture.md)
        held = False
        notes.append(HELD_NOT_WITH)
    snapshot = None
    if opts.flags["profile_memory"] and level != "level_none":   # the allocator's history too, for PyTorch's memory viewer
        snapshot, why_not = snapshot_kind("cuda" if cuda else "cpu", flags)
        if why_not:
            notes.append(why_not)
    return {"activities": activities, **flags, "annotations_only": level == "level_none", "memory_snapshot": snapshot,
            "export_after_run": held, "notes": notes}


def held_key(opts: dict[str, Any]) -> tuple:
    """Pure: what a held session must have been started with for a capture of `opts` to join it."""
    return (tuple(opts["activities"]),) + tuple((k, opts[k]) for k in
                                                ("record_shapes", "profile_memory", "with_stack", "with_modules", "with_flops"))


def keep_annotations(trace: dict[str, Any]) -> dict[str, Any]:
    """Pure: a Kineto trace reduced to metadata events and user annotations (level_none)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "M" or e.get("cat") in ANNOTATION_CATS]
    return {**trace, "traceEvents": events}


def _annotations_step(path: Path) -> Deferred:
    """The deferred step reducing the raw trace at `path` to its annotations (level_none)."""
    def step(files: list[Path]) -> list[Path]:
        with open(path, encoding="utf-8") as fh:
            trace = json.load(fh)
        with _removed_if_failed(path):
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(keep_annotations(trace), fh)
        return files
    return step


@contextlib.contextmanager
def _removed_if_failed(path: Path):
    """Remove what a failed write left at `path` (and Kineto's `<path>.tmp`, which it renames onto
    `path` only when the write succeeds), then let the error through."""
    try:
        yield
    except BaseException:
        for left in (path, path.with_name(path.name + ".tmp")):
            with contextlib.suppress(OSError):
                left.unlink()
        raise


class TorchCapture(WindowedCapture):
    """One torch.profiler capture driven by hand: prepare_trace() at `begin` (warmup),
    start_trace() at `first`, stop_trace() after `last`; a `ProfilerStep#<iteration>` range per
    recorded iteration (the stepping: base.WindowedCapture)."""

    torch_session = True

    def __init__(self, spec: CaptureSpec, opts: dict[str, Any]):
        super().__init__(spec)
        self.opts = opts
        self.directory = None  # made at start
        self._prof = None
        self._step_range = None
        self._recorded = False
        self.notes: list[str] = []
        self.phases: dict[str, float] = {}
        self.deferred: list[tuple[str, Deferred]] = []
        # export_after_run: recorded in the process's held session (backends/held_session.py), whose
        # key the runtime checks before start (a session of other options is flushed first)
        self.held_key = held_key(opts) if opts.get("export_after_run") else None
        self.held: held_session.HeldSession | None = None   # the held session it records in
        self.window = ""   # its window's id in that session
        kind = opts.get("memory_snapshot")
        self._memory = MemorySnapshot(kind, "cuda" if "CUDA" in opts["activities"] else "cpu") if kind else None

    def start(self) -> None:
        import torch

        self.directory = layout.make_capture_dir(self.spec.save_dir, self.spec.worker_name, TorchBackend.suffix)
        acts = [getattr(torch.profiler.ProfilerActivity, a) for a in self.opts["activities"]]
        if self.held_key is not None:
            self._start_held(acts)
            return
        self._prof = self._profile(acts)
        self._prof.prepare_trace()
        self._start_window()

    def _profile(self, acts: list[Any]) -> Any:
        import torch

        return torch.profiler.profile(
            activities=acts,
            record_shapes=self.opts["record_shapes"],
            profile_memory=self.opts["profile_memory"],
            with_stack=self.opts["with_stack"],
            with_modules=self.opts["with_modules"],
            with_flops=self.opts["with_flops"],
        )

    def _start_held(self, acts: list[Any]) -> None:
        """export_after_run: join the process's held session (started here when there is none)."""
        held = held_session.current()
        if held is None:
            prof = self._profile(acts)
            if not hasattr(prof, "toggle_collection_dynamic"):
                raise RuntimeError("export_after_run needs torch.profiler's toggle_collection_dynamic (torch >= 2.3)")
            held = held_session.HeldSession(self.held_key, prof, acts)
            prof.prepare_trace()
            held_session.set_current(held)
        elif held.key != self.held_key:   # the runtime flushes such a session before (runtime/captures.py)
            raise RuntimeError("a held profiler session of other options is open in this process")
        self.held = held
        self._start_window()

    def _begin_recording(self) -> None:
        if self.held is not None:
            self.window = self.held.open_window(self.spec.worker_name)
        else:
            self._prof.start_trace()
        self._recorded = True
        if self._memory is not None:   # the allocator's history: per window in a held session too
            self._memory.start()

    def _open_step(self, iteration: int) -> None:
        import torch

        self._step_range = torch.autograd.profiler.record_function(f"ProfilerStep#{iteration}")
        self._step_range.__enter__()

    def _close_step(self) -> None:
        if self._step_range is not None:
            rng, self._step_range = self._step_range, None
            rng.__exit__(None, None, None)

    def stop(self) -> None:
        self._close_step()
        if self.held_key is not None:
            self._stop_held()
            return
        if self._prof is None:
            return
        if not self._recording and not self._recorded:
            # stopped during warmup: Kineto needs start before stop; nothing is exported
            self._prof.start_trace()
        if self._recording or not self._recorded:
            self._recording = False
            with timed(self.phases, "stop"):   # torch's post-processing: on this thread, as torch requires
                self._prof.stop_trace()
            self._take_snapshot(self._prof)

    def _stop_held(self) -> None:
        """export_after_run: the window closes (collection off); torch's stop waits for the flush."""
        if self._recording:
            self._recording = False
            with timed(self.phases, "toggle"):
                self.held.close_window()
            self._take_snapshot(None)
        elif self.held is not None and not self._recorded:
            self.held = None   # stopped during warmup: nothing of this capture is in the session

    def _take_snapshot(self, prof: Any) -> None:
        if self._memory is not None and self._recorded:
            with timed(self.phases, "snapshot_take"):
                self._memory.stop(prof)
            self.notes += self._memory.notes
            self._memory.notes = []

    def raw_path(self) -> Path:
        """Where the raw Kineto JSON of this capture is written (compressed later)."""
        final = self.directory / layout.trace_file_name(self.spec.trace_basename)
        return final.with_name(final.name[:-len(".gz")])

    def export(self) -> list[Path]:
        """The raw Kineto JSON now (torch's writer holds the GIL: no thread would run beside it);
        its compression, the level_none reduction and the memory snapshot's pickle deferred. Held
        (export_after_run): nothing now; the same steps run once the flush has cut its trace."""
        if self.held is not None:
            if self._recorded:
                self._defer_steps(self.raw_path())
            return []
        if self._prof is None or not self._recorded:
            return []
        raw = self.raw_path()
        with _removed_if_failed(raw):   # a full disk must not leave half a trace that keeps it full
            with timed(self.phases, "write"):
                self._prof.export_chrome_trace(str(raw))
            check_whole_json(raw)
        self._defer_steps(raw)
        return [raw]

    def _defer_steps(self, raw: Path) -> None:
        final = raw.with_name(raw.name + ".gz")
        if self.opts["annotations_only"]:
            self.deferred.append(("annotations", _annotations_step(raw)))
        self.deferred.append(("compress", compress_step(raw, final)))
        if self._memory is not None and self._memory.pending:
            snap_path = self.directory / formats.memory_snapshot_name(self.spec.trace_basename, os.getpid())
            self.deferred.append(("snapshot", self._snapshot_step(snap_path)))

    def _snapshot_step(self, snap_path: Path) -> Deferred:
        def step(files: list[Path]) -> list[Path]:
            try:
                with _removed_if_failed(snap_path):
                    snap = self._memory.write(snap_path)
            except OSError as exc:   # the trace is kept: the snapshot is extra
                self.notes.append(f"memory snapshot not written: {type(exc).__name__}: {exc}")
                return files
            finally:
                self.notes += self._memory.notes   # what build() could not do
                self._memory.notes = []
                self._memory.data = None   # on disk (or not): free the host copy
            return files + ([snap] if snap is not None else [])
        return step


@register_backend
class TorchBackend(Backend):
    """torch.profiler on CUDA (when available) or CPU: usable wherever torch imports."""

    name = "torch"
    suffix = "pt"
    priority = 0
    # NVTX on CUDA (nsys sees it); on CPU no device markers: record_function, inside a capture only
    device_markers = {"cuda": ("nvtx",), "cpu": ()}
    capture_markers = ("record_function",)
    honours = frozenset({"export_after_run"})  # the others are torch_npu's (honour.py notes them)
    tool = "torch.profiler"

    def __init__(self, cuda: bool | None = None):
        if cuda is None:
            import torch

            cuda = bool(torch.cuda.is_available())
        self.cuda = cuda
        self.device = "cuda" if cuda else "cpu"

    @classmethod
    def unusable_reason(cls) -> str | None:
        try:
            import torch  # noqa: F401
        except Exception as exc:
            return f"torch does not import ({type(exc).__name__}: {exc})"
        return None

    @classmethod
    def detect_device(cls) -> str | None:
        try:
            import torch

            return "cuda" if torch.cuda.is_available() else "cpu"
        except Exception:
            return None

    def options(self, cfg: CaptureSettings) -> dict[str, Any]:
        opts = profile_options(cfg, self.cuda)
        if HELD_NOT_WITH in opts["notes"]:
            warn_once(("held-not-with",), "mindspeed-profiler: %s (recorded in the capture metadata notes)", HELD_NOT_WITH)
        return opts

    def warm(self) -> None:
        """torch.profiler's prepare_trace() asks `hasattr(torch, "_inductor")`, which imports
        torch._inductor (1.3 s and 70 MB on the CPU box, torch 2.13) inside the first captured step of
        a process that has not imported it: imported here instead, at the profiler's start."""
        if "torch._inductor" in sys.modules:
            return
        try:
            import torch._inductor  # noqa: F401
        except Exception:   # torch's own prepare_trace meets the same failure, and reports it there
            pass

    def open(self, spec: CaptureSpec) -> CaptureHandle:
        return TorchCapture(spec, self.options(spec.cfg))
