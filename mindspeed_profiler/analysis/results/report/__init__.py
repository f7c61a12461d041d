"""report.html: one self-contained page (inline SVG, CSS and a few lines of JS; no network).

Built only from summary.json, so `mindspeed-profiler report DIR` can regenerate it. sections.py picks
what each section shows, svg.py and timeline_svg.py draw the plots, and the Jinja templates under
templates/ lay the page out. Data reaches the page escaped: the templates autoescape, and the SVG
fragments are Markup built with escaping format strings (svg.tag)."""
from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemBytecodeCache, FileSystemLoader, StrictUndefined

from mindspeed_profiler.analysis.results.report import sections
from mindspeed_profiler.analysis.results.report.fmt import ms
from mindspeed_profiler.analysis.results.report.sections import MAX_ITERATION_ROWS, SCALE_CAPTURES
from mindspeed_profiler.analysis.results.report.timeline_svg import BAR_CAP, MIN_SPAN_PX
from mindspeed_profiler.core.fileio import write_atomic

LONG_TABLE = 50            # tables longer than this are collapsed into a <details>


class _KeptTemplates(FileSystemBytecodeCache):
    """The templates compiled once and kept (jinja2's per-user directory in the temp directory,
    mode 0700; an entry is used only for the same template source and jinja2 version): compiling
    them was 0.04 s of a 0.05 s render, at the end of every cold `analyse` (issue 34). A cache that
    cannot be read or written is not used; the page is the same."""

    def load_bytecode(self, bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, ValueError, EOFError):
            bucket.reset()

    def dump_bytecode(self, bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _kept_templates() -> FileSystemBytecodeCache | None:
    try:
        return _KeptTemplates()
    except (OSError, RuntimeError):   # no safe directory of this user's (jinja2's checks): compiled each time
        return None


_ENV = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,             # every template is HTML: escape whatever is not Markup
    undefined=StrictUndefined,   # a misspelt field fails the render instead of leaving a blank
    finalize=lambda v: "" if v is None else v,   # a missing value (None) shows as nothing
    trim_blocks=True, lstrip_blocks=True,
    bytecode_cache=_kept_templates(),
)
_ENV.filters["ms"] = ms
_ENV.tests["exact"] = lambda v: isinstance(v, sections.Exact)
_ENV.tests["link"] = lambda v: isinstance(v, sections.Link)
_ENV.globals.update(LONG_TABLE=LONG_TABLE, MAX_ITERATION_ROWS=MAX_ITERATION_ROWS, SCALE_CAPTURES=SCALE_CAPTURES, BAR_CAP=BAR_CAP,
                    MIN_SPAN_PX=MIN_SPAN_PX)

__all__ = ["render", "write_report"]


def render(summary: dict, report_dir: str | Path | None = None) -> str:
    """The page for a summary.json dict; links to captures are relative to `report_dir` (where the
    page is written; default: DIR/analysis/)."""
    return _ENV.get_template("report.html.j2").render(sections.context(summary, report_dir))


def write_report(path: Path | str, summary: dict) -> Path:
    """Render and write atomically (a failed write leaves the previous report, not half a page)."""
    path = Path(path)
    return write_atomic(path, render(summary, path.parent).encode("utf-8"))
