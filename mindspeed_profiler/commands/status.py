"""What a running job did with its on-demand capture requests: per worker, requested / running /
done / rejected / skipped, with the reason and the capture directories.

Exits 0 while the job is reachable (some worker's listener wrote a heartbeat recently), 1 when no
worker is (the job ended or never listened), 2 when RUN_DIR is not a run directory.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the job's profile_save_path")
    parser.add_argument("--request", action="append", default=[], metavar="ID", help="only this request (repeatable)")
    parser.add_argument("--ray-address", metavar="ADDR", help="also read the workers' states from the job's Ray cluster")
    parser.add_argument("--run-id", metavar="ID", help="the run's id, when RUN_DIR is not on this machine")
    parser.add_argument("--json", action="store_true", help="print the worker states and request rows as JSON")


def print_status(run_dir: str, states: Mapping[str, Mapping[str, Any]], request_ids: Sequence[str] = (),
                 as_json: bool = False, problems: Sequence[str] = ()) -> int:
    """Print the workers and their requests; `problems`: the state files skipped (to stderr)."""
    from mindspeed_profiler.ondemand import trigger as tg

    warn_skipped("status", problems)
    now = time.time()
    live = tg.live_workers(states, now)
    rows = tg.summarize(states, request_ids)
    if as_json:
        print(json.dumps({"workers": states, "rows": rows, "reachable": bool(live)}, indent=1, default=str))
        return 0 if live else 1
    print(f"{len(live)} of {len(states)} worker(s) listening")
    for key in sorted(states):
        st = states[key]
        hb = st.get("heartbeat") or {}
        age = tg.heartbeat_age(st, now)
        where = f"iteration {hb.get('iteration')}" if hb.get("iteration") is not None else "not started"
        seen = f"{age:.0f} s ago" if age is not None else "never"
        mark = "" if key in live else "  (not listening)"
        print(f"  {key:<24} {where:<16} heartbeat {seen}{mark}")
    if rows:
        print()
        print(f"  {'request':<22} {'worker':<22} {'state':<9} {'iterations':<12} captures  reason")
        for r in rows:
            its = "-".join(map(str, r["iterations"])) if r["iterations"] else "-"
            print(f"  {r['request']:<22} {r['worker']:<22} {r['state'] or '?':<9} {its:<12} {r['captures']:>8}  {r['reason'] or ''}")
    elif request_ids:
        print(f"  no worker has seen request(s) {', '.join(request_ids)} yet")
    if not live:
        print("no worker is listening: the job ended, or it does not run with integrated.dynamic: true", file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    from mindspeed_profiler.ondemand import trigger as tg

    if not Path(args.run_dir).is_dir() and not args.ray_address:
        print(f"mindspeed-profiler status: {args.run_dir}: not a directory", file=sys.stderr)
        return 2
    try:
        box = tg.connect_mailbox(args.ray_address, args.run_id, args.run_dir)
    except tg.TriggerError as exc:
        print(f"mindspeed-profiler status: {exc}", file=sys.stderr)
        return 2
    problems: list[str] = []
    states = tg.gather_states(args.run_dir, box, problems)
    return print_status(args.run_dir, states, args.request, as_json=args.json, problems=problems)


def warn_skipped(command: str, problems: Sequence[str]) -> None:
    """One stderr line per worker state skipped: the others are still used."""
    for line in problems:
        print(f"mindspeed-profiler {command}: warning: {line}", file=sys.stderr)
