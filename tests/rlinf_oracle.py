"""RLinf's own verdict on `cluster.profiling` blocks, run with RLinf's interpreter (`.venv-rlinf/bin/python`).

tests/test_rlinf_real.py runs this script in the environment `./run test` makes for RLinf
(rlinf 0.3.0 from PyPI pins wandb < 0.25.1, which verl's environment is not). It imports nothing of
mindspeed_profiler: it is RLinf's side of the comparison.

stdin: JSON `{"cases": [{"id": ..., "profiling": {...}}, ...]}`. For each case it builds RLinf's
`ClusterConfig(num_nodes=1, component_placement=[], profiling=...)`, which is where RLinf checks a
training YAML's `cluster.profiling` (the backend's config class, its field check, its
`__post_init__`), and for an accepted Nsight block the `nsys profile` tokens RLinf renders
(`to_cli_tokens`, the output prefix left out).

stdout: JSON `{"rlinf": version, "results": [{"id", "accepted", "error", "options", "tokens"}],
"keys": {...}, "tracer": bool}`: `keys` are the fields of RLinf's profiling config classes by
backend; `tracer` says whether this release has a tracer module (`rlinf.scheduler.manager.tracer`).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from importlib.metadata import version


def main() -> int:
    request = json.load(sys.stdin)
    from rlinf.scheduler.cluster.config import ClusterConfig
    from rlinf.scheduler.hardware.accelerators.accelerator import AcceleratorManager

    results = []
    for case in request["cases"]:
        out = {"id": case["id"], "accepted": False, "error": None, "options": None, "tokens": None}
        try:
            cfg = ClusterConfig(num_nodes=1, component_placement=[], profiling=dict(case["profiling"]))
            out["accepted"] = True
            prof = cfg.profiling
            out["options"] = getattr(prof, "options", None)
            if hasattr(prof, "to_cli_tokens"):
                out["tokens"] = prof.to_cli_tokens()
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"[:600]
        results.append(out)
    backends = AcceleratorManager.profile_backend_register
    keys = {name: [f.name for f in dataclasses.fields(cls)] for name, cls in sorted(backends.items())}
    tracer = importlib.util.find_spec("rlinf.scheduler.manager.tracer") is not None
    json.dump({"rlinf": version("rlinf"), "results": results, "keys": keys, "tracer": tracer}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
