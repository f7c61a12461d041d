"""The console summary (rich tables): names from the traces are printed as text, never read as markup."""
from __future__ import annotations

import io

from analysis_testutil import analyse_hostile_run


def test_console_tables_do_not_read_names_as_markup(tmp_path):
    from rich.console import Console

    from mindspeed_profiler.analysis.results.console import print_summary
    summary = analyse_hostile_run(tmp_path)
    buf = io.StringIO()
    print_summary(summary, console=Console(file=buf, width=300, color_system=None))
    assert "[/bold]" in buf.getvalue()
