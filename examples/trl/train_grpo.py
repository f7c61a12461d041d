"""TRL's GRPOTrainer on a tiny model built here (CPU, a few seconds a step), profiled by one line.

    python -m examples.trl.train_grpo [--steps 4] [--config examples/trl/profiler.yaml] [--save DIR]

then `python -m mindspeed_profiler.analyse <profile_save_path>` (the script runs it at the end).
"""
from __future__ import annotations


def reward_words(completions: list[str], **_: object) -> list[float]:
    """More words is better (a toy reward: any TRL reward function works)."""
    return [float(len(c.split())) for c in completions]


def main(argv: list[str] | None = None) -> int:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from examples.trl.common import example_args, train_and_analyse
    from examples.trl.tiny_model import build_tiny_model, prompts

    args, cfg, work = example_args(__doc__, argv, "trl_grpo_")
    trainer = GRPOTrainer(
        model=str(build_tiny_model(f"{work}/model")), reward_funcs=reward_words,
        train_dataset=Dataset.from_dict({"prompt": prompts(64)}),
        args=GRPOConfig(output_dir=args.out, per_device_train_batch_size=4, num_generations=4, max_completion_length=8,
                        max_steps=args.steps, beta=0.1, logging_steps=1, report_to=[], use_cpu=True, save_strategy="no",
                        bf16=False, seed=0))
    return train_and_analyse(trainer, cfg)


if __name__ == "__main__":
    raise SystemExit(main())
