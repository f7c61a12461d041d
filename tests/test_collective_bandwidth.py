"""Collective algorithm / bus bandwidth from the message sizes in Kineto's collective args
(analyzers/collective_bandwidth.py, parsing/events.py's comm_args).

Real data: HTA's nccl_parser_config trace (a 2-rank NCCL job whose record_param_comms ops and NCCL
kernels both carry the args) and its ns_resolution trace (one rank: NCCL launches no kernel),
recomputed here from the raw JSON rows; a real 2-rank gloo job run here (torch's gloo backend
writes no record_param_comms: the test pins that, and checks the numbers should it start to)."""
from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from gloo_job import INIT, run_two_ranks

from mindspeed_profiler.analysis.analyzers import collective_bandwidth as cb
from mindspeed_profiler.analysis.analyzers.classify import classified
from mindspeed_profiler.analysis.analyzers.trace_summary import summarise
from mindspeed_profiler.analysis.parsing.events import EventTable
from mindspeed_profiler.analysis.parsing.kineto_trace import read_kineto_trace

DATA = Path(__file__).parent / "data" / "hta"
NCCL = DATA / "nccl_parser_config" / "nccl_data.json.gz"
ONE_RANK = DATA / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
SIZES = {"Float": 4, "Long": 8, "Byte": 1, "BFloat16": 2, "Half": 2, "Int": 4}


