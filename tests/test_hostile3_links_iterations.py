"""Issue 31, items 11 and 20.

11: the `links` table (analyzers/links.py) joins the Ascend captures of one job (run, role, stage,
iteration window), never two RL stages' or two windows' matrices into one (that doubled every
link's MB and time, n_ranks 2). Checked on a real capture set (text_l1: torch_npu's text export
with communication_matrix.json; ../shared/ascend-2rank's level-0 export writes no matrix) copied
under two stage directories, the expected MB and ms recomputed from the raw files.

20: the tracker's tokens/s and MFU per iteration (metrics/<role>_rank<R>.jsonl, written here by the
real tracker) are shown in the terminal's iteration table and in report.html (a column and a
plot), equal to the tracker's rows; without them, no such column."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import ascend_data
from mindspeed_profiler.analysis import RunAnalysis
from mindspeed_profiler.analysis.analyzers import links
from mindspeed_profiler.analysis.batch import analyse_directory
from mindspeed_profiler.analysis.parsing.ascend_files import step_label

SET = "text_l1"


def _stage_copy(root: Path, stage: str, steps: list[int]) -> Path:
    """The set's rank directories under root/<stage>/, each with our metadata naming the stage and window."""
    d = ascend_data.writable_copy(SET, root / stage)
    for cap in d.iterdir():
        (cap / "mindspeed_profiler_meta.json").write_text(
            json.dumps({"stage": stage, "run_id": "run1", "role": "actor", "steps": steps}))
    return d


def _raw_links(d: Path) -> dict[tuple, list[float]]:
    """{(step, group, op, src, dst): [MB, ms]} summed over the rank files of one copy, from the raw
    communication_matrix.json (the aggregate `<op>-total` ops only, as links.py keeps)."""
    out: dict[tuple, list[float]] = {}
    for f in sorted(d.glob("*/ASCEND_PROFILER_OUTPUT/communication_matrix.json")):
        for step, kinds in json.loads(f.read_text()).items():
            for ops in kinds.values():
                for key, lks in (ops.items() if isinstance(ops, dict) else ()):
                    op, _, group = key.partition("@")
                    if not links.is_aggregate(key):
                        continue
                    for lk, v in lks.items():
                        s, t = (int(x) for x in lk.split("-"))
                        acc = out.setdefault((step_label(step.removeprefix("step")), group, op, s, t), [0.0, 0.0])
                        acc[0] += v["Transit Size(MB)"]
                        acc[1] += v["Transit Time(ms)"]
    assert out, f"{SET}: no aggregate links in the raw matrices"
    return out


def _links(root: Path) -> list[dict]:
    summary, _ = analyse_directory(root, jobs=1, progress=False, write=False)
    ascend = [c for c in summary["captures"] if c["kind"] == "ascend"]
    assert ascend and all(c["status"] == "ok" for c in ascend), [(c["path"], c.get("error")) for c in ascend]
    return RunAnalysis.from_summary(summary).links()


def _check_group(rows: list[dict], want: dict[tuple, list[float]]) -> None:
    got = {(r["step"], r["group"], r["op"], r["src_local"], r["dst_local"]): r for r in rows if r["op"] != links.TOTAL_OP}
    assert set(got) == set(want)
    for k, (mb, ms) in want.items():
        assert got[k]["size_mb"] == pytest.approx(mb, rel=1e-9), k
        assert got[k]["time_ms"] == pytest.approx(ms, rel=1e-9), k
        assert got[k]["n_ranks"] == 1, k


def test_two_stages_of_one_iteration_are_two_link_groups_not_summed(tmp_path, ascend_sets):
    ascend_sets(SET)
    gen = _stage_copy(tmp_path / "run", "actor_generate", [3, 3])
    _stage_copy(tmp_path / "run", "actor_update", [3, 3])
    want = _raw_links(gen)   # both copies hold the same files: each stage's links are these, once
    rows = _links(tmp_path / "run")
    for r in rows:   # every link's MB and ms are one stage's, never the two stages' sum
        if r["op"] != links.TOTAL_OP:
            k = (r["step"], r["group"], r["op"], r["src_local"], r["dst_local"])
            assert (r["size_mb"], r["time_ms"]) == pytest.approx(tuple(want[k]), rel=1e-9), (k, r)
    by_stage: dict[str, list[dict]] = {}
    for r in rows:
        by_stage.setdefault(r["stage"], []).append(r)
    assert sorted(by_stage) == ["actor_generate", "actor_update"]
    for stage, rs in by_stage.items():
        assert {(r["run_id"], r["role"], r["step_first"], r["step_last"]) for r in rs} == {("run1", "actor", 3, 3)}
        _check_group(rs, want)
    # the slow-link median compares a stage's links only: a twin stage's copies do not count twice
    compared = [r for r in rows if r["median_gbps"] is not None]
    assert compared and all(r["n_ranks"] == 1 for r in compared)


def test_two_windows_of_one_stage_are_two_groups_and_a_repeated_rank_counts_once(tmp_path, ascend_sets):
    ascend_sets(SET)
    first = _stage_copy(tmp_path / "run" / "w3", "actor_update", [3, 3])
    _stage_copy(tmp_path / "run" / "w7", "actor_update", [7, 7])
    want = _raw_links(first)
    # rank 0 of the first window captured twice (a copy beside it): the first by path is taken, not both
    dup = tmp_path / "run" / "w3" / "actor_update" / "rank0_ascend_pt_copy_ascend_pt"
    ascend_data.writable_copy(SET, tmp_path / "spare")
    (tmp_path / "spare" / "rank0_ascend_pt").rename(dup)
    (dup / "mindspeed_profiler_meta.json").write_text(
        json.dumps({"stage": "actor_update", "run_id": "run1", "role": "actor", "steps": [3, 3]}))
    rows = _links(tmp_path / "run")
    assert all(r["n_ranks"] == 1 for r in rows), "a window's or a repeated capture's links were summed"
    windows = {(r["step_first"], r["step_last"]) for r in rows}
    assert windows == {(3, 3), (7, 7)}
    for w in windows:
        _check_group([r for r in rows if (r["step_first"], r["step_last"]) == w], want)
