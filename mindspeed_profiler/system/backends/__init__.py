"""The registry of system backends: `system.backend` value -> the tool that wraps a worker.

One module per tool, registering itself with `@register_system_backend`, plus one line in
BUILTIN_MODULES. The config's validation, the launch settings, the launcher and the worker all ask
this registry, so a backend is described once. Standard library only (the launcher imports it
before the worker's interpreter starts).
"""
from __future__ import annotations

from mindspeed_profiler.core.registry import Registry
from mindspeed_profiler.system.backends.base import STEPS_CUT, STEPS_PROFILER_API, SystemBackend

BUILTIN_MODULES = (
    "mindspeed_profiler.system.backends.nsight",
    "mindspeed_profiler.system.backends.rocprof_sys",
    "mindspeed_profiler.system.backends.msprof",
    "mindspeed_profiler.system.backends.py_spy",
)

REGISTRY: Registry[SystemBackend] = Registry(BUILTIN_MODULES)

__all__ = ["SystemBackend", "STEPS_CUT", "STEPS_PROFILER_API", "register_system_backend", "system_backend",
           "system_backend_names"]


def register_system_backend(cls: type[SystemBackend]) -> type[SystemBackend]:
    """Class decorator: `system.backend: <cls.name>` selects it (the registry holds one instance)."""
    from mindspeed_profiler.core.formats import SYSTEM_REPORTS

    for attr in ("name", "tool", "title", "fields"):
        if getattr(cls, attr, None) is None:
            raise TypeError(f"system backend {cls.__name__} must set the class attribute {attr!r}")
    if cls.name not in SYSTEM_REPORTS:
        raise ValueError(f"system backend {cls.name!r} has no report name in formats.SYSTEM_REPORTS")
    REGISTRY.add(cls.name, cls())
    return cls


def system_backend_names() -> tuple[str, ...]:
    return tuple(b.name for b in REGISTRY)


def system_backend(name: str) -> SystemBackend:
    backend = REGISTRY.get(name)
    if backend is None:
        raise ValueError(f"system backend {name!r}: allowed: {', '.join(system_backend_names())}")
    return backend
