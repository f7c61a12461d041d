"""The `system` section's cross-field rules, with the system backends whose settings they are:
options / flags / args only where the chosen backend reads them, no dashes in keys, reserved keys,
steps only for a backend that can be limited to them, a writable output directory."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping

from mindspeed_profiler.core.fileio import unwritable
from mindspeed_profiler.core.formats import CONFIG_ROOT_KEY as ROOT_KEY, SYSTEM_DIR
from mindspeed_profiler.system.backends import system_backend, system_backend_names as system_backend_choices

if TYPE_CHECKING:  # the config package calls these rules (config/validate.py); they never import it
    from mindspeed_profiler.config.errors import Problems

# How messages name a backend's settings field.
_FIELD_NOUN = {"options": "options", "flags": "flags", "args": "arguments"}


def _system_backend(name: Any) -> Any:
    """The registered system backend of that name, or None (a bad name is reported by its checker)."""
    try:
        return system_backend(name) if isinstance(name, str) else None
    except ValueError:
        return None


def _wrong_field(field_name: str, backend: Any) -> str:
    """`options are nsys profile options (backend: nsight) or ...; for rocprof_sys use args`."""
    noun = _FIELD_NOUN[field_name]
    owners = [system_backend(n) for n in system_backend_choices()]
    owners = [b for b in owners if field_name in b.fields]
    whose = " or ".join(f"{b.title} {noun} (backend: {b.name})" for b in owners) or "read by no backend"
    takes = " and ".join(backend.fields)
    return f"{field_name} are {whose}; for {backend.name} use {takes}"


def check_system(f: dict[str, Any], raw: Mapping[str, Any], problems: Problems, check_paths: bool, profile_save_path: str) -> None:
    p = f"{ROOT_KEY}.system"
    enabled = f.get("enabled", True)
    if "backend" not in raw and enabled:
        problems.append((f"{p}.backend", f"is required when the system section is enabled; allowed: {', '.join(system_backend_choices())}"))
    backend = _system_backend(f.get("backend"))
    options = f.get("options") or {}
    flags = f.get("flags") or ()
    args = f.get("args") or {}
    if backend is not None:
        for name, value in (("options", options), ("flags", flags), ("args", args)):
            if value and name not in backend.fields:
                problems.append((f"{p}.{name}", _wrong_field(name, backend)))
    for key in list(options) + list(args):
        if key.startswith("-"):
            section = "options" if key in options else "args"
            problems.append((f"{p}.{section}.{key}", f"write the key without dashes ({key.lstrip('-')!r}): one-letter keys render as -k value, longer ones as --key=value"))
    for flag in flags:
        name = flag.lstrip("-")
        if flag.startswith("-"):
            problems.append((f"{p}.flags", f"write flag {flag!r} without dashes ({name!r}); it renders as --{name}"))
        if name in options or name in args:
            problems.append((f"{p}.flags", f"{name!r} is given both as a flag and as an option; keep one"))
        if "=" in name:
            problems.append((f"{p}.flags", f"flag {flag!r} carries a value; put it in options as {name.split('=')[0]}: {name.split('=', 1)[1]}"))
    if backend is not None and backend.key_field:
        for key in sorted(backend.reserved & set(options if backend.key_field == "options" else args)):
            problems.append((f"{p}.{backend.key_field}.{key}", f"is set by mindspeed-profiler for {backend.name} (the report "
                             f"goes to <output_dir>/<group>_rank<R>, the worker's own command is run): remove it"))
    steps = f.get("steps")
    if backend is not None and steps:
        if backend.steps_mode is None:
            problems.append((f"{p}.steps", f"got {list(steps)}; the {backend.name} backend cannot be limited to training "
                             f"steps: {backend.no_steps}; remove steps to capture each wrapped worker's whole process"))
        else:
            problems += [(f"{p}.{sub}", msg) for sub, msg in backend.step_problems(options, steps)]
    if check_paths and enabled and (f.get("output_dir") or f.get("worker_groups")):
        out = f.get("output_dir") or os.path.join(profile_save_path, SYSTEM_DIR)
        msg = unwritable(out)
        if msg:
            problems.append((f"{p}.output_dir", msg))
