"""Other frameworks' profiler settings read as ours: MindSpeed-RL, verl and RLinf (docs/migrating.md).

`translate(data)` takes a whole training YAML, or just its profiler blocks, as plain data and returns
a `Translation`: which framework wrote it, our `profiler_config` block, and notes, one per setting
that has no exact equivalent here (each says what is done instead). A value that is wrong in the
framework's own terms is a `ProfilerConfigError` naming the framework's key, all problems together.
`translate` is pure: it writes nothing and logs nothing.

- MindSpeed-RL: its `profiler_config.integrated` is ours (hyphenated keys read as its loader reads
  them, in config.py). Here: `profiler_config.register_stages` (a key MindSpeed-RL's own loader never
  reads, so the YAML still works there) is moved into `integrated`.
- verl: `global_profiler` (tool, steps, profile_continuous_steps, save_path, global_tool_config) and
  each role's `profiler` (enable, all_ranks, ranks, tool_config.<tool>) under actor_rollout_ref.actor
  / .rollout / .ref, critic, reward_model. npu / torch / torch_memory become the `integrated`
  section (per-role ranks as `role_ranks`, discrete as one capture per stage call); nsys becomes the
  `system` section. OmegaConf's plain interpolations (`${a.b}`, `${oc.select:a.b,default}`), which
  verl's trainer YAMLs use between these blocks, are resolved.
- RLinf: `cluster.tracer` (enable, output_file) becomes `tracer`, `cluster.profiling` (or a profile
  preset file on its own) becomes `system`, its 0-based steps counted from 1.

`load_config` (config/load.py) calls `detect` once, on the data as given (its `Layout` says whose
layout it is and where their settings are), applies the overrides written in the framework's own
keys, then `Layout.translate` and `report`: the notes go to the `mindspeed_profiler.config` logger,
or to `collect_notes()` (which check-config prints). One module per framework: verl.py, rlinf.py;
reader.py reads any of them.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from mindspeed_profiler.config.dialects.reader import DIALECT_TITLES, STAGES_KEY, Note, Translation, is_mapping
from mindspeed_profiler.config.dialects.rlinf import from_rlinf, rlinf_shape, rlinf_view
from mindspeed_profiler.config.dialects.verl import from_verl, verl_shape, verl_view
from mindspeed_profiler.config.errors import ROOT_KEY

__all__ = ["Layout", "Translation", "detect", "translate", "translate_kind", "find_block", "report", "collect_notes",
           "foreign_layout", "DIALECT_TITLES"]

log = logging.getLogger("mindspeed_profiler.config")

def _with_declared_stages(data: Mapping[str, Any]) -> Translation | None:
    """profiler_config.register_stages (where MindSpeed-RL's loader, which reads only `integrated`,
    never looks) moved into `integrated`; None when there is nothing to move."""
    block = data[ROOT_KEY]
    if not is_mapping(block) or STAGES_KEY not in block:
        return None
    block = dict(block)
    names = block.pop(STAGES_KEY)
    integ = block.get("integrated")
    if integ is not None and not is_mapping(integ):
        return None   # validate() reports the section
    integ = dict(integ or {})
    if STAGES_KEY in integ:
        both = [integ[STAGES_KEY], names]
        merged = [n for v in both for n in ([v] if isinstance(v, str) else v if isinstance(v, (list, tuple)) else [v])]
        integ[STAGES_KEY] = list(dict.fromkeys(merged))
    else:
        integ[STAGES_KEY] = names
    block["integrated"] = integ
    return Translation("mindspeed_rl", block, ())


def _foreign_parts(data: Mapping[str, Any]) -> list[Note]:
    """verl / RLinf profiler settings in a YAML that also has profiler_config (which wins)."""
    notes = []
    gp = data.get("global_profiler")
    if is_mapping(gp) and gp.get("tool") is not None:
        notes.append(("global_profiler", f"not read: {ROOT_KEY} is present and decides"))
    cluster = data.get("cluster")
    for part in ("tracer", "profiling"):
        if is_mapping(cluster) and is_mapping(cluster.get(part)):
            notes.append((f"cluster.{part}", f"not read: {ROOT_KEY} is present and decides"))
    return notes


def _with_our_block(data: Mapping[str, Any]) -> Translation | None:
    """A YAML with profiler_config: register_stages moved, and the other frameworks' blocks noted
    as not read; None when there is nothing to move or note."""
    moved = _with_declared_stages(data)
    notes = tuple(_foreign_parts(data))
    if moved is None and not notes:
        return None
    if moved is None:
        block = data[ROOT_KEY]
        if not is_mapping(block):
            return None
        moved = Translation("mindspeed_rl", dict(block), ())
    return Translation(moved.dialect, moved.block, notes)


@dataclass(frozen=True)
class Layout:
    """Whose layout a config's data has, decided once by `detect`: `dialect` is "verl" or "rlinf"
    (their keys; `shape` says where their settings are), "mindspeed_rl" (a profiler_config block),
    or None (ours, or no framework's)."""

    dialect: str | None = None
    shape: str = ""

    @property
    def foreign(self) -> bool:
        """Whether overrides written in the framework's own keys apply to its data."""
        return self.dialect in ("verl", "rlinf")

    def translate(self, data: Any) -> Translation | None:
        """`data` (of this layout; the framework's overrides applied) as our block, or None when it
        needs nothing."""
        if self.dialect == "verl":
            return from_verl(*verl_view(self.shape, data))
        if self.dialect == "rlinf":
            return from_rlinf(data, *rlinf_view(self.shape, data))
        if self.dialect == "mindspeed_rl":
            return _with_our_block(data)
        return None


def detect(data: Any) -> Layout:
    """The layout of `data` (plain data): a profiler_config block wins, then verl's, then RLinf's."""
    if not is_mapping(data):
        return Layout()
    if ROOT_KEY in data:
        return Layout("mindspeed_rl")
    shape = verl_shape(data)
    if shape is not None:
        return Layout("verl", shape)
    shape = rlinf_shape(data)
    return Layout("rlinf", shape) if shape is not None else Layout()


def translate(data: Any) -> Translation | None:
    """The framework's settings in `data` (a whole training YAML or its profiler blocks, plain data)
    as our block, or None when `data` is ours (or no framework's) and needs nothing."""
    return detect(data).translate(data)


_collector: contextvars.ContextVar[list | None] = contextvars.ContextVar("mindspeed_profiler_dialect_notes", default=None)


@contextlib.contextmanager
def collect_notes() -> Iterator[list[tuple[str, str, str]]]:
    """Within it, load_config's translation notes are gathered as (framework, where, what) instead of logged."""
    notes: list[tuple[str, str, str]] = []
    token = _collector.set(notes)
    try:
        yield notes
    finally:
        _collector.reset(token)


def report(found: Translation | None) -> dict[str, Any] | None:
    """A translation's notes reported (to `collect_notes()` within it, else logged); its block."""
    if found is None:
        return None
    sink = _collector.get()
    for where, message in found.notes:
        if sink is not None:
            sink.append((DIALECT_TITLES[found.dialect], where, message))
        else:
            log.warning("%s config: %s: %s", DIALECT_TITLES[found.dialect], where, message)
    return found.block


def find_block(data: Any) -> dict[str, Any] | None:
    """Our block for a framework's config (its notes reported), else None."""
    return report(translate(data))


def translate_kind(data: Mapping[str, Any]) -> str | None:
    """Which framework's layout `data` has ('verl', 'rlinf'), without translating it."""
    if verl_shape(data) is not None:
        return "verl"
    return "rlinf" if rlinf_shape(data) is not None else None


def foreign_layout(data: Any) -> bool:
    """Whether `data` is a verl or RLinf config without our block (overrides in its own keys apply to it)."""
    return detect(data).foreign
