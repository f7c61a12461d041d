"""The advisor (analysis/analyzers/advisor.py): each rule on a case that triggers it and one that does not,
the ranking, a failing rule, and the findings through analyse_directory, RunAnalysis, analysis.db,
the terminal and report.html. Summaries are written by hand in summary.json's shape (docs/analysis.md),
except the straggler's: real gloo traces (tests/test_stragglers_cpu.py's job) and the hand-made
3-rank job of tests/test_stragglers.py."""
from __future__ import annotations

import io

import pytest

from mindspeed_profiler.analysis.analyzers import advisor
from mindspeed_profiler.analysis.analyzers.stragglers import block_of
from mindspeed_profiler.analysis.results.facade import RunAnalysis
from test_stragglers import LATE_US, _hand_job, _per_rank


def _cap(path="actor_rank0", rank=0, **fields) -> dict:
    return {"path": path, "kind": "kineto", "status": "ok", "run_id": "r1", "role": "actor", "rank": rank,
            "stage": "actor_update", **fields}


def _ids(summary: dict) -> list[str]:
    return [f["id"] for f in advisor.findings(summary)]


# ------------------------------------------------------------------------------ straggler

@pytest.fixture(scope="module")
def late_job(tmp_path_factory) -> dict:
    """tests/test_stragglers.py's hand-made 3-rank job: rank 2 arrives LATE_US late at each of 3 all-reduces."""
    return _per_rank(_hand_job(tmp_path_factory.mktemp("late"), late=True))


def _straggler_summary(per_rank: dict, wall_us: float) -> dict:
    caps = [_cap(f"actor_rank{r}", r, wall_us=wall_us, collective_kernels=block_of(rc)) for r, rc in per_rank.items()]
    return {"captures": caps}


def test_straggler_found_with_its_cost_to_the_others(late_job):
    s = _straggler_summary(late_job, wall_us=5_000.0)   # 3 x 200 us of waits: 12% of rank 0's 5 ms
    f, = [f for f in advisor.findings(s) if f["id"] == "straggler"]
    assert f["title"].startswith("actor rank 2 is the straggler of actor_update: actor rank 0 waited 0.6 ms")
    assert f["evidence"]["victim_rank"] == 0 and f["evidence"]["victim_cost_us"] == 3 * LATE_US
    # its all-reduces were launched in time and started late (a longer GEMM before them)
    assert f["title"].endswith("; launched in time, its device was busy before them (100% of the delay)")
    assert f["evidence"]["late_launch_us"] == 0.0 and "runs longer before the collective" in f["action"]
    assert f["impact"] == pytest.approx(3 * LATE_US / 5_000.0)


def test_no_straggler_when_the_waits_are_small(late_job):
    assert "straggler" not in _ids(_straggler_summary(late_job, wall_us=1_000_000.0))   # 0.06%: noise


@pytest.mark.parametrize("wall_us, hosts, device, found", [
    (5_000.0, ("vm", "vm", "vm"), "cpu", False),     # 12%: CPU ranks sharing a host's cores, under its 25% floor
    (5_000.0, ("a", "b", "c"), "cpu", True),         # the same waits across hosts: a straggler
    (5_000.0, ("vm", "vm", "vm"), "cuda:0", True),   # device ranks on one host do not share their compute
    (2_000.0, ("vm", "vm", "vm"), "cpu", True),      # 30%: above the shared-host floor
])
def test_straggler_floor_of_cpu_ranks_sharing_a_host(late_job, wall_us, hosts, device, found):
    s = _straggler_summary(late_job, wall_us=wall_us)
    for c, host in zip(s["captures"], hosts):
        c["meta"] = {"host": host, "device": device}
    assert ("straggler" in _ids(s)) is found


# ------------------------------------------------------------------------------ device-side rules

def test_comm_bound():
    hit = _cap(device={"window_us": 1000.0, "busy_us": 800.0, "communication_exposed_us": 400.0})
    miss = _cap(device={"window_us": 1000.0, "busy_us": 800.0, "communication_exposed_us": 100.0})
    f, = [f for f in advisor.findings({"captures": [hit]}) if f["id"] == "comm_bound"]
    assert "50% of the device's busy time" in f["title"] and f["impact"] == pytest.approx(0.4)
    assert "comm_bound" not in _ids({"captures": [miss]})


