"""Regenerate report.html from an existing analysis, or run the analysis when there is none.

    mindspeed-profiler report DIR [--reanalyse] [-j N]

DIR is a profile_save_path (its analysis/summary.json is used), an analysis directory, or a
summary.json. Without a summary (or with --reanalyse) this runs `analyse DIR` (which writes the
report). Prints the path of report.html. Exit codes as `analyse` (0 ok, 1 some captures failed,
3 nothing found).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mindspeed_profiler.core import formats


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", help="profile_save_path, analysis directory or summary.json")
    parser.add_argument("--reanalyse", action="store_true", help="analyse again even if a summary exists")
    parser.add_argument("-j", "--jobs", type=int, default=None, help="worker processes if analysing")


def run(args: argparse.Namespace) -> int:
    from mindspeed_profiler.analysis.pipeline.batch import EXIT_NOTHING_FOUND, analyse_directory
    from mindspeed_profiler.analysis.results.outputs import find_summary, load_summary
    from mindspeed_profiler.analysis.results.report import write_report

    p = Path(args.directory)
    found = None if args.reanalyse else find_summary(p)
    if found is not None:
        try:
            summary = load_summary(found)
        except ValueError as exc:   # not JSON, or not a summary's shape: the message names the file and the field
            print(f"report: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # noqa: BLE001
            print(f"report: cannot read {found}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        out = write_report(found.parent / formats.REPORT_FILE, summary)
        print(out)
        return int(summary.get("exit_code", 0))
    if not p.exists():
        print(f"report: {str(p)!r} does not exist", file=sys.stderr)
        return EXIT_NOTHING_FOUND
    summary, code = analyse_directory(p, jobs=args.jobs)
    if code == EXIT_NOTHING_FOUND:
        print(f"report: nothing to analyse under {p}", file=sys.stderr)
        return code
    print(Path(formats.analysis_dir(p)) / formats.REPORT_FILE)
    return code


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="mindspeed-profiler report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    sys.exit(run(ap.parse_args()))
