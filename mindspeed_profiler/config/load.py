"""Loading, in one pass (`_load` shows it): the overrides parsed -> the source read as plain data
(a YAML path, a dict, an OmegaConf/Hydra DictConfig or a ProfilerConfig; converted once) -> whose
layout it is, detected once (dialects.detect) -> the overrides written in another framework's own
keys applied to its data -> our `profiler_config` block, translated from that framework's settings
or found in a whole training YAML -> copied once and our overrides applied -> validated.
`load_config` is the one entry point: the CLI's check-config calls it too."""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from mindspeed_profiler.core import yaml_bounded
from mindspeed_profiler.config import dialects
from mindspeed_profiler.config.containers import deep_copy, to_container
from mindspeed_profiler.config.checks import MAX_OVERRIDE_DEPTH, path_problem
from mindspeed_profiler.config.errors import ROOT_KEY, SECTIONS, ProfilerConfigError, describe
from mindspeed_profiler.config.schema import INTEGRATED_FIELDS, ProfilerConfig
from mindspeed_profiler.config.validate import validate
from mindspeed_profiler.core.formats import RUN_ID_KEY

# section names that a training YAML may use for something of its own at its top level
GENERIC_SECTIONS = frozenset({"metrics"})


def load_yaml(path: Path) -> Any:
    """safe_load with a bound on alias expansion (a 279-byte "billion laughs" file expands to
    millions of nodes: refused before anything is built from it)."""
    where = str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfilerConfigError([(where, f"not UTF-8 text (byte {exc.start}: {exc.reason}); save the YAML as UTF-8")]) from None
    except OSError as exc:
        raise ProfilerConfigError([(where, f"cannot read: {exc.strerror or exc}")]) from None
    try:
        return yaml_bounded.load(text)
    except yaml_bounded.YamlRefused as exc:
        raise ProfilerConfigError([(where, str(exc))]) from None
    except RecursionError:
        raise ProfilerConfigError([(where, "nested too deeply to be a config")]) from None


def read_source(source: Any) -> tuple[Any, str]:
    """(the source as plain data, where it came from for messages)."""
    if isinstance(source, ProfilerConfig):
        return source.to_dict(), "<ProfilerConfig>"
    if isinstance(source, (bytes, bytearray)) or (isinstance(source, os.PathLike) and isinstance(os.fspath(source), bytes)):
        raise ProfilerConfigError([(repr(source)[:200], "expected a path as text (str), not bytes")])
    if isinstance(source, (str, os.PathLike)):
        where = os.fspath(source)
        shown = where if len(where) <= 200 else where[:200] + "..."
        why = path_problem(where)
        if why:
            raise ProfilerConfigError([(shown, f"not a usable config file path: it {why}")])
        if where.startswith("~") and os.path.expanduser(where) == where:
            raise ProfilerConfigError([(shown, f"no such user to expand {where.split('/', 1)[0]!r}")])
        try:
            path = Path(where).expanduser()
            exists, is_dir = path.exists(), path.is_dir()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ProfilerConfigError([(shown, f"not a usable config file path ({type(exc).__name__}: {exc})")]) from None
        if not exists:
            raise ProfilerConfigError([(shown, "config file not found")])
        if is_dir:
            raise ProfilerConfigError([(shown, "is a directory; expected a YAML file")])
        return load_yaml(path), str(path)
    return to_container(source), "<dict>"


