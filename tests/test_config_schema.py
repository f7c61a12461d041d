"""Each field is declared once (dataclass field + checker); the schemas and the docs follow from it."""
from __future__ import annotations

import re
from dataclasses import dataclass, fields

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler import config, load_config
from mindspeed_profiler.config import schema as config_schema
from mindspeed_profiler.config.checks import check_bool
from mindspeed_profiler.config import (
    INTEGRATED_FIELDS,
    MINDSPEED_FIELDS,
    SYSTEM_FIELDS,
    TRACER_FIELDS,
    IntegratedConfig,
    SystemConfig,
    TracerConfig,
    backend_choices,
    setting,
)

DOCS = REPO_ROOT / "docs" / "config.md"
SECTIONS = {"integrated": (IntegratedConfig, INTEGRATED_FIELDS),
            "tracer": (TracerConfig, TRACER_FIELDS),
            "system": (SystemConfig, SYSTEM_FIELDS)}


@pytest.mark.parametrize("section", SECTIONS)
def test_every_field_has_a_checker_and_the_schema_is_the_dataclass(section):
    cls, schema = SECTIONS[section]
    declared = [(f.name, f.metadata.get(config_schema._CHECK)) for f in fields(cls)]
    assert all(callable(check) for _, check in declared), [name for name, check in declared if not callable(check)]
    assert list(schema.items()) == declared  # same names, same checkers, same order


@pytest.mark.parametrize("section", SECTIONS)
def test_derived_schemas_are_read_only(section):
    _, schema = SECTIONS[section]
    with pytest.raises(TypeError):
        schema["new_field"] = schema[next(iter(schema))]  # type: ignore[index]


@pytest.mark.parametrize("section", SECTIONS)
def test_every_default_passes_its_own_checker(section):
    cls, _ = SECTIONS[section]
    for f in fields(cls):
        default = getattr(cls(), f.name)
        problems: list = []
        assert f.metadata[config_schema._CHECK](default, f.name, problems) == default and not problems, f.name


def test_a_field_without_a_checker_is_refused():
    @dataclass(frozen=True)
    class Section:
        checked: bool = setting(False, check_bool)
        unchecked: int = 3

    with pytest.raises(TypeError, match="unchecked"):
        config_schema.schema_of(Section)


def test_mapping_defaults_are_fresh_and_read_only():
    a, b = SystemConfig(), SystemConfig()
    assert a.options == {} and a.options is not b.options
    with pytest.raises(TypeError):
        a.env["X"] = "1"  # type: ignore[index]


def test_mindspeed_fields_are_mindspeed_rl_s_fifteen_in_its_order():
    assert MINDSPEED_FIELDS == (
        "profile", "mstx", "stage", "profile_save_path", "profile_export_type", "profile_step_start",
        "profile_step_end", "profile_level", "profile_with_memory", "profile_record_shapes",
        "profile_with_cpu", "profile_with_npu", "profile_with_module", "profile_analysis", "profile_ranks",
    )
    # the flag, not the position, decides: only integrated fields carry it
    assert not any(f.metadata[config_schema._MINDSPEED] for cls in (TracerConfig, SystemConfig) for f in fields(cls))


def test_backend_values_come_from_backend_choices():
    assert set(backend_choices()) >= {"auto"}
    for choice in backend_choices():
        assert load_config({"integrated": {"backend": choice}}, check_paths=False).integrated.backend == choice
    with pytest.raises(config.ProfilerConfigError) as e:
        load_config({"integrated": {"backend": "no_such_backend"}}, check_paths=False)
    (_, msg), = e.value.problems
    assert all(choice in msg for choice in backend_choices())


def _documented_fields() -> dict[str, set[str]]:
    """Section -> the backticked names in the first cell of the table rows under its `## `section`` headings."""
    found: dict[str, set[str]] = {name: set() for name in SECTIONS}
    section = None
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            heading = re.match(r"## `(\w+)`", line)
            section = heading.group(1) if heading and heading.group(1) in SECTIONS else None
        elif section and line.startswith("|") and not line.startswith("|---"):
            first_cell = line.split("|")[1]
            found[section] |= set(re.findall(r"`(\w+)`", first_cell))
    return found


@pytest.mark.parametrize("section", SECTIONS)
def test_docs_table_rows_match_the_schema(section):
    # a field added without a docs row, or a docs row left behind by a removed field, fails here
    _, schema = SECTIONS[section]
    assert _documented_fields()[section] == set(schema)
