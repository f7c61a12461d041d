"""The `npu` backend: torch_npu.profiler on Ascend, adapted to the installed torch_npu release.

torch_npu is imported lazily and every import is guarded: without CANN it raises more than
ImportError. What each release accepts comes from snapshots of the real torch-npu wheels
(mindspeed_profiler/data/torch_npu-<version>.json, one per release line, made by
tools/extract_torch_npu_signatures.py from the wheels' sources), and, on a machine with torch_npu,
from the installed functions' own signatures (`inspect`; torch_npu's wrappers keep them with
functools.wraps). The tests run every capture against a fake of each snapshot: a keyword a release
lacks fails there as it would on that release.

Three steps, each testable alone:
  - `profile_options(cfg)`: pure, what the config means, by torch_npu option and enum member names;
  - `NpuApi`: what one release offers (accepted keywords, enum members, instance attributes),
    from a snapshot (`NpuApi.from_snapshot`) or from the installed module (`installed_api`);
  - `adapt_options(options, api)`: pure, the keywords to pass on that release and a note for each
    configured feature it cannot honour (the older switch where one exists: `msprof_tx=True` for
    `mstx` before `_ExperimentalConfig(mstx=)`). Notes go to the capture metadata (`options.notes`)
    and are logged once per feature and version; they never fail the capture.

torch_npu's own `tensorboard_trace_handler(dir, worker_name)` names the capture directory
`<worker_name>_<pid>_<YYYYmmddHHMMSSmmm>_ascend_pt`, which is our layout when worker_name is
`<role>_rank<R>_step<A>-<B>[_c<K>]_<host>`. ProfilerStep#N carries the 1-based training iteration,
as in torch captures: we set the profile's `_step_num_offset` (an instance attribute of
torch_npu.profiler.profile, listed in the snapshot) where the release has it; on releases without
it (2.3.1 - 2.5.1) the profile starts at step `begin` (`step_num`, `current_action`) with a schedule
that skips the first `begin` steps, which records the same iterations under the same names.
"""
from __future__ import annotations

import functools
import inspect
import json
import re
from dataclasses import dataclass, field
import os
from pathlib import Path
from typing import Any, Mapping

from mindspeed_profiler._warn import warn_once
from mindspeed_profiler import formats
from mindspeed_profiler.backends.base import Backend, CaptureHandle, CaptureSpec
from mindspeed_profiler.backends.memory_snapshot import ALLOCATOR, MemorySnapshot
from mindspeed_profiler.backends.registry import register_backend
from mindspeed_profiler.config import IntegratedConfig
from mindspeed_profiler.schedule import schedule_args

_LEVELS = {"level_none": "Level_none", "level0": "Level0", "level1": "Level1", "level2": "Level2"}
_EXPORT = {"text": "Text", "db": "Db"}

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
INDEX_FILE = DATA_DIR / "torch_npu_index.json"

# the torch_npu functions we call, by their public dotted names (the snapshots' keys)
PROFILE = "torch_npu.profiler.profile.__init__"
EXPERIMENTAL = "torch_npu.profiler._ExperimentalConfig.__init__"
HANDLER = "torch_npu.profiler.tensorboard_trace_handler"
SCHEDULE = "torch_npu.profiler.schedule.__init__"
ANALYSE = "torch_npu.profiler.profiler.analyse"
MARK = "torch_npu.npu.mstx.mark"
RANGE_START = "torch_npu.npu.mstx.range_start"
RANGE_END = "torch_npu.npu.mstx.range_end"
_OBJECTS = {  # public name -> attribute path from the torch_npu module
    PROFILE: ("profiler", "profile", "__init__"),
    EXPERIMENTAL: ("profiler", "_ExperimentalConfig", "__init__"),
    HANDLER: ("profiler", "tensorboard_trace_handler"),
    SCHEDULE: ("profiler", "schedule", "__init__"),
    ANALYSE: ("profiler", "profiler", "analyse"),
    MARK: ("npu", "mstx", "mark"),
    RANGE_START: ("npu", "mstx", "range_start"),
    RANGE_END: ("npu", "mstx", "range_end"),
}
ENUMS = ("ProfilerLevel", "AiCMetrics", "ExportType", "ProfilerActivity")
STEP_OFFSET_ATTR = "_step_num_offset"

