"""Stragglers from matched collectives (analyzers/stragglers.py).

- HolisticTraceAnalysis 0.5.0 (the `crosscheck` extra; skipped without it, a failure where
  MSP_REQUIRE_CROSSCHECK=1), HTA_DISABLE_NS_ROUNDING=1, on the real 2-rank NCCL job
  (../shared/data/kineto/gpu_rank{0,1}.json.gz), on a 4-rank job made of it (ranks 2 and 3 are
  ranks 0 and 1 with every timestamp shifted, +200 ms and -1.2 ms: clock skew) and on the
  hand-made 3-rank jobs below, with and without the last profiler step: get_potential_stragglers()
  gives the same ranks for k = 1, 2, 3; the metric kernel (stream, name) is the same, and per
  (rank, step) the same normalized start time within 1e-9 relative.
- a hand-made 3-rank job where rank 2 reaches its all-reduce 200 us late: it is last at every one,
  its cost to ranks 0 and 1 is 200 us each there, and HTA's rule (recomputed by hand) names it; a
  job where nobody is late: no rank is last, and the rule flags no rank above the others.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis_testutil import write_json
from conftest import SHARED_DATA
from mindspeed_profiler.analysis.analyzers.classify import classified
from mindspeed_profiler.analysis.analyzers.stragglers import (
    STRAGGLER_COLLECTIVES, STRAGGLERS, _pandas_desc_order, block_of, matched_collectives, potential_stragglers,
    rank_collectives, straggler_costs, straggler_rows)
from mindspeed_profiler.analysis.parsing.kineto_trace import read_kineto_trace
from reference_tools import need

NCCL = [SHARED_DATA / "kineto" / f"gpu_rank{r}.json.gz" for r in (0, 1)]
SKEW_US = {2: 200_000.0, 3: -1_200.0}   # the 4-rank job: rank r + 2 is rank r, its clock shifted

# HTA's potential stragglers per k, and its metric rows as get_potential_stragglers computes them
HTA_STRAGGLER_DRIVER = """
import sys, json, logging
logging.disable(logging.WARNING)
import pandas as pd
from hta.trace_analysis import TraceAnalysis
from hta.analyzers.straggler import _compute_normalized_start_time_of_significant_comm_kernels
from hta.analyzers.straggler_analysis import StragglerAnalysis
out = {}
for job in json.loads(sys.argv[1]):
    ta = TraceAnalysis(trace_dir=job["dir"], include_last_profiler_step=job["include_last"])
    t = ta.t
    res = {"stragglers": {str(k): [int(r) for r in ta.get_potential_stragglers(num_candidates=k)] for k in job["ks"]}}
    ranks = list(t.get_all_traces())
    df = pd.concat([t.get_trace(r) for r in ranks], axis=0, keys=ranks, names=["rank", "idx"]).reset_index()
    df = df.loc[df["iteration"].isin(StragglerAnalysis.get_profiler_steps(t))]
    m, col = _compute_normalized_start_time_of_significant_comm_kernels(df, t.symbol_table)
    sym = t.symbol_table.get_sym_table()
    res["metric"] = [[int(r["rank"]), int(r["iteration"]), float(r[col]), int(r["stream"]), sym[int(r["name"])]]
                     for _, r in m.iterrows()]
    out[job["id"]] = res
