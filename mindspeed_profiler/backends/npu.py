"""The `npu` backend: torch_npu.profiler on Ascend.

torch_npu is imported lazily and every import is guarded: without CANN it raises more than
ImportError. Every keyword passed here is checked by the tests against a snapshot of the real
torch_npu signatures (mindspeed_profiler/data/torch_npu_signatures.json, made by
tools/extract_torch_npu_signatures.py from the wheel's sources).

torch_npu's own `tensorboard_trace_handler(dir, worker_name)` names the capture directory
`<worker_name>_<pid>_<YYYYmmddHHMMSSmmm>_ascend_pt`, which is our layout when worker_name is
`<role>_rank<R>_step<A>-<B>[_c<K>]_<host>`. We set the profile's `_step_num_offset` (an attribute
of torch_npu.profiler.profile, listed in the snapshot) so ProfilerStep#N carries the 1-based
training iteration, as in torch captures.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mindspeed_profiler.backends.base import Backend, CaptureHandle, CaptureSpec
from mindspeed_profiler.backends.registry import register_backend
from mindspeed_profiler.config import IntegratedConfig
from mindspeed_profiler.schedule import schedule_args

_LEVELS = {"level_none": "Level_none", "level0": "Level0", "level1": "Level1", "level2": "Level2"}
_EXPORT = {"text": "Text", "db": "Db"}


def import_torch_npu():
    """torch_npu, or raise the import error (callers guard)."""
    import torch_npu  # noqa: F401  (lazy on purpose: never at module top level)

    return torch_npu


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


def profile_options(cfg: IntegratedConfig) -> dict[str, Any]:
    """Pure: the torch_npu option names a config means (enum members by name)."""
    activities = [a for a, on in (("CPU", cfg.profile_with_cpu), ("NPU", cfg.profile_with_npu)) if on]
    experimental: dict[str, Any] = {
        "profiler_level": _LEVELS[cfg.profile_level],
        "l2_cache": cfg.l2_cache,
        "mstx": bool(cfg.mstx),
        "data_simplification": cfg.data_simplification,
        "export_type": _EXPORT[cfg.profile_export_type],
    }
    if cfg.aic_metrics:
        experimental["aic_metrics"] = cfg.aic_metrics
    if cfg.mstx_domain_include:
        experimental["mstx_domain_include"] = list(cfg.mstx_domain_include)
    if cfg.mstx_domain_exclude:
        experimental["mstx_domain_exclude"] = list(cfg.mstx_domain_exclude)
    return {
        "activities": activities,
        "record_shapes": cfg.profile_record_shapes,
        "profile_memory": cfg.profile_with_memory,
        "with_stack": cfg.profile_with_stack,
        "with_modules": cfg.profile_with_module,
        "with_flops": cfg.profile_with_flops,
        "experimental": experimental,
        "analyse_flag": bool(cfg.profile_analysis),
    }


class NpuCapture(CaptureHandle):
    def __init__(self, spec: CaptureSpec, opts: dict[str, Any]):
        self.spec = spec
        self.opts = opts
        self.directory = None
        self._prof = None

    def start(self) -> None:
        tnpu = import_torch_npu()
        P = tnpu.profiler
        e = self.opts["experimental"]
        exp_kwargs = {
            "profiler_level": getattr(P.ProfilerLevel, e["profiler_level"]),
            "l2_cache": e["l2_cache"],
            "mstx": e["mstx"],
            "data_simplification": e["data_simplification"],
            "export_type": getattr(P.ExportType, e["export_type"]),
        }
        if "aic_metrics" in e:
            exp_kwargs["aic_metrics"] = getattr(P.AiCMetrics, e["aic_metrics"])
        for key in ("mstx_domain_include", "mstx_domain_exclude"):
            if key in e:
                exp_kwargs[key] = e[key]
        Path(self.spec.save_dir).mkdir(parents=True, exist_ok=True)
        self._prof = P.profile(
            activities=[getattr(P.ProfilerActivity, a) for a in self.opts["activities"]],
            schedule=P.schedule(**schedule_args(self.spec)),  # a CaptureSpec is a Window
            on_trace_ready=P.tensorboard_trace_handler(
                self.spec.save_dir, worker_name=self.spec.worker_name, analyse_flag=self.opts["analyse_flag"]
            ),
            record_shapes=self.opts["record_shapes"],
            profile_memory=self.opts["profile_memory"],
            with_stack=self.opts["with_stack"],
            with_modules=self.opts["with_modules"],
            with_flops=self.opts["with_flops"],
            experimental_config=P._ExperimentalConfig(**exp_kwargs),
        )
        # the profile's step 0 is iteration `begin`: name steps by training iteration
        self._prof._step_num_offset = self.spec.begin
        self._prof.start()

    def step(self) -> None:
        self._prof.step()

    def stop(self) -> None:
        if self._prof is not None:
            prof, self._prof = self._prof, None
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
        out = self.directory / "ASCEND_PROFILER_OUTPUT"
        return sorted(p for p in out.rglob("*") if p.is_file()) if out.is_dir() else []


def find_capture_dir(save_dir: Path, worker: str) -> Path | None:
    """The newest `<worker>_<pid>_<time>_ascend_pt` directory of this process under save_dir."""
    import os

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
    device = "npu"

    @classmethod
    def unusable_reason(cls) -> str | None:
        return npu_unusable_reason()

    @classmethod
    def detect_device(cls) -> str | None:
        return "npu" if npu_available() else None

    def options(self, cfg: IntegratedConfig) -> dict[str, Any]:
        return profile_options(cfg)

    def open(self, spec: CaptureSpec) -> CaptureHandle:
        return NpuCapture(spec, self.options(spec.cfg))