# option -> the integrated config field it comes from (named in notes)
_FIELD = {
    "activities": "profile_with_cpu / profile_with_npu",
    "record_shapes": "profile_record_shapes",
    "profile_memory": "profile_with_memory",
    "with_stack": "profile_with_stack",
    "with_modules": "profile_with_module",
    "with_flops": "profile_with_flops",
    "analyse_flag": "profile_analysis",
    "profiler_level": "profile_level",
    "aic_metrics": "aic_metrics",
    "l2_cache": "l2_cache",
    "mstx": "mstx",
    "data_simplification": "data_simplification",
    "export_type": "profile_export_type",
    "mstx_domain_include": "mstx_domain_include",
    "mstx_domain_exclude": "mstx_domain_exclude",
}
# what leaving an option out means on the releases we know (torch_npu's defaults): dropping an
# option that has this value changes nothing, so it needs no note
_NEUTRAL: dict[str, Any] = {
    "record_shapes": False, "profile_memory": False, "with_stack": False, "with_modules": False, "with_flops": False,
    "analyse_flag": True, "l2_cache": False, "mstx": False, "data_simplification": True, "export_type": "Text",
}
# the feature each option is, in words (named in notes)
_FEATURE = {
    "mstx": "mstx markers in the capture",
    "mstx_domain_include": "mstx domain filter (include)",
    "mstx_domain_exclude": "mstx domain filter (exclude)",
    "export_type": "db export",
    "data_simplification": "data simplification",
    "l2_cache": "L2 cache data",
    "aic_metrics": "AI Core metrics",
    "profiler_level": "profiler level",
    "analyse_flag": "skipping the online analysis",
}


def import_torch_npu():
    """torch_npu, or raise the import error (callers guard)."""
    import torch_npu  # noqa: F401  (lazy on purpose: never at module top level)

    return torch_npu


def npu_unusable_reason() -> str | None:
    """None when torch_npu imports and sees an NPU, else why not (never raises: without CANN the
    import fails with more than ImportError)."""
    try:
        tnpu = import_torch_npu()
    except Exception as exc:
        return f"torch_npu does not import ({type(exc).__name__}: {exc})"
    try:
        if not tnpu.npu.is_available():
            return "torch_npu imports, but no NPU is available"
    except Exception as exc:
        return f"torch_npu.npu.is_available() failed ({type(exc).__name__}: {exc})"
    return None


def npu_available() -> bool:
    return npu_unusable_reason() is None


def profile_options(cfg: IntegratedConfig) -> dict[str, Any]:
    """Pure: the torch_npu option names a config means (enum members by name), for the newest API.
    `adapt_options` maps them onto what an older release has."""
    activities = [a for a, on in (("CPU", cfg.profile_with_cpu), ("NPU", cfg.profile_with_npu)) if on]
    experimental: dict[str, Any] = {
        "profiler_level": _LEVELS[cfg.profile_level],
        "l2_cache": cfg.l2_cache,
        # torch_npu's rule (2.6.0.post5, 2.7.1.post11, 2.8+ force it themselves): Level_none
        # records markers only, so they are on
        "mstx": bool(cfg.mstx) or cfg.profile_level == "level_none",
        "data_simplification": cfg.data_simplification,
        "export_type": _EXPORT[cfg.profile_export_type],
    }
    if cfg.aic_metrics:
        experimental["aic_metrics"] = cfg.aic_metrics
    if cfg.mstx_domain_include:
        experimental["mstx_domain_include"] = list(cfg.mstx_domain_include)
    if cfg.mstx_domain_exclude:
        experimental["mstx_domain_exclude"] = list(cfg.mstx_domain_exclude)
    return {
        "activities": activities,
        "record_shapes": cfg.profile_record_shapes,
        "profile_memory": cfg.profile_with_memory,
        "with_stack": cfg.profile_with_stack,
        "with_modules": cfg.profile_with_module,
        "with_flops": cfg.profile_with_flops,
        "experimental": experimental,
        "analyse_flag": bool(cfg.profile_analysis),
    }


