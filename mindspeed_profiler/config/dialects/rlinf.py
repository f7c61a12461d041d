"""RLinf's profiler settings read as ours: `cluster.tracer` (enable, output_file) becomes `tracer`,
`cluster.profiling` (or a profile preset file on its own) becomes `system`, its 0-based steps
counted from 1."""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from mindspeed_profiler.config.checks import ALL_GROUPS, system_backend_choices
from mindspeed_profiler.config.dialects.reader import Reader, Translation, is_mapping
from mindspeed_profiler.config.errors import describe, hint
from mindspeed_profiler.config.schema import INTEGRATED_FIELDS, TRACER_FIELDS

RLINF_RELEASE = "0.3.0"   # the PyPI release the profiling keys were read from (tests/test_rlinf_real.py checks it)
RLINF_TRACER_KEYS = ("enable", "output_file")
_COMMON = ("backend", "enabled", "worker_groups", "steps", "output_dir")   # RLinf's ProfileConfig
# cluster.profiling per backend: the fields of RLinf's config class of that backend (NsightConfig,
# RocprofSysConfig); RLinf refuses any other key
RLINF_BACKEND_KEYS = {"nsight": _COMMON + ("options", "flags"), "rocprof_sys": _COMMON + ("args", "env")}
RLINF_PROFILING_KEYS = ("backend", "enabled", "worker_groups", "steps", "output_dir", "options", "flags", "args", "env")
RLINF_TRACE_FILE = "trace_events.jsonl"


def rlinf_shape(data: Mapping[str, Any]) -> str | None:
    """Where RLinf's tracer / profiling are in `data`, decided once (load_config applies the
    overrides in RLinf's keys before `rlinf_view` reads them): "cluster" (a training YAML's
    `cluster`), "defaults" (only Hydra defaults fill cluster.profiling), "top" (a cluster block
    itself), "preset" (a profile preset file: the profiling block alone); None when not RLinf's."""
    cluster = data.get("cluster")
    if is_mapping(cluster) and ({"tracer", "profiling"} & set(cluster) or _rlinf_defaults(data)):
        return "cluster"
    if _rlinf_defaults(data):
        return "defaults"
    if is_mapping(data.get("profiling")) or (is_mapping(data.get("tracer")) and "output_file" in data["tracer"]):
        return "top"
    keys = set(data)
    if "backend" in keys and keys <= set(RLINF_PROFILING_KEYS) and keys - set(INTEGRATED_FIELDS):
        return "preset"   # ({backend: ...} alone stays a bare integrated section)
    return None


