"""verl's own verdict on profiler configs, run with verl's interpreter (`.venv-verl/bin/python`).

tests/test_verl_real.py runs this script in the environment `./run test` makes for verl (verl 0.9.1
needs transformers < 5.11, which the vLLM CPU build in .venv cannot have). It imports nothing of
mindspeed_profiler: it is verl's side of the comparison.

stdin: JSON `{"cases": [{"id": ..., "overrides": [...]}, ...]}`. It composes verl's shipped
`ppo_trainer` config with Hydra once, and for each case applies the overrides to a copy with
Hydra's own override parser and applier (what `compose` does after loading the defaults: one
compose per case took 1.2-1.6 s here, a copy 0.1 s), then runs on it what verl 0.9.1 runs on its
profiler settings when its trainer and workers start:

- each role's `profiler` (actor, rollout, ref, critic, reward_model, where the config has one)
  converted as verl's workers convert it: `omega_conf_to_dataclass(block, ProfilerConfig)` (the
  engine workers) and `omega_conf_to_dataclass(block)` (Hydra's instantiate through `_target_`: the
  critic and the inner training workers), then its tool's `tool_config` instantiated when the tool
  is one of verl's, then `DistProfiler(rank=0, ...)` for the tools whose module imports on a CPU
  machine (torch, torch_memory; npu imports torch_npu, nsys imports nvtx: hardware, not config);
- `global_profiler`, which verl never converts to a dataclass: what its trainer does with it
  (`global_steps in steps`, and with nsys the controller options as a container).

stdout: JSON `{"verl": version, "results": [{"id", "accepted", "error"}], "keys": {...},
"generated_is_composed": bool}`: `keys` lists the fields of verl's profiler config classes and the
shipped profiler YAMLs' keys, for the recorded key lists (mindspeed_profiler/config/dialects/verl.py);
`generated_is_composed` says whether the profiler blocks of the shipped `_generated_ppo_trainer.yaml`
(the file our side reads, as users do) are what Hydra composes.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
import traceback
from contextlib import redirect_stdout

ROLE_PATHS = ("actor_rollout_ref.actor.profiler", "actor_rollout_ref.rollout.profiler", "actor_rollout_ref.ref.profiler",
              "critic.profiler", "reward_model.profiler")
TOOLS = ("npu", "nsys", "torch", "torch_memory", "precision_debugger")   # DistProfiler's branches
CPU_TOOLS = ("torch", "torch_memory")


def _check(cfg) -> None:
    """What verl runs on the profiler settings of a composed trainer config; raises on refusal."""
    from omegaconf import OmegaConf

    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.profiler.config import ProfilerConfig
    from verl.utils.profiler.profile import DistProfiler

    gp = cfg.get("global_profiler")
    if gp is not None:
        steps = OmegaConf.select(gp, "steps")
        if steps is not None:
            _ = 1 in steps   # ray_trainer: `self.global_steps in self.config.global_profiler.steps`
        if OmegaConf.select(gp, "tool") == "nsys" and steps:
            OmegaConf.to_container(gp.global_tool_config.nsys.controller_nsight_options)   # main_ppo
    for path in ROLE_PATHS:
        block = OmegaConf.select(cfg, path)
        if block is None:
            continue
        config = omega_conf_to_dataclass(block, dataclass_type=ProfilerConfig)
        if "_target_" in block:
            omega_conf_to_dataclass(block)
        tool = block.get("tool", None)
        tool_config = None
        if tool in TOOLS:
            tool_config = omega_conf_to_dataclass(block.get("tool_config", {}).get(tool))
        if tool in CPU_TOOLS:
            DistProfiler(rank=0, config=config, tool_config=tool_config)


def _keys() -> dict:
    """verl's own key lists: its config classes' fields and the shipped profiler YAMLs' keys."""
    import verl
    from omegaconf import OmegaConf
    from verl.utils.profiler import config as C

    classes = {name: [f.name for f in dataclasses.fields(getattr(C, name))]
               for name in ("ProfilerConfig", "NsightToolConfig", "NPUToolConfig", "TorchProfilerToolConfig",
                            "TorchProfilerScheduleConfig", "TorchMemoryToolConfig", "PrecisionDebuggerToolConfig")}
    here = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    trainer = OmegaConf.load(os.path.join(here, "_generated_ppo_trainer.yaml"))
    role = OmegaConf.load(os.path.join(here, "profiler", "profiler.yaml"))
    gp = trainer.global_profiler
    return {
        "classes": classes,
        "global_profiler": list(gp.keys()),
        "global_tool_config": {k: list(v.keys()) for k, v in gp.global_tool_config.items()},
        "role_profiler": list(role.keys()),
        "role_tool_config": {k: list(v.keys()) for k, v in role.tool_config.items()},
        "files": {name: os.path.join(here, name) for name in ("_generated_ppo_trainer.yaml", "ppo_trainer.yaml",
                                                               "profiler/profiler.yaml")},
    }


def _overridden(base, overrides: list[str]):
    """A copy of the composed config with Hydra's overrides applied as compose applies them."""
    import copy

    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    cfg = copy.deepcopy(base)
    ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides(overrides), cfg)
    return cfg


def main() -> int:
    request = json.load(sys.stdin)
    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        base = compose(config_name="ppo_trainer")
    generated = OmegaConf.load(os.path.join(config_dir, "_generated_ppo_trainer.yaml"))
    results = []
    for case in request["cases"]:
        out = {"id": case["id"], "accepted": False, "error": None}
        try:
            cfg = _overridden(base, list(case["overrides"]))
        except Exception as exc:   # an override Hydra refuses is not a profiler verdict
            out["error"] = f"override: {type(exc).__name__}: {exc}"
            results.append(out)
            continue
        try:
            with redirect_stdout(io.StringIO()):   # verl prints as it builds profilers
                _check(cfg)
            out["accepted"] = True
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}".strip()[:600]
            if os.environ.get("VERL_ORACLE_TRACE"):
                traceback.print_exc(file=sys.stderr)
        results.append(out)
    # the profiler blocks only: the rest of the shipped file lags compose in places (0.9.1: `model_engine`)
    def block(cfg, path):
        node = OmegaConf.select(cfg, path)
        return None if node is None else OmegaConf.to_container(node, resolve=False)

    same = all(block(base, p) == block(generated, p) for p in ("global_profiler",) + ROLE_PATHS)
    json.dump({"verl": verl.__version__, "results": results, "keys": _keys(), "generated_is_composed": same}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
