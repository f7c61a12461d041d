"""The analysis cache (issue 34): a re-analysis takes the results of unchanged captures from
OUT/.analysis_cache and writes the same outputs as a cold run (timestamps aside). Real traces
(../shared/data/kineto: GPU and CPU Kineto traces; ../shared/kineto-torch19; a real Ascend set),
the command run as a user runs it (a fresh interpreter each time)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from mindspeed_profiler.core import formats
from mindspeed_profiler.analysis.pipeline import report_cache, result_cache
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

REPO_ROOT = Path(__file__).resolve().parents[1]
KINETO = REPO_ROOT.parent / "shared" / "data" / "kineto"
TORCH19 = REPO_ROOT.parent / "shared" / "kineto-torch19"
TRACES = sorted(KINETO.glob("*.json.gz")) + sorted(TORCH19.glob("*.json.gz"))
needs_traces = pytest.mark.skipif(not TRACES, reason=f"no real Kineto traces in {KINETO} or {TORCH19}")
CREATED = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+\-]\d\d:\d\d")   # summary["created"], also in the page


def _command(d: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mindspeed_profiler.analyse", str(d), *args],
                          capture_output=True, timeout=300, cwd=REPO_ROOT, env=env)


def _outputs(d: Path) -> dict[str, bytes]:
    """The files the command writes, with the creation time and the timings (which differ between
    any two runs) taken out."""
    out = d / formats.ANALYSIS_DIR
    summary = orjson.loads((out / formats.SUMMARY_FILE).read_bytes())
    for k in ("created", "elapsed_s"):
        summary.pop(k)
    for c in summary["captures"]:
        c.pop("analyse_s", None)
    got = {"summary": orjson.dumps(summary, option=orjson.OPT_SORT_KEYS)}
    for name in (formats.REPORT_FILE, formats.CAPTURE_TOTALS_FILE):
        if (out / name).exists():
            got[name] = CREATED.sub(b"<created>", (out / name).read_bytes())
    return got


def _entries(d: Path) -> list[Path]:
    return sorted((d / formats.ANALYSIS_DIR / result_cache.CACHE_DIR / "captures").glob("*.json"))


@pytest.fixture
def traces(tmp_path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    for i, t in enumerate(TRACES):
        shutil.copy(t, d / f"{i}_{t.name}")
    return d


@needs_traces
def test_warm_run_writes_what_the_cold_one_wrote(traces):
    cold = _command(traces)
    assert cold.returncode == 0, cold.stderr
    assert len(_entries(traces)) == len(TRACES)
    first = _outputs(traces)
    warm = _command(traces)
    assert warm.returncode == 0, warm.stderr
    assert f"{len(TRACES)} of {len(TRACES)} captures from the analysis cache".encode() in warm.stderr
    assert _outputs(traces) == first
    assert warm.stdout == cold.stdout   # the tables printed
    nocache = _command(traces, "--no-cache")   # and both are what an analysis without the cache writes
    assert b"from the analysis cache" not in nocache.stderr
    assert _outputs(traces) == first and nocache.stdout == cold.stdout


@needs_traces
def test_a_rewritten_trace_is_analysed_again(traces):
    assert _command(traces, "-q").returncode == 0
    victim = sorted(traces.glob("*.json.gz"))[0]
    before = {p.name: p.stat().st_mtime_ns for p in _entries(traces)}
    os.utime(victim, ns=(victim.stat().st_atime_ns, victim.stat().st_mtime_ns + 10**9))   # touched: "rewritten"
    p = _command(traces, "-q")
    assert p.returncode == 0
    assert f"{len(TRACES) - 1} of {len(TRACES)} captures from the analysis cache".encode() in p.stderr
    changed = [e.name for e in _entries(traces) if e.stat().st_mtime_ns != before[e.name]]
    assert len(changed) == 1   # that capture's entry, written again; the others read


@needs_traces
def test_a_new_capture_of_a_running_job_is_the_only_one_analysed(traces, tmp_path):
    first = sorted(traces.glob("*.json.gz"))[0]
    moved = tmp_path / first.name
    first.rename(moved)
    assert _command(traces, "-q").returncode == 0
    moved.rename(first)   # the job wrote one more
    p = _command(traces, "-q")
    assert f"{len(TRACES) - 1} of {len(TRACES)} captures from the analysis cache".encode() in p.stderr
    got = _outputs(traces)
    shutil.rmtree(traces / formats.ANALYSIS_DIR)
    assert _command(traces, "-q", "--no-cache").returncode == 0
    assert _outputs(traces) == got


@needs_traces
def test_a_corrupt_entry_is_said_and_its_capture_analysed_again(traces):
    assert _command(traces, "-q").returncode == 0
    want = _outputs(traces)
    bad = _entries(traces)[0]
    bad.write_bytes(b'{"schema": 1, "code": "trunc')
    p = _command(traces, "-q")
    assert p.returncode == 0
    said = [line for line in p.stderr.decode().splitlines() if "unreadable" in line]
    assert len(said) == 1 and str(bad) in said[0]
    assert _outputs(traces) == want
    assert orjson.loads(bad.read_bytes())["result"]["capture"]["status"] == "ok"   # written again


@needs_traces
def test_no_cache_reads_and_writes_nothing(traces):
    p = _command(traces, "-q", "--no-cache")
    assert p.returncode == 0
    assert not (traces / formats.ANALYSIS_DIR / result_cache.CACHE_DIR).exists()
    assert (traces / formats.ANALYSIS_DIR / formats.SUMMARY_FILE).exists()


@needs_traces
def test_a_fully_cached_run_loads_no_numpy_nor_parser(tmp_path):
    """One capture: nothing across captures needs numpy (the straggler tables of several ranks do:
    np.median; numpy is then loaded where it is used)."""
    shutil.copy(TRACES[0], tmp_path / TRACES[0].name)
    assert _command(tmp_path, "-q").returncode == 0
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    p = _command(tmp_path, "-q", env=env)
    assert p.returncode == 0 and b"1 of 1 captures from the analysis cache" in p.stderr
    imported = {line.split("|")[-1].strip() for line in p.stderr.decode().splitlines() if line.startswith("import time:")}
    assert "mindspeed_profiler.analysis.pipeline.batch" in imported   # (the probe works)
    loaded = {m for m in imported if m.startswith(("numpy.", "msgspec", "jinja2", "mindspeed_profiler.analysis.parsing.kineto",
                                                   "mindspeed_profiler.analysis.parsing.typed_events",
                                                   "mindspeed_profiler.analysis.inputs.", "rich"))}
    assert loaded <= {"mindspeed_profiler.analysis.inputs.record"}, sorted(loaded)
    cold = _command(tmp_path, "-q", "--no-cache", env=env)
    assert b"numpy._core" in cold.stderr and b"analysis.parsing.kineto_trace" in cold.stderr   # the probe sees them


def _exporting_capture(root: Path, status: str) -> Path:
    d = root / "all" / "actor_rank0_step1-1_pt"
    d.mkdir(parents=True)
    shutil.copy(TRACES[0], d / "trace.pt.trace.json.gz")
    (d / formats.META_FILE).write_bytes(orjson.dumps({"role": "actor", "rank": 0, "stage": "all", "status": status,
                                                     "steps": [1, 1]}))
    return d


@needs_traces
def test_a_capture_still_exporting_is_never_cached(tmp_path):
    _exporting_capture(tmp_path, "exporting")
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, cache=True)
    assert code == 0 and summary["captures"][0]["status"] == "ok"
    assert any("export not finished" in w for w in summary["captures"][0]["warnings"])
    assert _entries(tmp_path) == []
    meta = tmp_path / "all" / "actor_rank0_step1-1_pt" / formats.META_FILE   # its export ends
    meta.write_bytes(orjson.dumps({**orjson.loads(meta.read_bytes()), "status": "ok"}))
    analyse_directory(tmp_path, jobs=1, progress=False, cache=True)
    assert len(_entries(tmp_path)) == 1


@needs_traces
def test_the_python_api_keeps_no_cache_unless_asked(traces):
    analyse_directory(traces, jobs=1, progress=False)
    assert not (traces / formats.ANALYSIS_DIR / result_cache.CACHE_DIR).exists()


def test_ascend_set_cold_and_warm_equal(ascend_sets, tmp_path):
    import ascend_data

    ascend_sets("text_l0")   # (skips when the set is absent)
    d = ascend_data.writable_copy("text_l0", tmp_path / "set")
    assert _command(d, "-q", "-j", "1").returncode == 0
    first = _outputs(d)
    assert _entries(d)
    warm = _command(d, "-q", "-j", "1")
    assert b"captures from the analysis cache" in warm.stderr
    assert _outputs(d) == first
    # a file of the Ascend output directory rewritten: that rank analysed again
    victim = next(d.rglob(formats.ASCEND_OUTPUT_DIR)).iterdir().__next__()
    os.utime(victim, ns=(victim.stat().st_atime_ns, victim.stat().st_mtime_ns + 10**9))
    again = _command(d, "-q", "-j", "1")
    n = len(_entries(d))
    assert f"{n - 1} of {n} captures from the analysis cache".encode() in again.stderr


# -- the pieces ------------------------------------------------------------------------------------
def test_fingerprint_covers_the_capture_directory_and_its_files(tmp_path):
    from mindspeed_profiler.analysis.inputs.record import Capture

    (tmp_path / "a_pt" / "sub").mkdir(parents=True)
    (tmp_path / "a_pt" / "sub" / "x.json").write_text("{}")
    (tmp_path / "b.json").write_text("{}")
    (tmp_path / "seg.jsonl").write_text("")
    files = result_cache.listing(tmp_path)
    fp = result_cache.fingerprint(tmp_path, Capture(path="a_pt", kind="torch", files=["seg.jsonl"]), files)
    assert [r[0] for r in fp] == [os.path.join("a_pt", "sub", "x.json"), "seg.jsonl"]
    loose = result_cache.fingerprint(tmp_path, Capture(path="b.json", kind="kineto", files=["b.json"]), files)
    assert [r[0] for r in loose] == ["b.json"]


def test_the_listing_skips_the_output_directory_also_through_a_link(tmp_path):
    """`skip` (collect.py: the output directory, where this run writes) is left out wherever the
    walk meets it: by its own path, and through a link from inside the root to an output directory
    elsewhere; hidden directories, the top-level outputs and a skip that does not exist change nothing."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere" / "out"
    for f in ("a_pt/x.json", "out/summary.json", "deep/one/y.json", ".hidden/z.json",
              formats.ANALYSIS_DIR + "/s.json", "deep/" + formats.ANALYSIS_DIR + "/kept.json"):
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("{}")
    elsewhere.mkdir(parents=True)
    (elsewhere / "summary.json").write_text("{}")
    os.symlink(elsewhere, root / "deep" / "one" / "to_out")
    kept = {"a_pt/x.json", "deep/one/y.json", "deep/" + formats.ANALYSIS_DIR + "/kept.json"}
    assert set(result_cache.listing(root)) == kept | {"out/summary.json", "deep/one/to_out/summary.json"}
    assert set(result_cache.listing(root, skip=[root / "out", tmp_path / "missing"])) == kept | {"deep/one/to_out/summary.json"}
    assert set(result_cache.listing(root, skip=[elsewhere])) == kept | {"out/summary.json"}


