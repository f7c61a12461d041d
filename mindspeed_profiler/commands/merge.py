"""Merge the tracer's per-process segments into one Perfetto-ready timeline.json.

DIR is the profile_save_path (its timeline/ subdirectory is used) or the timeline directory
itself. Writes DIR/timeline/timeline.json, or timeline.json.gz with --gzip (default: the run's
`tracer.gzip`, read from its run.json; plain JSON when there is none); open it in
https://ui.perfetto.dev or chrome://tracing as is.
"""
from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="profile_save_path or its timeline/ directory")
    parser.add_argument("--gzip", action=argparse.BooleanOptionalAction, default=None,
                        help="write timeline.json.gz instead of timeline.json (default: the run's tracer.gzip)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only the output path")


def run(args: argparse.Namespace) -> int:
    from mindspeed_profiler.analysis.merge import configured_gzip, read_timeline_file, resolve_timeline_dir, write_timeline

    timeline_dir = resolve_timeline_dir(args.dir)
    gzip = args.gzip if args.gzip is not None else bool(configured_gzip(timeline_dir))
    try:
        path = write_timeline(timeline_dir, gzip=gzip)
    except FileNotFoundError as exc:
        print(f"mindspeed-profiler merge: {exc}", file=sys.stderr)
        return 1
    if args.quiet:
        print(path)
        return 0

    other = read_timeline_file(str(path)).get("otherData", {})
    procs = other.get("processes", [])
    print(f"wrote {path}")
    for p in procs:
        sync = f"offset {p['offset_ns'] / 1e6:+.3f} ms (+/- {p['uncertainty_ns'] / 1e6:.3f})" if p.get("synced") else "not clock-synced"
        state = "closed" if p.get("closed") else "not closed (crashed or still running)"
        print(f"  {p['name']:<28} {p['events']:>8} events  {sync}  {state}" + (f"  dropped {p['dropped']}" if p.get("dropped") else ""))
    for w in other.get("warnings", []):
        print(f"  warning: {w}", file=sys.stderr)
    return 0
