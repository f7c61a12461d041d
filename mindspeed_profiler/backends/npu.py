"""The `npu` backend: torch_npu.profiler on Ascend, adapted to the installed torch_npu release.

Three modules, one job each, every step testable alone:
  - npu_release.py: what one release offers (`NpuApi`: accepted keywords, enum members, instance
    attributes), from a snapshot of the real wheels or from the installed module (`installed_api`);
  - npu_options.py: what the config means (`profile_options`) and what of it that release can take
    (`adapt_options`: the keywords to pass and a note for each feature it cannot honour);
  - this module: the capture (`NpuCapture`) and the backend (`NpuBackend`). The names of the other
    two stay importable from here.
The tests run every capture against a fake of each snapshot: a keyword a release lacks fails there
as it would on that release.

torch_npu's own `tensorboard_trace_handler(dir, worker_name)` names the capture directory
`<worker_name>_<pid>_<YYYYmmddHHMMSSmmm>_ascend_pt`, which is our layout when worker_name is
`<role>_rank<R>_step<A>-<B>[_c<K>]_<host>`. ProfilerStep#N carries the 1-based training iteration,
as in torch captures: we set the profile's `_step_num_offset` (an instance attribute of
torch_npu.profiler.profile, listed in the snapshot) where the release has it; on releases without
it (2.3.1 - 2.5.1) the profile starts at step `begin` (`step_num`, `current_action`) with a schedule
that skips the first `begin` steps, which records the same iterations under the same names.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from mindspeed_profiler.core import formats
from mindspeed_profiler.backends.base import Backend, CaptureHandle, CaptureSpec
from mindspeed_profiler.backends.memory_snapshot import ALLOCATOR, MemorySnapshot
from mindspeed_profiler.backends.npu_options import (Adapted, Note, adapt_options, adapt_to_installed,
                                                     profile_options, report_notes)
from mindspeed_profiler.backends.npu_release import (ANALYSE, DATA_DIR, ENUMS, EXPERIMENTAL, HANDLER, INDEX_FILE, MARK,
                                                     PROFILE, RANGE_END, RANGE_START, SCHEDULE, STEP_OFFSET_ATTR,
                                                     NpuApi, import_torch_npu, installed_api, load_snapshot,
                                                     nearest_snapshot, snapshot_index, snapshot_versions, version_key)
from mindspeed_profiler.backends.registry import register_backend
from mindspeed_profiler.core.capture_options import CaptureSettings
from mindspeed_profiler.capture.schedule import schedule_args

__all__ = [  # the names this module had before the split (tests and users import them from here)
    "ANALYSE", "DATA_DIR", "ENUMS", "EXPERIMENTAL", "HANDLER", "INDEX_FILE", "MARK", "PROFILE", "RANGE_END",
    "RANGE_START", "SCHEDULE", "STEP_OFFSET_ATTR", "Adapted", "Note", "NpuApi", "NpuBackend", "NpuCapture",
    "adapt_options", "adapt_to_installed", "find_capture_dir", "import_torch_npu", "installed_api", "load_snapshot",
    "nearest_snapshot", "npu_available", "npu_unusable_reason", "profile_options", "report_notes",
    "snapshot_index", "snapshot_versions", "version_key",
]


def npu_unusable_reason() -> str | None:
    """None when torch_npu imports and sees an NPU, else why not (never raises: without CANN the
    import fails with more than ImportError)."""
    try:
        tnpu = import_torch_npu()
    except Exception as exc:
        return f"torch_npu does not import ({type(exc).__name__}: {exc})"
    try:
        if not tnpu.npu.is_available():
            return "torch_npu imports, but no NPU is available"
    except Exception as exc:
        return f"torch_npu.npu.is_available() failed ({type(exc).__name__}: {exc})"
    return None


def npu_available() -> bool:
    return npu_unusable_reason() is None


# ------------------------------------------------------------------------------ the capture


class NpuCapture(CaptureHandle):
    def __init__(self, spec: CaptureSpec, options: Mapping[str, Any]):
        self.spec = spec
        self.options = options
        self.adapted: Adapted | None = None
        self.directory = None
        self._prof = None
        self.notes: list[str] = []
        # profile_with_memory: also the allocator's history (from the profiler's start, warm-up included)
        self._memory = MemorySnapshot(ALLOCATOR, "npu") if options.get("profile_memory") else None

    def start(self) -> None:
        tnpu = import_torch_npu()
        P = tnpu.profiler
        self.adapted = a = adapt_options(self.options, installed_api(tnpu))
        report_notes(a)
        exp_kwargs = dict(a.experimental)
        for key, enum in (("profiler_level", P.ProfilerLevel), ("export_type", P.ExportType), ("aic_metrics", P.AiCMetrics)):
            if key in exp_kwargs:
                exp_kwargs[key] = getattr(enum, exp_kwargs[key])
        sched = schedule_args(self.spec)  # a CaptureSpec is a Window
        if a.step_naming == "skip_first":
            sched["skip_first"] = self.spec.begin
        Path(self.spec.save_dir).mkdir(parents=True, exist_ok=True)
        profile_kwargs = dict(a.profile)
        profile_kwargs["activities"] = [getattr(P.ProfilerActivity, n) for n in profile_kwargs["activities"]]
        self._prof = P.profile(
            schedule=P.schedule(**sched),
            on_trace_ready=P.tensorboard_trace_handler(self.spec.save_dir, worker_name=self.spec.worker_name, **a.handler),
            experimental_config=P._ExperimentalConfig(**exp_kwargs),
            **profile_kwargs,
        )
        # the profile's step 0 is iteration `begin`: name steps by training iteration
        if a.step_naming == "offset":
            self._prof._step_num_offset = self.spec.begin
        elif a.step_naming == "skip_first":
            self._prof.step_num = self.spec.begin
            self._prof.current_action = self._prof.schedule(self.spec.begin)
        self._prof.start()
        if self._memory is not None:
            self._memory.start()

    def step(self) -> None:
        self._prof.step()

    def stop(self) -> None:
        if self._prof is not None:
            prof, self._prof = self._prof, None
            if self._memory is not None:
                self._memory.stop()
                self.notes += self._memory.notes
            try:
                prof.stop()
            finally:
                # torch_npu made its directory at start and writes it at stop, also when the capture
                # is being abandoned (no export then): find it, so the metadata goes there too.
                self.directory = find_capture_dir(Path(self.spec.save_dir), self.spec.worker_name)

    def export(self) -> list[Path]:
        # torch_npu wrote (and, with analyse_flag, parsed) the capture itself; its public methods
        # log failures instead of raising, so check that the directory really exists.
        if self.directory is None:
            raise RuntimeError(f"torch_npu wrote no {self.spec.worker_name}_<pid>_<time>_ascend_pt directory under {self.spec.save_dir}")
        out = self.directory / formats.ASCEND_OUTPUT_DIR
        files = sorted(p for p in out.rglob("*") if p.is_file()) if out.is_dir() else []
        if self._memory is not None:
            snap = self._memory.write(self.directory / formats.memory_snapshot_name(self.spec.trace_basename, os.getpid()))
            files += [snap] if snap is not None else []
        return files


def find_capture_dir(save_dir: Path, worker: str) -> Path | None:
    """The newest `<worker>_<pid>_<time>_ascend_pt` directory of this process under save_dir."""
    found = sorted(save_dir.glob(f"{worker}_{os.getpid()}_*_{NpuBackend.suffix}"))
    return found[-1] if found else None


@register_backend
class NpuBackend(Backend):
    """torch_npu.profiler on Ascend; `auto` prefers it wherever it can run."""

    name = "npu"
    suffix = "ascend_pt"
    priority = 100
    device_markers = {"npu": ("mstx",)}
    capture_markers = ()  # mstx ranges are in the torch_npu capture already (experimental mstx=True)
    annotation_only_mode = True   # torch_npu's Level_none + mstx
    # every backend-specific option is torch_npu's; what a release lacks is noted by adapt_options
    honours = frozenset({"l2_cache", "aic_metrics", "profile_export_type", "data_simplification", "profile_analysis"})
    tool = "torch_npu.profiler"
    device = "npu"

    @classmethod
    def unusable_reason(cls) -> str | None:
        return npu_unusable_reason()

    @classmethod
    def detect_device(cls) -> str | None:
        return "npu" if npu_available() else None

    def options(self, cfg: CaptureSettings) -> dict[str, Any]:
        """What the config means, what is passed on the installed torch_npu and why (the metadata's
        `options`; `notes` lists what that release cannot honour)."""
        opts = profile_options(cfg)
        try:
            adapted, api = adapt_to_installed(opts)
        except Exception as exc:  # torch_npu does not import: the capture fails at start and says why
            return {**opts, "torch_npu": {"error": f"{type(exc).__name__}: {exc}"}, "notes": []}
        return {**opts, "torch_npu": {"version": api.version, "api": api.source, "passed": adapted.as_dict()},
                "notes": [n.message for n in adapted.notes]}

    def open(self, spec: CaptureSpec) -> CaptureHandle:
        return NpuCapture(spec, profile_options(spec.cfg))
