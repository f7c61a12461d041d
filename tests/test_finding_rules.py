"""The advisor's finding rules come from one registry (analysis/models/finding_rules.py): each registered
rule has its row in docs/diagnosis.md (the table is generated from the registry) and a test that
names its id; the advisor runs exactly the registered rules."""
from __future__ import annotations

import re

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler.analysis.analyzers import advisor
from mindspeed_profiler.analysis.models import finding_rules
from mindspeed_profiler.analysis.models.finding_rules import REGISTRY, finding_rule


def test_the_docs_table_is_generated_from_the_registry():
    page = (REPO_ROOT / "docs" / "diagnosis.md").read_text()
    assert finding_rules.markdown() in page, \
        "docs/diagnosis.md: paste the output of `python -m mindspeed_profiler.analysis.analyzers.advisor` into \"The advisor\""
    for rule_id in REGISTRY:
        assert f"| `{rule_id}` |" in page


def test_every_rule_has_a_test_naming_its_id():
    texts = {p.name: p.read_text() for p in (REPO_ROOT / "tests").glob("test_*.py") if p.name != "test_finding_rules.py"}
    for rule_id in REGISTRY:
        where = [n for n, t in texts.items() if re.search(rf"\b{re.escape(rule_id)}\b", t)]
        assert where, f"finding rule {rule_id!r}: no test names it (tests/test_advisor.py has one per rule)"


def test_the_advisor_runs_the_registered_rules_and_each_finding_is_of_one():
    assert advisor.RULES == tuple(r.check for r in REGISTRY.values())
    assert len(REGISTRY) >= 11 and all(r.triggers and r.impact and r.reads for r in REGISTRY.values())


def test_a_second_rule_under_one_id_is_refused():
    with pytest.raises(ValueError, match="comm_bound"):
        finding_rule("comm_bound", triggers="t", impact="i", reads="r")(lambda summary: [])


def test_a_rule_registered_later_runs_by_default(monkeypatch):
    monkeypatch.setitem(REGISTRY, "always", finding_rules.FindingRule(
        "always", lambda summary: [advisor._finding("always", "t", 0.5, {}, "a", "the-advisor")], "t", "i", "r"))
    assert [f["id"] for f in advisor.findings({})] == ["always"]
