"""report.html's templates compiled once and kept (results/report/__init__.py, _KeptTemplates; issue
34): the page is the same bytes with the kept code, with a corrupt entry and with a directory that
cannot be written; and the process that writes the page does not import rich. On a real trace (HTA's
trace_diff control, MIT, tests/data/hta)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results import report

REPO_ROOT = Path(__file__).resolve().parents[1]
REAL = REPO_ROOT / "tests" / "data" / "hta" / "trace_diff" / "control" / "control.json.gz"


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    root = tmp_path_factory.mktemp("trace")
    shutil.copy(REAL, root / REAL.name)
    summary, code = analyse_directory(root, jobs=1, progress=False, html=False, write=False)
    assert code == 0
    return summary


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """report's environment with its kept templates in tmp_path/kept, none loaded yet."""
    d = tmp_path / "kept"
    d.mkdir()
    monkeypatch.setattr(report._ENV, "bytecode_cache", report._KeptTemplates(str(d)))
    report._ENV.cache.clear()
    yield d
    report._ENV.cache.clear()


def _fresh_render(summary: dict) -> str:
    report._ENV.cache.clear()   # the loaded templates: so that the kept code is read again
    return report.render(summary)


def test_the_kept_templates_give_the_same_page(summary, kept, monkeypatch):
    first = _fresh_render(summary)   # compiled, and kept
    entries = sorted(kept.iterdir())
    assert entries, "no compiled template was kept"
    assert _fresh_render(summary) == first   # from the kept code
    monkeypatch.setattr(report._ENV, "bytecode_cache", None)
    assert _fresh_render(summary) == first   # compiled without any cache


def test_a_corrupt_entry_is_compiled_again(summary, kept):
    first = _fresh_render(summary)
    for f in kept.iterdir():
        f.write_bytes(b"j2\x00not a code object")
    assert _fresh_render(summary) == first
    for f in kept.iterdir():
        f.write_bytes(b"")
    assert _fresh_render(summary) == first


def test_a_directory_that_cannot_be_written_leaves_the_page_as_it_is(summary, kept):
    first = _fresh_render(summary)
    shutil.rmtree(kept)   # the kept code gone and nowhere to write it: compiled each time
    assert _fresh_render(summary) == first
    assert not kept.exists()


def test_the_page_process_imports_no_rich():
    code = ("import sys; import mindspeed_profiler.analysis.results.report; "
            "print(sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
