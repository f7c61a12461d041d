"""Ray's local node is started again when it timed out at startup (Ray waits a fixed 30 s for its
raylet, which a busy 2-core machine can miss): core.ray_local.init_local_ray, used by the examples
(trainer._init_ray, its old name), the analysis's local cluster (--ray) and the tests' fixtures; any
other failure, and a real cluster's (RAY_ADDRESS), are raised at once. The fake stands for the `ray`
module: ray.init / ray.shutdown with Ray's own message (ray/_private/node.py)."""
from __future__ import annotations

import pytest

from examples.common import trainer
from mindspeed_profiler.core import ray_local

TIMEOUT = Exception("The current node timed out during startup. This could happen because some of the "
                    "raylet failed to startup or the GCS has become overloaded.")


class FakeRay:
    def __init__(self, failures: list[Exception]):
        self.failures, self.inits, self.shutdowns = list(failures), [], 0

    def init(self, **kwargs) -> None:
        self.inits.append(kwargs)
        if self.failures:
            raise self.failures.pop(0)

    def shutdown(self) -> None:
        self.shutdowns += 1


def test_a_startup_timeout_is_retried(capsys):
    ray = FakeRay([TIMEOUT, TIMEOUT])
    trainer._init_ray(ray, {"address": "local", "num_cpus": 2}, local=True)
    assert len(ray.inits) == 3 and ray.shutdowns == 2 and ray.inits[-1] == {"address": "local", "num_cpus": 2}
    assert "attempt 1 of 3" in capsys.readouterr().out


def test_retries_end_and_say_so_through_log():
    said = []
    ray = FakeRay([TIMEOUT] * ray_local.RAY_START_ATTEMPTS)
    with pytest.raises(Exception, match="timed out during startup"):
        ray_local.init_local_ray(ray, {}, log=said.append)
    assert len(ray.inits) == ray_local.RAY_START_ATTEMPTS == trainer.RAY_START_ATTEMPTS
    assert len(said) == ray_local.RAY_START_ATTEMPTS - 1 and "attempt 2 of 3" in said[-1]


@pytest.mark.parametrize("err, local", [(ValueError("num_cpus must be positive"), True), (TIMEOUT, False)])
def test_other_failures_and_real_clusters_raise_at_once(err, local):
    ray = FakeRay([err])
    with pytest.raises(type(err)):
        trainer._init_ray(ray, {}, local=local)
    assert len(ray.inits) == 1 and ray.shutdowns == 0
