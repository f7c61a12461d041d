"""The analysis of the memory files (issue 47): kind `memory` (analysis/inputs/memory_records.py)
gives the per-stage x rank table (stage_memory), the out-of-memory and host watermark records
(oom_records) and what was alive at the failure from the allocator's snapshot (oom_live: by site, by
the stage that allocated it, by Python site); the advisor's memory rules (memory_rules.py), each with
a case that triggers it and one that does not; corrupt files are warnings and the rest is analysed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_device_memory import GIB, MIB
from memory_testutil import OOM_ITERATION, OOM_RANK, OOM_STAGE, oom_run
from mindspeed_profiler.analysis import RunAnalysis
from mindspeed_profiler.analysis.analyzers import advisor, memory_rules
from mindspeed_profiler.analysis.analyzers.oom import OOM_RECORDS
from mindspeed_profiler.analysis.analyzers.stage_memory import STAGE_MEMORY
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, dict]:
    root = oom_run(tmp_path_factory.mktemp("oom_run"))
    summary, _ = analyse_directory(root, jobs=1, progress=False, html=False)
    return root, summary


def test_the_per_stage_by_rank_table(run):
    root, summary = run
    rows = {(r["rank"], r["stage"]): r for r in RunAnalysis(root).stage_memory()}
    assert set(rows) == {(0, "actor_generate"), (0, "actor_update"), (1, "actor_generate"), (1, "actor_update")}
    assert rows[(0, "actor_generate")]["device_allocated_peak_bytes"] == 2 * GIB       # weights + its 1 GiB cache
    assert rows[(1, "actor_generate")]["device_allocated_peak_bytes"] == 4 * GIB       # weights + its 3 GiB cache
    assert rows[(0, "actor_update")]["device_allocated_peak_bytes"] == GIB + 512 * MIB
    assert rows[(0, "actor_update")]["calls"] == 4 and rows[(1, "actor_update")]["calls"] == OOM_ITERATION
    assert rows[(1, "actor_update")]["failed_calls"] == 1 and rows[(1, "actor_generate")]["iterations"] == OOM_ITERATION
    assert all(r["capacity_bytes"] == 8 * GIB and r["host_peak_bytes"] > 0 and r["host_peak_scope"] == "stage"
               for r in rows.values())


def test_the_oom_record_its_snapshot_and_what_was_alive(run):
    root, summary = run
    ra = RunAnalysis(root)
    (oom,) = [r for r in ra.oom_records() if r["kind"] == "device_oom"]
    assert (oom["role"], oom["rank"], oom["stage"], oom["iteration"]) == ("actor", OOM_RANK, OOM_STAGE, OOM_ITERATION)
    assert oom["exception"] == "torch.OutOfMemoryError" and oom["tried_bytes"] == 6 * GIB
    assert oom["snapshot"].endswith(".memory_snapshot.pickle") and oom["snapshot_problem"] is None
    # alive at the failure: rank 1's weights (allocated before its iterations) and its update's gradients
    assert oom["live_bytes"] == GIB + 512 * MIB
    live = {(r["by"], r["key"]): r["bytes"] for r in ra.oom_live() if r["record"] == oom["record"]}
    assert live[("stage", OOM_STAGE)] == 512 * MIB
    assert live[("stage", "(before the history)")] == GIB     # the weights: allocated before its profiler started
    assert live[("site", "(no stack recorded)")] == GIB        # ... so the history holds no stack for them
    (grads,) = [k[1] for k in live if k[0] == "site" and k[1] != "(no stack recorded)"]
    assert "memory_testutil.py" in grads and grads.endswith(" oom_run") and live[("site", grads)] == 512 * MIB
    (mark,) = [r for r in ra.oom_records() if r["kind"] == "host_watermark"]
    assert mark["rank"] == 0 and mark["watermark_share"] == 0.5
    assert any(r["by"] == "python" and r["record"] == mark["record"] for r in ra.oom_live())   # tracemalloc's top


def test_the_findings_of_the_run(run):
    _, summary = run
    ids = {f["id"]: f for f in summary["findings"]}
    oom = ids["out_of_memory"]
    assert oom["impact"] == 1.0 and summary["findings"][0]["id"] == "out_of_memory"
    assert f"actor rank {OOM_RANK}: out of device memory in {OOM_STAGE}, iteration {OOM_ITERATION}" in oom["title"]
    assert "it asked for 6.00 GiB" in oom["title"] and "micro-batch" in oom["action"]
    assert oom["evidence"]["snapshot"] and oom["evidence"]["top_stage"] == "(before the history)"
    assert "by stage, the most was allocated before the history (1.00 GiB)" in oom["title"]
    assert "host_memory_watermark" in ids
    assert any(f["id"] == "stage_memory_imbalance" and f["evidence"]["stage"] == "actor_generate"
               and f["evidence"]["rank"] == OOM_RANK for f in summary["findings"])   # its cache: 3x rank 0's


# ------------------------------------------------------------------------------ each rule, both ways


def _summary(stages=(), records=()) -> dict:
    return {"captures": [{"path": "metrics/memory", "kind": "memory",
                          "stage_memory": {"stages": list(stages), "records": list(records), "live": []}}]}


def _stage(rank, stage="actor_update", reserved=None, allocated=None, host=None, capacity=None) -> dict:
    return STAGE_MEMORY.row(role="actor", rank=rank, stage=stage, calls=1, iterations=1,
                            device_allocated_peak_bytes=allocated, device_reserved_peak_bytes=reserved,
                            host_peak_bytes=host, host_peak_median_bytes=host, offload_bytes=0, onload_bytes=0,
                            failed_calls=0, capacity_bytes=capacity, host_limit_bytes=None, host_peak_scope="stage")


def _record(kind, stage="actor_generate", **kw) -> dict:
    base = dict(record="r.memory.json", kind=kind, run_id=None, role="actor", rank=2, stage=stage, iteration=7)
    return OOM_RECORDS.row(**base, **kw)


def ids_of(summary: dict) -> list[str]:
    return [f["id"] for f in advisor.findings(summary)]


def test_out_of_memory_names_the_stage_s_action_and_a_snapshot_when_none_was_kept():
    found = [f for f in advisor.findings(_summary(records=[_record("device_oom", tried_bytes=2 * GIB,
                                                                   device_free_bytes=GIB)]))
             if f["id"] == "out_of_memory"]
    (f,) = found
    assert "out of device memory in actor_generate, iteration 7" in f["title"] and "gpu_memory_utilization" in f["action"]
    assert "metrics.oom_snapshot: true" in f["action"]
    assert "out_of_memory" not in ids_of(_summary(records=[_record("host_watermark", host_rss_bytes=1,
                                                                   host_limit_bytes=2)]))


def test_host_memory_watermark_both_ways():
    hit = advisor.findings(_summary(records=[_record("host_watermark", host_rss_bytes=9 * GIB, host_limit_bytes=10 * GIB,
                                                     watermark_share=0.9)]))
    (f,) = [f for f in hit if f["id"] == "host_memory_watermark"]
    assert f["impact"] == pytest.approx(0.45) and "90% of its limit" in f["title"]
    assert "host_memory_watermark" not in ids_of(_summary(records=[_record("device_oom")]))


def test_stage_memory_imbalance_both_ways():
    ranks = [_stage(0, reserved=10 * GIB), _stage(1, reserved=10 * GIB), _stage(2, reserved=14 * GIB)]
    (f,) = [f for f in advisor.findings(_summary(ranks)) if f["id"] == "stage_memory_imbalance"]
    assert f["evidence"]["rank"] == 2 and f["evidence"]["others_median_bytes"] == 10 * GIB
    close = [_stage(0, reserved=10 * GIB), _stage(1, reserved=12 * GIB)]                 # 1.2x: under the factor
    small = [_stage(0, host=100 * MIB), _stage(1, host=300 * MIB)]                        # 3x but 200 MiB apart
    alone = [_stage(0, reserved=10 * GIB), _stage(0, stage="actor_generate", reserved=30 * GIB)]   # one rank per stage
    for rows in (close, small, alone):
        assert "stage_memory_imbalance" not in ids_of(_summary(rows))
    assert memory_rules.IMBALANCE_FACTOR == 1.25 and memory_rules.IMBALANCE_MIN_BYTES == 256 << 20


def test_stage_near_capacity_both_ways_and_it_replaces_the_tracker_s_finding():
    tracker = {"path": "metrics/actor_rank0.jsonl", "kind": "tracker", "role": "actor", "rank": 0,
               "tracker": {"rows": [{"iteration": 1, "metric": "perf/max_memory_reserved_gb", "value": 76.0},
                                    {"iteration": 1, "metric": "perf/memory_capacity_gb", "value": 80.0}]}}
    staged = _summary([_stage(0, stage="actor_generate", reserved=76 * GIB, capacity=80 * GIB)])
    staged["captures"].append(tracker)
    found = advisor.findings(staged)
    (f,) = [f for f in found if f["id"] == "stage_near_capacity"]
    assert "actor_generate peaks at 95%" in f["title"] and "memory_near_capacity" not in [x["id"] for x in found]
    # without per-stage rows the tracker's rule still says it
    assert "memory_near_capacity" in ids_of({"captures": [tracker]})
    assert "stage_near_capacity" not in ids_of(_summary([_stage(0, reserved=40 * GIB, capacity=80 * GIB)]))


# ------------------------------------------------------------------------------ bad files


def test_corrupt_memory_files_are_warnings_and_the_rest_is_analysed(tmp_path):
    root = oom_run(tmp_path / "run")
    mem = root / "metrics" / "memory"
    rec = next(mem.glob("*.device_oom.*.memory.json"))
    snap = mem / json.loads(rec.read_text())["snapshot"]["file"]
    snap.write_bytes(b"\x80\x04\x95not a pickle at all")                           # a broken snapshot
    (mem / "actor_rank0.host_watermark.1-99.memory.json").write_text("{truncated")   # a broken record
    with open(mem / "actor_rank0.stages.jsonl", "a") as fh:
        fh.write('{"type": "stage", "stage": "actor_up')                         # a torn last line
    summary, _ = analyse_directory(root, jobs=1, progress=False, html=False)
    (cap,) = [c for c in summary["captures"] if c["kind"] == "memory"]
    assert cap["status"] == "ok"
    said = " | ".join(cap["warnings"])
    assert "host_watermark.1-99.memory.json: not read" in said and "unreadable" in said and "1 line(s)" in said
    oom = next(r for r in OOM_RECORDS.rows(summary) if r["kind"] == "device_oom")
    assert oom["snapshot_problem"] and oom["live_bytes"] is None and oom["stage"] == OOM_STAGE
    assert len(STAGE_MEMORY.rows(summary)) == 4
    assert "out_of_memory" in [f["id"] for f in summary["findings"]]


def test_the_terminal_and_the_report_show_the_tables(run):
    root, summary = run
    from mindspeed_profiler.analysis.results import memory_table
    from mindspeed_profiler.analysis.results.report import sections

    rows = memory_table.stage_rows(summary)
    assert [r[:3] for r in rows] == [["actor:0", "actor_generate", "4"], ["actor:1", "actor_generate", "3"],
                                     ["actor:0", "actor_update", "4"], ["actor:1", "actor_update", "3"]]
    assert rows[1][3] == "4.00" and rows[3][10] == "1"                      # rank 1: 4 GiB in generate, one failed update
    (oom,) = [r for r in memory_table.record_rows(summary) if r[1] == "device_oom"]
    assert oom[:5] == [f"actor:{OOM_RANK}", "device_oom", OOM_STAGE, str(OOM_ITERATION), "6.00"]
    page = sections.memory(summary)
    assert page["stages"].rows and page["records"].rows
    summary_without = {"captures": [c for c in summary["captures"] if c["kind"] != "memory"]}
    assert sections.memory(summary_without) is None and memory_table.stage_rows(summary_without) == []
    html = (root / "analysis" / "report.html")
    analyse_directory(root, jobs=1, progress=False, html=True)
    text = html.read_text()
    assert 'id="stage-memory"' in text and 'id="oom-records"' in text