def test_host_bound():
    row = {"device": "0", "stream": 7, "idle_us": 600.0, "host_wait_us": 500.0, "kernel_wait_us": 50.0, "other_us": 50.0}
    f, = advisor.host_bound({"captures": [_cap(wall_us=1000.0, idle_causes=[row])]})
    assert f["impact"] == pytest.approx(0.5) and "stream 7" in f["title"]
    assert advisor.host_bound({"captures": [_cap(wall_us=10_000.0, idle_causes=[row])]}) == []


def test_slow_link():
    from test_links import _capture, _link
    from mindspeed_profiler.analysis.analyzers import links

    def caps(slow_time):
        m = [_link(0, d, "HCCS", 20.0, slow_time if d == 5 else 1.0) for d in range(1, 8)]
        groups = [{"id": "group_name_0", "ranks": list(range(8)), "name": "default_group", "rank": 0}]
        c = _capture(0, m, groups)
        c["communication"]["communication_matrix"] = [dict(r, group=str(links.double_hash("group_name_0"))) for r in m]
        return [c]
    found = [f for f in advisor.findings({"captures": caps(1.0 / 0.3)}) if f["id"] == "slow_link"]
    assert found and all("0 -> 5 (HCCS)" in f["title"] for f in found)
    assert found[0]["impact"] == pytest.approx(0.7, abs=1e-3)
    assert "slow_link" not in _ids({"captures": caps(1.0)})


def test_slow_rank():
    flagged = {"run_id": "r1", "source": "timeline", "stage": "actor_update", "metric": "span", "role": "actor",
               "rank": "actor:1", "value_us": 300.0, "median_us": 150.0, "ratio": 2.0, "n": 5, "flagged": True,
               "reason": None}
    f, = advisor.slow_rank({"slow_ranks": [flagged]})
    assert "2.00x the median" in f["title"] and f["impact"] == pytest.approx(0.5)
    assert advisor.slow_rank({"slow_ranks": [dict(flagged, flagged=False)]}) == []


# ------------------------------------------------------------------------------ timeline rules

def _timeline(gen_us: float, profiler_us: float) -> dict:
    its = [{"iteration": i, "start_us": 1000.0 * i, "dur_us": 1000.0, "profiler_us": profiler_us,
            "stages": {"actor_generate": {"total_us": gen_us, "wall_us": gen_us, "count": 1},
                       "actor_update": {"total_us": 100.0, "wall_us": 100.0, "count": 1}}} for i in (1, 2)]
    return {"captures": [], "timeline": {"iterations": its}}


def test_generation_bound():
    f, = advisor.generation_bound(_timeline(700.0, 0.0))
    assert f["impact"] == pytest.approx(0.7) and "70%" in f["title"]
    assert advisor.generation_bound(_timeline(300.0, 0.0)) == []


def test_profiler_overhead():
    f, = advisor.profiler_overhead(_timeline(0.0, 200.0))
    assert f["impact"] == pytest.approx(0.2)
    assert advisor.profiler_overhead(_timeline(0.0, 50.0)) == []


def _idle_timeline(actor_idle: float, rollout_idle: float) -> dict:
    """Two iterations of 1 ms; two actor workers, one rollout worker, each idle that share."""
    its = [{"iteration": i, "start_us": 1000.0 * i, "dur_us": 1000.0, "stages": {},
            "idle_per_worker_us": {"actor:0": 1000.0 * actor_idle, "actor:1": 1000.0 * actor_idle,
                                   "rollout:0": 1000.0 * rollout_idle}} for i in (1, 2)]
    return {"captures": [], "timeline": {"iterations": its}}


def test_group_idle():
    f, = advisor.group_idle(_idle_timeline(0.6, 0.1))
    assert f["title"] == "worker group actor is idle 60% of the iterations while rollout works (rollout idle 10%)"
    assert f["impact"] == pytest.approx(0.6 * 2 / 3) and f["evidence"]["workers"] == 2
    assert advisor.group_idle(_idle_timeline(0.4, 0.1)) == []       # under half: no finding
    one_group = _idle_timeline(0.9, 0.1)
    for it in one_group["timeline"]["iterations"]:
        del it["idle_per_worker_us"]["rollout:0"]
    assert advisor.group_idle(one_group) == []                      # nobody else to wait on


