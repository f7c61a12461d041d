"""The registry of the advisor's finding rules: each rule's id, its check and what docs/diagnosis.md
says of it, declared once where the rule is written (advisor.py, `@finding_rule(...)`).

From this registry come the advisor's rules (`advisor.findings` runs them in registration order),
the table of docs/diagnosis.md "The advisor" (`markdown()`; tests/test_finding_rules.py checks the
page holds it) and the check that every rule has a test naming its id.

    python -m mindspeed_profiler.analysis.analyzers.advisor    # docs/diagnosis.md's table of the rules

Standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

Finding = dict
Check = Callable[[dict], list[Finding]]


@dataclass(frozen=True)
class FindingRule:
    """One rule: `id` is the findings' `id`; `triggers`, `impact` and `reads` are the columns of
    its row in docs/diagnosis.md (markdown, as the page shows them)."""

    id: str
    check: Check
    triggers: str
    impact: str
    reads: str


REGISTRY: dict[str, FindingRule] = {}


def finding_rule(rule_id: str, *, triggers: str, impact: str, reads: str) -> Callable[[Check], Check]:
    """Register the decorated check under `rule_id` (a second check under one id is refused: two
    rules would share their findings' ranking and cap)."""
    def register(check: Check) -> Check:
        old = REGISTRY.get(rule_id)
        # the same function again (advisor.py run as __main__ and also imported): not a second rule
        if old is not None and old.check.__qualname__ != check.__qualname__:
            raise ValueError(f"finding rule {rule_id!r} is already registered by {old.check.__qualname__}")
        REGISTRY[rule_id] = FindingRule(rule_id, check, triggers, impact, reads)
        return check
    return register


def named_check(rule_id: str, findings_of: Callable[[dict], list[tuple]], make: Callable[..., Finding]) -> Check:
    """A check named after its rule: `make` (the advisor's finding maker) applied to each argument
    tuple `findings_of(summary)` gives (for rules written outside advisor.py: async_rl.py, memory_rules.py)."""
    def check(summary: dict) -> list[Finding]:
        return [make(*f) for f in findings_of(summary)]
    check.__name__ = check.__qualname__ = rule_id
    return check


def markdown() -> str:
    """docs/diagnosis.md's table of the registered rules, in registration order."""
    lines = ["| id | triggers when | impact | reads |", "|---|---|---|---|"]
    lines += [f"| `{r.id}` | {r.triggers} | {r.impact} | {r.reads} |" for r in REGISTRY.values()]
    return "\n".join(lines)
