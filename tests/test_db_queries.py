"""analysis.db: every query documented in docs/analysis.md (its ```sql blocks) returns rows on a real
run's database: a small torch capture made in-process (CPU, gloo collectives inside the stages, the
tracer on) and, marked slow, the GRPO example. Also: `steps.step` is an INTEGER column, and the
`spans` table holds every stage span of the timeline (recomputed here from timeline.json itself).

`gloo_run(root)` is shared with the console and report tests."""
from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.outputs import TotalsReader

STAGES = ("actor_generate", "actor_update")


class AllReduceInStages:
    """An IntegratedProfiler whose every stage call ends with a gloo all_reduce (inside the stage)."""

    def __init__(self, prof):
        self.prof = prof

    def __getattr__(self, name):
        return getattr(self.prof, name)

    @contextlib.contextmanager
    def stage(self, name):
        import torch
        import torch.distributed as dist

        with self.prof.stage(name):
            yield
            dist.all_reduce(torch.ones(1 << 16))


@contextlib.contextmanager
def _gloo_world_of_one():
    dist = pytest.importorskip("torch.distributed")
    if dist.is_initialized():
        if dist.get_world_size() != 1:
            pytest.skip("a process group of several ranks is already initialised in this process")
        yield
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # no port to race for
    try:
        yield
    finally:
        dist.destroy_process_group()


def gloo_run(root: Path) -> Path:
    """A real in-process run under `root`: a small model trained 3 iterations (profiler_testutil.train)
    as actor rank 0 with the tracer on, and again as actor rank 1 (no tracer), each stage call ending
    with a gloo all_reduce; the stages are captured at iteration 2 on both ranks, and the timeline is
    merged into timeline/timeline.json. Returns root."""
    pytest.importorskip("torch")
    from mindspeed_profiler import IntegratedProfiler, load_config, tracing
    from mindspeed_profiler.runtime.manifest import new_run_id
    from profiler_testutil import train

    cfg = load_config({"run_id": new_run_id(),
                       "integrated": {"profile": True, "profile_save_path": str(root), "backend": "torch",
                                      "stage": list(STAGES), "profile_step_start": 2, "profile_step_end": 3},
                       "tracer": {"enable": True}})
    with _gloo_world_of_one():
        tracing.init_tracer(cfg, role="actor", rank=0)
        try:
            train(AllReduceInStages(IntegratedProfiler(cfg, role="actor", rank=0, world_size=2)), 3, stages=STAGES)
        finally:
            tracing.shutdown_tracer()
        tracing.merge_timeline(cfg)
        train(AllReduceInStages(IntegratedProfiler(cfg, role="actor", rank=1, world_size=2)), 3, stages=STAGES)
    return root


def documented_queries(repo_root: Path = REPO_ROOT) -> list[str]:
    """Every SQL statement of the ```sql blocks of docs/analysis.md."""
    doc = (repo_root / "docs" / "analysis.md").read_text()
    out = []
    for block in re.findall(r"```sql\n(.*?)```", doc, re.S):
        cur = ""
        for line in block.splitlines(keepends=True):
            cur += line
            if sqlite3.complete_statement(cur):
                if any(ln.strip() and not ln.strip().startswith("--") for ln in cur.splitlines()):
                    out.append(cur.strip())
                cur = ""
        assert not cur.strip() or all(ln.strip().startswith("--") for ln in cur.splitlines() if ln.strip()), cur
    return out


def check_documented_queries(db_path: Path) -> None:
    queries = documented_queries()
    assert len(queries) >= 6, queries
    db = sqlite3.connect(db_path)
    try:
        for q in queries:
            rows = db.execute(q).fetchall()
            assert rows, f"no rows from the documented query:\n{q}"
    finally:
        db.close()


def timeline_stage_durations(path: Path) -> list[float]:
    """The durations of the stage spans of a timeline.json, read directly (not through the analysis)."""
    events = json.loads(path.read_text())["traceEvents"]
    return sorted(float(e["dur"]) for e in events if e.get("ph") == "X" and e.get("cat") == "stage")


def check_spans(root: Path, summary: dict) -> None:
    db = sqlite3.connect(root / "analysis" / "analysis.db")
    try:
        got = sorted(r[0] for r in db.execute("SELECT dur_us FROM spans"))
        want = timeline_stage_durations(root / "timeline" / "timeline.json")
        assert len(got) == len(want) and got == pytest.approx(want, abs=1e-6)
        its = {r[0] for r in db.execute("SELECT DISTINCT iteration FROM spans")}
        assert its == {it["iteration"] for it in summary["timeline"]["iterations"]}
        # start_us is counted from the timeline's t0 (as the Gantt and timeline_iterations.start_us)
        first = db.execute("SELECT min(start_us) FROM spans").fetchone()[0]
        assert first == pytest.approx(min(g["start_us"] for g in summary["timeline"]["gantt"]))
    finally:
        db.close()
    # the full span list is for the db only: summary.json keeps the Gantt
    tl_cap = next(c for c in summary["captures"] if c["kind"] == "timeline")
    assert "spans" not in tl_cap and "spans" not in summary["timeline"]


