"""What the TRL examples share: their command line, and the run: the one line, training, analysis."""
from __future__ import annotations

import argparse
import tempfile
from typing import Any


def example_args(doc: str, argv: list[str] | None, prefix: str) -> tuple[argparse.Namespace, Any, str]:
    """(the arguments, our config loaded from --config, a fresh working directory)."""
    from mindspeed_profiler import load_config

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--config", default="examples/trl/profiler.yaml")
    parser.add_argument("--out", default=None, help="TRL's output_dir (default: in a temporary directory)")
    parser.add_argument("--save", default=None, help="profile_save_path (default: the config's)")
    args = parser.parse_args(argv)
    cfg = load_config(args.config, [f"integrated.profile_save_path={args.save}"] if args.save else [])
    work = tempfile.mkdtemp(prefix=prefix)
    args.out = args.out or f"{work}/out"
    return args, cfg, work


def train_and_analyse(trainer: Any, cfg: Any) -> int:
    """The one line, `trainer.train()`, then `analyse` over what was written (its exit code)."""
    from mindspeed_profiler.analyse import main as analyse
    from mindspeed_profiler.integrations.trl import profile_trainer

    profile_trainer(trainer, cfg)          # the one line
    trainer.train()
    return analyse([cfg.integrated.profile_save_path])