def rlinf_view(shape: str, data: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """(the mapping holding RLinf's tracer / profiling, how their keys are named) for that shape."""
    if shape == "cluster":
        cluster = data.get("cluster")
        return (cluster if is_mapping(cluster) else {}), "cluster."
    if shape == "defaults":
        return {}, "cluster."
    if shape == "top":
        return data, ""
    return {"profiling": data}, "preset"


def _rlinf_defaults(data: Mapping[str, Any]) -> list[str]:
    """Hydra defaults entries that fill cluster.profiling (`profile/default@cluster.profiling`)."""
    entries = data.get("defaults")
    return [e for e in entries if isinstance(e, str) and e.endswith("@cluster.profiling")] if isinstance(entries, list) else []


def from_rlinf(data: Mapping[str, Any], cluster: Mapping[str, Any], prefix: str = "cluster.") -> Translation:
    """RLinf's cluster.tracer / cluster.profiling as our tracer / system sections. `prefix`: how
    their keys are named ("cluster.", "" for a cluster block, "preset" for a profiling block alone)."""
    r = Reader(data)
    block: dict[str, Any] = {k: cluster[k] for k in ("integrated", "system") if k in cluster}
    tracer = r.get(cluster, "tracer", f"{prefix}tracer")
    if is_mapping(tracer):
        block["tracer"] = _rlinf_tracer(r, data, tracer, f"{prefix}tracer")
    profiling = r.get(cluster, "profiling", f"{prefix}profiling")
    if is_mapping(profiling):
        if "system" in block:
            r.problems.append((f"{prefix}profiling", "given together with a system section: keep one"))
        else:
            block["system"] = _rlinf_profiling(r, data, profiling, "" if prefix == "preset" else f"{prefix}profiling")
    elif _rlinf_defaults(data):
        r.note("defaults", f"{', '.join(_rlinf_defaults(data))}: the profiling block comes from Hydra's defaults, not in this "
                           "file; pass the composed config (Hydra DictConfig), or check the preset file itself")
    return r.finish("rlinf", block)


def _rlinf_log_dir(r: Reader, data: Mapping[str, Any], sub: str) -> str | None:
    """RLinf's default output place: <runner.logger.log_path>/<experiment_name>/<sub>, when both are plain."""
    log_path = r.get(data, "runner.logger.log_path", "runner.logger.log_path")
    name = r.get(data, "runner.logger.experiment_name", "runner.logger.experiment_name")
    if isinstance(log_path, str) and isinstance(name, str) and "${" not in log_path + name:
        return os.path.join(log_path, name, sub)
    return None


def _rlinf_tracer(r: Reader, data: Mapping[str, Any], tracer: Mapping[str, Any], where: str) -> dict[str, Any]:
    r.known_keys(tracer, RLINF_TRACER_KEYS + tuple(TRACER_FIELDS), where, "RLinf tracer")
    out = {k: v for k, v in tracer.items() if k in TRACER_FIELDS}
    enable = r.get(tracer, "enable", f"{where}.enable")
    if enable is not None and r.check("tracer", "enable", enable, f"{where}.enable"):
        out["enable"] = enable
    output_file = r.get(tracer, "output_file", f"{where}.output_file")
    if isinstance(output_file, str) and output_file.strip():
        directory = os.path.dirname(output_file) or "."
        out.setdefault("output_dir", directory)
        r.note(f"{where}.output_file", f"one JSONL file in RLinf; here each process writes its segment into {directory!r} "
                                       f"and `mindspeed-profiler merge` makes timeline.json there (the name "
                                       f"{os.path.basename(output_file)!r} is not used)")
    elif output_file is not None:
        r.problems.append((f"{where}.output_file", f"got {describe(output_file)}; expected a file path or null"))
    elif out.get("enable") and "output_dir" not in out:
        default = _rlinf_log_dir(r, data, "trace")
        if default:
            out["output_dir"] = default
        r.note(f"{where}.output_file", f"null: RLinf writes <log_path>/<experiment_name>/trace/{RLINF_TRACE_FILE}; here the "
                                       f"segments and the merged timeline.json go to {default or '<profile_save_path>/timeline'}")
    return out


def _rlinf_profiling(r: Reader, data: Mapping[str, Any], prof: Mapping[str, Any], where: str) -> dict[str, Any]:
    """cluster.profiling (`where`; "" for a preset file) -> our system section."""
    def at(key: str) -> str:
        return f"{where}.{key}" if where else key

    _profiling_keys(r, prof, at)
    out = {k: r.get(prof, k, at(k)) for k in RLINF_PROFILING_KEYS if k in prof}
    if out.get("backend") is None and out.get("enabled", True):
        r.problems.append((at("backend"), f"is required (RLinf requires it too); allowed: {', '.join(system_backend_choices())}"))
    for key in ("worker_groups", "flags"):   # RLinf takes one name as a string
        if isinstance(out.get(key), str) and not (key == "worker_groups" and out[key].lower() == ALL_GROUPS):
            out[key] = [out[key]]
    if out.get("flags") is None:
        out.pop("flags", None)
    steps = out.get("steps")
    if steps is not None:
        if isinstance(steps, (list, tuple)) and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps):
            out["steps"] = [s + 1 for s in steps]
            if steps:
                r.note(at("steps"), f"RLinf counts training steps from 0 (global_step), this library from 1: "
                                    f"{list(steps)} -> {out['steps']}")
            else:   # RLinf takes [] and profiles no step
                del out["steps"]
                out["enabled"] = False
                r.note(at("steps"), "[]: RLinf profiles no step with it; here system.enabled is false")
        else:
            r.problems.append((at("steps"), f"got {describe(steps)}; expected a list of RLinf step indices >= 0 "
                                            "(global_step, counted from 0)"))
            out.pop("steps")
    options = out.get("options")
    if is_mapping(options):
        out["options"] = _rlinf_nsys_options(r, options, out.get("steps") or [], at("options"))
        both = sorted(set(out.get("flags") or ()) & set(out["options"])) if isinstance(out.get("flags"), list) else []
        if both:
            r.problems.append((at("flags"), f"{', '.join(both)}: given as a flag and as an option (RLinf refuses it): keep one"))
    if out.get("enabled", True) and out.get("output_dir") is None:
        default = _rlinf_log_dir(r, data, "profiling")
        if default:
            out["output_dir"] = default
            r.note(at("output_dir"), f"null: RLinf's default place, {default!r}, is kept")
    return out


def _profiling_keys(r: Reader, prof: Mapping[str, Any], at: Any) -> None:
    """RLinf refuses a key its backend's config class does not have (our own backends, msprof and
    py_spy, take any of RLinf's keys)."""
    backend = prof.get("backend")
    known = RLINF_BACKEND_KEYS.get(backend, RLINF_PROFILING_KEYS) if isinstance(backend, str) else RLINF_PROFILING_KEYS
    for key in prof:
        if key in known:
            continue
        whose = f"RLinf's {backend} profiling" if backend in RLINF_BACKEND_KEYS else "RLinf profiling"
        r.problems.append((at(key), f"not a key of {whose} config (RLinf refuses it){hint(str(key), known)}; its keys: "
                                    f"{', '.join(known)}"))


def _rlinf_nsys_options(r: Reader, options: Mapping[str, Any], steps: Sequence[int], where: str) -> dict[str, Any]:
    """RLinf's nsys option spellings: booleans as lower-case strings, the `stop-on-range-end` alias,
    and `capture-range-end: stop` with several steps (nsys then ignores every range after the first)."""
    out = {str(k): (str(v).lower() if isinstance(v, bool) else v) for k, v in options.items()}
    if "stop-on-range-end" in out:
        alias = str(out.pop("stop-on-range-end")).strip().lower()
        if "capture-range-end" in out:
            r.problems.append((f"{where}.stop-on-range-end", "given together with capture-range-end (RLinf refuses both too): keep one"))
        else:
            out["capture-range-end"] = "stop" if alias in ("true", "1", "yes", "on") else "none" if alias in ("false", "0", "no", "off") else alias
    if "o" in out and "output" in out:
        r.problems.append((where, "gives both 'o' and 'output' (RLinf refuses both too): keep one"))
    end = str(out.get("capture-range-end", "")).lower()
    if len(steps) > 1 and end in ("stop", "stop-shutdown"):
        del out["capture-range-end"]
        r.note(f"{where}.capture-range-end", f"{end!r} with {len(steps)} steps captures only the first step (nsys ignores "
                                             f"later ranges); left out, so each step's range is captured (repeat:{len(steps)})")
    return out
