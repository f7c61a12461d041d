"""Our own capture layout (docs/formats.md) from a REAL torch.profiler run on CPU, analysed:
identity from mindspeed_profiler_meta.json, steps, op counts, annotations, stage x rank,
the SQLite export and compare; Kineto's relative timestamps made absolute."""
from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

N_MM = {0: 3, 1: 6}   # matmuls per step on each rank


def capture(root: Path, rank: int, run_tag: str = "") -> Path:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    d = root / "actor_update" / f"actor_rank{rank}_step1-2_host_{1000 + rank}_20261129080000{rank:03d}_pt"
    d.mkdir(parents=True)
    a = torch.randn(64, 64)
    raw = d / "trace.json"
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
        for _ in range(3):
            with record_function("rollout_chunk"):
                for _ in range(N_MM[rank]):
                    a = torch.mm(a, a).clamp_(-1, 1)
            prof.step()
    name = f"actor_rank{rank}.{1000 + rank}.pt.trace.json.gz"
    (d / name).write_bytes(gzip.compress(raw.read_bytes()))
    raw.unlink()
    (d / "mindspeed_profiler_meta.json").write_text(json.dumps({
        "schema": 1, "role": "actor", "stage": "actor_update", "rank": rank, "world_size": 2, "local_rank": rank,
        "parallel": None, "steps": [1, 2], "warmup_steps": 0, "backend": "torch", "device": "cpu",
        "level": "level0", "export_type": "text", "host": "host", "pid": 1000 + rank, "status": "ok",
        "errors": [], "trace_files": [name]}))
    return d


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    for r in (0, 1):
        capture(root, r)
    return root


def test_own_captures(run_dir):
    summary, code = analyse_directory(run_dir, jobs=2, export_type="db", progress=False)
    assert code == 0
    caps = sorted(summary["captures"], key=lambda c: c["rank"])
    for c in caps:
        r = c["rank"]
        assert (c["kind"], c["role"], c["stage"], c["step_range"]) == ("torch", "actor", "actor_update", [1, 2])
        assert [s["step"] for s in c["steps"]] == [1, 2]   # ProfilerStep#1, #2 (step 0 was warmup)
        ops = {o["name"]: o for o in c["top_ops"]}
        assert ops["aten::mm"]["count"] == 2 * N_MM[r]
        assert ops["aten::clamp_"]["count"] == 2 * N_MM[r]
        # mm has no child ops on CPU here except possibly internal ones: self <= total
        assert ops["aten::mm"]["self_us"] <= ops["aten::mm"]["total_us"] + 1e-6
        ann = {a["name"]: a for a in c["annotations"]}
        assert ann["rollout_chunk"]["count"] == 2
        assert c["device"] is None
    rows = [r for r in summary["stage_rank"] if r["source"] == "capture"]
    assert {(r["stage"], r["rank"]) for r in rows} == {("actor_update", 0), ("actor_update", 1)}
    assert all(r["metric"] == "wall_us_per_step" for r in rows)

    db = sqlite3.connect(run_dir / "analysis" / "analysis.db")
    n = dict(db.execute("SELECT c.rank, count(*) FROM events e JOIN captures c ON c.id = e.capture_id "
                        "WHERE e.name = 'aten::mm' GROUP BY c.rank").fetchall())
    assert n == {0: 2 * N_MM[0], 1: 2 * N_MM[1]}
    for c in caps:
        raw = json.loads(gzip.decompress((run_dir / c["files"][0]).read_bytes()))
        nx = sum(1 for e in raw["traceEvents"] if e.get("ph") == "X")
        got = db.execute("SELECT count(*) FROM events e JOIN captures c ON c.id = e.capture_id WHERE c.rank = ?",
                         (c["rank"],)).fetchone()[0]
        assert got == nx
    assert db.execute("SELECT count(*) FROM slow_ranks").fetchone()[0] == 2


def test_compare_two_runs(tmp_path, run_dir):
    # run B: both ranks do rank 1's work (6 matmuls per step)
    b = tmp_path / "b"
    capture(b, 1)
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", "compare", str(run_dir), str(b), "--json", "-"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    keys = [r["key"] for r in res["ranks"]]
    assert "capture:actor_update:actor:0" in keys
    r0 = next(r for r in res["ranks"] if r["key"] == "capture:actor_update:actor:0")
    assert r0["b_us"] is None and r0["delta_us"] == -r0["a_us"]   # rank 0 is gone in B
    # deltas are sorted by impact
    # deltas are sorted by impact; unknown ones (an op below one side's top-N cut) come last
    known = [r["delta_us"] is not None for r in res["ops"]]
    assert known == sorted(known, reverse=True)
    d = [abs(r["delta_us"]) for r in res["ops"] if r["delta_us"] is not None]
    assert d and d == sorted(d, reverse=True)
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", "compare", str(run_dir), str(b)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Ops and kernels" in p.stdout


def test_report_command_regenerates(run_dir):
    html = run_dir / "analysis" / "report.html"
    if not html.exists():
        analyse_directory(run_dir, jobs=1, progress=False)
    html.unlink()
    p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.cli", "report", str(run_dir)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert Path(p.stdout.strip()) == html and "aten::mm" in html.read_text()


def test_kineto_base_time_makes_start_absolute(tmp_path):
    """Kineto (torch >= 2.x) writes ts relative to baseTimeNanoseconds: start_us must be epoch us."""
    before = time.time() * 1e6
    d = capture(tmp_path, 0)
    after = time.time() * 1e6
    raw = json.loads(gzip.decompress(next(d.glob("*.json.gz")).read_bytes()))
    if "baseTimeNanoseconds" not in raw:
        pytest.skip("this torch writes absolute timestamps")
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False)
    c = summary["captures"][0]
    assert before <= c["start_us"] <= after
    assert all(before <= s["start_us"] <= after for s in c["steps"])
