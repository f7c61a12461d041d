"""Other frameworks' spellings of a field are accepted at load as the field (schema.FIELD_ALIASES,
docs/glossary.md); the field given under two names is an error naming both."""
from __future__ import annotations

import pytest

from mindspeed_profiler import ProfilerConfigError, load_config
from mindspeed_profiler.config.schema import FIELD_ALIASES, SECTION_SCHEMAS


def test_each_alias_names_a_field_of_its_section_and_is_not_one():
    for section, aliases in FIELD_ALIASES.items():
        for alias, field in aliases.items():
            assert field in SECTION_SCHEMAS[section] and alias not in SECTION_SCHEMAS[section], (section, alias)


def test_aliases_load_as_their_fields():
    cfg = load_config({"integrated": {"enable": True, "profile_continuous_steps": False},
                       "tracer": {"enabled": True}, "system": {"enable": False, "backend": "py_spy"}})
    assert cfg.integrated.profile is True and cfg.integrated.profile_steps_continuous is False
    assert cfg.tracer.enable is True and cfg.system.enabled is False
    # and as overrides, in a dotted key
    cfg = load_config(None, ["integrated.enable=true", "integrated.profile-continuous-steps=false"])
    assert cfg.integrated.profile is True and cfg.integrated.profile_steps_continuous is False


def test_a_field_under_two_names_is_one_error_naming_both():
    with pytest.raises(ProfilerConfigError) as err:
        load_config({"integrated": {"enable": True, "profile": False, "profile_level": "level9"}})
    text = str(err.value)
    assert "integrated.profile: is given twice, as 'enable' and 'profile'" in text
    assert "profile_level" in text   # every problem at once, as always