def _small_collectives(wall_us: float) -> dict:
    """10 all-reduces of 4 KiB; the fastest took 10.24 us (0.4 GB/s), the others waited for a late
    rank (5 ms in all): the rule counts 10 x 10.24 us, not the waits."""
    small = {"collective": "allreduce", "count": 10, "n_timed": 10, "total_us": 5000.0, "bytes_per_call": 4096,
             "algbw_max_gbps": 0.4, "latency_bound": True}
    big = {"collective": "allreduce", "count": 2, "n_timed": 2, "total_us": 900.0, "bytes_per_call": 64 << 20,
           "algbw_max_gbps": 150.0, "latency_bound": False}
    return {"captures": [_cap(wall_us=wall_us, collective_bandwidth=[small, big])]}


def test_latency_bound():
    f, = advisor.latency_bound(_small_collectives(1000.0))
    assert f["title"] == "actor rank 0 in actor_update: 10 small collectives take 10% of the capture"
    assert f["impact"] == pytest.approx(10 * 4096 / 0.4e3 / 1000.0) and f["evidence"]["collectives"] == ["allreduce"]
    assert advisor.latency_bound(_small_collectives(10_000.0)) == []    # 1%: not worth it


def test_latency_bound_not_on_a_real_nccl_trace():
    from conftest import REPO_ROOT
    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

    summary, _ = analyse_directory(REPO_ROOT / "tests" / "data" / "hta" / "nccl_parser_config", jobs=1, html=False,
                                   write=False, progress=False)
    rows = summary["captures"][0]["collective_bandwidth"]
    assert any(r["latency_bound"] for r in rows)          # two small broadcasts: 110 us of a 684 ms capture
    assert advisor.latency_bound(summary) == []


def _tracker_cap(role="actor", rank=0, **metrics) -> dict:
    rows = [{"iteration": i, "metric": k, "value": v} for i in (1, 2) for k, v in metrics.items()]
    return {"path": f"metrics/{role}_rank{rank}.jsonl", "kind": "tracker", "status": "ok", "role": role, "rank": rank,
            "stage": None, "tracker": {"rows": rows, "n_iterations": 2}}


def test_memory_near_capacity_from_the_tracker_and_from_memory_records():
    full = _tracker_cap(**{"perf/max_memory_reserved_gb": 60.0, "perf/memory_capacity_gb": 64.0})
    f, = advisor.memory_near_capacity({"captures": [full]})
    assert f["title"] == "actor rank 0: peak memory 94% of the device's"
    assert f["impact"] == pytest.approx(60 / 64 * advisor.MEMORY_IMPACT_WEIGHT, abs=1e-4)   # rounded to 4 places
    roomy = _tracker_cap(**{"perf/max_memory_reserved_gb": 30.0, "perf/memory_capacity_gb": 64.0})
    assert advisor.memory_near_capacity({"captures": [roomy]}) == []
    gpu = {"device": "CUDA:0", "device_id": 0, "peak_reserved_bytes": 79 * 2**30, "capacity_bytes": 80 * 2**30}
    f, = advisor.memory_near_capacity({"captures": [_cap(memory_records={"devices": [gpu]})]})
    assert "CUDA:0: peak memory 99%" in f["title"] and f["evidence"]["table"] == "memory_record_peaks"
    no_capacity = dict(gpu, capacity_bytes=None)   # Ascend's records: no capacity in the files, no finding
    assert advisor.memory_near_capacity({"captures": [_cap(memory_records={"devices": [no_capacity]})]}) == []


def test_low_mfu():
    slow = _tracker_cap(**{"perf/mfu/actor_update": 0.05, "timing_s/actor_update": 2.0, "timing_s/iteration": 4.0,
                           "perf/mfu/actor_generate": 0.01})
    f, = advisor.low_mfu({"captures": [slow]})   # generation is no training stage: not this rule's
    assert f["title"] == "actor actor_update: MFU 5.0% of the device's peak (under 25%)"
    assert f["impact"] == pytest.approx(0.5 * (1 - 0.05 / advisor.LOW_MFU))
    good = _tracker_cap(**{"perf/mfu/actor_update": 0.4, "timing_s/actor_update": 2.0, "timing_s/iteration": 4.0})
    assert advisor.low_mfu({"captures": [good]}) == []


# ------------------------------------------------------------------------------ the whole

