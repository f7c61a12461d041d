"""Issue 45, items 4, 5 and 7 (the analysis side): what the analysis reads is the run's own, and one
odd file never costs the summary.

- 4: `merge` resolved a run.json's relative `profile_save_path` (the default) against its own
  working directory: merging an archived run from inside another run's directory drew the other
  run's samples, none of its own, and said nothing.
- 5: one file with a non-UTF-8 name anywhere under the directory crashed `analyse` in the result
  cache's listing digest (TypeError: surrogates not allowed): a traceback, no summary.json.
- 7: an export interrupted after compression, during the memory-snapshot step: the metadata still
  listed the deleted raw trace, and the analysis failed the capture although its whole .gz was there.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mindspeed_profiler import IntegratedProfiler, load_config
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.timeline import sample_tracks as st
from mindspeed_profiler.config.schema import DEFAULT_SAVE_PATH
from mindspeed_profiler.core import formats
from mindspeed_profiler.runtime.manifest import write_run_manifest
from test_timeline_samples import merged, sample, traced, write_samples  # noqa: F401 (traced: a fixture)

REPO = Path(__file__).resolve().parents[1]
MS = 1_000_000


# ------------------------------------------------------------------------------ 4. merge's working directory


def _samples_of(save: Path, stages, prefix: str) -> None:
    write_samples(save, "actor", 0, [(it, "actor_generate", [sample(it, a + MS, b - MS, id=f"{prefix}{it}")])
                                     for it, (a, b) in enumerate(stages, 1)])


def test_merge_draws_the_runs_own_samples_from_any_working_directory(traced, monkeypatch):
    """A real tracer's run (test_timeline_samples' `traced`), its run.json as a job with the default,
    relative profile_save_path writes it, merged from inside another run's directory whose samples
    sit where that relative path points from there."""
    archived, stages = traced
    write_run_manifest(load_config({"integrated": {"profile_save_path": DEFAULT_SAVE_PATH}}), str(archived))
    _samples_of(archived, stages, "mine-")
    other = archived / "job_b"
    _samples_of(other / DEFAULT_SAVE_PATH, stages, "other-")
    monkeypatch.chdir(other)
    trace, _ = merged(archived)
    ids = sorted(e["args"]["id"] for e in trace["traceEvents"] if e.get("cat") == st.CAT_SAMPLE)
    assert ids == ["mine-1", "mine-2"], ids
    assert st.samples_dir_of(archived / formats.TIMELINE_DIR) == archived / formats.SAMPLES_DIR


# ------------------------------------------------------------------------------ 5. a non-UTF-8 file name


def test_a_file_with_a_non_utf8_name_never_costs_the_summary(tmp_path, shared_data):
    """A real Kineto trace to analyse, and beside it a file whose name is not UTF-8 (bytes 0xff):
    `analyse` writes summary.json, twice (the second run from the cache), exit code 0."""
    src = next(p for p in sorted(Path(shared_data).rglob("*.json*")) if ".pt.trace.json" in p.name)
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(src, run / src.name)
    bad = os.fsencode(str(run)) + b"/notes_\xff\xfe.txt"
    with open(bad, "wb") as fh:
        fh.write(b"a file a user copied in")
    for attempt in range(2):
        out = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", "analyse", str(run), "--no-html"],
                             capture_output=True, text=True, timeout=300, cwd=str(REPO),
                             env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
        assert out.returncode == 0 and "Traceback" not in out.stderr, (attempt, out.stderr[-3000:])
        summary = json.loads((run / formats.ANALYSIS_DIR / formats.SUMMARY_FILE).read_text())
        assert [c["status"] for c in summary["captures"]] == ["ok"]


# ------------------------------------------------------------------------------ 7. an interrupted export


def test_a_capture_whose_raw_trace_is_gone_but_whose_gz_is_whole_is_analysed(tmp_path, clean_state):
    """The metadata (written when the capture closed) lists the raw trace; the writer compressed it
    (the .gz renamed into place whole, the raw removed) and the process was killed in the next step.
    The analysis reads the .gz, and says why."""
    prof = IntegratedProfiler(load_config({"integrated": {"profile": True, "profile_level": "level0",
                                                          "profile_save_path": str(tmp_path),
                                                          "background_export": False}}),
                              role="actor", rank=0, world_size=1)
    prof.start()
    import torch

    torch.mm(torch.randn(8, 8), torch.randn(8, 8))
    prof.step()
    prof.stop()
    [meta] = prof.captures
    directory = Path(meta["directory"])
    [gz] = meta["trace_files"]
    raw = gz[:-len(".gz")]
    on_disk = json.loads((directory / formats.META_FILE).read_text())
    on_disk.update(status="exporting", trace_files=[raw])   # as written at close, before the writer ran
    (directory / formats.META_FILE).write_text(json.dumps(on_disk))
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False)
    [cap] = summary["captures"]
    assert cap["status"] == "ok", cap.get("error")
    assert any(gz in w and "interrupted" in w for w in cap.get("warnings") or []), cap.get("warnings")
