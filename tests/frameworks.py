"""The training frameworks the integrations are tested against, installed as their users install
them: TRL in this interpreter (the `trl` extra, beside vLLM), verl and RLinf each in an environment
of its own that `./run test` makes (`.venv-verl`, `.venv-rlinf`: verl 0.9.1 needs transformers
< 5.11, which the vLLM CPU build cannot have; RLinf pins wandb < 0.25.1, which verl's wandb is
not). Without them the tests that need them skip, saying why; with MSP_REQUIRE_FRAMEWORKS=1 (CI,
.ci/run) a missing framework is a failure instead."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT

REQUIRED = os.environ.get("MSP_REQUIRE_FRAMEWORKS") == "1"
ENVIRONMENTS = {"verl": ".venv-verl", "rlinf": ".venv-rlinf"}


def _missing(why: str) -> None:
    if REQUIRED:
        pytest.fail(why + " and MSP_REQUIRE_FRAMEWORKS=1")
    pytest.skip(why)


def need_module(module: str, extra: str) -> None:
    """Skip (fail under MSP_REQUIRE_FRAMEWORKS=1) unless `module` imports in this interpreter."""
    if importlib.util.find_spec(module) is None:
        _missing(f"{module} is not installed (pip install -e .[{extra}]; ./run test installs it)")


def framework_python(name: str) -> Path:
    """The interpreter of framework `name`'s own environment (VENV_<NAME> overrides the place)."""
    venv = Path(os.environ.get(f"VENV_{name.upper()}", REPO_ROOT / ENVIRONMENTS[name]))
    python = venv / "bin" / "python"
    if not python.exists():
        _missing(f"{name}'s environment {venv} is absent (./run test makes it)")
    return python


def run_json(python: Path, script: Path, request: Any, timeout: float) -> dict[str, Any]:
    """`python script` with `request` as JSON on stdin; its JSON answer (stdout)."""
    out = subprocess.run([str(python), str(script)], input=json.dumps(request), capture_output=True, text=True,
                         timeout=timeout, cwd=REPO_ROOT)
    assert out.returncode == 0, f"{script.name} failed ({out.returncode}):\n{out.stderr[-4000:]}"
    return json.loads(out.stdout)
