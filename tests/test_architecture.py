"""Module boundaries the design relies on (docs/architecture.md):

- the offline analysis never loads the runtime (profiler, session, backends, markers, the tracer's
  recorder / api), torch or torch_npu: it runs on any machine, and merging a timeline is offline work;
- Ray is optional for the analysis: loaded only by `analyse --ray` (analysis/pipeline/ray_batch.py, which
  imports it only when it runs);
- formats.py, the on-disk contract, needs nothing but the standard library.

Each check runs in a fresh interpreter and lists the forbidden modules it saw loaded; the
checks are shown to fail on a deliberate violation.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import SHARED_DATA

RUNTIME = ("mindspeed_profiler.runtime.profiler", "mindspeed_profiler.runtime.stage_scope", "mindspeed_profiler.runtime.session", "mindspeed_profiler.integrations.mindspeed_api",
           "mindspeed_profiler.runtime.mstx", "mindspeed_profiler.backends", "mindspeed_profiler.tracing",
           "mindspeed_profiler.core.state", "mindspeed_profiler.integrations", "torch", "torch_npu")
OPTIONAL = ("ray",)   # the analysis loads it only with --ray


def loaded_forbidden(code: str, forbidden: tuple[str, ...] = RUNTIME) -> list[str]:
    """Run `code` in a fresh interpreter; the forbidden modules (or their submodules) it loaded."""
    probe = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        bad = sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in {forbidden!r}))
        print("LOADED=" + json.dumps(bad))
    """)
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("LOADED=")][-1]
    return json.loads(line[len("LOADED="):])


def _run_dir(tmp_path) -> str:
    """A profile_save_path with a real torch capture's trace, tracer segments (merged during the
    analysis) and Ascend output, written here by plain file copies (no runtime)."""
    import shutil

    root = tmp_path / "run"
    cap = root / "actor_update" / "actor_rank0_step3-3_host_1234_20261130120000000_pt"
    cap.mkdir(parents=True)
    shutil.copy(SHARED_DATA / "kineto" / "cpu_only_rank34.pt.trace.json.gz", cap / "actor_rank0.1234.pt.trace.json.gz")
    asc = root / "all" / "actor_rank1_step1-1_host_99_20261130120000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    asc.mkdir(parents=True)
    for n in ("trace_view.json", "kernel_details.csv"):
        shutil.copy(SHARED_DATA / "ascend" / n, asc / n)
    tl = root / "timeline"
    tl.mkdir()
    header = {"type": "header", "schema": 1, "host": "h", "pid": 7, "role": "actor", "rank": 0,
              "clock": {"wall_ns": 10**18, "mono_ns": 0}, "offset_ns": 0}
    lines = [header, ["X", "iteration", "iteration", 0, 5_000_000, 1, {"iteration": 1}],
             ["X", "actor_update", "stage", 1_000_000, 2_000_000, 1, {"iteration": 1, "stage": "actor_update"}]]
    (tl / "actor_rank0_h_7.seg.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(root)


@pytest.fixture
def run_dir(tmp_path, shared_data):
    return _run_dir(tmp_path)


def test_analysis_loads_no_runtime(run_dir, tmp_path):
    loaded = loaded_forbidden(f"""
        from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
        from mindspeed_profiler.analysis import RunAnalysis
        from mindspeed_profiler.cli import main
        summary, code = analyse_directory({run_dir!r}, jobs=1, progress=False, export_type="db")
        assert code == 0, [c.get("error") for c in summary["captures"]]
        assert summary["timeline"]["n_iterations"] == 1      # merged from the segments, offline
        assert {{c["kind"] for c in summary["captures"]}} == {{"torch", "ascend", "timeline"}}
        assert main(["analyse", {run_dir!r}, "-q", "-o", {str(tmp_path / "out")!r}]) == 0
        assert main(["report", {run_dir!r}]) == 0
        assert main(["merge", {run_dir!r}, "-q"]) == 0
        RunAnalysis({run_dir!r}).captures()
    """, RUNTIME + OPTIONAL)
    assert loaded == []


def test_the_ray_dispatch_imports_ray_only_when_it_runs():
    loaded = loaded_forbidden("""
        import mindspeed_profiler.analysis.pipeline.ray_batch
        from mindspeed_profiler.cli import main
        assert main(["analyse", "/nonexistent-dir", "--address", "x"]) == 2   # --address needs --ray
    """, RUNTIME + OPTIONAL)
    assert loaded == []


def test_the_check_catches_a_violation(run_dir):
    # tracing.merge is the old home of the merge (kept for users): importing it loads the tracer
    loaded = loaded_forbidden(f"""
        from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
        import mindspeed_profiler.tracing.merge
        analyse_directory({run_dir!r}, jobs=1, progress=False, write=False)
    """)
    assert "mindspeed_profiler.tracing.api" in loaded and "mindspeed_profiler.tracing.recorder" in loaded


def test_formats_needs_only_the_standard_library():
    code = """
        import sys
        before = set(sys.modules)
        import mindspeed_profiler.core.formats
        new = sorted(set(sys.modules) - before)
        stdlib = sys.stdlib_module_names
        print("LOADED=" + __import__("json").dumps([m for m in new if m.split(".")[0] not in stdlib
                                                    and m not in ("mindspeed_profiler", "mindspeed_profiler.compat", "mindspeed_profiler.core",
                                                                  "mindspeed_profiler.core.formats")]))
        raise SystemExit(0)
    """
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.split("LOADED=")[-1]) == []
