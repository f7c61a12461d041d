"""formats.py, the on-disk contract: names round-trip, the writer and the contract agree, and
docs/formats.md names what formats.py defines."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindspeed_profiler.core import formats
from mindspeed_profiler import load_config
from mindspeed_profiler.backends import backend_classes, layout
from mindspeed_profiler.runtime.manifest import capture_metadata
from conftest import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "formats.md").read_text()


@settings(max_examples=300, deadline=None)
@given(role=st.from_regex(formats.ROLE_RE, fullmatch=True).filter(lambda r: len(r) < 400),
       rank=st.integers(0, 10**6), first=st.integers(1, 10**7), n=st.integers(0, 50), call=st.integers(1, 99),
       host=st.text(min_size=1, max_size=300), suffix=st.sampled_from(sorted(formats.CAPTURE_FORMATS)),
       pid=st.integers(1, 2**22))
def test_capture_dir_names_round_trip(role, rank, first, n, call, host, suffix, pid):
    worker = layout.worker_name(role, rank, first, first + n, call, host)
    name = formats.capture_dir_name(worker, suffix, pid, "20261130120000123")
    assert len(name.encode()) <= 255
    p = formats.parse_capture_dir_name(name)
    assert p is not None, name
    assert (p["rank"], p["first"], p["last"], p["call"], p["pid"], p["suffix"]) == (rank, first, first + n, call, pid, suffix)
    assert p["format"] == formats.CAPTURE_FORMATS[suffix] == formats.capture_format_of_dir(name)
    if len(worker) < layout.MAX_WORKER_NAME - 20:   # not shortened: the role and host come back as written
        assert p["role"] == role and p["host"] == formats.host_token(host)


def test_every_backend_writes_a_known_format():
    assert {b.suffix for b in backend_classes()} <= set(formats.CAPTURE_FORMATS)


def test_the_metadata_writer_writes_exactly_the_contract_keys(tmp_path):
    cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(tmp_path)}}).integrated
    meta = capture_metadata(cfg, run_id="r1", role="actor", stage=None, rank=0, world_size=1, local_rank=None, first=1, last=1,
                            warmup=0, requested_warmup=0, backend="torch", device="cpu", host="h", notes=[])
    assert tuple(meta) == formats.META_KEYS
    assert meta["stage"] == formats.ALL_DIR and meta["schema"] == formats.META_SCHEMA


@pytest.mark.parametrize("name", [
    formats.RUN_FILE, formats.META_FILE, formats.TIMELINE_FILE, formats.SEGMENT_SUFFIX, formats.ASCEND_OUTPUT_DIR,
    formats.SUMMARY_FILE, formats.REPORT_FILE, formats.DB_FILE, formats.TRACE_FILE_SUFFIX,
    formats.TIMELINE_DIR + "/", formats.SYSTEM_DIR + "/", formats.ANALYSIS_DIR + "/",
    *[f'cat: "{c}"' for c in (formats.CAT_STAGE, formats.CAT_ITERATION, formats.CAT_RPC, formats.CAT_PROFILER,
                               formats.CAT_MSTX)],
    *[f'"{k}"' for k in formats.META_KEYS],
    *[f'"type": "{t}"' for t in formats.SEG_RECORD_TYPES],
])
def test_docs_name_what_the_contract_defines(name):
    assert name in DOC, f"docs/formats.md does not mention {name!r}"


def test_docs_list_every_capture_suffix():
    for suffix in formats.CAPTURE_FORMATS:
        assert re.search(rf"_{suffix}/", DOC), suffix