def test_ranked_by_impact_and_a_failing_rule_is_reported():
    def broken(summary):
        raise KeyError("x")
    s = _timeline(700.0, 200.0)
    got = advisor.findings(s, rules=(advisor.profiler_overhead, broken, advisor.generation_bound))
    assert [f["id"] for f in got] == ["generation_bound", "profiler_overhead", "advisor_error"]
    assert "rule broken failed: KeyError" in got[-1]["title"]
    assert advisor.findings({"captures": []}) == []


def test_findings_through_the_facade_console_and_report(late_job):
    from rich.console import Console

    from mindspeed_profiler.analysis.results.console import print_summary
    from mindspeed_profiler.analysis.results.report import render

    s = _straggler_summary(late_job, wall_us=5_000.0)
    s.update(findings=advisor.findings(s), counts={"found": 3, "ok": 3, "failed": 0, "unparsed": 0}, warnings=[],
             stage_rank=[], slow_ranks=[], timeline=None, runs=["r1"], root="/x", created="now", options={})
    rows = list(RunAnalysis.from_summary(s).findings())
    assert rows[0]["id"] == "straggler" and rows[0]["impact"] == pytest.approx(0.12)
    out = io.StringIO()
    print_summary(s, console=Console(file=out, width=200), html=False, db=False)
    text = out.getvalue()
    assert text.index("Findings") < text.index("actor rank 2 is the straggler")
    page = render(s)
    assert page.index("<h2>Findings</h2>") < page.index("actor rank 2 is the straggler")


def _slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    import re
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_finding_points_to_a_heading_of_diagnosis_md(late_job, tmp_path):
    from conftest import REPO_ROOT
    from samples_testutil import long_tail_batch, sample
    from memory_testutil import memory_rule_summary

    text = (REPO_ROOT / "docs" / "diagnosis.md").read_text()
    anchors = {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}
    row = {"device": "0", "stream": 7, "idle_us": 600.0, "host_wait_us": 500.0, "kernel_wait_us": 50.0, "other_us": 50.0}
    flagged = {"run_id": "r1", "source": "timeline", "stage": "actor_update", "metric": "span", "role": "actor",
               "rank": "actor:1", "value_us": 300.0, "median_us": 150.0, "ratio": 2.0, "n": 5, "flagged": True}
    found = (advisor.findings(_straggler_summary(late_job, wall_us=5_000.0))
             + advisor.findings({"captures": [_cap(device={"window_us": 1000.0, "busy_us": 800.0,
                                                            "communication_exposed_us": 400.0})]})
             + advisor.host_bound({"captures": [_cap(wall_us=1000.0, idle_causes=[row])]})
             + advisor.slow_rank({"slow_ranks": [flagged]})
             + advisor.findings(_timeline(700.0, 200.0)) + advisor.group_idle(_idle_timeline(0.6, 0.1))
             + advisor.latency_bound(_small_collectives(1000.0))
             + advisor.memory_near_capacity({"captures": [_tracker_cap(**{"perf/max_memory_reserved_gb": 60.0,
                                                                          "perf/memory_capacity_gb": 64.0})]})
             + advisor.low_mfu({"captures": [_tracker_cap(**{"perf/mfu/actor_update": 0.05, "timing_s/actor_update": 2.0,
                                                             "timing_s/iteration": 4.0})]})
             + advisor.findings(_rollout_summary(tmp_path / "tail", [long_tail_batch(n=16, every=4)]))
             + advisor.engine_queueing(_rollout_summary(tmp_path / "queue", [[sample(i, 0, 100, 8, queue_s=0.04)
                                                                               for i in range(8)]]))
             # asynchronous RL's rules (tests/test_async_rl.py has each one's cases)
             + advisor.findings({"captures": [_tracker_cap("driver", **{
                 "timing_s/iteration": 1.0, "async/trainer_idle_ratio": 0.6, "async/rollout_idle_ratio": 0.1,
                 "async/weight_sync_exposed_s": 0.2, "async/over_bound_samples": 1, "async/samples": 8}),
                 _tracker_cap("trainer", **{"timing_s/iteration": 1.0, "async/rollout_idle_ratio": 0.6})]})
             # the automatic capture's rule (tests/test_auto_capture.py has its cases)
             + advisor.findings({"captures": [{"path": "all/a_pt", "role": "actor", "rank": 0, "status": "ok", "meta": {
                 "notes": ['auto_capture: {"slow_iteration": 3, "time_s": 1.0, "median_s": 0.1}']}}]})
             # memory's rules (tests/test_memory_analysis.py has each one's cases)
             + advisor.findings(memory_rule_summary()))
    ids = {f["id"] for f in found}
    assert ids >= {r.__name__ for r in advisor.RULES} - {"slow_link"}   # slow_link's: test_slow_link's fixture
    for f in found:
        page, anchor = f["docs"].split("#")
        assert page == "docs/diagnosis.md" and anchor in anchors, f
    assert "links" in anchors     # slow_link's anchor


