"""One row model per analysis question (analysis/models/rows.py, questions.py): a field has one name in
summary.json, analysis.db and RunAnalysis, and docs/analysis.md's tables are made from the models.

Checked on real outputs: the shared sample data (Kineto + Ascend), a real in-process CPU run with
the tracer (the timeline questions), a 4-rank Ascend pipeline run and msprof-analyze's own cluster
output. For every question with rows there:
  - analysis.db's table has exactly the model's columns, and its rows equal the model's rows;
  - RunAnalysis' method returns exactly the capture identity + the fields (+ their documented
    older names + the legacy nested keys), with the values the db holds;
  - every field read from summary.json is found there under the path it declares (a stale path
    would silently give NULL columns), and is named after that path (or names it as an alias).
"""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import REPO_ROOT, SHARED_DATA
from mindspeed_profiler.analysis import RunAnalysis
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.models.questions import MODELS, db_tables_markdown, markdown
from mindspeed_profiler.analysis.models.rows import IDENTITY, Field, RowModel
from mindspeed_profiler.analysis.results.sqlite_export import converter



def _memory_run(root: Path) -> Path:
    """A real CPU capture with profile_with_memory (a PyTorch memory snapshot beside it), metrics on."""
    from mindspeed_profiler import IntegratedProfiler, load_config
    from profiler_testutil import train

    cfg = load_config({"integrated": {"profile": True, "profile_save_path": str(root), "backend": "torch",
                                      "profile_level": "level2", "profile_with_memory": True,
                                      "profile_step_start": 2, "profile_step_end": 3},
                       "metrics": {"enable": True}})   # and the tracker's rows (tracker_metrics)
    train(IntegratedProfiler(cfg, role="actor", rank=0, world_size=1), 3)
    return root


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, request) -> list[tuple[str, Path, dict]]:
    """(name, root, summary) of each input, analysed with the db export."""
    from test_db_queries import gloo_run
    from samples_testutil import rollout_run

    roots = []
    if SHARED_DATA.is_dir():
        root = tmp_path_factory.mktemp("shared")
        shutil.copytree(SHARED_DATA, root, dirs_exist_ok=True)
        roots.append(("shared data", root))
    roots.append(("cpu run with timeline", gloo_run(tmp_path_factory.mktemp("gloo"))))
    roots.append(("cpu run with a memory snapshot", _memory_run(tmp_path_factory.mktemp("memory"))))
    nccl = tmp_path_factory.mktemp("nccl_args")   # HTA's NCCL trace with collective args (collective_bandwidth)
    shutil.copytree(REPO_ROOT / "tests" / "data" / "hta" / "nccl_parser_config", nccl, dirs_exist_ok=True)
    roots.append(("nccl trace with collective args", nccl))
    from test_async_rl import write_async_tracker   # an async trainer's tracker file (async_iterations)
    roots.append(("async trainer's metrics", write_async_tracker(tmp_path_factory.mktemp("async"))))
    roots.append(("rollout samples", rollout_run(tmp_path_factory.mktemp("samples"))))   # docs/rollout.md's records
    from memory_testutil import oom_run   # per-stage memory and an out-of-memory record with its snapshot (issue 47)
    roots.append(("memory records", oom_run(tmp_path_factory.mktemp("memory_records"))))
    ascend_sets = request.getfixturevalue("ascend_sets")
    for name, sub in (("pp4_l2", ""), ("gpt3_cluster16", "cluster_analysis_output"), ("db_l1", "")):
        root = tmp_path_factory.mktemp(name)
        shutil.copytree(ascend_sets(name) / sub, root, dirs_exist_ok=True)
        roots.append((name, root))
    out = []
    for name, root in roots:
        summary, _ = analyse_directory(root, jobs=1, export_type="db", progress=False, html=False)
        out.append((name, root, summary))
    return out


def _db_rows(root: Path, table: str) -> tuple[list[str], list[tuple]]:
    con = sqlite3.connect(root / "analysis" / "analysis.db")
    try:
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        return cols, con.execute(f"SELECT * FROM {table}").fetchall()
    finally:
        con.close()


def _method_rows(ra: RunAnalysis, m: RowModel) -> list[dict]:
    return list(getattr(ra, m.method)())


