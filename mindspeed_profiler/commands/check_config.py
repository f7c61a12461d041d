"""Validate a profiler config and print it normalized (exit 0), or print every problem (exit 2).

A MindSpeed-RL, verl or RLinf training YAML (or just its profiler blocks) is read as ours: what has
no equivalent is printed as a note (docs/migrating.md). Overrides in the framework's own keys
(`global_profiler.steps=[1,2]`, `+cluster.tracer.enable=true`) apply to its YAML, the others to ours.

Examples:
  mindspeed-profiler check-config configs/profiler_config/default.yaml
  mindspeed-profiler check-config train.yaml profiler_config.integrated.stage=actor_update
  mindspeed-profiler check-config train.yaml --stage actor_image_embeds profiler_config.integrated.stage=actor_image_embeds
  mindspeed-profiler check-config verl_ppo_trainer.yaml global_profiler.tool=npu global_profiler.steps=[2,4]
"""
from __future__ import annotations

import argparse
import sys

from mindspeed_profiler.capture import stages
from mindspeed_profiler.config import ProfilerConfigError, load_config
from mindspeed_profiler.config.dialects import collect_notes

EXTRA_POSITIONALS = "overrides"  # overrides may come after --no-path-check


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a training YAML with a profiler_config block, or the block itself "
                                     "(a verl or RLinf training YAML, or its profiler blocks, too)")
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE", default=[],  # a default keeps argparse from calling it required
                        help="dotted key=value, e.g. profiler_config.integrated.profile_ranks=[0,1]")
    parser.add_argument("--no-path-check", action="store_true",
                        help="skip the check that output directories are writable (e.g. checking a cluster config locally)")
    parser.add_argument("--stage", action="append", default=[], metavar="NAME",
                        help="a stage name the trainer registers (register_stage), so that `stage` may select it; "
                             "repeat for more (the YAML can declare them too: integrated.register_stages)")


def _problems(file: str, problems: list[tuple[str, str]]) -> int:
    print(f"error: {file}", file=sys.stderr)
    for path, msg in problems:
        print(f"  {path}: {msg}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    bad = []
    for name in args.stage:
        try:
            stages.register_stage(name, owner="check-config")
        except ValueError as exc:
            bad.append(("--stage", str(exc)))
    if bad:
        return _problems(args.file, bad)
    with collect_notes() as notes:
        try:   # the library's own loading, overrides included: the CLI accepts what load_config accepts
            cfg = load_config(args.file, args.overrides, check_paths=not args.no_path_check)
        except ProfilerConfigError as exc:
            _print_notes(notes)
            return _problems(args.file, exc.problems)
    _print_notes(notes)
    sys.stdout.write(cfg.to_yaml())
    return 0


def _print_notes(notes: list[tuple[str, str, str]]) -> None:
    for framework, where, msg in notes:
        print(f"note ({framework}): {where}: {msg}", file=sys.stderr)