print("HTA-JSON " + json.dumps(out))
"""

# ---------------------------------------------------------------------------- hand-made jobs

T0 = 1_700_000_000_000_000   # an absolute base, as Kineto writes
STEP_US = 1000.0
AR = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
AG = "ncclKernel_AllGather_RING_LL_Sum_bf16(ncclDevComm*, unsigned long, ncclWork*)"
LATE_US = 200.0


def _rank_trace(rank: int, late_us: float = 0.0, gather_late_us: float = 0.0, gather: bool = True,
                n_steps: int = 3, host_late: bool = False) -> dict:
    """Per ProfilerStep#n (1000 us each): a GEMM on stream 7, then an all-reduce on stream 9 that
    every rank ends at step + 800 us; the GEMM lasts `late_us` longer here, so this rank starts it
    that much later (with `host_late`, the GEMM is as long as elsewhere and the host launches the
    all-reduce `late_us` late instead). Then (`gather`) an all-gather on stream 11 ending at step +
    900 us, started `gather_late_us` late."""
    ev = []
    for n in range(1, n_steps + 1):
        s = T0 + (n - 1) * STEP_US
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": s,
                   "dur": STEP_US})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": s + 5, "dur": 40})
        rows = [(n * 10 + 1, "sm80_xmma_gemm", s + 10, 7, s + 20, 300 + (0.0 if host_late else late_us)),
                (n * 10 + 2, AR, s + 30 + (late_us if host_late else 0.0), 9, s + 320 + late_us, 480 - late_us)]
        if gather:
            rows.append((n * 10 + 3, AG, s + 40, 11, s + 820 + gather_late_us, 80 - gather_late_us))
        for corr, name, lts, stream, ts, dur in rows:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": lts,
                       "dur": 4, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                       "args": {"correlation": corr, "stream": stream, "device": rank}})
    return {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 3}, "traceEvents": ev}


def _hand_job(d: Path, late: bool) -> Path:
    for r in range(3):
        t = _rank_trace(r, late_us=LATE_US if late and r == 2 else 0.0, gather_late_us=10.0 if late and r == 1 else 0.0,
                        gather=late)
        write_json(d / f"rank-{r}.json", t)
    return d


def _skewed_job(d: Path) -> Path:
    d.mkdir(parents=True)
    for p in NCCL:
        shutil.copy(p, d / p.name)
    for r, skew in SKEW_US.items():
        t = json.load(gzip.open(NCCL[r - 2]))
        t["distributedInfo"]["rank"] = r
        for e in t["traceEvents"]:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] += skew
        with gzip.open(d / f"gpu_rank{r}.json.gz", "wt", compresslevel=1) as f:
            json.dump(t, f)
    return d


def _per_rank(d: Path) -> dict:
    out = {}
    for p in sorted(d.iterdir()):
        kt = read_kineto_trace(p)
        rc = rank_collectives(classified(kt.events), kt.distributed["rank"])
        out[rc.rank] = rc
    return out


# ---------------------------------------------------------------------------- the HTA cross-check

JOBS = {   # id: (which job, include_last_profiler_step, k values)
    "nccl": ("nccl", False, (1, 2)), "nccl_last": ("nccl", True, (1, 2)),
    "skewed_last": ("skewed", True, (1, 2, 3)),   # 4 ranks: one HTA load takes a second, so one mode
    "late": ("late", False, (1, 2)), "late_last": ("late", True, (1, 2)),
    "even": ("even", False, (1, 2)),
}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("stragglers")
    out = {"late": _hand_job(root / "late", True), "even": _hand_job(root / "even", False)}
    if all(p.is_file() for p in NCCL):
        out["nccl"] = root / "nccl"
        out["nccl"].mkdir()
        for p in NCCL:
            shutil.copy(p, out["nccl"] / p.name)   # HTA reads every trace of a directory as a rank
        out["skewed"] = _skewed_job(root / "skewed")
    return out


@pytest.fixture(scope="module")
def parsed(jobs):
    cache: dict = {}
    return lambda job: cache[job] if job in cache else cache.setdefault(job, _per_rank(jobs[job]))


@pytest.fixture(scope="module")
def hta_stragglers(jobs):
    need("hta")
    spec = [{"id": i, "dir": str(jobs[j]), "include_last": last, "ks": list(ks)}
            for i, (j, last, ks) in JOBS.items() if j in jobs]
    env = dict(os.environ, HTA_DISABLE_NS_ROUNDING="1")
    p = subprocess.run([sys.executable, "-c", HTA_STRAGGLER_DRIVER, json.dumps(spec)], capture_output=True,
                       text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("HTA-JSON "))
    return json.loads(line[len("HTA-JSON "):])


@pytest.mark.parametrize("job_id", list(JOBS))
def test_potential_stragglers_equal_hta(job_id, jobs, parsed, hta_stragglers):
    job, last, ks = JOBS[job_id]
    if job not in jobs:
        pytest.skip(f"{NCCL[0].parent} not found")
    per_rank = parsed(job)
    ref = hta_stragglers[job_id]
    for k in ks:
        ours = potential_stragglers(per_rank, num_candidates=k, include_last_step=last)
        assert ours["stragglers"] == ref["stragglers"][str(k)], (job_id, k, ours["counts"])
    ours = potential_stragglers(per_rank, include_last_step=last)
    assert {(s, n) for *_, s, n in ref["metric"]} == {(ours["stream"], ours["name"])}
    want = {(r, step): v for r, step, v, _, _ in ref["metric"]}
    got = {(r, step): v for r, by_step in ours["metric"].items() for step, v in by_step.items()}
    assert set(got) == set(want)
    worst = max(abs(got[x] - want[x]) / abs(want[x]) for x in want)
    assert worst <= 1e-9, (job_id, worst)


# ---------------------------------------------------------------------------- by hand

@pytest.fixture(scope="module")
def late(parsed):
    return parsed("late")


def test_the_late_rank_is_last_and_costs_the_others_its_delay(late):
    inst = matched_collectives(late)
    ar = [c for c in inst if c["name"] == AR]
    assert [c["step"] for c in ar] == [1, 2, 3] and all(c["ranks"] == [0, 1, 2] for c in inst)
    for c in ar:
        assert c["last_rank"] == 2
        assert c["wait_us"] == {0: LATE_US, 1: LATE_US, 2: 0.0}
    ag = [c for c in inst if c["name"] == AG]
    assert [(c["last_rank"], c["wait_us"]) for c in ag] == [(1, {0: 10.0, 1: 0.0, 2: 10.0})] * 3
    cost = straggler_costs(inst)
    # rank 2's all-reduce was launched in time and started late (its GEMM ran longer): no late launch
    assert all(c["late_launch_share"] == 0.0 for c in ar + ag)
    assert cost[2] == {"n_matched": 6, "n_last": 3, "cost_to_others_us": 3 * 2 * LATE_US, "waited_us": 3 * 10.0,
                       "worst_victim_rank": 0, "worst_victim_cost_us": 3 * LATE_US,
                       "worst_victim_net_us": 3 * LATE_US, "late_launch_us": 0.0}   # a tie: the lower rank
    assert (cost[1]["n_last"], cost[1]["cost_to_others_us"], cost[1]["waited_us"]) == (3, 60.0, 3 * LATE_US)
    assert (cost[0]["n_last"], cost[0]["cost_to_others_us"], cost[0]["worst_victim_rank"]) == (0, 0.0, None)


def test_a_late_launch_on_the_host_is_told_from_a_busy_device(tmp_path):
    for r in range(3):
        write_json(tmp_path / f"rank-{r}.json", _rank_trace(r, late_us=LATE_US if r == 2 else 0.0, host_late=True,
                                                            gather=False))
    inst = matched_collectives(_per_rank(tmp_path))
    assert [(c["last_rank"], c["late_launch_share"]) for c in inst] == [(2, 1.0)] * 3
    assert straggler_costs(inst)[2]["late_launch_us"] == 3 * 2 * LATE_US    # all of it: the host launched late
    for r in range(3):   # half the delay on the host, half a longer GEMM before it
        t = _rank_trace(r, late_us=LATE_US if r == 2 else 0.0, gather=False)
        for e in t["traceEvents"]:
            if r == 2 and e.get("cat") == "cuda_runtime" and e["args"]["correlation"] % 10 == 2:
                e["ts"] += LATE_US / 2
        write_json(tmp_path / f"rank-{r}.json", t)
    inst = matched_collectives(_per_rank(tmp_path))
    assert [c["late_launch_share"] for c in inst] == [0.5] * 3


def test_hta_rule_by_hand(late):
    """Default: steps 1 and 2 (the last is left out); t_min = step 1's start, mean iteration =
    2000 us / 2. The all-reduce's durations differ most across ranks: it is the metric kernel, and
    its start is 320 us into the step (520 on rank 2)."""
    h = potential_stragglers(late, num_candidates=1)
    assert (h["stream"], h["name"], h["steps"], h["mean_iter_us"]) == (9, AR, [1, 2], 1000.0)
    assert h["metric"] == {0: {1: 0.32, 2: 1.32}, 1: {1: 0.32, 2: 1.32}, 2: {1: 0.52, 2: 1.52}}
    assert (h["stragglers"], h["counts"]) == ([2], {0: 0, 1: 0, 2: 2})
    # k = 2: the second largest is ranks 0 and 1's, so every rank is flagged twice and HTA's sort
    # keeps the first two: HTA's rule, not a verdict on rank 2
    h2 = potential_stragglers(late, num_candidates=2)
    assert (h2["stragglers"], h2["counts"]) == ([0, 1], {0: 2, 1: 2, 2: 2})
    assert potential_stragglers(late, include_last_step=True)["steps"] == [1, 2, 3]
    rows = straggler_rows(late, h)
    assert [(r["rank"], r["is_potential_straggler"], r["n_last"], r["cost_to_others_us"]) for r in rows] == \
        [(0, False, 0, 0.0), (1, False, 3, 60.0), (2, True, 3, 1200.0)]
    assert rows[2]["metric"] == pytest.approx(1.02) and rows[2]["n_flagged"] == 2
    # through summary.json: each rank's capture keeps its block; the run's tables join them
    captures = [{"path": f"actor_rank{r}", "status": "ok", "run_id": "run1", "role": "actor", "stage": None, "rank": r,
                 "collective_kernels": json.loads(json.dumps(block_of(rc)))} for r, rc in late.items()]
    captures.append({**captures[0], "path": "other_run", "run_id": "run2"})   # one rank alone: no job
    got = STRAGGLERS.rows({"captures": captures})
    assert [(r["run_id"], r["role"], r["rank"], r["worst_victim_rank"], r["n_last"]) for r in got] == \
        [("run1", "actor", 0, None, 0), ("run1", "actor", 1, 0, 3), ("run1", "actor", 2, 0, 3)]
    assert [r["cost_to_others_us"] for r in got] == [row["cost_to_others_us"] for row in rows]
    got = STRAGGLER_COLLECTIVES.rows({"captures": captures})
    assert [(r["step"], r["last_rank"], r["max_wait_us"]) for r in got if r["name"] == AR] == \
        [(s, 2, LATE_US) for s in (1, 2, 3)]


def test_nobody_late_no_straggler(parsed):
    even = parsed("even")
    inst = matched_collectives(even)
    assert len(inst) == 3 and all(c["last_rank"] is None and c["cost_us"] == 0 for c in inst)
    assert all(r["n_last"] == 0 and r["cost_to_others_us"] == 0 and r["worst_victim_rank"] is None
               for r in straggler_rows(even))
    for k in (1, 2, 3):
        h = potential_stragglers(even, num_candidates=k)
        # every rank has the same metric: the rule flags all at every step, none more often
        assert len(set(h["counts"].values())) == 1 and h["stragglers"] == [0, 1, 2][:k]


def test_where_hta_has_no_answer(late, jobs):
    assert potential_stragglers({0: late[0]}) is None                # one rank: no spread across ranks
    dev = {r: rank_collectives(classified(read_kineto_trace(p).events), r)
           for r, p in enumerate(sorted(jobs["late"].iterdir()))}
    for rc in dev.values():   # NCCL 2.19's names are none of HTA's ncclKernel*
        for k in rc.kernels:
            k["name"] = k["name"].replace("ncclKernel_", "ncclDevKernel_")
    assert potential_stragglers(dev) is None
    assert potential_stragglers(dev, num_candidates=1, hta_names=False)["stragglers"] == [2]
    assert potential_stragglers(late, profiler_steps=[7]) is None


def test_tie_order_is_pandas():
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    for seed in range(3):
        v = np.random.RandomState(seed).randint(0, 3, size=40).astype(np.int64)
        assert list(_pandas_desc_order(v)) == pd.Series(v).sort_values(ascending=False).index.tolist()


def test_clock_skew_is_lateness_to_hta_not_to_the_matching(jobs, parsed):
    """Rank 2 of the 4-rank job is rank 0 with its clock 200 ms ahead: HTA's metric (raw starts)
    names it; aligned on each collective's end it waits exactly as rank 0 does and is never last
    (rank 0 and it tie; a tie goes to the lower rank)."""
    if "skewed" not in jobs:
        pytest.skip(f"{NCCL[0].parent} not found")
    per_rank = parsed("skewed")
    assert potential_stragglers(per_rank, num_candidates=1, include_last_step=True)["stragglers"] == [2]
    rows = {r["rank"]: r for r in straggler_rows(per_rank)}
    assert (rows[2]["n_last"], rows[2]["waited_us"]) == (0, rows[0]["waited_us"])
    assert rows[3]["waited_us"] == rows[1]["waited_us"] and rows[0]["n_last"] + rows[1]["n_last"] == 10


def test_many_steps_by_binary_search_as_by_passes(jobs, monkeypatch):
    """Past intervals.PASSES_MAX ProfilerStep ranges the steps are assigned by one binary search
    (intervals.last_holding): the same collectives, steps and extents as a pass per step, on every
    job above (the real NCCL traces: their steps are the HTA-checked ones) and on a trace of 60
    steps."""
    import mindspeed_profiler.analysis.analyzers.intervals as iv
    import mindspeed_profiler.analysis.analyzers.stragglers as st

    def both(path):
        ct = classified(read_kineto_trace(path).events)
        monkeypatch.setattr(iv, "PASSES_MAX", 10 ** 6)
        by_passes = st.rank_collectives(ct, 0)
        monkeypatch.setattr(iv, "PASSES_MAX", 0)
        return by_passes, st.rank_collectives(ct, 0)

    for d in jobs.values():
        for p in sorted(d.iterdir()):
            a, b = both(p)
            assert a == b and a.extents
    ev = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": 100.0 * s,
           "dur": 90.0} for s in range(60)]
    ev += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 7.0 * k, "dur": 2.0} for k in range(900)]
    path = write_json(jobs["late"].parent / "many_steps.json", {"traceEvents": ev})
    a, b = both(path)
    assert a == b and len(a.extents) == 60 and len(a.step_rows) == 60