def find_our_block(data: Any, origin: str, layout: dialects.Layout | None = None) -> dict[str, Any]:
    """Our block from a whole training YAML, the block itself, a bare section, or another framework's
    settings (translated, notes reported); `layout`: `dialects.detect(data)`, when known."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ProfilerConfigError([(origin, f"got {describe(data)} at the top level; expected a mapping")])
    translated = dialects.report((layout or dialects.detect(data)).translate(data))
    if translated is not None:
        return translated
    if ROOT_KEY in data:
        block = data[ROOT_KEY]
        if block is None:
            return {}
        if not isinstance(block, Mapping):
            raise ProfilerConfigError([(ROOT_KEY, f"got {describe(block)}; expected a mapping with integrated / tracer / system / metrics")])
        return dict(block)
    keys = set(data)
    ours = keys & set(SECTIONS)
    # the block itself (validate() reports any unknown section); `metrics` is a common key of a whole
    # training YAML too: alone, it is our block only when nothing else is there
    if ours - GENERIC_SECTIONS or (ours and keys <= set(SECTIONS) | {RUN_ID_KEY}):
        return dict(data)
    if keys and (keys <= set(INTEGRATED_FIELDS) or any(str(k).startswith("profile") for k in keys & set(INTEGRATED_FIELDS))):
        return {"integrated": dict(data)}  # a bare `integrated` section; validate() reports unknown keys
    # A typo must not silently turn profiling off: a top-level key close to `profiler_config`, or a
    # mapping whose every key is close to a section or integrated field name, is checked as such.
    str_keys = [k for k in data if isinstance(k, str)]
    for k in str_keys:
        if difflib.get_close_matches(k, [ROOT_KEY], n=1, cutoff=0.8):
            raise ProfilerConfigError([(k, f"unknown top-level key {k!r} (did you mean {ROOT_KEY!r}?); "
                                           f"without a {ROOT_KEY} block profiling stays off")])
    if str_keys and len(str_keys) == len(keys):
        if all(difflib.get_close_matches(k, list(SECTIONS), n=1, cutoff=0.8) for k in str_keys):
            return dict(data)
        if all(difflib.get_close_matches(k, list(SECTIONS) + list(INTEGRATED_FIELDS), n=1, cutoff=0.8) for k in str_keys):
            return {"integrated": dict(data)}
    # a training YAML with no profiler_config: profiling stays off (MindSpeed's default)
    return {}


@dataclass(frozen=True)
class Override:
    """One `key=value` override, parsed once: `parts` is the dotted key as written (a leading `+`
    dropped), `value` the YAML value."""

    text: str
    parts: tuple[str, ...]
    value: Any

    @property
    def ours(self) -> bool:
        """Whether it addresses our block (`profiler_config.`, `integrated.`, ...) rather than the
        keys of another framework's YAML (`global_profiler.steps`, `cluster.tracer.enable`)."""
        return self.parts[0] in (ROOT_KEY,) + SECTIONS

    @property
    def block_parts(self) -> list[str]:
        """The key inside our block (the `profiler_config.` prefix is optional)."""
        return list(self.parts[1:] if self.parts[0] == ROOT_KEY and len(self.parts) > 1 else self.parts)


def parse_override(text: str) -> Override:
    if "=" not in text:
        raise ProfilerConfigError([(shown(text), "override must look like profiler_config.integrated.stage=actor_update")])
    key, raw_value = text.split("=", 1)
    key = key.strip().lstrip("+")  # Hydra's '+key=value' adds a key; same for us
    parts = [p for p in key.split(".") if p]
    if not parts or parts == [ROOT_KEY]:
        raise ProfilerConfigError([(shown(text), "override has no key")])
    depth = len(parts) - (parts[0] == ROOT_KEY)   # the optional `profiler_config.` prefix is not a level
    if depth > MAX_OVERRIDE_DEPTH:
        raise ProfilerConfigError([(text[:120] + ("..." if len(text) > 120 else ""),
                                    f"override key has {depth} dotted parts; the config is 3 levels deep "
                                    f"(e.g. profiler_config.integrated.stage=actor_update)")])
    try:
        value = yaml_bounded.load_value(raw_value)
    except yaml_bounded.YamlRefused as exc:
        raise ProfilerConfigError([(shown(text), f"value: {exc}")]) from None
    return Override(text, tuple(parts), value)


