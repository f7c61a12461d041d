"""report.html's "Rollout: the long tail" (report/sections.py rollout, report/rollout_svg.py): the
occupancy curve and the length histogram of each batch, drawn from the rows of sample files written
in docs/rollout.md's format; names from the files escaped; rendered in headless Chromium (skipped
where chromium is not installed) without console errors."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.report.rollout_svg import HEIGHT, LEFT, TOP, lengths_svg, occupancy_svg
from mindspeed_profiler.analysis.results.report.sections import MAX_ROLLOUT_CHARTS, rollout
from samples_testutil import long_tail_batch, rollout_run, write_worker

CHROME = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def test_the_section_draws_each_batch(tmp_path):
    rollout_run(tmp_path)
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False)
    html = (tmp_path / "analysis" / "report.html").read_text()
    assert code == 0 and 'id="rollout"' in html
    assert html.count('<svg class="occupancy"') == 2 and html.count('<svg class="lengths"') == 2
    assert 'id="rollout-batches"' in html and "The slowest samples of each batch" in html
    sec = rollout(summary)
    assert [c["title"] for c in sec["charts"]] == ["iteration 1 · actor_generate", "iteration 2 · actor_generate"]


def test_occupancy_curve_steps_where_the_samples_end():
    svg = str(occupancy_svg([(0.0, 1.0), (0.01, 0.125), (0.08, 0.0)], [("t50", 0.01), ("t90", 0.08)], "t"))
    line = re.search(r'<polyline[^>]*points="([^"]+)"', svg).group(1).split()
    ys = [float(p.split(",")[1]) for p in line]
    assert ys[0] == pytest.approx(TOP) and ys[-1] == pytest.approx(HEIGHT - 24)   # from 100% down to 0%
    assert len(line) == 5 and line[1].split(",")[0] == line[2].split(",")[0]       # a vertical step at t50
    assert svg.count("stroke-dasharray") == 2 and occupancy_svg([(0.0, 0.0)], [], "t") is None


def test_histogram_stacks_the_truncated_in_red():
    svg = str(lengths_svg([{"lo_tokens": 0, "hi_tokens": 4, "count": 7, "truncated": 0},
                           {"lo_tokens": 4, "hi_tokens": 8, "count": 2, "truncated": 2}], "t"))
    assert svg.count("<rect") == 2 and "#e15759" in svg and "4-7 tokens: 2 samples, 2 truncated" in svg
    assert float(re.search(r'<rect x="([\d.]+)"', svg).group(1)) >= LEFT and lengths_svg([], "t") is None


def test_names_from_the_files_are_escaped_and_charts_are_bounded(tmp_path):
    stages = [f"<script>alert({i})</script>" for i in range(MAX_ROLLOUT_CHARTS + 3)]
    write_worker(tmp_path, "actor", 0, [(i + 1, s, long_tail_batch(n=8)) for i, s in enumerate(stages)])
    summary, _ = analyse_directory(tmp_path, jobs=1, progress=False)
    html = (tmp_path / "analysis" / "report.html").read_text()
    assert "<script>alert(" not in html and "&lt;script&gt;alert(0)" in html
    assert html.count('<svg class="occupancy"') == MAX_ROLLOUT_CHARTS and rollout(summary)["n_batches"] == len(stages)


@pytest.mark.skipif(CHROME is None, reason="chromium not installed (apt-get install -y chromium)")
def test_renders_in_headless_chromium(tmp_path):
    rollout_run(tmp_path / "run")
    analyse_directory(tmp_path / "run", jobs=1, progress=False)
    page = (tmp_path / "run" / "analysis" / "report.html").as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}"]
    p = subprocess.run([CHROME, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and not [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]
    assert p.stdout.count('class="occupancy"') == 2 and p.stdout.count('class="lengths"') == 2
    shot = tmp_path / "x.png"
    subprocess.run([CHROME, *flags, f"--screenshot={shot}", "--window-size=1400,3000", page],
                   capture_output=True, timeout=120)
    assert shot.stat().st_size > 20_000   # a page with its charts, not a blank one