def test_a_result_json_cannot_give_back_is_not_stored(tmp_path):
    from mindspeed_profiler.analysis.inputs.record import Capture

    cache = result_cache.AnalysisCache(tmp_path / "c", {"top_n": 20}, log=lambda m: None, identity="x")
    caps = [Capture(path="a", kind="kineto", files=[]), Capture(path="b", kind="kineto", files=[])]
    hits, todo = cache.split(tmp_path, caps, {})
    assert hits == {} and todo == [0, 1]
    cache.store({"capture": {"path": "a", "status": "ok", "x": float("nan")}, "events": None})   # NaN: null in JSON
    cache.store({"capture": {"path": "b", "status": "ok", "x": (1, 2)}, "events": None})         # a tuple: a list
    assert cache.stored == 0
    cache.store({"capture": {"path": "a", "status": "failed"}, "events": None})
    assert cache.stored == 0
    cache.store({"capture": {"path": "a", "status": "ok", "x": [1.5, None]}, "events": None})
    assert cache.stored == 1
    again = result_cache.AnalysisCache(tmp_path / "c", {"top_n": 20}, log=lambda m: None, identity="x")
    hits, todo = again.split(tmp_path, caps, {})
    assert todo == [1] and hits[0]["capture"]["x"] == [1.5, None]
    other = result_cache.AnalysisCache(tmp_path / "c", {"top_n": 5}, log=lambda m: None, identity="x")
    assert other.split(tmp_path, caps, {})[1] == [0, 1]   # other options: a miss
    newer = result_cache.AnalysisCache(tmp_path / "c", {"top_n": 20}, log=lambda m: None, identity="y")
    assert newer.split(tmp_path, caps, {})[1] == [0, 1]   # other code: a miss