@pytest.fixture(scope="module")
def gloo_db(tmp_path_factory):
    root = gloo_run(tmp_path_factory.mktemp("gloo"))
    summary, code = analyse_directory(root, jobs=1, progress=False, export_type="db")
    assert code == 0, [c.get("error") for c in summary["captures"]]
    return root, summary


def test_documented_queries_return_rows_on_an_in_process_capture(gloo_db):
    root, _ = gloo_db
    check_documented_queries(root / "analysis" / "analysis.db")


def test_steps_are_integers(gloo_db):
    root, summary = gloo_db
    db = sqlite3.connect(root / "analysis" / "analysis.db")
    decl = {r[1]: r[2] for r in db.execute("PRAGMA table_info(steps)")}
    assert decl["step"] == "INTEGER"
    rows = db.execute("SELECT typeof(step), step FROM steps").fetchall()
    assert rows and all(t == "integer" for t, _ in rows)
    want = sorted(s["step"] for c in summary["captures"] for s in c.get("steps") or [])
    assert sorted(v for _, v in rows) == want and all(isinstance(v, int) for v in want)
    for table, cols in (("captures", ("rank", "n_steps")), ("slow_ranks", ("rank", "flagged", "n")),
                        ("spans", ("iteration", "rank"))):
        types = {r[1]: r[2] for r in db.execute(f"PRAGMA table_info({table})")}
        assert all(types[c] == "INTEGER" for c in cols), (table, types)


def test_a_step_label_that_is_not_a_number_stays_text(tmp_path):
    from mindspeed_profiler.analysis.results.sqlite_export import write_db

    summary = {"captures": [{"path": "c", "kind": "kineto", "status": "ok",
                             "steps": [{"step": 3, "dur_us": 1.0}, {"step": "warmup", "dur_us": 2.0},
                                       {"step": "7", "dur_us": 3.0}]}],
               "stage_rank": [], "slow_ranks": [], "timeline": None}
    write_db(tmp_path / "a.db", summary, [])
    rows = sqlite3.connect(tmp_path / "a.db").execute("SELECT step, typeof(step) FROM steps").fetchall()
    assert rows == [(3, "integer"), ("warmup", "text"), (7, "integer")]


def test_spans_hold_every_stage_span_of_the_timeline(gloo_db):
    root, summary = gloo_db
    check_spans(root, summary)


def test_communication_and_totals_tables(gloo_db):
    root, summary = gloo_db
    db = sqlite3.connect(root / "analysis" / "analysis.db")
    n_comm = sum(1 for c in summary["captures"] if c.get("communication"))
    assert n_comm == 2 * len(STAGES)   # every stage call all-reduces, on both ranks
    assert db.execute("SELECT count(*) FROM communication WHERE host_total_us > 0").fetchone()[0] == n_comm
    with TotalsReader(summary) as rd:   # the totals are in capture_totals.jsonl, beside summary.json
        n_ops = sum(len(rd.get(c, "op_totals") or []) for c in summary["captures"])
    assert db.execute("SELECT count(*) FROM op_totals").fetchone()[0] == n_ops > 0
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == len(summary["runs"]) == 1


# ------------------------------------------------------------------------------ the GRPO example (slow)


def grpo_run(root: Path, iterations: int = 4) -> Path:
    """The GRPO example (Ray, 2 actor ranks and a reference worker) profiled into `root`, not analysed."""
    code = ("import sys; from examples.grpo.train_grpo import run; "
            "run('examples/grpo/grpo.yaml', [f'grpo.iterations={sys.argv[1]}', "
            "f'profiler_config.integrated.profile_save_path={sys.argv[2]}'], analyse=False)")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-c", code, str(iterations), str(root)], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return root


@pytest.fixture(scope="module")
def grpo_db(tmp_path_factory):
    root = grpo_run(tmp_path_factory.mktemp("grpo"))
    summary, code = analyse_directory(root, export_type="db", progress=False)
    assert code == 0, [c.get("error") for c in summary["captures"]]
    return root, summary


@pytest.mark.slow
def test_documented_queries_return_rows_on_the_grpo_example(grpo_db):
    root, summary = grpo_db
    check_documented_queries(root / "analysis" / "analysis.db")
    check_spans(root, summary)


@pytest.mark.slow
def test_grpo_terminal_and_report_say_where_the_time_goes(grpo_db):
    """On the GRPO run: the terminal names the gloo collective and the communication share of
    actor_update, and the report's iteration bars show the profiler's export of iteration 3."""
    import io

    from rich.console import Console

    from mindspeed_profiler.analysis.results.console import print_summary
    root, summary = grpo_db
    buf = io.StringIO()
    print_summary(summary, console=Console(file=buf, width=200, color_system=None), out_dir=root / "analysis")
    text = buf.getvalue()
    assert "gloo:all_reduce" in text and "% of wall (host)" in text
    upd = [c for c in summary["captures"] if c.get("stage") == "actor_update"]
    assert all(c["communication"]["host"]["share_of_wall"] > 0.05 for c in upd)
    it3 = next(it for it in summary["timeline"]["iterations"] if it["iteration"] == 3)
    assert it3["profiler_us"] > 0
    page = (root / "analysis" / "report.html").read_text()
    assert "iter 3: profiler (capture export)" in page