def parse_overrides(overrides: Any) -> list[Override]:
    """Every override parsed; every problem of all of them reported together."""
    if overrides is None:
        overrides = ()
    if isinstance(overrides, str):
        overrides = [overrides]
    if isinstance(overrides, (bytes, bytearray)) or not isinstance(overrides, Iterable):
        raise ProfilerConfigError([("overrides", f"got {describe(overrides)}; expected a list of strings such as "
                                                 f"['profiler_config.integrated.stage=actor_update']")])
    errors: list[tuple[str, str]] = []
    out: list[Override] = []
    for text in overrides:
        if not isinstance(text, str):
            errors.append(("overrides", f"got {describe(text)} in the list; each override is a string key=value"))
            continue
        try:
            out.append(parse_override(text))
        except ProfilerConfigError as exc:
            errors.extend(exc.problems)
    if errors:
        raise ProfilerConfigError(errors)
    return out


def shown(text: str, n: int = 120) -> str:
    """An override as shown in an error: its first characters (a value may be megabytes)."""
    return text if len(text) <= n else text[:n] + "..."


def with_override(node: Any, parts: Sequence[str], value: Any) -> dict[str, Any]:
    """`node` with `value` at the dotted key `parts` (a non-mapping on the way becomes a mapping);
    only the mappings along the path are copied: `node` itself, perhaps the caller's, is unchanged."""
    out = dict(node) if isinstance(node, Mapping) else {}
    out[parts[0]] = value if len(parts) == 1 else with_override(out.get(parts[0]), parts[1:], value)
    return out


def load_config(source: Any = None, overrides: Iterable[str] = (), *, check_paths: bool = True) -> ProfilerConfig:
    """Load and validate a profiler config.

    `source`: a YAML path, a dict, an OmegaConf/Hydra DictConfig, or None (all defaults); either a
    whole training YAML (the `profiler_config` key is found) or the block itself.
    `overrides`: dotted `key=value` strings, e.g. `profiler_config.integrated.stage=actor_update`
    (the `profiler_config.` prefix is optional; values are parsed as YAML).
    Returns typed, immutable objects; raises ProfilerConfigError listing every problem, and nothing
    else whatever the input (docs/reliability.md).
    """
    try:
        return _load(source, overrides, check_paths)
    except RecursionError:
        raise ProfilerConfigError([(ROOT_KEY, "nested too deeply to be a config (a value inside thousands of lists or mappings)")]) from None


def _load(source: Any, overrides: Any, check_paths: bool) -> ProfilerConfig:
    """The pipeline: each step takes the previous one's result."""
    parsed = parse_overrides(overrides)
    data, origin = read_source(source)
    layout = dialects.detect(data)
    theirs, ours = split_parsed(layout, parsed)
    block = find_our_block(apply_theirs(data, theirs), origin, layout)
    block = apply_ours(deep_copy(block), ours)   # the one copy: validate() keeps nothing of the caller's
    return validate(block, check_paths=check_paths)


def split_parsed(layout: dialects.Layout, parsed: list[Override]) -> tuple[list[Override], list[Override]]:
    """(the overrides written in the framework's own keys, for its data; those for our block). Only
    a verl or RLinf layout has keys of its own: for any other, all of them address our block."""
    if not layout.foreign:
        return [], parsed
    return [o for o in parsed if not o.ours], [o for o in parsed if o.ours]


def apply_theirs(data: Any, theirs: Sequence[Override]) -> Any:
    """`data` with the overrides in its own keys set (before it is translated); `data` is unchanged."""
    for o in theirs:
        data = with_override(data, o.parts, o.value)
    return data


def apply_ours(block: dict[str, Any], ours: Sequence[Override]) -> dict[str, Any]:
    """Our block with our overrides set (the `profiler_config.` prefix optional)."""
    for o in ours:
        block = with_override(block, o.block_parts, o.value)
    return block


def split_overrides(data: Any, overrides: Iterable[str]) -> tuple[Any, list[str]]:
    """(Kept for callers of the old two-step loading; load_config does this itself.) For a verl or
    RLinf config: a copy of it with the overrides written in its own keys applied, and the texts of
    the overrides that address our block."""
    theirs, ours = split_parsed(dialects.detect(data), parse_overrides(overrides))
    return apply_theirs(data, theirs), [o.text for o in ours]