def _raw(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _rows(path: Path) -> list[dict]:
    return cb.trace_collective_bandwidth(classified(read_kineto_trace(path).events))


# -- pure functions -------------------------------------------------------------------------

def test_dtype_sizes():
    assert [cb.dtype_bytes(d) for d in ("Float", "float32", "BFloat16", "bfloat16", "Half", "float16", "Double",
                                        "Long", "int64", "Int", "Byte", "Char", "Bool", "torch.bfloat16")] == \
        [4, 4, 2, 2, 2, 2, 8, 8, 8, 4, 1, 1, 1, 2]
    assert cb.dtype_bytes("Float8_e4m3fn") == 1 and cb.dtype_bytes("ComplexFloat") == 8
    assert cb.dtype_bytes("NoSuchType") is None and cb.dtype_bytes(None) is None and cb.dtype_bytes(4) is None


def test_collective_names_and_busbw_factors():
    names = {"allreduce": "all_reduce", "all_reduce": "all_reduce", "allreduce_coalesced": "all_reduce",
             "allgather": "all_gather", "_allgather_base": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
             "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
             "reduce_scatter_tensor_coalesced": "reduce_scatter", "all_to_all": "all_to_all", "all_to_allv": "all_to_all",
             "alltoall_base": "all_to_all", "broadcast": "broadcast", "reduce": "reduce", "send": "send", "recv": "recv",
             "gather": "gather", "scatter": "scatter", "barrier": None, "wait": None, None: None}
    assert {n: cb.canonical_collective(n) for n in names} == names
    # nccl-tests doc/PERFORMANCE.md: 2(n-1)/n, (n-1)/n, 1
    assert cb.busbw_factor("all_reduce", 8) == pytest.approx(1.75)
    assert cb.busbw_factor("all_reduce", 2) == pytest.approx(1.0)
    for op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        assert cb.busbw_factor(op, 4) == pytest.approx(0.75)
    for op in ("broadcast", "reduce", "send", "recv"):
        assert cb.busbw_factor(op, 16) == 1.0
    # one rank: nothing crosses a link (nccl-tests prints busbw 0 for all_reduce)
    assert cb.busbw_factor("all_reduce", 1) == 0.0 and cb.busbw_factor("all_gather", 1) == 0.0
    assert cb.busbw_factor("broadcast", 1) == 1.0
    assert cb.busbw_factor(None, 8) is None and cb.busbw_factor("all_reduce", 0) is None
    assert cb.busbw_factor("all_reduce", None) is None and cb.busbw_factor("all_reduce", True) is None


def test_bytes_and_algbw():
    assert cb.message_bytes({"dtype": "BFloat16", "In msg nelems": 10, "Out msg nelems": 40}) == 80
    assert cb.message_bytes({"dtype": "Mystery", "In msg nelems": 10, "Out msg nelems": 40}) is None
    assert cb.message_bytes({"dtype": "Float"}) is None
    assert cb.message_bytes({"dtype": "Float", "In msg nelems": float("inf"), "Out msg nelems": float("nan")}) is None
    assert cb.message_bytes({"dtype": "Float", "In msg nelems": "12", "Out msg nelems": True}) is None
    assert cb.algbw_gbps(1e9, 1e6) == pytest.approx(1.0)     # 1e9 bytes in one second: 1 GB/s (1e9)
    assert cb.algbw_gbps(1e9, 0.0) is None and cb.algbw_gbps(None, 5.0) is None


def _inst(coll, dtype, nbytes, us, n=4, source=cb.KERNEL):
    return {"collective": coll, "dtype": dtype, "group_size": n, "pg_name": "0", "pg_desc": None, "bytes": nbytes,
            "us": us, "source": source, "n_kernels": 1}


def test_rows_time_weighted_latency_bound_and_unknown_dtype():
    rows = cb.bandwidth_rows([_inst("allreduce", "Float", 4 << 20, 100.0), _inst("allreduce", "Float", 4 << 20, 300.0),
                              _inst("allgather", "Float", 1000, 10.0), _inst("allreduce", "Mystery", None, 50.0),
                              _inst("wait", "Byte", 0, None, n=1, source=cb.NO_KERNEL)])
    ar = rows[0]
    assert (ar["collective"], ar["count"], ar["n_timed"], ar["total_us"], ar["bytes"]) == ("allreduce", 2, 2, 400.0, 8 << 20)
    assert ar["algbw_gbps"] == pytest.approx((8 << 20) / 400e-6 / 1e9)       # total bytes / total time
    assert ar["busbw_gbps"] == pytest.approx(ar["algbw_gbps"] * 1.5)          # 2(n-1)/n at n = 4
    assert ar["algbw_min_gbps"] == pytest.approx((4 << 20) / 300e-6 / 1e9)
    assert ar["algbw_max_gbps"] == pytest.approx((4 << 20) / 100e-6 / 1e9)
    assert ar["latency_bound"] is False and ar["bytes_per_call"] == 4 << 20
    by = {(r["collective"], r["dtype"]): r for r in rows}
    assert by[("allgather", "Float")]["latency_bound"] is True
    unknown = by[("allreduce", "Mystery")]
    assert unknown["count"] == 1 and unknown["bytes"] is None and unknown["algbw_gbps"] is None
    assert unknown["total_us"] == 50.0 and unknown["latency_bound"] is None
    wait = by[("wait", "Byte")]
    assert wait["op"] is None and wait["algbw_gbps"] is None and wait["latency_bound"] is None and wait["total_us"] is None


def test_many_sizes_are_bucketed_by_power_of_two():
    inst = [_inst("all_to_allv", "Float", 1000 + k, 1.0) for k in range(20)]
    rows = cb.bandwidth_rows(inst)
    assert len(rows) == 1 and rows[0]["size_bucket"] is True and rows[0]["count"] == 20
    assert (rows[0]["bytes_min"], rows[0]["bytes_max"]) == (1000, 1019)
    assert len(cb.bandwidth_rows(inst[:cb.MAX_SIZES])) == cb.MAX_SIZES


# -- parsing: comm_args follow the rows ---------------------------------------------------------

def test_comm_args_indices_follow_dropped_and_paired_events():
    comm = {"Collective name": "allreduce", "In msg nelems": 8, "Out msg nelems": 8, "Group size": 2, "dtype": "Float",
            "Process Group Name": "0", "Ev Idx": 3}
    t = EventTable()
    t.add_batch([
        {"ph": "X", "name": "a", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 0, "dur": 1, "args": None},
        {"ph": "X", "name": "bad", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": None, "dur": 1, "args": dict(comm)},
        {"ph": "X", "name": "x", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "args": "In msg nelems"},
        {"ph": "X", "name": "y", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 3, "dur": 1, "args": 7},
        {"ph": "X", "name": "record_param_comms", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 4, "dur": 2, "args": dict(comm)},
    ])
    t.add_batch([{"ph": "B", "name": "paired", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10, "args": dict(comm, dtype="Half")},
                 {"ph": "E", "pid": 1, "tid": 1, "ts": 12}])
    ev = t.finish()
    assert ev.n_bad == 1
    names = [ev.names[i] for i in ev.name]
    assert {names[i] for i in ev.comm_args} == {"record_param_comms", "paired"}
    for i, a in ev.comm_args.items():
        assert "Ev Idx" not in a and a["In msg nelems"] == 8
        assert a["dtype"] == ("Half" if names[i] == "paired" else "Float")
    assert not t.comm_args and t._n == 0


# -- real NCCL traces -----------------------------------------------------------------------------

def _raw_kernel_groups(raw: list[dict]) -> dict:
    """(collective, dtype, bytes) -> [durations] of the NCCL kernels carrying the args, straight
    from the JSON rows."""
    out = defaultdict(list)
    for e in raw:
        a = e.get("args") or {}
        if e.get("cat") == "kernel" and "In msg nelems" in a:
            nbytes = max(a["In msg nelems"], a["Out msg nelems"]) * SIZES[a["dtype"]]
            out[(a["Collective name"], a["dtype"], nbytes)].append(e["dur"])
    return out


def test_nccl_kernels_carrying_the_args_match_the_raw_rows():
    raw = _raw(NCCL)
    want = _raw_kernel_groups(raw)
    rows = [r for r in _rows(NCCL) if r["source"] == cb.KERNEL]
    assert len(want) == 7 and len(rows) == len(want)
    for r in rows:
        durs = want[(r["collective"], r["dtype"], r["bytes_per_call"])]
        assert r["count"] == len(durs) == r["n_timed"] and r["group_size"] == 2 and r["pg_name"] == "0"
        assert r["total_us"] == pytest.approx(sum(durs))
        assert r["bytes"] == r["bytes_per_call"] * len(durs)
        alg = r["bytes"] / (sum(durs) * 1e-6) / 1e9
        assert r["algbw_gbps"] == pytest.approx(alg)
        factor = {"allreduce": 2 * (2 - 1) / 2, "broadcast": 1.0}[r["collective"]]
        assert r["busbw_gbps"] == pytest.approx(alg * factor)
        per_call = [r["bytes_per_call"] / (d * 1e-6) / 1e9 for d in durs]
        assert (r["algbw_min_gbps"], r["algbw_max_gbps"]) == (pytest.approx(min(per_call)), pytest.approx(max(per_call)))
        assert r["latency_bound"] == (r["bytes_per_call"] < 1 << 20)
    # the record_param_comms op of each of those kernels is not counted a second time
    host = [r for r in _rows(NCCL) if r["source"] != cb.KERNEL]
    assert [(r["collective"], r["source"], r["count"]) for r in host] == [("wait", cb.NO_KERNEL, 6)]


def test_host_ops_without_kernel_args_take_their_launched_kernels_time():
    """The older layout (torch 2.1-2.3: the args on record_param_comms only): the same trace with the
    kernels' args dropped gives the same numbers through the launch join."""
    ev = read_kineto_trace(NCCL).events
    ct = classified(ev)
    ev.comm_args = {i: a for i, a in ev.comm_args.items() if not ct.m["device"][i]}
    rows = cb.trace_collective_bandwidth(ct)
    launched = [r for r in rows if r["source"] == cb.LAUNCHED]
    want = _raw_kernel_groups(_raw(NCCL))
    assert len(launched) == len(want)
    for r in launched:
        durs = want[(r["collective"], r["dtype"], r["bytes_per_call"])]
        assert r["count"] == len(durs) and r["total_us"] == pytest.approx(sum(durs))
        assert r["algbw_gbps"] == pytest.approx(r["bytes"] / (sum(durs) * 1e-6) / 1e9)
    # the join itself, from the raw rows: each host op's kernel is the one whose correlation id a
    # runtime call inside the op (same thread) carries
    raw = _raw(NCCL)
    by_corr = {e["args"]["correlation"]: e for e in raw if e.get("cat") == "kernel" and "correlation" in e.get("args", {})}
    ops = [e for e in raw if e["name"] == "record_param_comms" and e["args"]["Collective name"] != "wait"]
    runtime = [e for e in raw if e.get("cat") == "cuda_runtime"]
    total = 0.0
    for op in ops:
        ks = [by_corr[r["args"]["correlation"]] for r in runtime
              if r["tid"] == op["tid"] and op["ts"] <= r["ts"] <= op["ts"] + op["dur"] and r["args"].get("correlation") in by_corr]
        assert len(ks) == 1 and ks[0]["name"].startswith("ncclKernel_")
        total += ks[0]["dur"]
    assert sum(r["total_us"] for r in launched) == pytest.approx(total)


def test_one_rank_nccl_launches_nothing_so_no_bandwidth():
    raw = [e for e in _raw(ONE_RANK) if e["name"] == "record_param_comms"]
    rows = _rows(ONE_RANK)
    assert sum(r["count"] for r in rows) == len(raw) == 45
    assert {r["source"] for r in rows} == {cb.NO_KERNEL} and all(r["algbw_gbps"] is None for r in rows)
    want = defaultdict(int)
    for e in raw:
        a = e["args"]
        want[(a["Collective name"], max(a["In msg nelems"], a["Out msg nelems"]) * SIZES[a["dtype"]])] += 1
    assert {(r["collective"], r["bytes_per_call"]): r["count"] for r in rows} == dict(want)


def test_summary_hook_and_row_model():
    out = summarise(read_kineto_trace(NCCL).events)
    rows = out["collective_bandwidth"]
    assert rows == _rows(NCCL)
    got = cb.COLLECTIVE_BANDWIDTH.rows({"captures": [dict(out, path="p", role="actor", rank=0, stage=None)]})
    assert len(got) == len(rows) and got[0]["rank"] == 0
    assert set(cb.COLLECTIVE_BANDWIDTH.names) == set(rows[0])
    assert cb.COLLECTIVE_BANDWIDTH.table == "collective_bandwidth" and cb.COLLECTIVE_BANDWIDTH.per_capture
    # no args, no block
    assert "collective_bandwidth" not in summarise(read_kineto_trace(ONE_RANK.parent.parent / "critical_path" / "alexnet" /
                                                                     "benchmark_result_2869224_1695835535_trace.json.gz").events)


def test_a_cpu_trace_times_the_host_op():
    """No device activity at all (a CPU backend): the op's own duration."""
    comm = {"Collective name": "allreduce", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20, "Group size": 2,
            "dtype": "Float", "Process Group Name": "0"}
    t = EventTable()
    t.add_batch([{"ph": "X", "name": "record_param_comms", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 0, "dur": 2000.0,
                  "args": comm}])
    rows = cb.trace_collective_bandwidth(classified(t.finish()))
    assert [(r["source"], r["total_us"], r["bytes"]) for r in rows] == [(cb.HOST, 2000.0, 4 << 20)]
    assert rows[0]["algbw_gbps"] == pytest.approx((4 << 20) / 2000e-6 / 1e9)


# -- a real gloo job ------------------------------------------------------------------------------

GLOO_WORKER = '''
import os, sys
import torch, torch.distributed as dist
rank = int(os.environ["RANK"])
''' + INIT + '''
x = torch.ones(1 << 18)                          # 1 MiB of Float
h = torch.ones(3000, dtype=torch.bfloat16)
b = torch.zeros(5000, dtype=torch.int64)
dist.all_reduce(x); dist.barrier()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
    dist.all_reduce(x)
    dist.all_reduce(h)
    dist.all_gather([torch.empty_like(b) for _ in range(2)], b)
    dist.broadcast(b, 0)
prof.export_chrome_trace(os.path.join(sys.argv[1], f"rank{rank}.pt.trace.json"))
dist.barrier()
dist.destroy_process_group()
# the trace is written: end without the interpreter's teardown, where gloo's worker threads can abort
# the process (tests/test_stragglers_cpu.py says more)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
'''
GLOO_JOB = {("allreduce", 1 << 20): 1, ("allreduce", 6000): 1, ("allgather", 80000): 1, ("broadcast", 40000): 1}


@pytest.mark.slow
def test_a_real_gloo_job(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "worker.py"
    script.write_text(GLOO_WORKER)
    assert run_two_ranks(script, str(tmp_path), timeout_s=120, quiet=True) == [0, 0]
    for rank in (0, 1):
        path = tmp_path / f"rank{rank}.pt.trace.json"
        raw = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
        ops = [e for e in raw if "In msg nelems" in (e.get("args") or {})]
        ev = read_kineto_trace(path).events
        rows = cb.trace_collective_bandwidth(classified(ev))
        assert len(ev.comm_args) == len(ops)
        if not ops:
            # torch's ProcessGroupGloo records no record_param_comms (2.13 here): nothing to report
            assert rows == [] and any(e["name"].startswith("gloo:") for e in raw)
            continue
        # should a release write them: the job's sizes, timed by the host op itself
        got = defaultdict(int)
        for r in rows:
            assert r["source"] == cb.HOST
            got[(r["collective"], r["bytes_per_call"])] += r["count"]
        assert dict(got) == GLOO_JOB
        for r in rows:
            durs = [e["dur"] for e in ops if e["args"]["Collective name"] == r["collective"]
                    and max(e["args"]["In msg nelems"], e["args"]["Out msg nelems"]) * SIZES[e["args"]["dtype"]] == r["bytes_per_call"]]
            assert r["algbw_gbps"] == pytest.approx(r["bytes"] / (sum(durs) * 1e-6) / 1e9)


def test_indices_stay_in_range_on_real_traces():
    for path in (NCCL, ONE_RANK):
        ev = read_kineto_trace(path).events
        assert ev.comm_args and max(ev.comm_args) < len(ev)
        names = np.array(ev.names, dtype=object)[ev.name[list(ev.comm_args)]]
        assert set(names) <= {"record_param_comms"} | {n for n in names if str(n).startswith("ncclKernel_")}
