"""Compare two analysis summaries (summary.json) key by key, recursively.

    python tools/summary_diff.py A B [--ignore-times [--loose]] [--inline] [--max N]

A and B are two summary.json files, or two directories: then every summary.json under each (at any
depth) is matched by its path relative to A / B, and a file on one side only is a difference.
Each difference is printed with its JSON path ($.captures[3].steps[0].dur_us):

    only in A / only in B   a key present on one side
    A != B                  values that differ (1 and 1.0 differ, but not with --loose; NaN equals NaN)
    len A != len B          lists of different lengths (the common prefix is still compared)

--ignore-times skips what differs between two analyses of the same data:
    the keys `created`, `root`, `elapsed_s` (wall time of the whole analysis) and `analyse_s`
    (wall time of one capture's analysis), and any string value that is an absolute path on both
    sides (the data or output may live elsewhere).
--loose (implies --ignore-times; for two separate training runs of the same example) also skips
    every int / float (never a bool) whose key - the key of the dict entry that holds it, directly
    or through lists (op_totals: [[name, count, total_us, ...]] is under op_totals) - lower-cased,
    starts with `n_`, is in LOOSE_KEYS or ends in one of LOOSE_SUFFIXES (both printed below by
    --help): times, durations, time stamps, shares, percentages, ratios, byte / event / call
    counts, sizes, ids, pids, tids. What remains is compared exactly: the key structure, strings,
    booleans, None, list lengths and the numbers under other keys (counts.found, rank, step ...).

--inline puts back in each capture record what the analysis wrote beside summary.json: its
    op_totals / kernel_totals and, above 1,000 captures, its top lists (the record's `totals` names a
    line of capture_totals.jsonl: file, offset, bytes), as outputs.load_summary does, and drops the
    `totals` reference. A summary from before the totals moved (everything inline) then compares
    with one from after key by key. A line that cannot be read, or that names another capture, is a
    usage error (exit 2).

Exit status: 0 equal, 1 different, 2 usage error (a missing file, unreadable JSON).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

TIME_KEYS = {"created", "root", "elapsed_s", "analyse_s"}
LOOSE_SUFFIXES = ("_us", "_ms", "_s", "_ns", "_pct", "pct", "share", "ts", "dur", "time", "bytes",
                  "_mb", "_kb", "_gb", "count", "counts", "_n", "ratio", "rate", "id", "ids", "pid",
                  "tid", "seconds", "mean", "median", "min", "max", "std", "total", "totals",
                  "events", "activities", "calls", "size", "speed", "throughput", "overlap")
LOOSE_KEYS = {"n", "value", "values", "score", "loss", "reward", "kl"}


def loose_key(key: str) -> bool:
    k = key.lower()
    return k in LOOSE_KEYS or k.startswith("n_") or k.endswith(LOOSE_SUFFIXES)


def is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def same_num(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


class Differ:
    def __init__(self, ignore_times: bool, loose: bool):
        self.ignore_times = ignore_times or loose
        self.loose = loose
        self.diffs: list[str] = []

    def compare(self, a, b, path: str = "$", key: str = "") -> None:
        """`key`: the nearest dict key above a / b (a list passes its own key on to its items)."""
        if self.ignore_times and key in TIME_KEYS:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in a:
                if k not in b:
                    if not (self.ignore_times and k in TIME_KEYS):
                        self.diffs.append(f"{path}.{k}: only in A ({short(a[k])})")
                else:
                    self.compare(a[k], b[k], f"{path}.{k}", k)
            for k in b:
                if k not in a and not (self.ignore_times and k in TIME_KEYS):
                    self.diffs.append(f"{path}.{k}: only in B ({short(b[k])})")
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                self.diffs.append(f"{path}: len {len(a)} != len {len(b)}")
            for i, (x, y) in enumerate(zip(a, b)):
                self.compare(x, y, f"{path}[{i}]", key)
        elif is_num(a) and is_num(b):
            if not (self.loose and loose_key(key)) and not (same_num(a, b) and (self.loose or type(a) is type(b))):
                self.diffs.append(f"{path}: {short(a)} != {short(b)}")
        elif isinstance(a, str) and isinstance(b, str) and self.ignore_times and os.path.isabs(a) and os.path.isabs(b):
            return
        elif type(a) is not type(b) or a != b:
            self.diffs.append(f"{path}: {short(a)} != {short(b)}")


def short(v, n: int = 100) -> str:
    s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= n else s[: n - 3] + "..."


def load(p: Path):
    try:
        with open(p, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as err:
        raise SystemExit(f"summary_diff: cannot read {p}: {err}") from None


def inline_totals(summary, where: Path):
    """`summary` with each capture's line of its totals file (beside it, in `where`) merged into its
    record and the `totals` reference removed (stdlib only: the tool reads any version's files)."""
    files: dict = {}
    try:
        caps = summary.get("captures") if isinstance(summary, dict) else None
        for c in caps if isinstance(caps, list) else []:
            ref = c.get("totals") if isinstance(c, dict) else None
            if not isinstance(ref, dict):
                continue
            name, offset, size = ref.get("file"), ref.get("offset"), ref.get("bytes")
            if not (isinstance(name, str) and os.path.basename(name) == name and isinstance(offset, int)
                    and isinstance(size, int) and offset >= 0 and size > 0):
                raise SystemExit(f"summary_diff: {where}: capture {c.get('path')}: a totals reference that is not "
                                 f"a place in a file beside summary.json: {short(ref)}")
            if name not in files:
                try:
                    files[name] = open(where / name, "rb")
                except OSError as err:
                    raise SystemExit(f"summary_diff: cannot read {where / name}: {err}") from None
            fh = files[name]
            fh.seek(offset)
            try:
                line = json.loads(fh.read(size))
            except ValueError as err:
                raise SystemExit(f"summary_diff: {where / name}: the {size} bytes at {offset} are not a JSON line "
                                 f"({err})") from None
            if not isinstance(line, dict) or line.get("path") != c.get("path"):
                raise SystemExit(f"summary_diff: {where / name}: the line at {offset} is not capture {c.get('path')}'s")
            c.update((k, v) for k, v in line.items() if k != "path")
            del c["totals"]
    finally:
        for fh in files.values():
            fh.close()
    return summary


def pairs(a: Path, b: Path) -> tuple[list[tuple[str, Path | None, Path | None]], bool]:
    if a.is_file() and b.is_file():
        return [("", a, b)], False
    if a.is_dir() and b.is_dir():
        ra = {str(p.relative_to(a)): p for p in a.rglob("summary.json")}
        rb = {str(p.relative_to(b)): p for p in b.rglob("summary.json")}
        return [(r, ra.get(r), rb.get(r)) for r in sorted(ra.keys() | rb.keys())], True
    raise SystemExit(f"summary_diff: {a} and {b} must be two files or two directories")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2] + f"\nLOOSE_KEYS: {' '.join(sorted(LOOSE_KEYS))}\n"
                                 f"LOOSE_SUFFIXES: {' '.join(LOOSE_SUFFIXES)}", formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", type=Path, help="summary.json, or a directory of them (the 'A' side)")
    ap.add_argument("b", type=Path, help="the same on the 'B' side")
    ap.add_argument("--ignore-times", action="store_true", help="skip created, root, elapsed_s, analyse_s, absolute paths")
    ap.add_argument("--loose", action="store_true", help="also skip timing / count / size numbers (fresh runs)")
    ap.add_argument("--inline", action="store_true", help="put each capture's capture_totals.jsonl line back in its record")
    ap.add_argument("--max", type=int, default=50, help="differences printed per file (default 50; 0: all)")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only the totals")
    args = ap.parse_args(argv)
    try:
        todo, many = pairs(args.a, args.b)
    except SystemExit as err:
        print(err, file=sys.stderr)
        return 2
    total = 0
    for rel, pa, pb in todo:
        label = f"{rel}: " if many else ""
        if pa is None or pb is None:
            total += 1
            print(f"{label}only in {'B' if pa is None else 'A'}")
            continue
        try:
            d = Differ(args.ignore_times, args.loose)
            sa, sb = load(pa), load(pb)
            if args.inline:
                sa, sb = inline_totals(sa, pa.parent), inline_totals(sb, pb.parent)
            d.compare(sa, sb)
        except SystemExit as err:
            print(err, file=sys.stderr)
            return 2
        total += len(d.diffs)
        if not args.quiet:
            for line in d.diffs[: args.max or None]:
                print(f"{label}{line}")
            if args.max and len(d.diffs) > args.max:
                print(f"{label}... {len(d.diffs) - args.max} more")
    print(f"{'equal' if total == 0 else f'differs ({total} differences)'}: {len(todo)} file(s) compared")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
