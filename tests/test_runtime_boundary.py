"""runtime/: one table of what happens at start / step / stop and at a stage call (boundary.py),
run by the profiler and the stage scope; a disabled profiler has every attribute an enabled one
has; the stage scope and the on-demand listener use the profiler's public interface only."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mindspeed_profiler import IntegratedProfiler
from mindspeed_profiler.capture import observers
from mindspeed_profiler.runtime import boundary
from mindspeed_profiler.runtime.stage_scope import StageScope
from profiler_testutil import profile_config

PKG = Path(__file__).resolve().parents[1] / "mindspeed_profiler"


class _Logged(IntegratedProfiler):
    """Every boundary action logged, then done as the profiler does it."""

    log: list

    def __getattribute__(self, name):
        attr = super().__getattribute__(name)
        if name.startswith("_") and name[1:] in {n for row in boundary.ORDER.values() for n in row}:
            def logged(at, _attr=attr, _name=name[1:]):
                self.log.append((at, _name))
                return _attr(at)
            return logged
        return attr


@pytest.mark.parametrize("enabled", [True, False])
def test_the_profiler_runs_the_table_in_its_order(tmp_path, clean_state, listeners, enabled):
    prof = _Logged(profile_config(tmp_path, profile=enabled, profile_steps=[2]), role="actor", rank=0, world_size=1)
    prof.log = []
    prof.add_observer(observers.Observer())
    observers.subscribe(observers.Observer())
    prof.start()
    with prof.stage("actor_update"):
        pass
    prof.step()
    prof.stop()
    for at, names in boundary.ORDER.items():
        done = [n for b, n in prof.log if b == at]
        # the INLINE actions are statements in the runner, not calls: seen by their effect below
        table = [n for n in names if (enabled or n not in boundary.CAPTURE_ACTIONS) and n not in boundary.INLINE]
        # in the table's order; each action without a guard always, a guarded one when it has work
        assert done == [n for n in table if n in done], (at, done)
        assert set(table) - set(boundary.GUARDS) <= set(done), (at, done)
        assert enabled or not set(done) & boundary.CAPTURE_ACTIONS
    began, ended = prof.iteration_window
    assert prof.iteration is None and began is not None and ended is not None and began <= ended


def test_a_table_naming_a_missing_action_is_refused():
    class NoActions:
        pass

    with pytest.raises(TypeError, match="_tell_listeners"):
        boundary.runners(NoActions, captures=True)


def test_a_disabled_profiler_has_every_attribute_an_enabled_one_has(tmp_path, clean_state):
    on = IntegratedProfiler(profile_config(tmp_path, profile=True), role="actor", rank=0, world_size=1)
    off = IntegratedProfiler(profile_config(tmp_path, profile=False), role="actor", rank=0, world_size=1)
    assert set(vars(on)) == set(vars(off))
    assert off.capturing is None and off.backend is None and off.captures == [] and off.plan is None


def _attributes_read_of(path: Path, owner_names: set[str]) -> set[str]:
    """The attributes read of `owner_names` (a name, or `self.<name>`) in one module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute):
            v = node.value
            name = v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else None
            if name in owner_names:
                found.add(node.attr)
    return found


@pytest.mark.parametrize("module, owners", [("runtime/stage_scope.py", {"p"}), ("ondemand/listener.py", {"owner", "child"}),
                                            ("runtime/session.py", {"p", "prof"})])
def test_the_profiler_is_used_through_public_names_only(module, owners):
    private = sorted(a for a in _attributes_read_of(PKG / module, owners) if a.startswith("_"))
    assert not private, f"{module} reads private attributes of the profiler: {private}"


def test_the_stage_scope_runs_the_stage_row(tmp_path, clean_state):
    prof = IntegratedProfiler(profile_config(tmp_path, profile=True), role="actor", rank=0, world_size=1)
    for name in boundary.STAGE_ENTRY:
        assert callable(getattr(StageScope, "_" + name)) and callable(getattr(StageScope, "_undo_" + name))
    prof.start()
    with prof.stage("actor_update") as scope:
        assert scope.prev is None and prof.iteration_busy
    prof.stop()
