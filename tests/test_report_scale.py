"""report.html at scale: above sections.SCALE_CAPTURES trace captures, a ranks x stages heat map and
the outliers instead of one row per capture; below it, the per-capture tables as always."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from mindspeed_profiler.core import formats
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.report import render, sections
from mindspeed_profiler.analysis.results.report.svg import heat_color

STAGES = ("actor_generate", "actor_update")


def _captures(root, shared_data, n: int, slow_rank: int | None = None):
    """n of our torch capture directories (two stages, ranks 0 .. n/2 - 1), each a real CPU trace."""
    trace = shared_data / "kineto" / "cpu_only_rank34.pt.trace.json.gz"
    for i in range(n):
        stage, rank = STAGES[i % 2], i // 2
        d = root / stage / f"actor_rank{rank}_step3-3_node0_{1000 + i}_20261202120000000_pt"
        d.mkdir(parents=True)
        shutil.copyfile(trace, d / f"actor_rank{rank}.{1000 + i}.pt.trace.json.gz")
        (d / formats.META_FILE).write_text(json.dumps({
            "schema": 1, "run_id": "r1", "role": "actor", "stage": stage, "rank": rank, "world_size": n // 2,
            "steps": [3, 3], "backend": "torch", "device": "cpu", "host": "node0", "pid": 1000 + i, "status": "ok",
            "trace_files": [f"actor_rank{rank}.{1000 + i}.pt.trace.json.gz"]}), encoding="utf-8")
    return root


def test_many_captures_get_a_heat_map_and_the_outliers_not_a_row_each(tmp_path, shared_data):
    n = 2 * (sections.SCALE_CAPTURES // 2 + 1)
    summary, code = analyse_directory(_captures(tmp_path / "run", shared_data, n), jobs=1, progress=False, write=False)
    assert code == 0 and len(summary["captures"]) == n > sections.SCALE_CAPTURES
    sr = summary["slow_ranks"]
    sr[0].update(ratio=1.9, flagged=True, reason="made slow for the test")   # an outlier to list and outline
    html = render(summary)
    assert "Ranks x stages" in html and html.count('<rect class="heat"') == n   # n/2 workers x 2 stages
    assert 'stroke="#000"' in html                                        # the flagged cell is outlined
    outliers = html[html.index("<h3>Outliers"):]
    assert len(re.findall(r"<tr", outliers[:outliers.index("</table>")])) == 1 + min(len(sr), sections.MAX_OUTLIERS)
    assert '<details class="cap"' not in html and "Communication per capture" not in html
    assert "Per-rank" not in html and "<h2>Slow ranks" not in html


def test_at_scale_the_findings_table_lists_the_first_ones(monkeypatch, tmp_path, shared_data):
    summary, _ = analyse_directory(_captures(tmp_path / "run", shared_data, 6), jobs=1, progress=False, write=False)
    summary["findings"] = [{"id": "host_bound", "title": f"rank {i}", "impact": 0.5, "action": "a", "docs": "d"}
                           for i in range(sections.MAX_OUTLIERS + 7)]
    assert f"of {sections.MAX_OUTLIERS + 7}" not in render(summary)   # a small run lists them all
    monkeypatch.setattr(sections, "SCALE_CAPTURES", 4)
    assert f"The first {sections.MAX_OUTLIERS} of {sections.MAX_OUTLIERS + 7}" in render(summary)


def test_a_heat_map_bins_thousands_of_workers(monkeypatch, tmp_path, shared_data):
    summary, _ = analyse_directory(_captures(tmp_path / "run", shared_data, 20), jobs=1, progress=False, write=False)
    monkeypatch.setattr(sections, "SCALE_CAPTURES", 4)
    monkeypatch.setattr(sections, "MAX_HEAT_ROWS", 4)   # 10 workers in bins of 3: 4 rows
    html = render(summary)
    assert html.count('<rect class="heat"') == 4 * 2 and "Each row is 3 consecutive workers" in html
    assert "the worst is actor:" in html


def test_few_captures_keep_the_per_capture_tables(tmp_path, shared_data):
    summary, _ = analyse_directory(_captures(tmp_path / "run", shared_data, 4), jobs=1, progress=False, write=False)
    html = render(summary)
    assert "Ranks x stages" not in html
    assert html.count('<details class="cap"') == 4


@pytest.mark.parametrize("ratio, color", [(1.0, "#ffffff"), (None, "#f0f0f0"), (5.0, "#d7301f"), (0.1, "#2c7bb6")])
def test_heat_colours(ratio, color):
    assert heat_color(ratio, 1.2) == color