def test_a_nan_impact_ranks_last():
    assert advisor._finding("x", "t", float("nan"), {}, "a", "the-advisor")["impact"] == 0.0


def test_a_rule_found_on_every_rank_is_listed_ten_times_and_counted():
    """A job whose every rank is host bound, each in a stage of its own (one stage's captures are
    one finding: tests/test_hostile3_compare.py): the 10 worst, the worst saying how many."""
    row = {"device": "0", "stream": 7, "idle_us": 600.0, "kernel_wait_us": 50.0, "other_us": 50.0}
    caps = [_cap(f"actor_rank{r}", r, wall_us=1000.0, idle_causes=[dict(row, host_wait_us=400.0 + r)], stage=f"s{r}")
            for r in range(30)]
    found = [f for f in advisor.findings({"captures": caps}) if f["id"] == "host_bound"]
    assert len(found) == advisor.MAX_PER_RULE
    assert [f["evidence"]["path"] for f in found] == [f"actor_rank{r}" for r in range(29, 19, -1)]   # the worst first
    assert found[0]["evidence"]["n_like_this"] == 30 and "the worst of 30 host_bound findings" in found[0]["title"]
    assert all("n_like_this" not in f["evidence"] for f in found[1:])
    few = [f for f in advisor.findings({"captures": caps[:3]}) if f["id"] == "host_bound"]
    assert len(few) == 3 and all("n_like_this" not in f["evidence"] and "worst of" not in f["title"] for f in few)


def test_findings_held_as_they_come_are_the_ones_a_full_sort_keeps(monkeypatch):
    """advisor.Worst trims each rule's findings while the rule runs (a rule firing on 10,000 ranks
    holds ~10, not 60,000): the result must be exactly the full list sorted and cut, ties included."""
    row = {"device": "0", "idle_us": 600.0, "kernel_wait_us": 50.0, "other_us": 50.0}
    # 600 findings over 3 streams, impacts with many exact ties, in an order that is not the ranking
    caps = [_cap(f"actor_rank{r}", r, wall_us=1000.0, stage=f"s{r % 50}",   # 50 subjects of 12 findings each
                 idle_causes=[dict(row, stream=s, host_wait_us=400.0 + (r * 7919 % 37)) for s in (7, 8, 9)])
            for r in range(200)]
    summary = {"captures": caps, "slow_ranks": [{"stage": "s", "rank": r, "flagged": True, "ratio": 1.5 + r % 3,
                                                  "us": 100.0, "median_us": 50.0} for r in range(40)]}
    got = advisor.findings(summary)
    monkeypatch.setattr(advisor.Worst, "_trim", lambda self: None)   # the full lists, cut only at the end
    full = advisor.findings(summary)
    assert got == full
    hb = [f for f in got if f["id"] == "host_bound"]
    assert len(hb) == advisor.MAX_PER_RULE and hb[0]["evidence"]["n_like_this"] == 50
    assert all(f["evidence"]["n_captures"] == 4 and f["evidence"]["of_captures"] == 4 for f in hb)


# ------------------------------------------------------------------------------ the rollout's rules (per-sample records)

def _rollout_summary(tmp_path, batches, tracker_iteration_s: float | None = None) -> dict:
    """A summary whose `samples` capture is the long tail of files written in docs/rollout.md's
    format (tests/samples_testutil.py), read by the real reader and analyzer; with a tracker
    capture giving iteration 1 its wall time when `tracker_iteration_s` is set."""
    from mindspeed_profiler.analysis.analyzers.long_tail import long_tail
    from mindspeed_profiler.analysis.parsing.samples import read_samples
    from samples_testutil import write_worker

    path = write_worker(tmp_path, "actor", 0, [(1, "actor_generate", b) for b in batches])
    caps = [{"path": "samples", "kind": "samples", "status": "ok", "rollout": long_tail(read_samples(path).samples, 5)}]
    if tracker_iteration_s is not None:
        caps.append(_tracker_cap(**{"timing_s/iteration": tracker_iteration_s}) | {"tracker": {"rows": [
            {"iteration": 1, "metric": "timing_s/iteration", "value": tracker_iteration_s}]}})
    return {"captures": caps}


