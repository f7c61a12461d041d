"""Reading another framework's config: OmegaConf's plain interpolations resolved, values checked
with our own field checkers but reported at the framework's keys, unknown keys a problem (close to a
known one: a typo) or a note; and what a translation is."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from mindspeed_profiler.core import yaml_bounded
from mindspeed_profiler.config.errors import ProfilerConfigError
from mindspeed_profiler.config.schema import SECTION_SCHEMAS

DIALECT_TITLES = {"mindspeed_rl": "MindSpeed-RL", "verl": "verl", "rlinf": "RLinf"}
Note = tuple[str, str]  # (where in their config, what happens here)
STAGES_KEY = "register_stages"  # the stages a trainer declares, in any dialect


@dataclass(frozen=True)
class Translation:
    dialect: str                 # a key of DIALECT_TITLES
    block: dict[str, Any]        # our profiler_config block (integrated / tracer / system)
    notes: tuple[Note, ...]      # settings without an exact equivalent, and what is done instead


ABSENT = object()
_INTERPOLATION = re.compile(r"^\$\{(.*)\}$", re.S)
_KEY_PATH = re.compile(r"^[A-Za-z_][\w\-]*(\.[A-Za-z_][\w\-]*)*$")


class Reader:
    """Their config, read with OmegaConf's plain interpolations resolved; collects problems and notes."""

    def __init__(self, root: Mapping[str, Any]):
        self.root = root
        self.problems: list[tuple[str, str]] = []
        self.notes: list[Note] = []

    def note(self, where: str, message: str) -> None:
        if (where, message) not in self.notes:
            self.notes.append((where, message))

    def _lookup(self, dotted: str, depth: int) -> Any:
        node: Any = self.root
        for part in dotted.split("."):
            node = self.resolve(node, dotted, depth)
            if not isinstance(node, Mapping) or part not in node:
                return ABSENT
            node = node[part]
        return node

    def resolve(self, value: Any, where: str, depth: int = 0) -> Any:
        """`value` with a whole-value interpolation replaced by what it points at (recursively);
        one this reader cannot follow (another resolver, a relative key) is a note and reads as unset."""
        if not isinstance(value, str):
            return value
        m = _INTERPOLATION.match(value.strip())
        if m is None:
            return value
        expr = m.group(1).strip()
        default: Any = ABSENT
        if expr.startswith("oc.select:"):
            key, comma, rest = expr[len("oc.select:"):].partition(",")
            expr = key.strip()
            if comma:
                try:
                    default = yaml_bounded.load_value(rest)
                except yaml_bounded.YamlTooLarge as exc:
                    raise ProfilerConfigError([(where, f"the default of {value[:80]!r}...: {exc}")]) from None
                except yaml_bounded.YamlRefused:   # not YAML: OmegaConf keeps the text
                    default = rest.strip()
            else:
                default = None
        if depth > 16:
            self.note(where, f"{value!r} refers to itself (or nests too deep): read as unset")
            return None
        if not _KEY_PATH.match(expr):
            self.note(where, f"{value!r} cannot be resolved without Hydra; read as unset (pass the composed "
                             "DictConfig to load_config, or write the value)")
            return None
        found = self._lookup(expr, depth + 1)
        if found is ABSENT:
            if default is ABSENT:
                self.note(where, f"{value!r} points at nothing; read as unset")
                return None
            return self.resolve(default, where, depth + 1)   # a default may itself be an interpolation (verl 0.9's YAML)
        return self.resolve(found, where, depth + 1)

    def get(self, node: Any, dotted: str, where: str, default: Any = None) -> Any:
        """node[a][b]... (interpolations resolved at every level), or `default`."""
        for part in dotted.split("."):
            node = self.resolve(node, where)
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        node = self.resolve(node, where)
        return default if node is None and default is not None else node

    def check(self, section: str, field_name: str, value: Any, where: str) -> bool:
        """Check `value` with our field's own checker, reporting at their key. True if valid."""
        before = len(self.problems)
        SECTION_SCHEMAS[section][field_name](value, where, self.problems)
        return len(self.problems) == before

    def flag(self, node: Any, key: str, where: str, default: bool) -> bool:
        value = self.get(node, key, f"{where}.{key}")
        if value is None:
            return default
        return value if self.check("integrated", "profile", value, f"{where}.{key}") else default

    def known_keys(self, node: Any, known: Sequence[str], where: str, whose: str) -> None:
        """A key close to a known one is a typo (a problem); any other unknown key is ignored, with a note."""
        if not isinstance(node, Mapping):
            return
        for key in node:
            if key in known:
                continue
            close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.8)
            if close:
                self.problems.append((f"{where}.{key}", f"unknown {whose} key {key!r} (did you mean {close[0]!r}?); "
                                                         f"{whose} keys: {', '.join(k for k in known if k != '_target_')}"))
            else:
                self.note(f"{where}.{key}", f"not a {whose} setting: ignored")

    def finish(self, dialect: str, block: dict[str, Any]) -> Translation:
        if self.problems:
            raise ProfilerConfigError(self.problems)
        return Translation(dialect, block, tuple(self.notes))


def is_mapping(value: Any) -> bool:
    return isinstance(value, Mapping)
