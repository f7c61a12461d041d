"""Validate a profiler config and print it normalized (exit 0), or print every problem (exit 2).

Examples:
  mindspeed-profiler check-config configs/profiler_config/default.yaml
  mindspeed-profiler check-config train.yaml profiler_config.integrated.stage=actor_update
"""
from __future__ import annotations

import argparse
import sys

from mindspeed_profiler.config import ProfilerConfigError, load_config

EXTRA_POSITIONALS = "overrides"  # overrides may come after --no-path-check


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a training YAML with a profiler_config block, or the block itself")
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE", default=[],  # a default keeps argparse from calling it required
                        help="dotted key=value, e.g. profiler_config.integrated.profile_ranks=[0,1]")
    parser.add_argument("--no-path-check", action="store_true",
                        help="skip the check that output directories are writable (e.g. checking a cluster config locally)")


def run(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.file, args.overrides, check_paths=not args.no_path_check)
    except ProfilerConfigError as exc:
        print(f"error: {args.file}", file=sys.stderr)
        for path, msg in exc.problems:
            print(f"  {path}: {msg}", file=sys.stderr)
        return 2
    sys.stdout.write(cfg.to_yaml())
    return 0