def test_long_tail_generation_one_sample_in_eight_eight_times_longer(tmp_path):
    from samples_testutil import long_tail_batch

    f, = [f for f in advisor.findings(_rollout_summary(tmp_path, [long_tail_batch(n=16, every=8)]))
          if f["id"] == "long_tail_generation"]
    # 14 samples of 10 ms, 2 of 80 ms: lost = 80 - (14 x 10 + 2 x 80) / 16 = 61.25 ms of an 80 ms window
    assert f["evidence"]["tail_lost_s"] == pytest.approx(0.06125) and f["impact"] == pytest.approx(0.7656, abs=1e-4)
    assert f["evidence"]["iteration_s"] is None and "of the generation window" in f["title"]
    assert "partial_rollout_max_split" in f["action"] and f["docs"].endswith("#long-tail-generation")


def test_long_tail_generation_impact_is_a_share_of_the_iteration(tmp_path):
    from samples_testutil import long_tail_batch

    s = _rollout_summary(tmp_path, [long_tail_batch(n=16, every=8)], tracker_iteration_s=0.245)
    f, = [f for f in advisor.findings(s) if f["id"] == "long_tail_generation"]
    assert f["impact"] == pytest.approx(0.06125 / 0.245, abs=1e-4) and f["evidence"]["iteration_s"] == 0.245
    assert f["evidence"]["iteration_source"] == "tracker_metrics timing_s/iteration"


def test_long_tail_generation_iteration_from_the_timeline_without_the_tracker(tmp_path):
    from samples_testutil import long_tail_batch

    s = _rollout_summary(tmp_path, [long_tail_batch(n=16, every=8)])
    s["timeline"] = {"iterations": [{"iteration": 1, "start_us": 0.0, "dur_us": 122_500.0}]}   # 0.1225 s
    f, = advisor.long_tail_generation(s)
    assert f["impact"] == pytest.approx(0.5) and f["evidence"]["iteration_source"] == "timeline_iterations dur_us"
    assert "50% of the iteration" in f["title"]


@pytest.mark.parametrize("n", [8, 64, 256])
def test_no_long_tail_generation_for_lengths_spread_evenly(tmp_path, n):
    from samples_testutil import uniform_batch

    assert "long_tail_generation" not in _ids(_rollout_summary(tmp_path, [uniform_batch(n=n)]))


def test_no_long_tail_generation_without_a_tail(tmp_path):
    from samples_testutil import long_tail_batch

    # every sample equally long (factor 1), or the long one only 2x the others
    for factor in (1.0, 2.0):
        assert "long_tail_generation" not in _ids(_rollout_summary(tmp_path, [long_tail_batch(n=16, factor=factor)]))


def test_truncation(tmp_path):
    from samples_testutil import long_tail_batch, sample

    f, = [f for f in advisor.findings(_rollout_summary(tmp_path, [long_tail_batch(n=16, every=4)]))
          if f["id"] == "truncation"]
    assert f["evidence"]["truncated"] == 4 and f["evidence"]["truncated_share"] == 0.25
    assert f["impact"] == pytest.approx(0.5 * 4 * 80 / (12 * 10 + 4 * 80), abs=1e-4) and f["docs"].endswith("#truncation")
    few = [sample(i, 0, 10, 4, "length" if i == 0 else "stop") for i in range(16)]   # 1 of 16: 6%
    assert "truncation" not in _ids(_rollout_summary(tmp_path, [few]))


def test_engine_queueing(tmp_path):
    from samples_testutil import sample

    queued = [sample(i, 0, 100, 8, queue_s=0.04) for i in range(8)]    # 40 of 100 ms in the queue
    f, = [f for f in advisor.findings(_rollout_summary(tmp_path, [queued])) if f["id"] == "engine_queueing"]
    assert f["evidence"]["queue_share"] == pytest.approx(0.4) and f["impact"] == pytest.approx(0.4)
    assert f["docs"].endswith("#engine-queueing")
    brief = [sample(i, 0, 100, 8, queue_s=0.005) for i in range(8)]    # 5%
    assert "engine_queueing" not in _ids(_rollout_summary(tmp_path, [brief]))
