"""A batch the actor ranks cannot share evenly is a config error before Ray starts (it used to stall
for EXAMPLE_RAY_TIMEOUT_S: a rank with no shard never joined the gradient all-reduce)."""
from __future__ import annotations

import pytest

import examples.dpo.train_dpo as dpo
import examples.grpo.train_grpo as grpo


class _NoRay:
    def __init__(self, *a, **k):
        raise AssertionError("Ray was started for a config that cannot run")


@pytest.mark.parametrize("module,override", [
    (grpo, "grpo.prompts_per_iteration=1"),   # fewer prompts than the 2 actor ranks: rank 1 gets nothing
    (grpo, "grpo.prompts_per_iteration=3"),   # uneven shards: the gradient average is no longer the batch mean
    (dpo, "dpo.pairs_per_iteration=1"),
    (dpo, "dpo.pairs_per_iteration=5"),
])
def test_uneven_batch_rejected_before_ray(monkeypatch, module, override):
    monkeypatch.setattr("examples.common.trainer.RayCluster", _NoRay)
    with pytest.raises(ValueError, match="actor_ranks"):
        module.run(module.Path(module.__file__).with_suffix("").parent / ("grpo.yaml" if module is grpo else "dpo.yaml"),
                   [override], analyse=False)
