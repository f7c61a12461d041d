"""Plain data from what a user passes: an OmegaConf/Hydra container turned into dicts and lists
(without importing omegaconf unless one is passed; load_config does it once, when reading), and the
deep copy of our block that load_config makes once, so that nothing validated is the caller's."""
from __future__ import annotations

from typing import Any, Mapping

from mindspeed_profiler.config.errors import MISSING, ROOT_KEY, ProfilerConfigError


def to_container(source: Any) -> Any:
    """Turn an OmegaConf/Hydra DictConfig (or ListConfig) into plain Python, without importing omegaconf.

    Of a whole training config only the `profiler_config` node is resolved: an interpolation or a
    Hydra resolver elsewhere (e.g. `${now:...}` outside a Hydra app) is none of our business. An
    interpolation inside the block still resolves against the whole config. `???` (missing) values
    are kept as the string '???' so that an override can fill them; validation names any left.
    """
    mod = type(source).__module__
    if not mod.startswith("omegaconf"):
        return source
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        if isinstance(source, DictConfig) and ROOT_KEY in source:
            node = OmegaConf.select(source, ROOT_KEY, throw_on_missing=False)  # resolves `profiler_config: ${x}`
            if OmegaConf.is_config(node):
                node = OmegaConf.to_container(node, resolve=True)
            return {ROOT_KEY: MISSING if OmegaConf.is_missing(source, ROOT_KEY) else node}
        return OmegaConf.to_container(source, resolve=True)
    except OmegaConfBaseException as exc:
        where = getattr(exc, "full_key", None) or ROOT_KEY
        msg = str(getattr(exc, "msg", None) or exc).strip().splitlines()[0]
        raise ProfilerConfigError([(where, f"cannot resolve: {msg}")]) from None


def deep_copy(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: deep_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [deep_copy(v) for v in obj]
    return obj
