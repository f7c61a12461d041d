"""Numbers that must not mislead, each on real data from other projects (tests/data/README.md) or
the shared samples, with the expected value recomputed here from the raw file."""
from __future__ import annotations

import csv
import gzip
import json
import shutil

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

DATA = REPO_ROOT / "tests" / "data"


def analyse_files(tmp_path, *files, top_n=50):
    for f in files:
        shutil.copy(f, tmp_path / f.name)
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False, top_n=top_n)
    return summary, code, {c["path"]: c for c in summary["captures"]}


def test_rocm_gpu_user_annotations_are_not_steps_or_calls(tmp_path):
    src = DATA / "hta" / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    ev = json.load(gzip.open(src))["traceEvents"]
    host_steps = sorted(e["name"] for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    gpu_copy = {e["name"]: e["dur"] for e in ev if e.get("cat") == "gpu_user_annotation"}
    assert host_steps == ["ProfilerStep#1", "ProfilerStep#2"] and "ProfilerStep#1" in gpu_copy
    _, code, caps = analyse_files(tmp_path, src)
    (c,) = caps.values()
    assert code == 0 and [s["step"] for s in c["steps"]] == [1, 2]          # was 3 (the GPU copy counted)
    s1 = c["steps"][0]
    assert s1["device_range_us"] == pytest.approx(gpu_copy["ProfilerStep#1"]) and c["steps"][1]["device_range_us"] is None
    opt = next(a for a in c["annotations"] if a["name"] == "Optimizer.step#SGD.step")
    host = [e for e in ev if e.get("cat") == "user_annotation" and e["name"] == "Optimizer.step#SGD.step"]
    assert opt["count"] == len(host) == 1 and opt["total_us"] == pytest.approx(host[0]["dur"])   # not doubled
    assert opt["device_us"] == pytest.approx(gpu_copy["Optimizer.step#SGD.step"])


def _kernel_rows(path):
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return [{k.strip(): (v or "").strip().strip("\t") for k, v in r.items()} for r in csv.DictReader(fh)]


def test_ascend_communication_is_hccl_never_broadcastto(tmp_path):
    src = DATA / "mstt" / "kernel_details_hccl_dsa.csv"
    rows = _kernel_rows(src)
    assert any(r["Name"].startswith("BroadcastTo") for r in rows)
    d = tmp_path / "ASCEND_PROFILER_OUTPUT"
    d.mkdir()
    shutil.copy(src, d / "kernel_details.csv")
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False, top_n=1000)
    (c,) = summary["captures"]
    classes = {k["name"]: k["class"] for k in c["top_kernels"]}
    assert classes["BroadcastTo86"] == "compute" and classes["hcom_broadcast__445_0"] == "communication"
    comm = [r for r in rows if r["Accelerator Core"] == "HCCL"]
    assert {n for n, k in classes.items() if k == "communication"} == {r["Name"] for r in comm}
    # independent: the union of the HCCL rows' intervals, in exact decimal arithmetic
    from decimal import Decimal
    iv = sorted((Decimal(r["Start Time(us)"]), Decimal(r["Start Time(us)"]) + Decimal(r["Duration(us)"])) for r in comm)
    total, cur = Decimal(0), None
    for s, e in iv:
        if cur is None or s > cur[1]:
            total += 0 if cur is None else cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    total += cur[1] - cur[0]
    assert c["device"]["communication_us"] == pytest.approx(float(total), abs=1e-6)
    assert c["communication"]["device"]["total_us"] == pytest.approx(float(total), abs=1e-6)
    # CSV only, yet steps: from the Step Id column
    assert [s["step"] for s in c["steps"]] == sorted({int(r["Step Id"]) for r in rows})


def test_kernel_and_name_families_word_boundaries():
    from mindspeed_profiler.analysis.analyzers.communication import is_comm_kind, is_comm_name, is_host_comm_name
    assert all(map(is_comm_name, ["ncclDevKernel_AllReduce_Sum_f32", "ncclKernel_SendRecv", "rcclGenericKernel",
                                  "hcom_allReduce_", "HcclAllReduce", "gloo:all_reduce", "nccl:all_gather"]))
    assert not any(map(is_comm_name, ["BroadcastTo86", "aten::broadcast_tensors", "allreduce_fusion_kernel_x",
                                      "hcomb", "ncclx", "AllGatherV2"]))
    assert is_comm_kind("hcom_broadcast_", "HCCL") and is_comm_kind("Foo", "HCCL") and not is_comm_kind("BroadcastTo", "AI_VECTOR_CORE")
    assert is_host_comm_name("c10d::allreduce_") and is_host_comm_name("record_param_comms")


