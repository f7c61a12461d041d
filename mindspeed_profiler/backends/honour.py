"""Which backend honours which backend-specific option of `profiler_config.integrated`.

Some fields mean something to one tool only (`l2_cache`, `aic_metrics`, ... are torch_npu's). Each
backend lists those it honours (`Backend.honours`); on a backend that does not, every such field set
to a non-default value is a note (`unhonoured`) in the capture metadata's `options.notes`
(`capture_options`, called by the profiler) and one warning per process per (backend, field).
What one torch_npu *release* cannot honour is the npu backend's own business (npu_options.py).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.backends.base import Backend
from mindspeed_profiler.backends.options import BACKEND_OPTIONS, OPTION_FIELDS, BackendOption, yaml_value
from mindspeed_profiler.backends.registry import backend_classes
from mindspeed_profiler.core.capture_options import CaptureSettings

__all__ = ["BACKEND_OPTIONS", "OPTION_FIELDS", "BackendOption", "yaml_value", "unhonoured_options", "unhonoured",
           "capture_options"]


def _default(cfg: Any, name: str) -> Any:
    f = next(f for f in dataclasses.fields(cfg) if f.name == name)
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _honoured_by(name: str) -> tuple[str, ...]:
    return tuple(c.name for c in backend_classes() if name in c.honours)


def unhonoured_options(backend: type[Backend] | Backend, cfg: CaptureSettings) -> list[tuple[str, str]]:
    """(field, note) for each backend-specific field `cfg` sets to a non-default value that
    `backend` does not honour."""
    out = []
    for opt in BACKEND_OPTIONS:
        value = getattr(cfg, opt.field)
        if opt.field in backend.honours or value == _default(cfg, opt.field):
            continue
        shown = yaml_value(value)
        others = _honoured_by(opt.field)
        who = (f"only the {', '.join(others)} backend{'s' if len(others) > 1 else ''} honours it" if others
               else "no registered backend honours it")
        tool = backend.tool or f"the {backend.name} backend"
        instead = f"; {opt.instead}" if opt.instead else ""
        out.append((opt.field, f"{opt.field}: {shown} is not honoured by the {backend.name} backend "
                               f"({tool} has no {opt.feature.format(value=shown)}; {who}){instead}"))
    return out


def unhonoured(backend: type[Backend] | Backend, cfg: CaptureSettings) -> list[str]:
    """One note per backend-specific option `cfg` sets (to a non-default value) that `backend` does
    not honour, naming the field, its value and why."""
    return [note for _, note in unhonoured_options(backend, cfg)]


def capture_options(backend: Backend, cfg: CaptureSettings) -> dict[str, Any]:
    """The metadata's `options`: `backend.options(cfg)` with a note first for each option it does not
    honour, each also logged once per process per (backend, field)."""
    options = dict(backend.options(cfg))
    unhonoured = unhonoured_options(backend, cfg)
    for name, note in unhonoured:
        warn_once(("not-honoured", backend.name, name), "mindspeed-profiler: %s (recorded in the capture metadata notes)",
                  note)
    if unhonoured:
        options["notes"] = [note for _, note in unhonoured] + list(options.get("notes") or ())
    return options