def test_code_identity_changes_with_a_source_file(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "analysis").mkdir(parents=True)
    (pkg / "core").mkdir()
    f = pkg / "analysis" / "a.py"
    f.write_text("x = 1\n")
    before = result_cache.code_identity(pkg)
    assert result_cache.code_identity(pkg) == before
    f.write_text("x = 22\n")
    assert result_cache.code_identity(pkg) != before


def test_the_cached_page_is_the_rendered_one(tmp_path):
    from mindspeed_profiler.analysis.results.report import render

    summary = {"schema": formats.SUMMARY_SCHEMA, "root": str(tmp_path), "created": "2026-12-04T15:00:00+00:00",
               "counts": {"found": 0, "ok": 0, "failed": 0, "unparsed": 0}, "captures": [], "warnings": []}
    try:
        want = render(summary, tmp_path)
    except Exception as exc:   # noqa: BLE001  (a summary too thin for the page: the real ones above cover it)
        pytest.skip(f"render needs a fuller summary: {exc}")
    cache = tmp_path / "cache"
    report_cache.write_report(tmp_path / "r.html", summary, cache, identity="x")
    assert (tmp_path / "r.html").read_text() == want
    summary["created"] = "2026-12-04T16:00:00+00:00"   # a later run: the page from the cache, the new time in it
    report_cache.write_report(tmp_path / "r.html", summary, cache, identity="x")
    assert (tmp_path / "r.html").read_text() == render(summary, tmp_path)
    summary["warnings"] = ["new"]   # another summary: rendered again
    report_cache.write_report(tmp_path / "r.html", summary, cache, identity="x")
    assert (tmp_path / "r.html").read_text() == render(summary, tmp_path)


