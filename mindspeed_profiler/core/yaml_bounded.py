"""YAML from text someone typed or wrote (a config file, an override value, `trigger --set`, a
verl `${oc.select:key,default}` default): safe_load with a bound on alias expansion. A few hundred
bytes of nested anchors ("billion laughs") stand for billions of nodes; they are refused from the
composed graph (a memo keeps the count linear in the text) before anything is built from them."""
from __future__ import annotations

from typing import Any

MAX_NODES = 200_000        # nodes of one document with every alias expanded
MAX_VALUE_CHARS = 1 << 20  # an override / --set value (a config file is bounded by MAX_NODES only)
MAX_ERROR_CHARS = 500      # of a YAML error shown back (the text may be huge)


class YamlRefused(ValueError):
    """Not valid YAML, or one that expands beyond MAX_NODES; str() says which, briefly."""


class YamlTooLarge(YamlRefused):
    """Valid or not, too large to read: over max_chars, or aliases expanding beyond max_nodes."""


def expanded_size(node: Any, memo: dict[int, int], limit: int) -> int:
    """How many nodes `node` (a composed YAML node) stands for with every alias expanded; stops
    counting past `limit`. Aliases share node objects, so the memo keeps this linear in the text."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = limit + 1  # a node inside itself (a recursive alias) expands without end
    total = 1
    value = node.value
    if isinstance(value, list):
        for item in value:
            for child in (item if isinstance(item, tuple) else (item,)):
                total += expanded_size(child, memo, limit)
                if total > limit:
                    break
            if total > limit:
                break
    memo[key] = total
    return total


def load(text: str, max_nodes: int = MAX_NODES, max_chars: int | None = None) -> Any:
    """yaml.safe_load(text) within the bounds; YamlRefused otherwise (RecursionError for a value
    nested thousands deep is the caller's to report)."""
    import yaml

    if max_chars is not None and len(text) > max_chars:
        raise YamlTooLarge(f"{len(text):,} characters; a value here is at most {max_chars:,}")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None and expanded_size(node, {}, max_nodes) > max_nodes:
            raise YamlTooLarge(f"YAML aliases expand to more than {max_nodes:,} nodes (a \"billion laughs\"?); "
                              "expand the anchors by hand or use fewer")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        msg = str(exc)
        raise YamlRefused(f"not valid YAML: {msg[:MAX_ERROR_CHARS]}{'...' if len(msg) > MAX_ERROR_CHARS else ''}") from None


def load_value(text: str) -> Any:
    """An override / --set value: empty is None, else load() within MAX_VALUE_CHARS."""
    return load(text, max_chars=MAX_VALUE_CHARS) if text.strip() else None
