"""Ascend output written by other projects (tests/ascend_data.py: 2 ranks at levels 0-2, text and
db; 4 ranks pipeline-parallel; msprof-analyze's own cluster output): the numbers equal torch_npu's
own rows (step_trace_time.csv / analysis.db, what msprof-analyze reports: tests/test_crosscheck.py
runs it) or a recomputation from the raw rows here (csv / json / sqlite3, no package code)."""
from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

import ascend_data
from analysis_testutil import plain_union
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory


def analyse(root: Path, **kw) -> tuple[dict, int, dict]:
    summary, code = analyse_directory(root, jobs=1, progress=False, write=False, **kw)
    return summary, code, {c["path"]: c for c in summary["captures"]}


def csv_rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return [{k.strip(): (v or "").strip().strip("\t") for k, v in r.items()} for r in csv.DictReader(f)]


def step_trace_file(capture: Path) -> dict:
    (row,) = csv_rows(capture / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
    return {k: float(v) for k, v in row.items() if k not in ("Step", "Device_id")} | {"Step": int(row["Step"])}


# ------------------------------------------------------------------------- 1. compute vs communication


@pytest.mark.parametrize("drop", [(), ("step_trace_time.csv",)])
def test_text_export_splits_compute_and_communication_as_torch_npu(ascend_sets, tmp_path, drop):
    """Level 1, text: compute 8,874 us (was 111,046: the HCCL sub-tasks counted as compute),
    exposed communication 101,963 us (was 2.8), free 25,744 us (was 65,686): torch_npu's own
    step_trace_time.csv, with the file or computed from trace_view.json without it."""
    d = ascend_data.writable_copy("text_l1", tmp_path / "s", drop=drop)
    summary, code, caps = analyse(d)
    assert code == 0
    for r in (0, 1):
        want = step_trace_file(ascend_sets("text_l1") / f"rank{r}_ascend_pt")
        c = caps[f"rank{r}_ascend_pt"]
        dev, (row,) = c["device"], c["step_trace"]
        assert row["step"] == want["Step"] == 50
        assert dev["compute_us"] == pytest.approx(want["Computing"], rel=1e-4)
        assert dev["communication_exposed_us"] == pytest.approx(want["Communication(Not Overlapped)"], rel=1e-4)
        assert dev["communication_us"] == pytest.approx(want["Communication"], rel=1e-4)
        assert dev["idle_us"] + dev["memcpy_exposed_us"] == pytest.approx(want["Free"], rel=1e-4)
        assert row["free_us"] == pytest.approx(want["Free"], rel=1e-4)
        assert c["communication"]["device"]["share_of_busy"] > 0.9
    if drop:
        assert caps["rank0_ascend_pt"]["step_trace_source"] == "trace_view.json: Overlap Analysis"
    assert caps["rank0_ascend_pt"]["device"]["compute_us"] == pytest.approx(8873.76, abs=0.01)


def test_hccl_sub_tasks_are_the_ops_own_never_compute(ascend_sets):
    """Recomputed from trace_view.json: the hardware tasks sharing an hcom op's connection_id are
    Notify Wait / Write Value / SDMA; the union of the other non-sync, non-copy tasks is Computing."""
    tv = json.loads((ascend_sets("text_l1") / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    procs = {e["pid"]: e["args"]["name"] for e in tv if e.get("ph") == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in tv if e.get("ph") == "M" and e["name"] == "thread_name"}
    ops = [e for e in tv if e.get("ph") == "X" and procs.get(e["pid"]) == "HCCL"
           and threads[(e["pid"], e["tid"])].endswith("Communication")]
    conn = {e["args"]["connection_id"] for e in ops}
    hw = [e for e in tv if e.get("ph") == "X" and procs.get(e["pid"]) == "Ascend Hardware"]
    sub = {e["args"]["Task Type"] for e in hw if e["args"].get("connection_id") in conn}
    assert sub == {"Notify Wait", "Write Value", "SDMA"} and all(o["name"].startswith("hcom_") for o in ops)
    non_compute = {"EVENT_RECORD_SQE", "EVENT_WAIT_SQE", "PLACE_HOLDER_SQE", "PCIE_DMA_SQE", "SDMA_SQE"}
    iv = sorted((Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(str(e["dur"]))) for e in hw
                if e["args"].get("connection_id") not in conn and e["args"]["Task Type"] not in non_compute)
    total = plain_union(iv)
    lane = sum(Decimal(str(e["dur"])) for e in tv if procs.get(e.get("pid")) == "Overlap Analysis" and e["name"] == "Computing")
    assert float(total) == pytest.approx(float(lane), abs=0.01)   # 8873.757 vs 8873.756


# ------------------------------------------------------------------------------- 2. rank and layout


@pytest.mark.parametrize("name", ["text_l0", "db_l0", "text_l1", "db_l1", "text_l2", "db_l2", "pp4_l2"])
def test_every_ascend_capture_has_its_rank(ascend_sets, name):
    summary, code, caps = analyse(ascend_sets(name))
    s = ascend_data.SETS[name]
    assert code == 0
    assert sorted(c["rank"] for c in caps.values()) == list(s.ranks)
    if s.devices:
        assert [c["device_id"] for c in sorted(caps.values(), key=lambda c: c["rank"])] == list(s.devices)
    assert {r["rank"] for r in summary["stage_rank"] if r["source"] == "capture"} == set(s.ranks)
    assert all(c["ascend"]["level"] == s.level for c in caps.values() if c["ascend"]["level"])


def test_pipeline_parallel_layout_and_devices_that_are_not_ranks(ascend_sets):
    d = ascend_sets("pp4_l2")
    summary, code, caps = analyse(d)
    by_rank = {c["rank"]: c for c in caps.values()}
    for r, c in by_rank.items():
        meta = json.loads((d / f"rank_{r}_ascend_pt" / "profiler_metadata.json").read_text())
        groups = {g["group_name"]: g for g in meta["parallel_group_info"].values()}
        pp = groups["pp"]
        assert c["parallel"]["pp"] == [pp["group_rank"], len(pp["global_ranks"])]
        dp = groups.get("dp") or groups["dp_cp"]
        assert c["parallel"]["dp"] == [dp["group_rank"], len(dp["global_ranks"])]
        assert c["world_size"] == meta["distributed_args"]["world_size"] == 4
        dev = int(csv_rows(d / f"rank_{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")[0]["Device_id"])
        assert c["device_id"] == dev
    assert [by_rank[r]["parallel"]["pp"][0] for r in range(4)] == [0, 0, 1, 1]
    assert [by_rank[r]["device_id"] for r in range(4)] == [0, 1, 4, 5]


def test_compare_keeps_ascend_ranks_apart(ascend_sets):
    from mindspeed_profiler.analysis.analyzers.compare import compare
    a, _, _ = analyse(ascend_sets("text_l1"))
    b, _, _ = analyse(ascend_sets("text_l2"))
    res = compare(a, b)
    assert res["how"]["level"] == "rank"
    assert {r["worker"] for r in res["breakdown"]} == {":0", ":1"}
    comm = {r["worker"]: r for r in res["breakdown"] if r["name"] == "communication_exposed_us"}
    for r in (0, 1):
        a = step_trace_file(ascend_sets("text_l1") / f"rank{r}_ascend_pt")["Communication(Not Overlapped)"]
        b = step_trace_file(ascend_sets("text_l2") / f"rank{r}_ascend_pt")["Communication(Not Overlapped)"]
        assert (comm[f":{r}"]["a_us"], comm[f":{r}"]["b_us"]) == pytest.approx((a, b))
        assert comm[f":{r}"]["delta_us"] == pytest.approx(b - a)


# ------------------------------------------------------------------------------------ 3. db parity


@pytest.mark.parametrize("level", ["l0", "l1", "l2"])
def test_db_export_at_parity_with_text(ascend_sets, level):
    t, _, tcaps = analyse(ascend_sets(f"text_{level}"))
    b, _, bcaps = analyse(ascend_sets(f"db_{level}"))
    for r in (0, 1):
        tc, bc = tcaps[f"rank{r}_ascend_pt"], bcaps[f"rank{r}_ascend_pt"]
        for key in ("steps", "step_trace", "top_ops", "top_kernels", "kernel_types", "op_totals", "kernel_totals"):
            assert bool(tc.get(key)) and bool(bc.get(key)), (level, r, key)
        assert [s["step"] for s in bc["steps"]] == [s["step"] for s in tc["steps"]] == [50]
        assert bc["memory"]["npu"] and tc["memory"]["npu"]
        # collectives' wait / transit and the links: communication.json vs analysis.db's CommAnalyzer tables
        for k in ("collectives", "links"):
            assert bool(tc["communication"][k]) == bool(bc["communication"][k]) == (level != "l0"), (level, k)
        for c in (tc, bc):
            top = c["communication"]["top"]
            assert top and all(x["name"].startswith("hcom_") for x in top if x["where"] == "device")
            assert {k[3] for k in c["kernel_totals"]} == {"compute", "communication"}
        # the same op names on the host (two recordings of one program)
        assert {o["name"] for o in bc["top_ops"][:5]} & {o["name"] for o in tc["top_ops"][:10]}


def test_db_numbers_recomputed_from_its_tables(ascend_sets):
    """Our db figures against the db's own rows: the compute tasks' and the ops' unions (sqlite3
    here), torch_npu's StepTraceTime, the PTA allocator's peak."""
    d = ascend_sets("db_l1") / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    con = sqlite3.connect(d / "ascend_pytorch_profiler_0.db")
    comm = con.execute("SELECT s.value, c.startNs, c.endNs FROM COMMUNICATION_OP c JOIN STRING_IDS s ON s.id = c.opName").fetchall()
    peak = con.execute("SELECT max(totalAllocated) FROM MEMORY_RECORD m JOIN STRING_IDS s ON s.id = m.component "
                       "WHERE s.value = 'PTA'").fetchone()[0]
    steps = con.execute("SELECT id FROM STEP_TIME").fetchall()
    con.close()
    own = sqlite3.connect(d / "analysis.db").execute("SELECT computing, communication_not_overlapped, free FROM StepTraceTime").fetchone()
    _, _, caps = analyse(ascend_sets("db_l1"))
    c = caps["rank0_ascend_pt"]
    (row,) = c["step_trace"]
    assert (row["computing_us"], row["communication_exposed_us"], row["free_us"]) == pytest.approx(own)
    assert [s["step"] for s in c["steps"]] == [int(s[0]) for s in steps]
    top = {x["name"]: x["total_us"] for x in c["communication"]["top"] if x["where"] == "device"}
    assert top == pytest.approx({n: (e - s) / 1e3 for n, s, e in comm})
    assert {m["component"]: m["peak_allocated_bytes"] for m in c["memory"]["npu"]}["PTA"] == peak


# ------------------------------------------------------------------- 4. msprof-analyze's own output


def test_msprof_analyze_output_is_an_input_never_a_failure(ascend_sets):
    d = ascend_sets("gpt3_cluster16") / "cluster_analysis_output"
    summary, code, caps = analyse(d)
    assert code == 0
    (c,) = caps.values()
    assert c["kind"] == "cluster" and len(c["files"]) == 4
    ranks = [r for r in csv_rows(d / "cluster_step_trace_time.csv") if r["Type"] == "rank"]
    assert [r["rank"] for r in c["ranks"]] == [int(r["Index"]) for r in ranks] == list(range(16))
    assert [r["bubble_us"] for r in c["ranks"]] == pytest.approx([float(r["Bubble"]) for r in ranks])
    assert len(c["stages"]) == 2
    groups = json.loads((d / "communication_group.json").read_text())
    assert sorted(g["ranks"] for g in c["groups"]) == sorted(groups["collective"] + groups["p2p"])
    per_rank = {r["rank"]: r for r in c["communication"]["per_rank"]}
    raw = json.loads((d / "cluster_communication.json").read_text())
    wait0 = sum(v["0"]["Communication Time Info"]["Wait Time(ms)"] * 1e3 for kind in raw.values() for step in kind.values()
                for op, v in step.items() if "0" in v and not op.startswith("Total Op Info"))
    assert per_rank[0]["wait_us"] == pytest.approx(wait0)
    assert c["communication"]["links"]


def test_every_msprof_output_layout_and_the_loose_ranks_beside_it(ascend_sets, tmp_path):
    """The whole directory: the cluster files, two ranks in a loose layout (test_rank_N/
    ASCEND_PROFILER_OUTPUT, profiler_info_N.json above it); an 8-rank cluster file without step
    numbers; communication_group.json in both layouts read by the parser."""
    from mindspeed_profiler.analysis.parsing.ascend_comm import group_rows
    src = ascend_sets("gpt3_cluster16")
    shutil.copytree(src, tmp_path / "run", ignore=shutil.ignore_patterns("communication_group", "metadata"))
    summary, code, caps = analyse(tmp_path / "run")
    assert code == 0, [(c["path"], c.get("error")) for c in caps.values()]
    assert {c["path"]: c.get("rank") for c in caps.values() if c["kind"] == "ascend"} == \
        {"test_rank_0/ASCEND_PROFILER_OUTPUT": 0, "test_rank_1/ASCEND_PROFILER_OUTPUT": 1}
    new = group_rows(json.loads((src / "communication_group" / "communication_group.json").read_text()))
    old = group_rows(json.loads((src / "communication_group" / "communication_group_old.json").read_text()))
    assert {g["pg_name"] for g in new} >= {"tp", "dp", "pp"} and {g["pg_name"] for g in old} == {None}
    _, code8, caps8 = analyse(ascend_sets("advisor_cluster8") / "cluster_analysis_output")
    (c8,) = caps8.values()
    assert code8 == 0 and [r["rank"] for r in c8["ranks"]] == list(range(8)) and {r["step"] for r in c8["ranks"]} == {None}


# ---------------------------------------------------------------------------------- 5-8. the rest


def test_step_sources_in_the_documented_order_and_disagreement_is_said(ascend_sets):
    """test_rank_1: step_trace_time.csv says step 2 took 294,586.5 us; its kernel_details.csv (cut
    down to 15 kernels) spans 16 ms: the steps are step_trace_time.csv's, and a warning says 18x."""
    d = ascend_sets("gpt3_cluster16") / "test_rank_1"
    _, _, caps = analyse(d)
    (c,) = caps.values()
    assert c["step_trace_source"] == "step_trace_time.csv"
    assert [(s["step"], s["dur_us"]) for s in c["steps"]] == [(2, 294586.5)]
    assert any("17.9x apart" in w for w in c["warnings"]), c["warnings"]


def test_top_collective_is_the_hcom_op_not_a_sub_task(ascend_sets):
    _, _, caps = analyse(ascend_sets("text_l1"))
    top = caps["rank0_ascend_pt"]["communication"]["top"]
    assert top[0]["name"] == "hcom_allReduce__586_0_1" and top[0]["total_us"] == pytest.approx(79089.52, abs=0.01)
    assert not any("Notify" in t["name"] for t in top)


def test_step_labels_are_integers_everywhere(ascend_sets, tmp_path):
    d = ascend_data.writable_copy("text_l1", tmp_path / "s")
    summary, code = analyse_directory(d, jobs=1, progress=False, export_type="db")
    for c in summary["captures"]:
        assert all(type(s["step"]) is int for s in c["steps"] + c["step_trace"])
    on_disk = json.loads((d / "analysis" / "summary.json").read_text())
    assert all(type(r["step"]) is int for c in on_disk["captures"] for r in c["step_trace"])
    con = sqlite3.connect(d / "analysis" / "analysis.db")
    assert {t for (t,) in con.execute("SELECT DISTINCT typeof(step) FROM step_breakdown UNION "
                                      "SELECT DISTINCT typeof(step) FROM steps")} == {"integer"}


def test_a_rank_with_only_step_trace_and_communication_files(ascend_sets):
    """pp4_l2 rank 1 (its authors kept step_trace_time.csv, communication(_matrix).json and
    analysis.db): the breakdown, the collectives with their wait times, the links; and what is
    missing, said."""
    d = ascend_sets("pp4_l2") / "rank_1_ascend_pt"
    _, code, caps = analyse(ascend_sets("pp4_l2"))
    c = caps["rank_1_ascend_pt"]
    want = step_trace_file(d)
    (row,) = c["step_trace"]
    assert row["computing_us"] == want["Computing"] and row["free_us"] == want["Free"]
    raw = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
    ops = [(op, v) for step in raw.values() for kind in step.values() for op, v in kind.items()
           if not op.startswith("Total Op Info")]
    col = c["communication"]["collectives"]
    assert col["n_ops"] == len(ops)
    assert col["wait_us"] == pytest.approx(sum(v["Communication Time Info"]["Wait Time(ms)"] * 1e3 for _, v in ops))
    assert c["communication"]["links"] and c["device"]["compute_us"] == want["Computing"]
    assert any(m.startswith("host ops") for m in c["missing"]) and any(m.startswith("kernels") for m in c["missing"])
    assert not any("communication.json" in m for m in c["missing"])


def test_two_steps_split_by_launch_and_window_as_torch_npu_does():
    """Synthetic trace_view rows (the real sets have one step each): tasks belong to the step whose
    host range launched them; a step's device window runs from its first task to the later of its
    last task's end and the host step's end; a task counts whole in the window its start is in."""
    from mindspeed_profiler.analysis.analyzers import step_breakdown as sb
    from mindspeed_profiler.analysis.analyzers.classify import classified
    from mindspeed_profiler.analysis.parsing.events import EventTable

    M = lambda pid, name: {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}
    ev = [M(1, "Python"), M(2, "CANN"), M(3, "Ascend Hardware"), M(4, "HCCL"),
          {"ph": "M", "name": "thread_name", "pid": 4, "tid": 0, "args": {"name": "Group 0 Communication"}}]
    x = lambda pid, name, ts, dur, **a: {"ph": "X", "name": name, "cat": "cpu_op" if pid == 1 else None, "pid": pid,
                                         "tid": 0, "ts": str(ts), "dur": dur, "args": a}
    ev += [x(1, "ProfilerStep#1", 0, 100), x(1, "ProfilerStep#2", 100, 100)]
    launches = {1: 5, 2: 20, 3: 105, 4: 110}
    ev += [x(2, f"AscendCL@launch{c}", t, 1, connection_id=c) for c, t in launches.items()]
    ev += [x(3, "MatMul", 10, 50, **{"Task Type": "AI_CORE", "connection_id": 1}),        # step 1: 10-60
           x(4, "hcom_allReduce_1", 50, 70, connection_id=2),                             # step 1: 50-120, past its host end
           x(3, "Notify Wait", 50, 70, **{"Task Type": "Notify Wait", "connection_id": 2}),  # its sub-task: not counted
           x(3, "Add", 130, 20, **{"Task Type": "AI_VECTOR_CORE", "connection_id": 3}),   # step 2: 130-150
           x(3, "EVENT_WAIT", 150, 30, **{"Task Type": "EVENT_WAIT_SQE", "connection_id": 9}),  # sync: no work
           x(3, "MEMCPY_ASYNC", 160, 10, **{"Task Type": "PCIE_DMA_SQE", "connection_id": 4})]  # step 2 copy, exposed
    t = EventTable()
    t.add_batch(ev)
    ct = classified(t.finish())
    w = sb.device_windows(ct)
    assert [(s.step, s.start, s.end, s.host_start) for s in w] == [(1, 10, 120, 0), (2, 130, 200, 100)]
    r1, r2 = sb.from_tasks(ct, w)
    assert (r1["computing_us"], r1["communication_us"], r1["communication_exposed_us"], r1["overlapped_us"]) == (50, 70, 60, 10)
    assert (r1["free_us"], r1["stage_us"], r1["preparing_us"]) == (0, 110, 10)
    assert (r2["computing_us"], r2["communication_us"], r2["free_us"], r2["stage_us"], r2["memcpy_exposed_us"]) == (20, 0, 0, 20, 0.0)
    assert sb.device_totals([r1, r2])["compute_us"] == 70


def test_loose_ranks_equal_msprof_analyzes_own_rows_for_them(ascend_sets):
    """gpt3_cluster16: msprof-analyze's cluster_step_trace_time.csv of the job and the parsed files
    of its ranks 0 and 1 (a loose layout): ours from those files equal its rows for them."""
    d = ascend_sets("gpt3_cluster16")
    ref = {int(r["Index"]): r for r in csv_rows(d / "cluster_analysis_output" / "cluster_step_trace_time.csv") if r["Type"] == "rank"}
    for rank in (0, 1):
        _, code, caps = analyse(d / f"test_rank_{rank}")
        (c,) = caps.values()
        (row,) = c["step_trace"]
        assert code == 0 and c["rank"] == rank and row["step"] == int(ref[rank]["Step"])
        for ours_key, col in (("computing_us", "Computing"), ("communication_exposed_us", "Communication(Not Overlapped)"),
                              ("overlapped_us", "Overlapped"), ("free_us", "Free"), ("bubble_us", "Bubble")):
            assert row[ours_key] == pytest.approx(float(ref[rank][col]), rel=1e-3, abs=1e-3), (rank, ours_key)
