"""The training-thread part of record_samples: the needed attributes pulled out of the engine's
objects into tuples and dict copies, nothing checked, converted or encoded (engines.py does that
at the next step() / stop()).

Each kind has a tight loop that assumes a batch of that kind (the first item says which); any
exception in it (a mixed batch, an object that is not what it seems) reruns the batch through
`pull_each`, which reads each item on its own and turns what it cannot read into a problem line.

What is kept (names as vLLM 0.33 and SGLang 0.5.23 spell them, docs/engines_api.md):
- vllm: `(request_id, len(prompt_token_ids) or None, ((index, len(token_ids), finish_reason), ...),
  (arrival_time, queued_ts, scheduled_ts, first_token_ts, last_token_ts, num_preemptions) or None)`
  per RequestOutput
  (its CompletionOutputs; its `metrics`, a RequestStateStats or None);
- sglang: a copy of the result's `meta_info`;
- dict: a copy of the caller's dict.
"""
from __future__ import annotations

from itertools import islice
from typing import Any, Iterable, Mapping

VLLM, SGLANG, DICT = "vllm", "sglang", "dict"
SOURCES = (VLLM, SGLANG, DICT)
METRIC_FIELDS = ("arrival_time", "queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts", "num_preemptions")


class Pulled:
    """What one record_samples() call took: raw items per source (in first-seen order), the items
    past the bound (`dropped`), and what could not be read (`problems`)."""

    __slots__ = ("groups", "dropped", "problems")

    def __init__(self, groups: dict[str, list[Any]], dropped: int, problems: list[str]):
        self.groups, self.dropped, self.problems = groups, dropped, problems

    @property
    def taken(self) -> int:
        return sum(len(v) for v in self.groups.values())


def pull(items: Iterable[Any], limit: int) -> Pulled:
    """At most `limit` items of `items` pulled (the rest counted, not read)."""
    it = iter(items)
    head = list(islice(it, limit)) if limit > 0 else []
    dropped = sum(1 for _ in it) if len(head) >= limit else 0
    if not head:
        return Pulled({}, dropped, [])
    try:
        if isinstance(head[0], dict):
            return Pulled(_dicts(head), dropped, [])
        return Pulled({VLLM: _vllm(head)}, dropped, [])
    except Exception:   # not the batch the first item promised: item by item
        return pull_each(head, dropped)


def _vllm(head: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    append = out.append
    for o in head:
        m = o.metrics
        p = o.prompt_token_ids
        outs = o.outputs
        if len(outs) == 1:
            c = outs[0]
            comps: tuple[Any, ...] = ((c.index, len(c.token_ids), c.finish_reason),)
        else:
            comps = tuple([(c.index, len(c.token_ids), c.finish_reason) for c in outs])
        append((o.request_id, None if p is None else len(p), comps,
                None if m is None else (m.arrival_time, m.queued_ts, m.scheduled_ts, m.first_token_ts, m.last_token_ts,
                                        getattr(m, "num_preemptions", None))))
    return out


def _dicts(head: list[Any]) -> dict[str, list[Any]]:
    plain: list[Any] = []
    meta: list[Any] = []
    for d in head:
        info = d.get("meta_info")
        if info is None:
            plain.append(d.copy())
        else:
            meta.append(info.copy())
    groups: dict[str, list[Any]] = {}
    if meta:
        groups[SGLANG] = meta
    if plain:
        groups[DICT] = plain
    return groups


def pull_each(head: list[Any], dropped: int = 0) -> Pulled:
    """Each item read on its own; what cannot be read becomes a problem line and is skipped."""
    groups: dict[str, list[Any]] = {}
    problems: list[str] = []
    for i, x in enumerate(head):
        try:
            kind, raw = _one(x, i, problems)
        except Exception as exc:
            problems.append(f"items[{i}]: could not be read ({type(exc).__name__}: {exc}): skipped")
            continue
        if kind is not None:
            groups.setdefault(kind, []).append(raw)
    return Pulled(groups, dropped, problems)


def _one(x: Any, i: int, problems: list[str]) -> tuple[str | None, Any]:
    if isinstance(x, Mapping):
        meta = x.get("meta_info")
        if meta is None:
            return DICT, dict(x)
        if isinstance(meta, Mapping):
            return SGLANG, dict(meta)
        problems.append(f"items[{i}]: meta_info is {type(meta).__name__}, not a dict: skipped")
        return None, None
    if hasattr(x, "request_id") and hasattr(x, "outputs"):
        return VLLM, _vllm_one(x, i, problems)
    problems.append(f"items[{i}]: {type(x).__name__} is not a vLLM RequestOutput, an SGLang result dict "
                    "(with meta_info) or a sample dict: skipped")
    return None, None


def _vllm_one(o: Any, i: int, problems: list[str]) -> tuple[Any, ...]:
    """One RequestOutput-like object read attribute by attribute (a missing one is None)."""
    p = getattr(o, "prompt_token_ids", None)
    try:
        n_prompt = None if p is None else len(p)
    except TypeError:
        problems.append(f"items[{i}]: prompt_token_ids is {type(p).__name__}, not a sequence")
        n_prompt = None
    comps = []
    for c in getattr(o, "outputs", None) or ():
        tokens = getattr(c, "token_ids", None)
        try:
            n = None if tokens is None else len(tokens)
        except TypeError:
            n = None
        comps.append((getattr(c, "index", len(comps)), n, getattr(c, "finish_reason", None)))
    m = getattr(o, "metrics", None)
    times = None if m is None else tuple(getattr(m, name, None) for name in METRIC_FIELDS)
    return getattr(o, "request_id", None), n_prompt, tuple(comps), times
