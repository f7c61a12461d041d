"""benchmarks/doc_section.py: a benchmark's --write replaces only its own region of a docs page, so
the hand-written readings and device runs beside it survive (bench_profiler_overhead --write used to
rewrite all of docs/perf_profiler.md)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from doc_section import markers, replace_region, write_region  # noqa: E402


def test_a_page_without_the_region_keeps_everything_and_gets_it_at_the_end():
    page = "# Capture cost\n\nA hand-written reading.\n\n## On an H200\n\nDevice figures.\n"
    out = replace_region(page, "bench_x.py", "| table 1 |", "## The latest run", "# Capture cost")
    assert out.startswith(page.rstrip())
    start, end = markers("bench_x.py")
    assert out.endswith(f"## The latest run\n\n{start}\n| table 1 |\n{end}\n")


def test_a_rerun_replaces_only_its_region():
    page = replace_region("# T\n\nbefore\n", "bench_x.py", "old table", "## Latest", "# T") + "\nafter, by hand\n"
    page = replace_region(page, "bench_y.py", "other bench", "## Y", "# T")
    out = replace_region(page, "bench_x.py", "new table", "## Latest", "# T")
    assert "new table" in out and "old table" not in out
    assert "before" in out and "after, by hand" in out and "other bench" in out
    assert out.count("## Latest") == 1


def test_a_missing_page_is_made_with_its_title(tmp_path):
    doc = tmp_path / "perf_x.md"
    write_region(doc, "bench_x.py", "table", "## Latest", "# X")
    assert doc.read_text().startswith("# X\n\n" + markers("bench_x.py")[0])


def test_a_start_marker_without_its_end_is_an_error():
    start, _ = markers("bench_x.py")
    with pytest.raises(ValueError, match="without"):
        replace_region(f"# T\n{start}\ncut off\n", "bench_x.py", "t", "## L", "# T")
