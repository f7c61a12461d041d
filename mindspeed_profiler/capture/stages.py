"""The registry of RL stage names that `profiler_config.integrated.stage` may name.

MindSpeed-RL's six stages are built in; trainers register their own (before loading the config)
so that a typo in `stage` is a load-time error rather than a silently empty capture.
"""
from __future__ import annotations

import contextlib
import re
from typing import Iterator

BUILTIN_STAGES: tuple[str, ...] = (
    "actor_generate",
    "actor_compute_log_prob",
    "reference_compute_log_prob",
    "critic_compute_values",
    "actor_update",
    "critic_update",
)

ALL = "all"

_registry: dict[str, str] = {name: "builtin" for name in BUILTIN_STAGES}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def check_stage_name(name: object) -> str:
    """`name` if it may name a stage; else ValueError saying what is allowed. Registers nothing."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or name == ALL:
        raise ValueError(
            f"stage name {name!r} is not allowed: use letters, digits, '_', '.', '-' "
            f"(starting with a letter or '_'), and not the reserved word {ALL!r}"
        )
    return name


def register_stage(name: str, owner: str = "user") -> str:
    """Add a stage name (idempotent). Returns the name. Raises ValueError for a bad name."""
    _registry.setdefault(check_stage_name(name), owner)
    return name


def registered_stages() -> tuple[str, ...]:
    """All known stage names, built-ins first, in registration order."""
    return tuple(_registry)


def is_stage(name: object) -> bool:
    return isinstance(name, str) and name in _registry


@contextlib.contextmanager
def scoped_stages() -> Iterator[None]:
    """Stages registered inside the block are forgotten when it ends (tests, a config tried out)."""
    saved = dict(_registry)
    try:
        yield
    finally:
        _registry.clear()
        _registry.update(saved)
