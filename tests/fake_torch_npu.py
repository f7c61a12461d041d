"""A fake `torch_npu` of any snapshotted release, built from the signature snapshot of the real
package (it cannot run here).

Why a fake: torch_npu needs CANN and an Ascend NPU, and installing it breaks `import torch` on this
box. What keeps it honest: every function and constructor below takes exactly the parameters that
the chosen torch-npu release has, rebuilt as an `inspect.Signature` from
mindspeed_profiler/data/torch_npu-<version>.json (extracted from that wheel's sources by
tools/extract_torch_npu_signatures.py), and every call is bound against it first: a keyword the
release lacks raises TypeError here as it would there. What the release does not have (a function
in the snapshot's "absent" list, an enum member, an enum class, the dynamic_profile module) is not
in the fake either. Enum members and their values, the instance attributes of `profile` we may
set, and `__version__` come from the same snapshot.

Behaviour is a small model of the real code (read from the same wheels): `profile` follows its
schedule (skip_first included) and, where the release has it, `_step_num_offset` (ProfilerStep#N is
step_num + offset, or step_num alone on 2.3.1 - 2.5.1); the capture directory is
`<dir>/<worker_name>_<pid>_<time>_ascend_pt` as torch_npu's ProfPathCreator names it (the host name
instead of a worker_name that is not shorter than the snapshot's MAX_WORKER_NAME_LENGTH),
`tensorboard_trace_handler(analyse_flag=True)` writes an ASCEND_PROFILER_OUTPUT/, mstx returns range
ids. The recorded ProfilerStep#N names are written to `FRAMEWORK/fake_steps.json` in the capture
directory so tests can check what was recorded. (Real torch_npu wraps most public functions in
`no_exception_func`, which logs a TypeError and returns None; the fake raises it, so tests see it.)

`inspectable=False` hides the signatures (the functions look like `(*args, **kwargs)` wrappers), so
the backend has to rely on the release's snapshot in package data instead of inspecting.

Usage (tests): the `fake_torch_npu` fixture (conftest.py) installs the newest release's fake for one
test and removes it afterwards:
    def test_x(fake_torch_npu): ...; fake_torch_npu.calls_to("torch_npu.profiler.profile.__init__")
Another release, or a modified snapshot:
    fake = FakeTorchNpu.for_version("2.5.1").install()   # sys.modules["torch_npu"], ".profiler", ".npu", ...
    fake = FakeTorchNpu(snapshot).install()
    try: ... finally: fake.uninstall()
SNAPSHOT_VERSIONS lists every snapshotted release, oldest first.
Helper T reuses it for mstx: fake.calls_to("torch_npu.npu.mstx.range_start"), fake.mstx_events.
"""
from __future__ import annotations

import datetime as _dt
import enum
import inspect
import json
import os
import socket
import sys
import types
from pathlib import Path
from typing import Any, Callable

import mindspeed_profiler

DATA_DIR = Path(mindspeed_profiler.__file__).parent / "data"
_INDEX = json.loads((DATA_DIR / "torch_npu_index.json").read_text(encoding="utf-8"))
SNAPSHOT_VERSIONS: list[str] = list(_INDEX["order"])  # oldest first
NEWEST = _INDEX["newest"]
SNAPSHOT_PATH = DATA_DIR / _INDEX["versions"][NEWEST]["file"]
MODULES = ("torch_npu", "torch_npu.profiler", "torch_npu.profiler.profiler", "torch_npu.profiler.dynamic_profile",
           "torch_npu.npu", "torch_npu.npu.mstx")


def snapshot_path(version: str) -> Path:
    return DATA_DIR / _INDEX["versions"][version]["file"]


def load_snapshot(path: Path | str = SNAPSHOT_PATH) -> dict[str, Any]:
    """A snapshot by path, or by release (`load_snapshot("2.5.1")`); a fresh copy each time."""
    if isinstance(path, str) and path in _INDEX["versions"]:
        path = snapshot_path(path)
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


class _SourceDefault:
    """A default the snapshot only has as source text (e.g. `Constant.LEVEL0`)."""

    def __init__(self, src: str):
        self.src = src

    def __repr__(self) -> str:
        return self.src


def signature_of(entry: dict[str, Any]) -> inspect.Signature:
    params = []
    for p in entry["params"]:
        kind = getattr(inspect.Parameter, p["kind"])
        if p.get("has_default"):
            default = p["default"] if "default" in p else _SourceDefault(p["default_src"])
        else:
            default = inspect.Parameter.empty
        params.append(inspect.Parameter(p["name"], kind, default=default))
    return inspect.Signature(params)


