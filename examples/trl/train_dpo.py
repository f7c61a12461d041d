"""TRL's DPOTrainer on a tiny model built here (CPU), profiled by one line.

    python -m examples.trl.train_dpo [--steps 4] [--config examples/trl/profiler.yaml] [--save DIR]

The update is `actor_update` (DPO's losses, backward passes and optimizer step), the reference
model's forward inside it `reference_compute_log_prob`; then `analyse` runs over what was written.
"""
from __future__ import annotations


def preference_pairs(n: int) -> dict[str, list[str]]:
    """Prompts with a preferred and a rejected completion (made up: any preference data works)."""
    from examples.trl.tiny_model import WORDS, prompts

    chosen = [" ".join(WORDS[(i + 4 + j) % len(WORDS)] for j in range(4)) for i in range(n)]
    rejected = [" ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(2)) for i in range(n)]
    return {"prompt": prompts(n), "chosen": chosen, "rejected": rejected}


def main(argv: list[str] | None = None) -> int:
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    from examples.trl.common import example_args, train_and_analyse
    from examples.trl.tiny_model import build_tiny_model

    args, cfg, work = example_args(__doc__, argv, "trl_dpo_")
    trainer = DPOTrainer(
        model=str(build_tiny_model(f"{work}/model")), train_dataset=Dataset.from_dict(preference_pairs(64)),
        args=DPOConfig(output_dir=args.out, per_device_train_batch_size=4, max_steps=args.steps, logging_steps=1,
                       report_to=[], use_cpu=True, save_strategy="no", bf16=False, seed=0))
    return train_and_analyse(trainer, cfg)


if __name__ == "__main__":
    raise SystemExit(main())
