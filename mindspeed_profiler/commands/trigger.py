"""Ask a running job for a capture now: the next N iterations, or the listed ones.

RUN_DIR is the job's profile_save_path; the job must run with profiler_config.integrated.dynamic:
true. The request uses the job's integrated settings, with the ones given here on top (--stage,
--level, --ranks, ... and --set FIELD=VALUE for any other integrated field), then every worker
returns to idle. `mindspeed-profiler status RUN_DIR` says what each worker did with it.

    mindspeed-profiler trigger ./profiler_data --steps 2 --stage actor_update --ranks 0
    mindspeed-profiler trigger ./profiler_data --iterations 3000-3001 --level level1 --set profile_with_memory=true
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the running job's profile_save_path")
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--steps", type=int, metavar="N", help="capture the next N iterations")
    when.add_argument("--iterations", metavar="FIRST-LAST", help="capture these iterations (1-based, inclusive)")
    parser.add_argument("--stage", nargs="+", metavar="S", help="stages to capture (default: the job's integrated.stage)")
    parser.add_argument("--ranks", metavar="R", help="ranks: all, or a comma-separated list such as 0,1 (default: the job's)")
    parser.add_argument("--roles", metavar="ROLE", help="only these worker roles, comma-separated (default: every role)")
    parser.add_argument("--level", metavar="L", help="profile_level: level_none, level0, level1, level2")
    parser.add_argument("--warmup", type=int, metavar="W", help="warmup_steps before the recorded iterations")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="any other integrated field, e.g. --set profile_with_memory=true (repeatable; values are YAML)")
    parser.add_argument("--wait", type=float, metavar="SECONDS", default=0,
                        help="wait up to this long until every listening worker has finished the request, then print its status")
    parser.add_argument("--ray-address", metavar="ADDR", help="also deliver through the job's Ray cluster (workers on nodes "
                                                              "that do not share RUN_DIR)")
    parser.add_argument("--run-id", metavar="ID", help="the run's id, when RUN_DIR (and its run.json) is not on this machine")
    parser.add_argument("--json", action="store_true", help="print the request as JSON")


def _fields(args: argparse.Namespace) -> dict:
    from mindspeed_profiler.core import yaml_bounded
    from mindspeed_profiler.ondemand.trigger import TriggerError

    fields: dict = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TriggerError(f"--set {item!r}: expected FIELD=VALUE, e.g. profile_with_memory=true")
        try:
            fields[key.strip()] = yaml_bounded.load_value(value)
        except (yaml_bounded.YamlRefused, RecursionError) as exc:
            raise TriggerError(f"--set {item[:120]!r}: the value: {exc or 'nested too deeply'}") from None
    if args.stage:
        fields["stage"] = args.stage[0] if len(args.stage) == 1 else list(args.stage)
    if args.ranks:
        text = args.ranks.strip()
        if text.lower() == "all":
            fields["profile_ranks"] = "all"
        else:
            try:
                fields["profile_ranks"] = [int(r) for r in text.split(",") if r.strip()]
            except ValueError:
                raise TriggerError(f"--ranks {args.ranks!r}: expected all or rank numbers such as 0,1") from None
    if args.level:
        fields["profile_level"] = args.level
    if args.warmup is not None:
        fields["warmup_steps"] = args.warmup
    return fields


def run(args: argparse.Namespace) -> int:
    from mindspeed_profiler.ondemand import trigger as tg

    try:
        fields = _fields(args)
        iterations = tg.parse_iterations(args.iterations) if args.iterations else None
        if args.steps is not None and args.steps < 1:
            raise tg.TriggerError(f"--steps: got {args.steps}; expected N >= 1")
        box = tg.connect_mailbox(args.ray_address, args.run_id, args.run_dir)
        roles = [r.strip() for r in args.roles.split(",") if r.strip()] if args.roles else None
        req = tg.trigger(args.run_dir, steps=args.steps, iterations=iterations, fields=fields, roles=roles,
                         mailbox=box, run_id=args.run_id)
    except tg.TriggerError as exc:
        print(f"mindspeed-profiler trigger: {exc}", file=sys.stderr)
        return 2
    from mindspeed_profiler.commands.status import print_status, warn_skipped

    warn_skipped("trigger", req["skipped_states"])
    if args.json:
        print(json.dumps(req, indent=1))
    else:
        print(f"request {req['id']}: {req['resolved']}")
        if not req["workers_listening"]:
            print("  no worker has reported a heartbeat yet: the request waits in RUN_DIR/requests/ for them", file=sys.stderr)
        else:
            print(f"  {req['workers_listening']} worker(s) listening; `mindspeed-profiler status {args.run_dir}` shows progress")
    if args.wait > 0:
        deadline = time.time() + args.wait
        while time.time() < deadline:
            states = tg.gather_states(args.run_dir, box)
            if tg.request_finished(states, req["id"], list(tg.live_workers(states, time.time()))):
                break
            time.sleep(1.0)
        return print_status(args.run_dir, tg.gather_states(args.run_dir, box), [req["id"]], as_json=False)
    return 0
