"""Issue 45, review: one rule per concept, in one place.

- Turning a value read from a file (or given by a caller) into a number is analysis/parsing/numbers.py's
  job: code added since it had grown its own `_int` / `_number` / `_num` again (timeline/stream.py,
  timeline/spill.py, parsing/samples.py, parsing/ascend_identity.py, ondemand/states.py,
  backends/held_session.py, analyzers/auto_capture_rules.py). A function named as such a helper
  anywhere else fails here.
- The map between the profilers' keywords and our `integrated` fields (profile_memory <->
  profile_with_memory, ...) is core/capture_options.py's FLAGS: a (keyword, field) pair written out
  anywhere else fails here.

Both read the package's source (ast), so a new module is checked without being listed.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path


from mindspeed_profiler.core.capture_options import FIELD_OF_KEYWORD

PACKAGE = Path(__file__).resolve().parents[1] / "mindspeed_profiler"
NUMBERS = "analysis/parsing/numbers.py"
KEYWORD_MAP = "core/capture_options.py"
# a coercion helper's name, leading underscores aside: _int, _num, as_real, to_float, _nonneg_int, ...
COERCION_NAME = re.compile(r"^(to_|as_|nonneg_|non_negative_)?(int|integer|num|number|float|real|finite|ns)$")

@functools.lru_cache(maxsize=None)
def _modules() -> list[tuple[str, ast.Module]]:
    return [(p.relative_to(PACKAGE).as_posix(), ast.parse(p.read_text(encoding="utf-8")))
            for p in sorted(PACKAGE.rglob("*.py"))]


def coercion_helpers() -> set[tuple[str, str]]:
    """(module, function) of every function named as a number-coercion helper outside numbers.py."""
    return {(rel, node.name) for rel, tree in _modules() if rel != NUMBERS for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and COERCION_NAME.match(node.name.lstrip("_"))}


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def keyword_pairs(modules: list[tuple[str, ast.Module]] | None = None) -> set[tuple[str, str]]:
    """(module, keyword) of every profile() keyword written beside its `integrated` field outside
    capture_options.py: a dict entry `keyword: field`, or a tuple (keyword, field, ...)."""
    out = set()
    for rel, tree in modules if modules is not None else _modules():
        if rel == KEYWORD_MAP:
            continue
        for node in ast.walk(tree):
            pairs = []
            if isinstance(node, ast.Dict):
                pairs = [(_text(k), _text(v)) for k, v in zip(node.keys, node.values) if k is not None]
            elif isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) >= 2:
                pairs = [(_text(node.elts[0]), _text(node.elts[1]))]
            out |= {(rel, k) for k, v in pairs if k in FIELD_OF_KEYWORD and v == FIELD_OF_KEYWORD[k]}
    return out


def test_the_finders_see_what_they_look_for():
    """Each finder run on a module that has the thing: it is found (the checks below can fail)."""
    tree = ast.parse("def _int(v):\n    return v\n\nx = {'profile_memory': 'profile_with_memory'}\n"
                     "y = (('with_stack', 'profile_with_stack'),)\n")
    found = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and COERCION_NAME.match(node.name.lstrip("_"))}
    assert found == {"_int"}
    assert {"_num", "as_real", "_nonneg_int", "to_float", "_number"} == {
        n for n in ("_num", "as_real", "_nonneg_int", "to_float", "_number", "_positive_int", "_text", "shown")
        if COERCION_NAME.match(n.lstrip("_"))}
    assert keyword_pairs([("x.py", tree)]) == {("x.py", "profile_memory"), ("x.py", "with_stack")}


def test_no_coercion_helper_outside_numbers_py():
    new = coercion_helpers()
    assert not new, f"use analysis/parsing/numbers.py (add the rule there if it has none): {sorted(new)}"


def test_no_second_keyword_to_field_map():
    new = keyword_pairs()
    assert not new, f"read core/capture_options.FLAGS / FIELD_OF_KEYWORD instead: {sorted(new)}"
