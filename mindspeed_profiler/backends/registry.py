"""The registry of capture backends: name -> Backend class; `auto` asks it.

Adding a backend is one module defining a `Backend` subclass decorated with `@register_backend`,
plus one line in BUILTIN_MODULES below (or, for a backend outside this package, importing its
module before the profiler starts). Importing a backend module never imports torch / torch_npu:
they are imported when a capture starts or a probe runs.
"""
from __future__ import annotations

from mindspeed_profiler.core.registry import Registry
from mindspeed_profiler.backends.base import Backend
from mindspeed_profiler.backends.options import OPTION_FIELDS

# Modules that register the built-in backends when imported.
BUILTIN_MODULES = (
    "mindspeed_profiler.backends.npu",
    "mindspeed_profiler.backends.torch",
    "mindspeed_profiler.backends.markers",
)
AUTO = "auto"

REGISTRY: Registry[type[Backend]] = Registry(BUILTIN_MODULES)


def register_backend(cls: type[Backend]) -> type[Backend]:
    """Class decorator: make `cls` selectable as `integrated.backend: <cls.name>`."""
    from mindspeed_profiler.core.formats import CAPTURE_FORMATS

    for attr in ("name", "suffix"):
        if not isinstance(getattr(cls, attr, None), str):
            raise TypeError(f"backend {cls.__name__} must set the class attribute {attr!r}")
    if cls.suffix not in CAPTURE_FORMATS:
        raise ValueError(f"backend {cls.name!r}: suffix {cls.suffix!r} is not a capture format "
                         f"(formats.CAPTURE_FORMATS: {', '.join(CAPTURE_FORMATS)})")
    if cls.name == AUTO:
        raise ValueError(f"backend name {AUTO!r} is reserved")
    unknown = set(cls.honours) - OPTION_FIELDS
    if unknown:  # a typo would silently note an option the backend does honour
        raise ValueError(f"backend {cls.name!r}: honours {', '.join(sorted(unknown))}, not backend-specific options "
                         f"(backends/options.py: {', '.join(sorted(OPTION_FIELDS))})")
    return REGISTRY.add(cls.name, cls)


def backend_classes() -> tuple[type[Backend], ...]:
    """Registered backends, the one `auto` prefers first."""
    return tuple(sorted(REGISTRY, key=lambda c: (-c.priority, c.name)))


def backend_names() -> tuple[str, ...]:
    """The names `integrated.backend` accepts besides `auto`."""
    return tuple(c.name for c in backend_classes())


def backend_class(name: str) -> type[Backend]:
    cls = REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"backend {name!r}: allowed: {', '.join((AUTO,) + backend_names())}")
    return cls


def select_backend(name: str = AUTO) -> Backend:
    """A backend instance for `integrated.backend`: `auto` = the first usable one in priority
    order; a named one raises (RuntimeError, with the reason) when it cannot run here."""
    if name == AUTO:
        reasons = []
        for cls in backend_classes():
            why = cls.unusable_reason()
            if why is None:
                return cls()
            reasons.append(f"{cls.name}: {why}")
        raise RuntimeError("no profiler backend is usable here (" + "; ".join(reasons) + ")")
    cls = backend_class(name)
    why = cls.unusable_reason()
    if why is not None:
        raise RuntimeError(f"backend: {name} was asked for, but {why}")
    return cls()


def device_markers(device: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(marker kinds on the device, marker kinds inside a running capture) of the preferred
    backend for a device: enable_markers(device=...) without a running profiler."""
    for cls in backend_classes():
        if device in cls.device_markers:
            return cls.device_markers[device], cls.capture_markers
    return (), ()


def detect_device() -> str:
    """The device the preferred usable backend would capture here ("cpu" when none says)."""
    for cls in backend_classes():
        device = cls.detect_device()
        if device is not None:
            return device
    return "cpu"
