"""What a config means to torch_npu, and what of it one release can take: both pure.

  - `profile_options(cfg)`: the torch_npu option and enum member names a config means (newest API);
  - `adapt_options(options, api)`: the keywords to pass on the release `api` describes
    (npu_release.py) and a note for each configured feature it cannot honour (the older switch
    where one exists: `msprof_tx=True` for `mstx` before `_ExperimentalConfig(mstx=)`). Notes go
    to the capture metadata (`options.notes`) and are logged once per feature and version
    (`report_notes`); they never fail the capture.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from mindspeed_profiler.core.warn import warn_once
from mindspeed_profiler.core.capture_options import FIELD_OF_KEYWORD, KEYWORDS, CaptureOptions, CaptureSettings
from mindspeed_profiler.backends.npu_release import (EXPERIMENTAL, HANDLER, PROFILE, RANGE_START, SCHEDULE,
                                                     STEP_OFFSET_ATTR, NpuApi, import_torch_npu, installed_api)


_LEVELS = {"level_none": "Level_none", "level0": "Level0", "level1": "Level1", "level2": "Level2"}
_EXPORT = {"text": "Text", "db": "Db"}

# option -> the integrated config field it comes from (named in notes)
_FIELD = {
    "activities": "profile_with_cpu / profile_with_npu",
    **FIELD_OF_KEYWORD,
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
    **dict.fromkeys(KEYWORDS, False),
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


def profile_options(cfg: CaptureSettings) -> dict[str, Any]:
    """Pure: the torch_npu option names a config means (enum members by name), for the newest API.
    `adapt_options` maps them onto what an older release has."""
    opts = CaptureOptions.from_settings(cfg)
    activities = [a for a, on in (("CPU", opts.with_cpu), ("NPU", opts.with_device)) if on]
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
        **opts.flags,
        "experimental": experimental,
        "analyse_flag": bool(cfg.profile_analysis),
    }


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
    for option in KEYWORDS:
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
    if mstx and not api.accepts(RANGE_START, "domain"):
        # the marker calls (mstx.py) drop the domain on this release: say so in the metadata, not only in
        # their log line; honoured=True because the markers themselves are recorded (logged at the first
        # marker of another domain, not here)
        notes.append(Note("mstx", "mstx marker domains", f"torch_npu {v}: mstx.range_start has no domain keyword: "
                                                         "markers are recorded without their domain", True))
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