def _need_every_input() -> None:
    """The coverage checks need every input: some rows (warnings) come only from ../shared (the
    per-input checks before them have run)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} not found (MSP_SHARED_DATA): some questions have rows only there")


def test_every_question_has_its_table_and_its_method(outputs):
    seen_rows: set[str] = set()
    for name, root, summary in outputs:
        ra = RunAnalysis(root)
        for m in MODELS:
            cols, rows = _db_rows(root, m.table)
            assert cols == list(m.columns), f"{name}: analysis.db {m.table} columns"
            if m.select is None:
                continue   # filled from the traces (events, spans)
            expected = [((cid,) if m.per_capture else ()) + tuple(converter(f)(vals[f.name]) for f in m.fields)
                        for cid, _, _, vals in m.records(summary)]
            if m.conflict == "IGNORE":   # duplicates dropped by the primary key
                expected = list(dict((r[0], r) for r in reversed(expected)).values())[::-1]
            assert sorted(map(repr, rows)) == sorted(map(repr, expected)), f"{name}: {m.table} rows"
            if rows:
                seen_rows.add(m.question)
            if m.method is None:
                continue
            got = _method_rows(ra, m)
            assert len(got) == len(rows), f"{name}: RunAnalysis.{m.method}() rows vs {m.table}"
            keys = ((IDENTITY if m.per_capture else ()) + m.names
                    + tuple(a for f in m.fields for a in f.aliases) + m.legacy)
            assert all(list(r) == list(dict.fromkeys(keys)) for r in got), f"{name}: RunAnalysis.{m.method}() keys"
            # the facade's field values are the db's values (the same rows, in the db's insert order)
            conv = [converter(f) for f in m.fields]
            as_db = [((None,) if m.per_capture else ()) + tuple(c(r[f.name]) for c, f in zip(conv, m.fields)) for r in got]
            strip = (lambda t: t[1:]) if m.per_capture else (lambda t: t)
            assert sorted(map(repr, map(strip, as_db))) == sorted(map(repr, map(strip, rows))), \
                f"{name}: RunAnalysis.{m.method}() values vs analysis.db {m.table}"
            for f in m.fields:
                for a in f.aliases:   # an older name carries the same value
                    assert all(r[a] == r[f.name] for r in got), f"{m.method}: alias {a} of {f.name}"
    _need_every_input()
    empty = {m.question for m in MODELS if m.select is not None} - seen_rows
    assert not empty, f"questions with no rows on these inputs: {sorted(empty)}"


def _has_path(raw, path: tuple) -> bool:
    v = raw
    for k in path:
        if isinstance(v, dict) and k in v:
            v = v[k]
        elif isinstance(v, (list, tuple)) and isinstance(k, int) and -len(v) <= k < len(v):
            v = v[k]
        else:
            return False
    return True


def _named_after_its_path(f: Field) -> bool:
    keys = [k for k in f.path if isinstance(k, str)]
    return f.name in ("_".join(keys), keys[-1]) or keys[-1] in f.aliases


def test_each_field_is_where_it_says_and_named_after_it(outputs):
    found: dict[tuple[str, str], bool] = {}
    for _, _, summary in outputs:
        for m in MODELS:
            if m.select is None:
                continue
            for _, _, raw, _ in m.records(summary):
                for f in m.fields:
                    hit = _has_path(raw, f.path)   # computed fields: select() puts them in the raw row
                    found[(m.question, f.name)] = found.get((m.question, f.name), False) or hit
    for m in MODELS:
        for f in m.fields:
            if not f.computed and not isinstance(f.path[-1], int):
                assert _named_after_its_path(f), f"{m.question}.{f.name} is read from {'.'.join(map(str, f.path))}"
    _need_every_input()
    with_rows = {q for q, _ in found}
    missing = sorted(f"{q}.{n}" for (q, n), hit in found.items() if not hit)
    # a field of a question with rows that no row of any input has: its path is stale, or no input
    # here writes it; the latter are listed (each one checked by hand against the analyzer)
    assert missing == sorted(ABSENT_HERE), "\n".join(missing)
    assert with_rows == {m.question for m in MODELS if m.select is not None}


# fields no input of this test writes, each checked against its writer: critical_path.py sets
# `inner` only when a span of another worker is enclosed by the link; crossrank.py sets `run_id`
# only when the directory holds several runs; ascend_files.py CLUSTER_INDEX_COLUMNS reads the
# parallel indices from cluster files that have those columns (these do not)
ABSENT_HERE = {"critical_path.inner_dur_us", "critical_path.inner_stage", "critical_path.inner_worker",
               "slow_ranks.run_id", "stage_rank.run_id",
               "step_breakdown.dp_index", "step_breakdown.pp_index", "step_breakdown.tp_index",
               # written only by export_after_run captures (their held session's phases: test_export_after_run.py)
               "captures.export_session_stop_s", "captures.export_session_write_s", "captures.export_session_cut_s"}


def test_the_docs_tables_are_made_from_the_models():
    how = "(python -m mindspeed_profiler.analysis.models.questions prints them)"
    assert db_tables_markdown() in (REPO_ROOT / "docs" / "analysis.md").read_text(), f"docs/analysis.md: the db tables {how}"
    assert markdown() in (REPO_ROOT / "docs" / "questions.md").read_text(), f"docs/questions.md: the field tables {how}"


def test_a_model_refuses_a_name_used_twice():
    with pytest.raises(ValueError, match="used twice"):
        RowModel("q", "row", "x", fields=(Field("a_us", "us", "a"), Field("b_us", "us", "b", aliases=("a_us",))),
                 select=None)
    with pytest.raises(ValueError, match="unknown unit"):
        Field("a", "furlongs", "a")
