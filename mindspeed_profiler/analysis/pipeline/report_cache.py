"""report.html from the analysis cache (issue 34): a re-analysis whose summary is the last one's
(its creation time aside) writes the last page again instead of rendering it (jinja2's import and
the render: 0.1-0.2 s, most of a fully cached run). The page is kept rendered with a placeholder
for the creation time, the one value of the summary that changes from run to run and that the page
shows, and the time is put in its place: the same bytes as a render.

    <out>/.analysis_cache/report.html.json   {"key": ..., "page": the page with the placeholder}

The key is a digest of what the page is rendered from: the summary (creation time and elapsed time
aside) and the captures' totals file beside it (capture_totals.jsonl, which the page reads), and the
page's directory (its links are relative to it). Any failure: the page is rendered, as without it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from mindspeed_profiler.core import fileio, formats

REPORT_ENTRY = "report.html.json"
PLACEHOLDER = "\ue000mindspeed-profiler:created\ue000"   # a private-use character: never in a summary's text
VOLATILE = ("created", "elapsed_s")   # what differs between two analyses of the same inputs


def page_key(summary: dict, report_dir: Path, identity: str) -> str:
    """What the page depends on, as a digest."""
    from mindspeed_profiler.analysis.results.outputs import dumps

    h = hashlib.sha1(f"{identity}\n{Path(report_dir).resolve()}\n".encode("utf-8", "surrogateescape"))
    h.update(dumps({k: v for k, v in summary.items() if k not in VOLATILE}))
    try:
        with open(Path(report_dir) / formats.CAPTURE_TOTALS_FILE, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except FileNotFoundError:
        h.update(b"(no totals file)")
    return h.hexdigest()


def write_report(path: Path, summary: dict, cache_dir: Path | None, identity: str | None = None) -> Path:
    """report.html for `summary` at `path`: the cached page when its key matches, else rendered
    (and kept for next time). Without `cache_dir`, results/report.write_report."""
    path = Path(path)
    created = summary.get("created")
    if cache_dir is None or not isinstance(created, str):
        from mindspeed_profiler.analysis.results.report import write_report as render_and_write
        return render_and_write(path, summary)
    if identity is None:
        from mindspeed_profiler.analysis.pipeline.result_cache import code_identity
        identity = code_identity()
    entry = Path(cache_dir) / REPORT_ENTRY
    key = page_key(summary, path.parent, identity)
    page = _cached_page(entry, key)
    if page is None:
        from mindspeed_profiler.analysis.results.report import render

        summary["created"] = PLACEHOLDER
        try:
            page = render(summary, path.parent)
        finally:
            summary["created"] = created
        if page.count(PLACEHOLDER) != 1:   # a page that shows the time otherwise: rendered as it is, not kept
            return fileio.write_atomic(path, render(summary, path.parent).encode("utf-8"))
        try:
            fileio.write_atomic(entry, orjson.dumps({"key": key, "page": page}))
        except OSError:
            pass   # the page is written below all the same; the next run renders it
    return fileio.write_atomic(path, page.replace(PLACEHOLDER, _escaped(created)).encode("utf-8"))


def _escaped(text: str) -> str:
    """`text` as the page's autoescape writes it (jinja2's markupsafe, imported only for a time that
    needs escaping: 10 ms of a cached run's import otherwise)."""
    if not any(ch in text for ch in "&<>'\""):
        return text
    from markupsafe import escape
    return str(escape(text))


def _cached_page(entry: Path, key: str) -> str | None:
    try:
        got = orjson.loads(fileio.read_regular_file(entry, 1 << 32))
    except (OSError, ValueError):
        return None
    if isinstance(got, dict) and got.get("key") == key and isinstance(got.get("page"), str) \
            and got["page"].count(PLACEHOLDER) == 1:
        return got["page"]
    return None
