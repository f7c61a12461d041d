"""Merge the tracer's per-process segments into one Perfetto-ready timeline.json and
timeline.pftrace.

DIR is the profile_save_path (its timeline/ subdirectory is used) or the timeline directory
itself. Writes DIR/timeline/timeline.json, or timeline.json.gz with --gzip (default: the run's
`tracer.gzip`, read from its run.json; plain JSON when there is none), and timeline.pftrace
(Perfetto's protobuf trace: opens at any size in https://ui.perfetto.dev, Open trace file).
The merge streams: any number of segments in bounded memory. --max-spans / --window cut what a
browser cannot hold; what was cut is said on stderr and in the output (otherData.cut).
"""
from __future__ import annotations

import argparse
import sys


def _window(text: str) -> tuple:
    """START:END in seconds since the timeline's start; either side may be empty (open)."""
    start, sep, end = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"--window {text!r}: expected START:END in seconds, e.g. 10:20, 30: or :5")
    try:
        lo = float(start) if start.strip() else None
        hi = float(end) if end.strip() else None
    except ValueError:
        raise argparse.ArgumentTypeError(f"--window {text!r}: START and END are seconds (numbers)") from None
    if lo is not None and hi is not None and hi <= lo:
        raise argparse.ArgumentTypeError(f"--window {text!r}: END must be after START")
    return lo, hi


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise argparse.ArgumentTypeError(f"--max-spans {text!r}: a positive number of spans")
    return n


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="profile_save_path or its timeline/ directory")
    parser.add_argument("--gzip", action=argparse.BooleanOptionalAction, default=None,
                        help="write timeline.json.gz instead of timeline.json (default: the run's tracer.gzip)")
    parser.add_argument("--pftrace", action=argparse.BooleanOptionalAction, default=True,
                        help="also write timeline.pftrace, Perfetto's protobuf trace (default: yes)")
    parser.add_argument("--max-spans", type=_positive, default=None, metavar="N",
                        help="keep only the first N spans (in time order, after --window); default: all")
    parser.add_argument("--window", type=_window, default=None, metavar="START:END",
                        help="keep only the spans that overlap [START, END), seconds since the timeline's "
                             "start (an empty side is open: 30: or :5)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only the output path")


def run(args: argparse.Namespace) -> int:
    from mindspeed_profiler.analysis.timeline.merge import configured_gzip, merge_timeline_dir, resolve_timeline_dir
    from mindspeed_profiler.analysis.timeline.stream import Cut

    timeline_dir = resolve_timeline_dir(args.dir)
    gzip = args.gzip if args.gzip is not None else bool(configured_gzip(timeline_dir))
    lo, hi = args.window if args.window else (None, None)
    try:
        result = merge_timeline_dir(timeline_dir, gzip=gzip, cut=Cut(args.max_spans, lo, hi), pftrace=args.pftrace)
    except FileNotFoundError as exc:
        print(f"mindspeed-profiler merge: {exc}", file=sys.stderr)
        return 1
    other = result.other
    if args.quiet:
        print(result.path)
    else:
        print(f"wrote {result.path}" + (f"\n  and {result.pftrace} (open it in https://ui.perfetto.dev: Open trace file)"
                                        if result.pftrace else ""))
        for p in other.get("processes", []):
            sync = f"offset {p['offset_ns'] / 1e6:+.3f} ms (+/- {p['uncertainty_ns'] / 1e6:.3f})" if p.get("synced") else "not clock-synced"
            state = "closed" if p.get("closed") else "not closed (crashed or still running)"
            print(f"  {p['name']:<28} {p['events']:>8} events  {sync}  {state}" + (f"  dropped {p['dropped']}" if p.get("dropped") else ""))
    for w in other.get("warnings", []):
        if not args.quiet or w.startswith(("timeline cut", "the JSON timeline")):  # a cut is said even with -q
            print(f"  warning: {w}", file=sys.stderr)
    return 0