def test_files_of_two_recordings_in_one_ascend_capture_are_reported(tmp_path, shared_data):
    """The shared sample's trace_view.json (2024-01-02) and kernel_details.csv (2025-01-09) come from
    two different recordings (msprof-analyze keeps them as separate test resources); put in one
    capture they are reported, not mixed silently. A kernel_details.csv made from the trace_view's
    own device tasks is one recording: no warning."""
    d = tmp_path / "actor_rank0_step1-1_h_1_20261130000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    tv = json.loads((shared_data / "ascend" / "trace_view.json").read_text())
    shutil.copy(shared_data / "ascend" / "trace_view.json", d)
    shutil.copy(shared_data / "ascend" / "kernel_details.csv", d)
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    (c,) = summary["captures"]
    assert c["status"] == "ok" and any("do not overlap" in w for w in c["warnings"])
    hw = {e["pid"] for e in tv if e.get("ph") == "M" and e.get("name") == "process_name" and e["args"]["name"] == "Ascend Hardware"}
    tasks = [e for e in tv if e.get("ph") == "X" and e.get("pid") in hw]
    with open(d / "kernel_details.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"])
        w.writerows(["", e["name"], e["name"], "AI_CORE", e["ts"], e["dur"]] for e in tasks)
    summary, _ = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    assert not [w for w in summary["captures"][0]["warnings"] if "recording" in w]


def test_cluster_stage_rows_use_the_files_stage_column(tmp_path, shared_data):
    src = shared_data / "ascend" / "cluster_step_trace_time.csv"
    rows = _kernel_rows(src)
    _, _, caps = analyse_files(tmp_path, src)
    (c,) = caps.values()
    stage_csv = [r for r in rows if r["Type"] == "stage"]
    assert [s["dur_us"] for s in c["stages"]] == [float(r["Stage"]) for r in stage_csv]
    summed = sum(float(stage_csv[0][k]) for k in ("Computing", "Communication(Not Overlapped)", "Free"))
    assert summed > 1.3 * float(stage_csv[0]["Stage"])   # the per-column maxima do not add up to a time


def test_the_same_trace_gzipped_beside_itself_is_analysed_once(tmp_path, shared_data):
    src = shared_data / "kineto" / "cpu_only_rank34.pt.trace.json.gz"
    (tmp_path / "t.json").write_bytes(gzip.decompress(src.read_bytes()))
    shutil.copy(src, tmp_path / "t.json.gz")
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    assert code == 0 and [c["path"] for c in summary["captures"]] == ["t.json"]
    assert "t.json.gz holds the same trace: analysed once" in summary["captures"][0]["warnings"][0]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "x", "ts": 1, "dur": 1}]}))
    summary, _ = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    assert len(summary["captures"]) == 2


def test_cuda_range_profiler_trace_warns_device_times_are_not_real(tmp_path):
    src = DATA / "hta" / "cupti_profiler" / "benchmark_result_924719_1679055439_trace.json.gz"
    _, code, caps = analyse_files(tmp_path, src)
    (c,) = caps.values()
    n = sum(1 for e in json.load(gzip.open(src))["traceEvents"] if e.get("cat") == "cuda_profiler_range")
    assert code == 0 and c["device"] is None
    assert any(f"{n} kernel(s) recorded by the CUDA range profiler" in w for w in c["warnings"])


def test_rocm_copy_kernels_and_sdma_are_memory():
    from mindspeed_profiler.analysis.analyzers.classify import is_memcpy_name
    assert is_memcpy_name("__amd_rocclr_copyBuffer.kd") and is_memcpy_name("Memcpy DtoD (Device -> Device)")
    assert not is_memcpy_name("void at::native::elementwise_kernel")


def test_blank_kernel_durations_are_counted_and_reported(tmp_path, shared_data):
    rows = (shared_data / "ascend" / "kernel_details.csv").read_text(encoding="utf-8-sig").splitlines()
    head = rows[0].split(",")
    k = head.index("Duration(us)")
    bad = rows[1].split(",")
    bad[k] = ""
    d = tmp_path / "ASCEND_PROFILER_OUTPUT"
    d.mkdir()
    (d / "kernel_details.csv").write_text("\n".join([rows[0], ",".join(bad)] + rows[2:]) + "\n")
    summary, _ = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    (c,) = summary["captures"]
    assert c["n_bad_kernels"] == 1 and any("1 row(s) without a usable" in w for w in c["warnings"])


def test_a_capture_without_steps_is_compared_per_capture():
    from mindspeed_profiler.analysis.analyzers.crossrank import stage_rank_rows
    caps = [{"path": p, "kind": "torch", "status": "ok", "rank": r, "role": "a", "stage": "s", "steps": [],
             "device": {"busy_us": 1000.0 * (r + 1)}, "wall_us": 5000.0} for p, r in (("x", 0), ("y", 1))]
    assert {r["metric"] for r in stage_rank_rows(caps)} == {"device_busy_us_per_capture"}
