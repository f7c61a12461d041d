"""Analysis figures on the real sample traces (conftest.SHARED_DATA: ../shared/data beside the
repository, or $MSP_SHARED_DATA), checked against values computed here independently (plain json /
csv, Python loops, no numpy, no code from the package)."""
from __future__ import annotations

import csv
import gzip
import json
import shutil
from decimal import Decimal

import pytest

from conftest import SHARED_DATA
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

pytestmark = pytest.mark.usefixtures("shared_data")   # every test reads the sample data: skip, saying where, without it


def plain_union(intervals):
    """Covered length of [(start, end)] with a sort and a loop."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


@pytest.fixture(scope="module")
def analysed(tmp_path_factory, shared_data):
    root = tmp_path_factory.mktemp("data")
    shutil.copytree(shared_data, root, dirs_exist_ok=True)
    summary, code = analyse_directory(root, jobs=2, progress=False, top_n=50)
    return root, summary, code, {c["path"]: c for c in summary["captures"]}


def test_everything_found_and_ok(analysed):
    root, summary, code, caps = analysed
    assert code == 0
    assert {c["kind"] for c in caps.values()} == {"kineto", "ascend", "cluster"}
    assert set(caps) == {"kineto/gpu_rank0.json.gz", "kineto/gpu_rank1.json.gz",
                         "kineto/cpu_only_rank34.pt.trace.json.gz", "ascend", "ascend/cluster_step_trace_time.csv"}
    assert all(c["status"] == "ok" for c in caps.values())
    assert (root / "analysis" / "summary.json").is_file() and (root / "analysis" / "report.html").is_file()
    on_disk = json.loads((root / "analysis" / "summary.json").read_text())
    assert on_disk["counts"] == {"found": 5, "ok": 5, "failed": 0, "unparsed": 0}


@pytest.mark.parametrize("rank", [0, 1])
def test_gpu_kineto_device_breakdown(analysed, rank):
    c = analysed[3][f"kineto/gpu_rank{rank}.json.gz"]
    ev = json.load(gzip.open(SHARED_DATA / "kineto" / f"gpu_rank{rank}.json.gz"))["traceEvents"]
    dev = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    comp = [(e["ts"], e["ts"] + e["dur"]) for e in dev if e["cat"] == "kernel" and "nccl" not in e["name"].lower()]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in dev if e["cat"] == "kernel" and "nccl" in e["name"].lower()]
    allv = [(e["ts"], e["ts"] + e["dur"]) for e in dev]
    window = max(e for _, e in allv) - min(s for s, _ in allv)
    d = c["device"]
    assert d["n_activities"] == len(dev)
    assert d["busy_us"] == pytest.approx(plain_union(allv))
    assert d["compute_us"] == pytest.approx(plain_union(comp))
    assert d["communication_us"] == pytest.approx(plain_union(comm))
    assert d["communication_exposed_us"] == pytest.approx(plain_union(comp + comm) - plain_union(comp))
    assert d["window_us"] == pytest.approx(window)
    assert d["idle_us"] == pytest.approx(window - plain_union(allv))
    # the split is exclusive and complete
    assert d["compute_us"] + d["communication_exposed_us"] + d["memcpy_exposed_us"] == pytest.approx(d["busy_us"])
    assert c["rank"] == rank and c["distributed"]["world_size"] == 128


def test_gpu_kineto_steps_kernels_and_rank0_literals(analysed):
    c = analysed[3]["kineto/gpu_rank0.json.gz"]
    # literal values read from the file by hand (ProfilerStep#551 / #552 "dur")
    assert [(s["step"], s["dur_us"]) for s in c["steps"]] == [(551, 607312.0), (552, 622928.0)]
    ev = json.load(gzip.open(SHARED_DATA / "kineto" / "gpu_rank0.json.gz"))["traceEvents"]
    nccl = [e["dur"] for e in ev if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_SendRecv")]
    top = c["top_kernels"][0]
    assert top["name"].startswith("ncclKernel_SendRecv") and top["class"] == "communication"
    assert (top["count"], top["total_us"]) == (len(nccl), sum(nccl)) == (10, 396199.0)
    # every kernel/memcpy appears once in the per-name totals
    sums = {}
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            sums[e["name"]] = sums.get(e["name"], 0) + e["dur"]
    for k in c["top_kernels"]:
        assert k["total_us"] == pytest.approx(sums[k["name"]])


def test_gpu_kineto_self_time_matches_a_stack_walk(analysed):
    """Self time of cpu ops = dur - direct children, children found with a per-thread stack."""
    c = analysed[3]["kineto/gpu_rank0.json.gz"]
    ev = json.load(gzip.open(SHARED_DATA / "kineto" / "gpu_rank0.json.gz"))["traceEvents"]
    host = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime")]
    by_thread = {}
    for e in host:
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    self_t = {}
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack, child = [], {}
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] < e["ts"] + e["dur"]:
                stack.pop()
            if stack:
                child[id(stack[-1])] = child.get(id(stack[-1]), 0) + e["dur"]
            stack.append(e)
        for e in evs:
            if e["cat"] == "cpu_op":
                self_t[e["name"]] = self_t.get(e["name"], 0) + max(0, e["dur"] - child.get(id(e), 0))
    for op in c["top_ops"]:
        assert op["self_us"] == pytest.approx(self_t[op["name"]]), op["name"]
    assert c["top_ops"][0]["self_us"] == max(self_t.values())


def test_cpu_only_kineto(analysed):
    c = analysed[3]["kineto/cpu_only_rank34.pt.trace.json.gz"]
    ev = json.load(gzip.open(SHARED_DATA / "kineto" / "cpu_only_rank34.pt.trace.json.gz"))["traceEvents"]
    gloo = [e["dur"] for e in ev if e.get("name") == "gloo:all_reduce"]
    assert c["device"] is None and c["rank"] == 34
    ann = {a["name"]: a for a in c["annotations"]}
    assert ann["gloo:all_reduce"]["count"] == len(gloo) == 10
    assert ann["gloo:all_reduce"]["total_us"] == pytest.approx(sum(gloo))
    assert ann["gloo:all_reduce"]["max_us"] == pytest.approx(max(gloo))
    assert [s["step"] for s in c["steps"]] == [551]
    xs = [e for e in ev if e.get("ph") == "X" and e.get("cat") != "Trace"]
    assert c["wall_us"] == pytest.approx(max(e["ts"] + e["dur"] for e in xs) - min(e["ts"] for e in xs))


def test_ascend_trace_view_string_timestamps(analysed):
    """mstt's trace_view.json: the breakdown is torch_npu's Overlap Analysis lanes (summed here in
    exact decimals), and the compute tasks' own union (a Decimal loop here) is within 0.13% of it
    (docs/analysis.md: this sample's trace and kernels come from two recordings)."""
    c = analysed[3]["ascend"]
    ev = json.load(open(SHARED_DATA / "ascend" / "trace_view.json"))
    pid = {e["args"]["name"]: e["pid"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"}
    hw = [(Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(str(e["dur"]))) for e in ev
          if e.get("ph") == "X" and e["pid"] == pid["Ascend Hardware"]]
    lane = lambda n: float(sum(Decimal(str(e["dur"])) for e in ev if e.get("pid") == pid["Overlap Analysis"] and e.get("name") == n))
    d, (row,) = c["device"], c["step_trace"]
    assert c["step_trace_source"] == "trace_view.json: Overlap Analysis"
    assert d["n_activities"] == len(hw) == 276
    assert d["compute_us"] == pytest.approx(lane("Computing"), abs=1e-6)
    assert row["free_us"] == pytest.approx(lane("Free"), abs=1e-6)
    assert d["idle_us"] + d["memcpy_exposed_us"] == pytest.approx(lane("Free"), abs=1e-6)
    assert d["compute_us"] == pytest.approx(float(plain_union(hw)), rel=1.3e-3)
    # durations and windows above match Decimal arithmetic to 1 ns, so the string timestamps kept
    # their sub-microsecond digits; absolute times in JSON are float64 (0.25 us steps at 1.7e15)
    first = min(Decimal(e["ts"]) for e in ev if e.get("ph") == "X")
    assert Decimal(str(c["start_us"])) == pytest.approx(first, abs=Decimal("0.5"))
    assert [s["step"] for s in c["steps"]] == [1]


def test_ascend_kernel_details_with_tabs(analysed):
    c = analysed[3]["ascend"]
    with open(SHARED_DATA / "ascend" / "kernel_details.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert "\t" in rows[0]["Start Time(us)"]   # the real quirk is there
    totals = {}
    for r in rows:
        totals[r["Name"]] = totals.get(r["Name"], 0.0) + float(r["Duration(us)"])
    assert c["n_kernels"] == len(rows) == 29
    got = {k["name"]: k["total_us"] for k in c["top_kernels"]}
    assert got == pytest.approx(totals)
    by_type = {}
    for r in rows:
        by_type[r["Type"]] = by_type.get(r["Type"], 0.0) + float(r["Duration(us)"])
    assert {t["type"]: t["total_us"] for t in c["kernel_types"]} == pytest.approx(by_type)


def test_kernel_details_alone_gives_device_breakdown(tmp_path):
    shutil.copy(SHARED_DATA / "ascend" / "kernel_details.csv", tmp_path)
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, html=False)
    c = summary["captures"][0]
    with open(SHARED_DATA / "ascend" / "kernel_details.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    iv = [(Decimal(r["Start Time(us)"].strip()), Decimal(r["Start Time(us)"].strip()) + Decimal(r["Duration(us)"]))
          for r in rows]
    assert code == 0 and c["kind"] == "ascend"
    assert c["device"]["busy_us"] == pytest.approx(float(plain_union(iv)), abs=1e-3)
    assert c["device"]["window_us"] == pytest.approx(float(max(e for _, e in iv) - min(s for s, _ in iv)), abs=1e-3)


def test_cluster_step_trace(analysed):
    c = analysed[3]["ascend/cluster_step_trace_time.csv"]
    with open(SHARED_DATA / "ascend" / "cluster_step_trace_time.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Type"] == "rank"]
    assert [r["rank"] for r in c["ranks"]] == [int(r["Index"]) for r in rows] == list(range(8))
    for got, r in zip(c["ranks"], rows):
        assert got["computing_us"] == pytest.approx(float(r["Computing"]))
        assert got["communication_exposed_us"] == pytest.approx(float(r["Communication(Not Overlapped)"]))
        assert got["free_us"] == pytest.approx(float(r["Free"]))
        # the step is computing + exposed communication + free, and it matches the "Stage" column
        assert got["dur_us"] == pytest.approx(float(r["Computing"]) + float(r["Communication(Not Overlapped)"]) + float(r["Free"]))
        assert got["dur_us"] == pytest.approx(float(r["Stage"]), rel=1e-5)
    summary = analysed[1]
    cl = [r for r in summary["slow_ranks"] if r["source"] == "cluster"]
    comps = sorted(float(r["Computing"]) for r in rows)
    median = (comps[3] + comps[4]) / 2
    assert all(r["median_us"] == pytest.approx(median) for r in cl)
    assert not any(r["flagged"] for r in cl)   # computing is within 1% across ranks in this data


def test_step_busy_matches_holistic_trace_analysis(analysed):
    """HolisticTraceAnalysis 0.5.0 (TraceAnalysis(trace_dir).get_temporal_breakdown(), run by hand
    in a separate venv on these two files, see docs/perf_analysis.md) reports for its iteration 551:
    rank 0 compute 106252 + non-compute 172428 us, rank 1 compute 135548 + non-compute 136455 us.
    Their sum is the device busy time of that step."""
    caps = analysed[3]
    busy = {r: caps[f"kineto/gpu_rank{r}.json.gz"]["steps"][0] for r in (0, 1)}
    assert busy[0]["step"] == busy[1]["step"] == 551
    assert busy[0]["device_busy_us"] == 106252 + 172428
    assert busy[1]["device_busy_us"] == 135548 + 136455
