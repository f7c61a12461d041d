"""Compare two runs or captures: per stage, per rank and per op deltas, sorted by impact.

    mindspeed-profiler compare A B [--top N] [--json OUT.json]

A and B are each a directory already analysed (DIR/analysis/summary.json), an analysis directory,
a summary.json, or a directory / trace to analyse now. Deltas are B - A in milliseconds.
Exit codes: 0 compared; 1 a side could not be analysed, or the two sides have nothing in common to
compare (said why); 2 usage error.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="baseline run / capture / summary.json")
    parser.add_argument("b", help="run / capture / summary.json to compare against A")
    parser.add_argument("--top", type=int, default=15, help="rows per table (default: %(default)s)")
    parser.add_argument("--json", dest="json_out", default=None, help="write the full comparison as JSON here ('-' = stdout)")
    parser.add_argument("-j", "--jobs", type=int, default=None, help="worker processes when a side must be analysed")


def load_or_analyse(where: str, jobs: int | None = None) -> dict:
    """The summary of `where`, analysing it first when there is none."""
    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
    from mindspeed_profiler.analysis.results.outputs import find_summary, load_summary

    p = Path(where)
    found = find_summary(p)
    if found is not None:
        return load_summary(found)
    if not p.exists():
        raise FileNotFoundError(f"compare: {where!r} does not exist")
    summary, code = analyse_directory(p, jobs=jobs, progress=False)
    if not summary["captures"]:
        raise ValueError(f"compare: nothing to analyse under {where!r}")
    return summary


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from mindspeed_profiler.analysis.analyzers.compare import compare

    try:
        a, b = load_or_analyse(args.a, args.jobs), load_or_analyse(args.b, args.jobs)
    except (OSError, ValueError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    res = compare(a, b)
    code = 1 if res["nothing_comparable"] else 0
    if args.json_out == "-":
        print(json.dumps(res, indent=2))
        return code
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=2), encoding="utf-8")
    con = Console()
    if not con.is_terminal and con.width < 140:
        con.width = 140
    f = lambda v: "" if v is None else f"{v / 1e3:,.3f}"
    con.print(f"[bold]B - A[/bold], by impact. Ops and kernels: {escape(res['how']['values'])}.", highlight=False)
    if res["nothing_comparable"]:
        print(f"compare: {res['nothing_comparable']}", file=sys.stderr)
        return code
    for title, key in (("Step time (mean of a captured step)", "steps"),
                       ("Stages (per iteration)", "stages"), ("Ranks", "ranks"),
                       ("Device time per step (computing / communication / free)", "breakdown"),
                       ("Host ops (self time per step)", "ops"), ("Kernels (device time per step)", "kernels")):
        rows = [r for r in res[key] if r["status"] != "same" or key == "steps"]   # step time leads, even unchanged
        if not rows:
            continue
        t = Table(title=f"{title}: B - A (ms)")
        for h in ("", "A ms", "B ms", "delta ms", "B/A", ""):
            t.add_column(h, overflow="fold" if not h else "ellipsis")
        for r in rows[: args.top]:
            name = r["key"] if len(r["key"]) <= 100 else r["key"][:99] + "…"
            t.add_row(escape(name), f(r["a_us"]) or ("below top-N" if r["status"] == "unknown" else ""),
                      f(r["b_us"]) or ("below top-N" if r["status"] == "unknown" else ""),
                      "?" if r["delta_us"] is None else f(r["delta_us"]),
                      "" if r["ratio"] is None else f"{r['ratio']:.3f}",
                      r["status"] if r["status"] in ("new", "gone", "unknown") else "",
                      style="red" if (r["delta_us"] or 0) > 0 and (r["ratio"] is None or r["ratio"] > 1.05) else None)
        con.print(t)
        if len(rows) > args.top:
            con.print(f"  ... {len(rows) - args.top} more changed rows (--top N to list them, --json FILE for all)",
                      highlight=False)
    return code


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="mindspeed-profiler compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    sys.exit(run(p.parse_args()))