def test_a_real_torch_capture_with_memory_records(tmp_path):
    """A torch.profiler capture of a real training loop with profile_memory (the memory block: its
    [memory] records), written here: cold and warm outputs equal."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True) as prof:
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    prof.export_chrome_trace(str(tmp_path / "rank0.pt.trace.json"))
    cold = _command(tmp_path, "-j", "1")
    assert cold.returncode == 0, cold.stderr
    summary = orjson.loads((tmp_path / formats.ANALYSIS_DIR / formats.SUMMARY_FILE).read_bytes())
    assert summary["captures"][0].get("memory_records")   # the block the cache must give back
    first = _outputs(tmp_path)
    warm = _command(tmp_path, "-j", "1")
    assert b"1 of 1 captures from the analysis cache" in warm.stderr
    assert _outputs(tmp_path) == first and warm.stdout == cold.stdout


# -- numpy deferred to its first use (commands/analyse.py) -----------------------------------------
DEFERRED = ("import os, sys; from mindspeed_profiler.commands import analyse as a; a._load_numpy(); import numpy as np; "
            "before = 'numpy._core' in sys.modules; x = np.zeros(3); import numpy.linalg; "
            "threads = open('/proc/self/status').read().split('Threads:')[1].split()[0]; "
            "print(before, 'numpy._core' in sys.modules, np.ndarray is type(x), sys.modules['numpy'].ndarray is np.ndarray, "
            "threads, os.environ.get('OPENBLAS_NUM_THREADS'))")


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="threads counted in /proc; one core gives one thread either way")
def test_numpy_is_loaded_at_its_first_use_with_one_openblas_thread():
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", DEFERRED], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "True", "True", "True", "1", "None"]
    env["OPENBLAS_NUM_THREADS"] = "2"   # the user's setting: numpy imported as usual (not deferred), with it
    out = subprocess.run([sys.executable, "-c", DEFERRED], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "True", "True", "True", "2", "2"]