# ------------------------------------------------------------------------------ what a release offers

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?")


def version_key(version: str | None) -> tuple[int, ...]:
    """Sort key of a torch-npu release number (2.7.1 < 2.7.1.post2 < 2.7.1.post11 < 2.8.0);
    a local part (+git...) is ignored; an unreadable one sorts first."""
    m = _VERSION.match((version or "").split("+")[0].strip())
    if not m:
        return (-1,)
    major, minor, patch, post = m.groups()
    return (int(major), int(minor), int(patch or 0), int(post or -1) + 1)


@functools.lru_cache(maxsize=None)
def snapshot_index() -> dict[str, Any]:
    """data/torch_npu_index.json: {"order": [oldest ... newest], "versions": {v: {"file", ...}}}
    (empty when missing: then only inspection tells what a release accepts)."""
    try:
        return json.loads(INDEX_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"order": [], "versions": {}}


def snapshot_versions() -> list[str]:
    """The torch-npu releases we have snapshots of, oldest first."""
    return list(snapshot_index()["order"])


@functools.lru_cache(maxsize=None)
def load_snapshot(version: str) -> dict[str, Any]:
    """The snapshot of one release (shared: do not modify it)."""
    entry = snapshot_index()["versions"][version]
    return json.loads((DATA_DIR / entry["file"]).read_text(encoding="utf-8"))


def nearest_snapshot(version: str | None) -> str | None:
    """The snapshot to assume for `version`: the same release, else the newest snapshot not newer
    than it (of its own line when there is one), else the oldest; the newest when `version` is
    unknown. None when there are no snapshots."""
    order = snapshot_versions()
    if not order:
        return None
    if version is None:
        return order[-1]
    base = version.split("+")[0].strip()
    if base in order:
        return base
    key = version_key(base)
    if key == (-1,):
        return order[-1]
    older = [v for v in order if version_key(v) <= key]
    same_line = [v for v in older if version_key(v)[:2] == key[:2]]
    return (same_line or older or order[:1])[-1]


