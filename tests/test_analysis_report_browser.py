"""report.html in a real headless Chromium: no console errors, the script ran, the plots are in
the DOM, and a screenshot is taken. Skips when chromium is not installed
(CI: `apt-get install -y chromium`)."""
from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

from test_analysis_timeline import STAGES, trace

CHROME = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROME is None, reason="chromium not installed (apt-get install -y chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


def chrome(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROME, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def console_errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


def test_console_error_detection_works(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFunction()</script></body></html>")
    p = chrome(tmp_path, "--dump-dom", bad.as_uri())
    assert any("undefinedFunction" in ln for ln in console_errors(p.stderr)), p.stderr[-2000:]


def test_report_renders_without_console_errors(tmp_path, shared_data):
    root = tmp_path / "run"
    shutil.copytree(shared_data, root)
    (root / "timeline").mkdir()
    (root / "timeline" / "timeline.json.gz").write_bytes(gzip.compress(json.dumps(trace()).encode()))
    summary, code = analyse_directory(root, jobs=2, progress=False)
    assert code == 0
    html = root / "analysis" / "report.html"
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html.read_text()), "report must not load anything remote"
    p = chrome(tmp_path, "--dump-dom", html.as_uri())
    assert p.returncode == 0, p.stderr[-2000:]
    assert console_errors(p.stderr) == [], console_errors(p.stderr)
    dom = p.stdout
    assert '<body data-ready="1">' in dom            # the page script ran to its end
    assert dom.count('class="span"') == len(STAGES)  # Gantt: one rect per stage span
    # the zoomed Gantt: the median iteration (2: 800 us) by default; #iter=1 redraws it in the browser
    assert dom.count('class="zspan"') == sum(1 for _, _, it, _, _ in STAGES if it == 2)
    p = chrome(tmp_path, "--dump-dom", html.as_uri() + "#iter=1")
    assert console_errors(p.stderr) == [], console_errors(p.stderr)
    assert '<span id="zoomcap">iteration 1 (1.000 ms)</span>' in p.stdout
    assert p.stdout.count('class="zspan"') == sum(1 for _, _, it, _, _ in STAGES if it == 1)
    n_dev = sum(1 for c in summary["captures"] if c.get("device"))
    assert dom.count('class="bar"') >= n_dev         # per-rank device bars
    shot = tmp_path / "report.png"
    p = chrome(tmp_path, f"--screenshot={shot}", "--window-size=1400,1800", "--hide-scrollbars", html.as_uri())
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", p.stderr[-2000:]
    assert shot.stat().st_size > 20_000              # a blank page is a few KB
    assert console_errors(p.stderr) == []