class Action(enum.Enum):  # torch_npu.profiler.ProfilerAction
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


_RECORDING = (Action.RECORD, Action.RECORD_AND_SAVE)


class FakeTorchNpu:
    def __init__(self, snapshot: dict[str, Any] | None = None, npu_available: bool = True, inspectable: bool = True):
        self.snap = snapshot or load_snapshot()
        self.version = self.snap.get("version")
        self.absent = set(self.snap.get("absent", ()))
        self.inspectable = inspectable
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: dict[str, BaseException] = {}  # qualname -> exception to raise (fault injection)
        self.npu_available = npu_available
        self.profiles: list[Any] = []
        self.mstx_events: list[tuple[str, str, str | None]] = []  # (kind, message or id, domain; None: the release has none)
        self._saved: dict[str, Any] = {}
        self.modules = self._build()

    @classmethod
    def for_version(cls, version: str, **kwargs: Any) -> "FakeTorchNpu":
        """The fake of one snapshotted release (see SNAPSHOT_VERSIONS)."""
        return cls(load_snapshot(version), **kwargs)

    # ------------------------------------------------------------------ install / inspect

    def install(self) -> "FakeTorchNpu":
        for name in MODULES:
            if name in sys.modules:
                self._saved[name] = sys.modules[name]
            sys.modules.pop(name, None)
        sys.modules.update(self.modules)
        return self

    def uninstall(self) -> None:
        for name in MODULES:
            sys.modules.pop(name, None)
            if name in self._saved:
                sys.modules[name] = self._saved.pop(name)

    def calls_to(self, qualname: str) -> list[dict[str, Any]]:
        return [args for name, args in self.calls if name == qualname]

    def has(self, qualname: str) -> bool:
        return qualname in self.snap["functions"]

    # ------------------------------------------------------------------ building

    def _wrap(self, qualname: str, impl: Callable[..., Any]) -> Callable[..., Any]:
        entry = self.snap["functions"][qualname]
        sig = signature_of(entry)
        fake = self

        def fn(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{qualname}{sig} (torch-npu {fake.version}): {exc}") from None
            arguments = {k: v for k, v in bound.arguments.items() if k != "self"}
            fake.calls.append((qualname, arguments))
            if qualname in fake.fail:
                raise fake.fail[qualname]
            return impl(*args, **kwargs)

        if self.inspectable:
            fn.__signature__ = sig  # type: ignore[attr-defined]
        fn.__name__ = qualname.rsplit(".", 1)[-1]
        fn.__qualname__ = qualname
        return fn

    def _enum_class(self, name: str) -> type:
        return type(name, (), dict(self.snap["enums"][name]))

    def _build(self) -> dict[str, types.ModuleType]:
        fake = self
        W = self._wrap
        allowed_attrs = set(self.snap["instance_attributes"]["torch_npu.profiler.profile"])
        has_offset = "_step_num_offset" in allowed_attrs

        ProfilerActivity = enum.Enum("ProfilerActivity", {m: m for m in self.snap["enums"]["ProfilerActivity"]})

        class _ExperimentalConfig:
            def _init(self, **kwargs: Any) -> None:
                self._fake_kwargs = kwargs

            __init__ = W("torch_npu.profiler._ExperimentalConfig.__init__", lambda self, *a, **k: _ExperimentalConfig._init(self, **k))

        class schedule:  # torch_npu.profiler.scheduler.Schedule
            def _init(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0, skip_first_wait: int = 0) -> None:
                self.wait, self.active, self.warmup = wait, active, warmup
                self.repeat, self.skip_first, self.skip_first_wait = repeat, skip_first, skip_first_wait

            __init__ = W("torch_npu.profiler.schedule.__init__", lambda self, *a, **k: schedule._init(self, *a, **k))

            def __call__(self, step: int) -> Action:  # the real Schedule.__call__'s arithmetic
                if step < self.skip_first:
                    return Action.NONE
                step -= self.skip_first
                if self.skip_first_wait != 0:
                    step += self.wait
                n = self.wait + self.warmup + self.active
                if self.repeat > 0 and step / n >= self.repeat:
                    return Action.NONE
                mod = step % n
                if mod < self.wait:
                    return Action.NONE
                if mod < self.wait + self.warmup:
                    return Action.WARMUP
                return Action.RECORD if mod < n - 1 else Action.RECORD_AND_SAVE

        max_worker = self.snap["constants"]["MAX_WORKER_NAME_LENGTH"]

        def tensorboard_trace_handler(dir_name=None, worker_name=None, analyse_flag=True, async_mode=False):
            # ProfPathCreator.init: a worker_name of MAX_WORKER_NAME_LENGTH characters or more is
            # dropped with a warning, and the directory is named after the host instead
            if not (isinstance(worker_name, str) and worker_name and len(worker_name) < max_worker):
                worker_name = None

            def handler_fn(prof: Any) -> None:
                if analyse_flag:
                    out = Path(prof._fake_dir) / "ASCEND_PROFILER_OUTPUT"
                    out.mkdir(parents=True, exist_ok=True)
                    (out / "trace_view.json").write_text(json.dumps([{"name": s} for s in prof._fake_recorded]))

            handler_fn._fake_dir_name = dir_name  # type: ignore[attr-defined]
            handler_fn._fake_worker_name = worker_name  # type: ignore[attr-defined]
            return handler_fn

        class profile:
            def __setattr__(self, name: str, value: Any) -> None:
                if not name.startswith("_fake") and name not in allowed_attrs:
                    raise AttributeError(f"torch_npu.profiler.profile (torch-npu {fake.version}) sets no attribute {name!r}; known: {sorted(allowed_attrs)}")
                object.__setattr__(self, name, value)

            def _init(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False, profile_memory=False,
                      with_stack=False, with_flops=False, with_modules=False, experimental_config=None, **_: Any) -> None:
                self._fake_kwargs = dict(activities=activities, record_shapes=record_shapes, profile_memory=profile_memory,
                                         with_stack=with_stack, with_flops=with_flops, with_modules=with_modules,
                                         experimental_config=experimental_config)
                self.schedule = schedule if callable(schedule) else (lambda _s: Action.RECORD)
                self.record_steps = callable(schedule)
                self.on_trace_ready = on_trace_ready
                self.step_num = 0
                if has_offset:
                    self._step_num_offset = 0
                self.current_action = self.schedule(self.step_num)
                self.stopped = False
                self._fake_dir = None
                self._fake_recorded: list[str] = []
                fake.profiles.append(self)

            def _fake_step_name(self) -> str:
                # "ProfilerStep#" + str(self.step_num + self._step_num_offset), or step_num alone (2.3.1 - 2.5.1)
                return f"ProfilerStep#{self.step_num + (self._step_num_offset if has_offset else 0)}"

            def _fake_transit(self, prev: Action | None, cur: Action | None) -> None:
                if cur in (Action.WARMUP,) + _RECORDING and self._fake_dir is None:
                    # ProfPathCreator.create_prof_dir: "<worker or host>_<pid>_<time>_ascend_pt"
                    d = getattr(self.on_trace_ready, "_fake_dir_name", None) or os.getcwd()
                    w = getattr(self.on_trace_ready, "_fake_worker_name", None) or socket.gethostname()
                    t = _dt.datetime.now().strftime("%Y%m%d%H%M%S%f")[:-3]
                    self._fake_dir = os.path.join(d, f"{w}_{os.getpid()}_{t}_ascend_pt")
                    os.makedirs(os.path.join(self._fake_dir, "FRAMEWORK"), exist_ok=True)
                if cur in _RECORDING and self.record_steps:
                    self._fake_recorded.append(self._fake_step_name())
                if prev in _RECORDING and cur not in _RECORDING or prev == Action.RECORD_AND_SAVE:
                    with open(os.path.join(self._fake_dir, "FRAMEWORK", "fake_steps.json"), "w") as fh:
                        json.dump(self._fake_recorded, fh)
                    if self.on_trace_ready:
                        self.on_trace_ready(self)

            def _start(self) -> None:
                self.stopped = False
                self._fake_transit(Action.NONE, self.current_action)

            def _step(self) -> None:
                if self.stopped:
                    return
                prev = self.current_action
                self.step_num += 1
                self.current_action = self.schedule(self.step_num)
                self._fake_transit(prev, self.current_action)

            def _stop(self) -> None:
                self._fake_transit(self.current_action, None)
                self.stopped = True

            __init__ = W("torch_npu.profiler.profile.__init__", lambda self, **k: profile._init(self, **k))
            start = W("torch_npu.profiler.profile.start", lambda self: profile._start(self))
            step = W("torch_npu.profiler.profile.step", lambda self: profile._step(self))
            stop = W("torch_npu.profiler.profile.stop", lambda self: profile._stop(self))

        for meth, impl in (("export_chrome_trace", lambda self, p: None), ("add_metadata", lambda self, k, v: None),
                           ("add_metadata_json", lambda self, k, v: None)):
            if self.has(f"torch_npu.profiler.profile.{meth}"):
                setattr(profile, meth, W(f"torch_npu.profiler.profile.{meth}", impl))

        ids = iter(range(1, 1 << 30))
        takes_domain = any(p["name"] == "domain" for p in self.snap["functions"]["torch_npu.npu.mstx.range_start"]["params"])

        def range_start(message, stream=None, domain="default"):
            rid = next(ids)
            fake.mstx_events.append(("range_start", message, domain if takes_domain else None))
            return rid

        def range_end(range_id, domain="default"):
            fake.mstx_events.append(("range_end", str(range_id), domain if takes_domain else None))

        def mark(message="", stream=None, domain="default"):
            fake.mstx_events.append(("mark", message, domain if takes_domain else None))

        mstx_impls = {"mark": mark, "range_start": range_start, "range_end": range_end,
                      "range_push": lambda message, stream=None, domain="default": next(ids),
                      "range_pop": lambda domain="default": 0,
                      "mstx_range": lambda message, stream=None, domain="default": (lambda f: f)}
        mstx = type("mstx", (), {name: staticmethod(W(f"torch_npu.npu.mstx.{name}", impl))
                                 for name, impl in mstx_impls.items() if self.has(f"torch_npu.npu.mstx.{name}")})

        root = types.ModuleType("torch_npu")
        root.__version__ = self.version  # type: ignore[attr-defined]
        root.__fake__ = True  # type: ignore[attr-defined]
        prof_mod = types.ModuleType("torch_npu.profiler")
        prof_prof = types.ModuleType("torch_npu.profiler.profiler")
        npu = types.ModuleType("torch_npu.npu")
        mstx_mod = types.ModuleType("torch_npu.npu.mstx")
        for name, value in {
            "profile": profile, "schedule": schedule, "_ExperimentalConfig": _ExperimentalConfig,
            "tensorboard_trace_handler": W("torch_npu.profiler.tensorboard_trace_handler", tensorboard_trace_handler),
            "ProfilerActivity": ProfilerActivity, "ProfilerAction": Action, "profiler": prof_prof,
        }.items():
            setattr(prof_mod, name, value)
        for name in ("ProfilerLevel", "AiCMetrics", "ExportType"):
            if name not in self.absent:
                setattr(prof_mod, name, self._enum_class(name))
        if self.has("torch_npu.profiler.profiler.analyse"):
            prof_prof.analyse = W("torch_npu.profiler.profiler.analyse", lambda *a, **k: None)  # type: ignore[attr-defined]
        prof_prof.profile = profile  # type: ignore[attr-defined]
        prof_prof.tensorboard_trace_handler = prof_mod.tensorboard_trace_handler  # type: ignore[attr-defined]
        modules = {"torch_npu": root, "torch_npu.profiler": prof_mod, "torch_npu.profiler.profiler": prof_prof,
                   "torch_npu.npu": npu, "torch_npu.npu.mstx": mstx_mod}
        dynamic = {n: f"torch_npu.profiler.dynamic_profile.{n}" for n in ("init", "step", "start")}
        if any(self.has(q) for q in dynamic.values()):  # a submodule: `from torch_npu.profiler import dynamic_profile`
            dyn = types.ModuleType("torch_npu.profiler.dynamic_profile")
            impls = {"init": lambda path: None, "step": lambda: None, "start": lambda config_path=None: None}
            for n, q in dynamic.items():
                if self.has(q):
                    setattr(dyn, n, W(q, impls[n]))
            prof_mod.dynamic_profile = dyn  # type: ignore[attr-defined]
            modules["torch_npu.profiler.dynamic_profile"] = dyn
        npu.is_available = W("torch_npu.npu.is_available", lambda: fake.npu_available)  # type: ignore[attr-defined]
        npu.synchronize = W("torch_npu.npu.synchronize", lambda device=None: None)  # type: ignore[attr-defined]
        npu.mstx = mstx  # type: ignore[attr-defined]  (as in the real package: the class shadows the module)
        mstx_mod.mstx = mstx  # type: ignore[attr-defined]
        root.profiler = prof_mod  # type: ignore[attr-defined]
        root.npu = npu  # type: ignore[attr-defined]
        return modules
