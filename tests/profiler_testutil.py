"""Helpers for the profiler tests: a config with profiling on, a tiny real training loop and readers for
what captures wrote."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any, Iterable

import torch

from mindspeed_profiler import load_config
from mindspeed_profiler.backends import layout

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")


def profile_config(save_path: Path, backend: str = "torch", **integrated: Any) -> Any:
    """A loaded ProfilerConfig with the integrated profiler on, writing under `save_path`, on `backend`
    (torch.profiler by default; the npu tests pass "auto" so that the installed fake torch_npu is picked)."""
    return load_config({"integrated": {"profile": True, "profile_save_path": str(save_path), "backend": backend,
                                       **integrated}})


def train(prof: Any, iters: int, stages: Iterable[str] = ("actor_generate", "actor_update"), seed: int = 0,
          repeat: dict[tuple[str, int], int] | None = None) -> list[float]:
    """A small real model trained for `iters` iterations under `prof`; returns the losses.
    `repeat[(stage, it)] = n` calls that stage n times in iteration `it`."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    losses = []
    prof.start()
    for it in range(1, iters + 1):
        loss = None
        for stage in stages:
            for _ in range((repeat or {}).get((stage, it), 1)):
                with prof.stage(stage):
                    if stage.endswith("update"):
                        opt.zero_grad()
                        loss = torch.nn.functional.mse_loss(model(x), y)
                        loss.backward()
                        opt.step()
                    else:
                        with torch.no_grad():
                            model(x)
        losses.append(float(loss.detach()) if loss is not None else 0.0)
        prof.step()
    prof.stop()
    return losses


def capture_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in Path(root).rglob(layout.META_FILE))


def meta_of(d: Path) -> dict[str, Any]:
    return json.loads((d / layout.META_FILE).read_text())


def load_trace(d: Path) -> dict[str, Any]:
    meta = meta_of(d)
    assert len(meta["trace_files"]) == 1, meta
    with gzip.open(d / meta["trace_files"][0], "rt") as fh:
        return json.load(fh)


def profiler_steps(trace: dict[str, Any]) -> list[int]:
    return sorted(int(m.group(1)) for e in trace["traceEvents"] if e.get("ph") == "X"
                  for m in [STEP_RE.match(e.get("name", ""))] if m)


def annotations(trace: dict[str, Any]) -> set[str]:
    return {e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}


def rel_names(root: Path) -> list[str]:
    """`<stage>/<name without _host_pid_time_suffix>` of every capture, sorted."""
    out = []
    for d in capture_dirs(root):
        parsed = layout.parse_capture_dir_name(d.name)
        assert parsed is not None, d.name
        call = f"_c{parsed['call']}" if parsed["call"] > 1 else ""
        out.append(f"{d.parent.name}/{parsed['role']}_rank{parsed['rank']}_step{parsed['first']}-{parsed['last']}{call}")
    return sorted(out)
