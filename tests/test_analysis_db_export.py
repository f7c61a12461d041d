"""The SQLite export (`--export-type db`): indices for the common queries, the timeline's iteration
table and stage spans, and no temporary file left behind."""
from __future__ import annotations

import sqlite3

from analysis_testutil import HOSTILE, analyse_hostile_run
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory


def test_db_has_indices_and_iteration_table(tmp_path):
    analyse_hostile_run(tmp_path)
    analyse_directory(tmp_path, jobs=1, progress=False, html=False, export_type="db")
    db = sqlite3.connect(tmp_path / "analysis" / "analysis.db")
    idx = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"events_capture_ts", "events_name", "events_cat_name"} <= idx
    plan = " ".join(str(r) for r in db.execute("EXPLAIN QUERY PLAN SELECT sum(dur_us) FROM events WHERE name = ?", ("x",)))
    assert "events_name" in plan
    # iteration 1 = [0, 100]; spans [0, 50] and [10, 60] of two stages: overlap 40, no stage 40
    assert db.execute("SELECT iteration, dur_us, overlap_us, no_stage_us FROM timeline_iterations").fetchall() == \
        [(1, 100.0, 40.0, 40.0)]
    assert not (tmp_path / "analysis" / "analysis.db.tmp").exists()
    # every stage span of the timeline, and the profiler columns of the iterations (no profiler spans here)
    assert db.execute("SELECT worker, stage, start_us, dur_us FROM spans ORDER BY start_us").fetchall() == \
        [(f"{HOSTILE[0]}:0", HOSTILE[1], 0.0, 50.0), (f"{HOSTILE[2]}:0", HOSTILE[3], 10.0, 50.0)]
    assert db.execute("SELECT profiler_us, profiler_no_stage_us FROM timeline_iterations").fetchall() == [(0.0, 0.0)]