def _keywords_of_params(params: list[tuple[str, str]]) -> frozenset[str] | None:
    """The keywords a call accepts, from (name, kind) pairs; None = any keyword (**kwargs)."""
    if params and params[0][0] == "self":
        params = params[1:]
    if any(kind == "VAR_KEYWORD" for _, kind in params):
        return None
    return frozenset(name for name, kind in params if kind in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"))


_OPAQUE = object()  # a signature that says nothing: (*args, **kwargs) of a wrapper without functools.wraps


def _inspected_keywords(obj: Any) -> Any:
    """The keywords `obj` accepts, None for any, or _OPAQUE when its signature cannot tell."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return _OPAQUE
    params = [(p.name, p.kind.name) for p in sig.parameters.values()]
    if params and params[0][0] == "self":
        params = params[1:]
    if params and all(kind in ("VAR_POSITIONAL", "VAR_KEYWORD") for _, kind in params):
        return _OPAQUE
    return _keywords_of_params(params)


@dataclass(frozen=True)
class NpuApi:
    """What one torch_npu release offers, as far as we call it.

    keywords: public function name -> the keyword names it accepts (None: any keyword);
    a function missing from `keywords` and listed in `absent` does not exist in the release.
    enums: enum class -> its member names (absent class: not a key).
    attributes: the instance attributes `profile.__init__` sets (None: not known).
    """

    version: str | None
    keywords: Mapping[str, frozenset[str] | None]
    absent: frozenset[str] = frozenset()
    enums: Mapping[str, frozenset[str]] = field(default_factory=dict)
    attributes: frozenset[str] | None = None
    source: str = "snapshot"  # where this description comes from (recorded in the metadata)

    def has(self, function: str) -> bool:
        return function not in self.absent

    def accepts(self, function: str, keyword: str) -> bool:
        if function in self.absent:
            return False
        accepted = self.keywords.get(function)
        return accepted is None or keyword in accepted

    def has_member(self, enum: str, member: str) -> bool:
        if enum in self.absent:
            return False
        members = self.enums.get(enum)
        return members is None or member in members  # None: not known, assume it is there

    @classmethod
    def from_snapshot(cls, snap: Mapping[str, Any], source: str | None = None) -> "NpuApi":
        """Pure: the API a snapshot (tools/extract_torch_npu_signatures.py) describes."""
        keywords = {name: _keywords_of_params([(p["name"], p["kind"]) for p in entry["params"]])
                    for name, entry in snap["functions"].items()}
        absent = set(snap.get("absent", ()))
        absent |= {name for name in _OBJECTS if name not in keywords}
        enums = {name: frozenset(members) for name, members in snap["enums"].items()}
        attrs = snap.get("instance_attributes", {}).get("torch_npu.profiler.profile")
        return cls(version=snap.get("version"), keywords=keywords, absent=frozenset(absent), enums=enums,
                   attributes=frozenset(attrs) if attrs is not None else None,
                   source=source or f"snapshot {snap.get('version')}")


def installed_api(tnpu: Any) -> NpuApi:
    """What the imported torch_npu offers: each function's own signature where it can be read,
    else (a wrapper hiding it) the snapshot of the nearest release; enum members from the classes;
    the instance attributes of `profile` (set inside __init__, not readable without running it)
    from the snapshot."""
    raw = getattr(tnpu, "__version__", None)
    version = raw if isinstance(raw, str) else None
    snap_version = nearest_snapshot(version)
    snap = NpuApi.from_snapshot(load_snapshot(snap_version)) if snap_version else None
    keywords: dict[str, frozenset[str] | None] = {}
    absent: set[str] = set()
    used_snapshot = False
    for name, path in _OBJECTS.items():
        obj: Any = tnpu
        for part in path:
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is None:
            absent.add(name)
            continue
        accepted = _inspected_keywords(obj)
        if accepted is _OPAQUE:
            if snap is not None and snap.has(name):
                accepted = snap.keywords.get(name)
                used_snapshot = True
            else:
                accepted = None  # nothing tells: pass what the newest API takes
        keywords[name] = accepted
    enums: dict[str, frozenset[str]] = {}
    profiler = getattr(tnpu, "profiler", None)
    for enum in ENUMS:
        cls = getattr(profiler, enum, None)
        if cls is None:
            absent.add(enum)
        else:
            enums[enum] = frozenset(n for n in dir(cls) if not n.startswith("_"))
    source = "inspected"
    if snap is not None:
        near = "" if snap_version == version else f", nearest to {version}"
        what = "hidden signatures and profile attributes" if used_snapshot else "profile attributes"
        source += f"; {what} from snapshot {snap_version}{near}"
    return NpuApi(version=version, keywords=keywords, absent=frozenset(absent), enums=enums,
                  attributes=snap.attributes if snap is not None else None, source=source)


# ------------------------------------------------------------------------------ adapting the options


@dataclass(frozen=True)
class Note:
    """A configured feature the release cannot honour as asked (honoured=False), or honours
    another way (honoured=True: e.g. the older switch)."""

    field: str  # the integrated config field
    feature: str
    message: str
    honoured: bool = False


@dataclass(frozen=True)
class Adapted:
    """The keywords to pass on one release (enum members by name), and the notes."""

    version: str | None
    profile: dict[str, Any]  # profile(...) beyond schedule / on_trace_ready / experimental_config
    experimental: dict[str, Any]  # _ExperimentalConfig(...)
    handler: dict[str, Any]  # tensorboard_trace_handler(...) beyond dir_name / worker_name
    step_naming: str  # "offset" (_step_num_offset), "skip_first" (step_num + schedule), "none"
    notes: tuple[Note, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "experimental_config": self.experimental, "handler": self.handler,
                "step_naming": self.step_naming}


def adapt_options(options: Mapping[str, Any], api: NpuApi) -> Adapted:
    """Pure: `profile_options(cfg)` mapped onto what `api`'s release accepts. Never raises for a
    missing feature: the option is dropped (or replaced by the release's older switch) with a note."""
    v = api.version or "(unknown version)"
    notes: list[Note] = []

    def drop(option: str, value: Any, why: str, instead: str = "ignored") -> None:
        field_name = _FIELD.get(option, option)
        feature = _FEATURE.get(option, option)
        notes.append(Note(field_name, feature, f"torch_npu {v}: {feature} (integrated.{field_name}={value!r}) not "
                                               f"honoured: {why}; {instead}"))

    # profile(...): activities and flags
    activities = []
    for name in options["activities"]:
        if api.has_member("ProfilerActivity", name):
            activities.append(name)
        else:
            drop("activities", name, f"ProfilerActivity has no {name}", "that activity is not recorded")
    profile: dict[str, Any] = {"activities": activities}
    for option in ("record_shapes", "profile_memory", "with_stack", "with_modules", "with_flops"):
        value = options[option]
        if api.accepts(PROFILE, option):
            profile[option] = value
        elif value != _NEUTRAL[option]:
            drop(option, value, f"profile() has no {option} keyword")

    # _ExperimentalConfig(...)
    exp_in = dict(options["experimental"])
    experimental: dict[str, Any] = {}
    level = exp_in.pop("profiler_level")
    if not api.accepts(EXPERIMENTAL, "profiler_level"):
        drop("profiler_level", level, "_ExperimentalConfig() has no profiler_level keyword", "torch_npu's default level")
    elif not api.has_member("ProfilerLevel", level):
        drop("profiler_level", level, f"ProfilerLevel has no {level}", "Level0 is used")
        experimental["profiler_level"] = "Level0"
    else:
        experimental["profiler_level"] = level
    mstx = exp_in.pop("mstx")
    if api.accepts(EXPERIMENTAL, "mstx"):
        experimental["mstx"] = mstx
    elif mstx and api.accepts(EXPERIMENTAL, "msprof_tx"):
        experimental["msprof_tx"] = True
        notes.append(Note("mstx", _FEATURE["mstx"], f"torch_npu {v}: _ExperimentalConfig() has no mstx keyword: "
                                                    f"mstx markers enabled with the older switch msprof_tx=True", True))
    elif mstx:
        drop("mstx", mstx, "_ExperimentalConfig() has neither mstx nor msprof_tx",
             "markers are emitted but this capture may not record them")
    export = exp_in.pop("export_type")
    if export != _NEUTRAL["export_type"] and not api.has_member("ExportType", export):
        drop("export_type", export.lower(), f"ExportType has no {export}", "text export")
    elif api.accepts(EXPERIMENTAL, "export_type"):
        experimental["export_type"] = export
    elif export != _NEUTRAL["export_type"]:
        drop("export_type", export.lower(), "_ExperimentalConfig() has no export_type keyword", "text export")
    if "aic_metrics" in exp_in:
        metric = exp_in.pop("aic_metrics")
        if not api.accepts(EXPERIMENTAL, "aic_metrics"):
            drop("aic_metrics", metric, "_ExperimentalConfig() has no aic_metrics keyword", "torch_npu's default metrics")
        elif not api.has_member("AiCMetrics", metric):
            drop("aic_metrics", metric, f"AiCMetrics has no {metric}", "torch_npu's default metrics")
        else:
            experimental["aic_metrics"] = metric
    for option, value in exp_in.items():  # plain values: l2_cache, data_simplification, mstx domains, ...
        if api.accepts(EXPERIMENTAL, option):
            experimental[option] = value
        elif option.startswith("mstx_domain_"):
            drop(option, value, f"_ExperimentalConfig() has no {option} keyword",
                 "mindspeed_profiler's own markers are still filtered by domain; other mstx ranges of every domain are recorded")
        elif value != _NEUTRAL.get(option, False) and value not in (None, [], ()):
            drop(option, value, f"_ExperimentalConfig() has no {option} keyword")

    # tensorboard_trace_handler(...)
    handler: dict[str, Any] = {}
    analyse = options["analyse_flag"]
    if api.accepts(HANDLER, "analyse_flag"):
        handler["analyse_flag"] = analyse
    elif analyse != _NEUTRAL["analyse_flag"]:
        drop("analyse_flag", analyse, "tensorboard_trace_handler() has no analyse_flag keyword",
             "torch_npu parses the capture online")

    # ProfilerStep#N = training iteration
    attrs = api.attributes
    if attrs is None or STEP_OFFSET_ATTR in attrs:
        step_naming = "offset"
    elif {"step_num", "current_action"} <= attrs and api.accepts(SCHEDULE, "skip_first"):
        step_naming = "skip_first"
    else:
        step_naming = "none"
        notes.append(Note("profile_step_start", "step names", f"torch_npu {v}: profile has no {STEP_OFFSET_ATTR} or "
                                                              "step_num: ProfilerStep#N counts from 0 at the capture's start, "
                                                              "not the training iteration"))
    return Adapted(version=api.version, profile=profile, experimental=experimental, handler=handler,
                   step_naming=step_naming, notes=tuple(notes))


def report_notes(adapted: Adapted) -> None:
    """Log each feature that cannot be honoured, once per feature and torch_npu version."""
    for note in adapted.notes:
        if not note.honoured:
            warn_once(("npu-not-honoured", note.field, adapted.version),
                      "mindspeed-profiler: %s (recorded in the capture metadata notes)", note.message)


def adapt_to_installed(options: Mapping[str, Any]) -> tuple[Adapted, NpuApi]:
    """`options` adapted to the imported torch_npu (raises when torch_npu does not import)."""
    api = installed_api(import_torch_npu())
    adapted = adapt_options(options, api)
    report_notes(adapted)
    return adapted, api


# ------------------------------------------------------------------------------ the capture


class NpuCapture(CaptureHandle):
    def __init__(self, spec: CaptureSpec, options: Mapping[str, Any]):
        self.spec = spec
        self.options = options
        self.adapted: Adapted | None = None
        self.directory = None
        self._prof = None
        self.notes: list[str] = []
        # profile_with_memory: also the allocator's history (from the profiler's start, warm-up included)
        self._memory = MemorySnapshot(ALLOCATOR, "npu") if options.get("profile_memory") else None

    def start(self) -> None:
        tnpu = import_torch_npu()
        P = tnpu.profiler
        self.adapted = a = adapt_options(self.options, installed_api(tnpu))
        report_notes(a)
        exp_kwargs = dict(a.experimental)
        for key, enum in (("profiler_level", P.ProfilerLevel), ("export_type", P.ExportType), ("aic_metrics", P.AiCMetrics)):
            if key in exp_kwargs:
                exp_kwargs[key] = getattr(enum, exp_kwargs[key])
        sched = schedule_args(self.spec)  # a CaptureSpec is a Window
        if a.step_naming == "skip_first":
            sched["skip_first"] = self.spec.begin
        Path(self.spec.save_dir).mkdir(parents=True, exist_ok=True)
        profile_kwargs = dict(a.profile)
        profile_kwargs["activities"] = [getattr(P.ProfilerActivity, n) for n in profile_kwargs["activities"]]
        self._prof = P.profile(
            schedule=P.schedule(**sched),
            on_trace_ready=P.tensorboard_trace_handler(self.spec.save_dir, worker_name=self.spec.worker_name, **a.handler),
            experimental_config=P._ExperimentalConfig(**exp_kwargs),
            **profile_kwargs,
        )
        # the profile's step 0 is iteration `begin`: name steps by training iteration
        if a.step_naming == "offset":
            self._prof._step_num_offset = self.spec.begin
        elif a.step_naming == "skip_first":
            self._prof.step_num = self.spec.begin
            self._prof.current_action = self._prof.schedule(self.spec.begin)
        self._prof.start()
        if self._memory is not None:
            self._memory.start()

    def step(self) -> None:
        self._prof.step()

    def stop(self) -> None:
        if self._prof is not None:
            prof, self._prof = self._prof, None
            if self._memory is not None:
                self._memory.stop()
                self.notes += self._memory.notes
            try:
                prof.stop()
            finally:
                # torch_npu made its directory at start and writes it at stop, also when the capture
                # is being abandoned (no export then): find it, so the metadata goes there too.
                self.directory = find_capture_dir(Path(self.spec.save_dir), self.spec.worker_name)

    def export(self) -> list[Path]:
        # torch_npu wrote (and, with analyse_flag, parsed) the capture itself; its public methods
        # log failures instead of raising, so check that the directory really exists.
        if self.directory is None:
            raise RuntimeError(f"torch_npu wrote no {self.spec.worker_name}_<pid>_<time>_ascend_pt directory under {self.spec.save_dir}")
        out = self.directory / formats.ASCEND_OUTPUT_DIR
        files = sorted(p for p in out.rglob("*") if p.is_file()) if out.is_dir() else []
        if self._memory is not None:
            snap = self._memory.write(self.directory / formats.memory_snapshot_name(self.spec.trace_basename, os.getpid()))
            files += [snap] if snap is not None else []
        return files


def find_capture_dir(save_dir: Path, worker: str) -> Path | None:
    """The newest `<worker>_<pid>_<time>_ascend_pt` directory of this process under save_dir."""
    import os

    found = sorted(save_dir.glob(f"{worker}_{os.getpid()}_*_{NpuBackend.suffix}"))
    return found[-1] if found else None


@register_backend
class NpuBackend(Backend):
    """torch_npu.profiler on Ascend; `auto` prefers it wherever it can run."""

    name = "npu"
    suffix = "ascend_pt"
    priority = 100
    device_markers = {"npu": ("mstx",)}
    capture_markers = ()  # mstx ranges are in the torch_npu capture already (experimental mstx=True)
    annotation_only_mode = True   # torch_npu's Level_none + mstx
    device = "npu"

    @classmethod
    def unusable_reason(cls) -> str | None:
        return npu_unusable_reason()

    @classmethod
    def detect_device(cls) -> str | None:
        return "npu" if npu_available() else None

    def options(self, cfg: IntegratedConfig) -> dict[str, Any]:
        """What the config means, what is passed on the installed torch_npu and why (the metadata's
        `options`; `notes` lists what that release cannot honour)."""
        opts = profile_options(cfg)
        try:
            adapted, api = adapt_to_installed(opts)
        except Exception as exc:  # torch_npu does not import: the capture fails at start and says why
            return {**opts, "torch_npu": {"error": f"{type(exc).__name__}: {exc}"}, "notes": []}
        return {**opts, "torch_npu": {"version": api.version, "api": api.source, "passed": adapted.as_dict()},
                "notes": [n.message for n in adapted.notes]}

    def open(self, spec: CaptureSpec) -> CaptureHandle:
        return NpuCapture(spec, profile_options(spec.cfg))
