"""Process-level capture's part of the on-disk contract (formats.py): names, the metadata writer,
and docs/formats.md naming what formats.py defines."""
from __future__ import annotations

import pytest

from mindspeed_profiler.core import formats
from mindspeed_profiler.system.backends import system_backend_names
from mindspeed_profiler.system.meta import new_meta
from mindspeed_profiler.system.spec import WorkerSpec
from conftest import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "formats.md").read_text()


def test_names_are_by_group_and_rank():
    assert formats.system_base_name("actor", 3) == "actor_rank3"
    assert formats.system_base_name("Actor Group/x", 0) == "Actor-Group-x_rank0"
    assert formats.system_meta_name("actor", 0) == "actor_rank0.system.json"
    assert formats.system_iterations_name("actor", 0) == "actor_rank0.iterations.jsonl"
    assert formats.system_report_name("py_spy", "actor", 1) == "actor_rank1.py-spy.json"
    with pytest.raises(ValueError):
        formats.system_report_name("perf", "actor", 0)


def test_every_backend_has_a_report_name():
    assert set(system_backend_names()) == set(formats.SYSTEM_REPORTS)
    assert formats.SYSTEM_REPORT_DIRS <= set(formats.SYSTEM_REPORTS)


def test_the_metadata_writer_writes_exactly_the_contract_keys():
    meta = new_meta(WorkerSpec("nsight", "actor", 0, "/o"), tool="nsys", tool_path=None, command=["nsys"],
                    status="running", reason=None, host="h", launcher_pid=1, launched_wall_ns=2)
    assert tuple(meta) == formats.SYSTEM_META_KEYS and meta["status"] in formats.SYSTEM_STATUSES


@pytest.mark.parametrize("name", [
    formats.SYSTEM_META_SUFFIX, formats.SYSTEM_ITERATIONS_SUFFIX, formats.CLOCK_MARK_FUNCTION,
    f'cat: "{formats.CAT_PYSPY}"', "system_tracks",
    *formats.SYSTEM_REPORTS.values(), *[f'"{k}"' for k in formats.SYSTEM_META_KEYS],
    *[f'"type": "{t}"' for t in formats.SYSTEM_RECORD_TYPES], *[f'"{s}"' for s in formats.SYSTEM_STATUSES],
])
def test_docs_name_what_the_contract_defines(name):
    assert name in DOC, f"docs/formats.md does not mention {name!r}"
