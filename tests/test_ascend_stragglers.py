"""Ascend stragglers (analyzers/stragglers.py, captures[*].communication_ops) against msprof-analyze
26.2.0's `slow_rank` recipe, run here in a child process (`cluster -m slow_rank`, the `crosscheck`
extra: skipped without it, a failure with MSP_REQUIRE_CROSSCHECK=1), once per set for the module:

- on every real db capture set: its rank_stats.csv / slow_op_stats.csv (none where it finds no slow
  rank) equal our vote (STRAGGLERS.slow_affect_count) exactly; the text sets it refuses (db only);
- on N-rank db sets made from db_l1 (4 to 16 ranks, each op's COMMUNICATION_OP durations spread
  per rank, some with one rank's short: Dixon's four branches): the same, vote for vote and op for op;
- its outlier rules (judge_slow_rank, Dixon up to 100 values, three sigma beyond) against ours on
  random lists, index for index;
- the wait-based costs recomputed from the raw communication.json / CommAnalyzerTime rows; an
  injected straggler (one rank's waits small, the others' large) is named, by the advisor too; a
  balanced job names nobody.
"""
from __future__ import annotations

import csv
import json
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import ascend_data
from mindspeed_profiler.analysis.analyzers.advisor import straggler as straggler_rule
from mindspeed_profiler.analysis.analyzers import slow_rank_vote as vote
from mindspeed_profiler.analysis.analyzers import stragglers as st
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from reference_tools import need

SLOW_RANK_DRIVER = """
import sys
from msprof_analyze.cluster_analyse.cluster_analysis import cluster_analysis_main
for src, out in zip(sys.argv[1::2], sys.argv[2::2]):
    sys.argv = ["msprof-analyze cluster", "-d", src, "-m", "slow_rank", "-o", out, "--export_type", "text"]
    cluster_analysis_main()
"""

# the recipe's outlier rules on lists given as JSON lines, its answers as JSON lines
JUDGE_DRIVER = """
import sys, json
from msprof_analyze.cluster_analyse.recipes.slow_rank.slow_rank import judge_slow_rank
for line in sys.stdin:
    print(json.dumps(judge_slow_rank(json.loads(line))))
"""

DB_SETS = [n for n in ascend_data.CAPTURE_SETS if ascend_data.SETS[n].export == "db"]
# (name, ranks, {rank: duration factor} of the op's short rank per op index, or None: spread only)
MADE = (("made4_balanced", 4, None), ("made4_rank2", 4, {0: 2, 1: 2, 2: 2, 3: 2}),
        ("made8_rank5", 8, {0: 5, 2: 5}), ("made12_rank0", 12, {1: 0, 3: 0}),
        ("made16_mixed", 16, {0: 3, 1: 9, 3: 3}))
SHORT = 0.05    # the injected rank's duration: 5% of the others'


def _run_recipe(pairs: list[tuple[Path, Path]]) -> None:
    need("msprof_analyze")
    args = [str(x) for pair in pairs for x in pair]
    p = subprocess.run([sys.executable, "-c", SLOW_RANK_DRIVER, *args], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]


def recipe_output(out: Path) -> tuple[dict[int, int], list[dict]]:
    """rank_stats.csv as {rank: slowAffectCount} and slow_op_stats.csv's rows ({}, [] where the
    recipe found no slow rank and wrote nothing)."""
    d = next(out.rglob("rank_stats.csv"), None)
    if d is None:
        return {}, []
    with open(d, newline="") as f:
        votes = {int(r["rankId"]): int(float(r["slowAffectCount"])) for r in csv.DictReader(f)}
    with open(d.parent / "slow_op_stats.csv", newline="") as f:
        ops = [{"slow_ranks": [int(x) for x in r["SlowRank"].split(",")], "op": r["OpName"], "group": r["GroupName"],
                "timestamp": float(r["Timestamp"]), "count": int(float(r["Count"]))} for r in csv.DictReader(f)]
    return votes, ops


def made_set(src: Path, dest: Path, n: int, short: dict[int, int] | None, seed: int) -> Path:
    """An n-rank db set from a 2-rank one: rank r a copy of rank r % 2 (its files renamed, its
    RANK_DEVICE_MAP and profiler_info rank set to r), every op's duration spread per rank (distinct
    values, none an outlier), and at op index j the rank short[j] SHORT as long (the rest unchanged),
    its CommAnalyzerTime wait small and the others' large (it arrived last)."""
    rng = random.Random(seed)
    for r in range(n):
        s = r % 2
        d = dest / f"rank{r}_ascend_pt"
        shutil.copytree(src / f"rank{s}_ascend_pt", d, ignore=shutil.ignore_patterns("*-shm", "*-wal"))
        info = json.loads((d / f"profiler_info_{s}.json").read_text())
        (d / f"profiler_info_{s}.json").unlink()
        (d / f"profiler_info_{r}.json").write_text(json.dumps({**info, "rank_id": r}))
        out = d / "ASCEND_PROFILER_OUTPUT"
        db = out / f"ascend_pytorch_profiler_{r}.db"
        if s != r:
            (out / f"ascend_pytorch_profiler_{s}.db").rename(db)
        con = sqlite3.connect(db)
        con.execute("UPDATE RANK_DEVICE_MAP SET rankId = ?", (r,))
        ops = con.execute("SELECT rowid, startNs, endNs FROM COMMUNICATION_OP ORDER BY startNs").fetchall()
        waits = {}
        for j, (rowid, start, end) in enumerate(ops):
            f = SHORT if short and short.get(j) == r else 1.0 + 0.02 * r + 0.004 * rng.random()
            con.execute("UPDATE COMMUNICATION_OP SET endNs = ? WHERE rowid = ?", (start + int((end - start) * f), rowid))
            waits[j] = 0.001 if short and short.get(j) == r else 1.0 + 0.1 * r
        con.commit()
        con.close()
        con = sqlite3.connect(out / "analysis.db")
        names = [x[0] for x in con.execute("SELECT hccl_op_name FROM CommAnalyzerTime ORDER BY start_timestamp")]
        for j, name in enumerate(x for x in names if x != st_total()):
            con.execute("UPDATE CommAnalyzerTime SET wait_time = ? WHERE hccl_op_name = ?", (waits.get(j, 1.0), name))
        con.commit()
        con.close()
    return dest


def st_total() -> str:
    from mindspeed_profiler.analysis.parsing.ascend_comm import TOTAL_OP
    return TOTAL_OP


@pytest.fixture(scope="module")
def recipe(ascend_sets, tmp_path_factory):
    """{set: (its directory, the recipe's (votes, ops))} for the real db sets and the made ones, the
    recipe run once on all (on writable copies: it checks its inputs' owner and permissions)."""
    need("msprof_analyze")
    root = tmp_path_factory.mktemp("slow_rank")
    sets = {}
    for name in DB_SETS + ["text_l1"]:
        if ascend_data.available(name):
            ascend_sets(name)
            sets[name] = ascend_data.writable_copy(name, root / "in" / name)
    base = ascend_data.writable_copy("db_l1", root / "base")
    for i, (name, n, short) in enumerate(MADE):
        sets[name] = made_set(base, root / "in" / name, n, short, seed=i)
    _run_recipe([(p, root / "out" / name) for name, p in sets.items()])
    return {name: (p, recipe_output(root / "out" / name)) for name, p in sets.items()}


def _job(path: Path) -> tuple[dict, dict[int, dict]]:
    summary, _ = analyse_directory(path, jobs=1, progress=False, write=False)
    caps = [c for c in summary["captures"] if c["kind"] == "ascend"]
    assert caps and all(c["status"] == "ok" for c in caps), [(c["path"], c.get("error")) for c in caps]
    jobs = st._ascend_jobs(caps)
    assert len(jobs) == 1, jobs.keys()
    return summary, next(iter(jobs.values()))


@pytest.mark.parametrize("name", DB_SETS + [m[0] for m in MADE])
def test_vote_equals_msprof_analyze_slow_rank(name, recipe):
    if name not in recipe:   # a ../shared set that is absent (the recipe fixture ran on the others)
        pytest.skip(f"{name}: {ascend_data.SETS[name].source} not found (../shared/ascend-2rank; MSP_SHARED_ASCEND)")
    path, (ref_votes, ref_ops) = recipe[name]
    summary, per_rank = _job(path)
    votes, ops = vote.slow_rank_vote(st.vote_input(per_rank))
    assert all(b["vote_ops"] for b in per_rank.values()), "a db set: the vote reads COMMUNICATION_OP"
    assert votes == ref_votes
    # the csv holds the start (ns) as pandas wrote it, through a float
    assert [{**o, "timestamp": float(o["timestamp"])} for o in ops] == ref_ops
    rows = st.straggler_tables(summary["captures"])[0]
    assert {r["rank"]: r["slow_affect_count"] for r in rows} == {r: ref_votes.get(r, 0) for r in per_rank}
    made = {m[0]: m for m in MADE}.get(name)
    if made:   # the made sets: the injected rank is what both name, once per op it was short at
        short = made[2] or {}
        expect = {}
        for r in short.values():
            expect[r] = expect.get(r, 0) + 1
        assert votes == expect
        # and the wait-based costs name it at those ops (its CommAnalyzerTime wait made the smallest)
        by_rank = {r["rank"]: r for r in rows}
        assert all(by_rank[r]["n_last"] >= k for r, k in expect.items())
    print(f"{name}: msprof-analyze slow_rank {ref_votes or 'no slow rank'}, {len(ref_ops)} op(s); ours equal")


def test_recipe_refuses_text_sets(recipe):
    """The recipe reads the db export only: on a text set it writes nothing; we vote on
    communication.json's Elapse Time with its rule (nothing on 2 ranks: Dixon needs 3 values)."""
    path, ref = recipe["text_l1"]
    assert ref == ({}, [])
    _summary, per_rank = _job(path)
    assert not any(b["vote_ops"] for b in per_rank.values())
    assert vote.slow_rank_vote(st.vote_input(per_rank)) == ({}, [])


def test_outlier_rules_equal_msprof_analyze():
    need("msprof_analyze")
    rng = random.Random(7)
    lists = []
    for n in list(range(0, 20)) + [30, 64, 99, 100, 101, 128, 150]:
        for _ in range(12):
            base = [rng.choice((rng.uniform(100, 110), round(rng.uniform(100, 102)))) for _ in range(n)]
            if n and rng.random() < 0.5:
                base[rng.randrange(n)] = rng.uniform(0, 60)    # a short outlier
            if n and rng.random() < 0.3:
                base[rng.randrange(n)] = rng.uniform(200, 900)  # a long one (three sigma: the shortest too)
            lists.append(base)
    p = subprocess.run([sys.executable, "-c", JUDGE_DRIVER], input="".join(json.dumps(x) + "\n" for x in lists),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    ref = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("[")]
    assert len(ref) == len(lists)
    got = [vote.judge_slow_rank(x) for x in lists]
    assert got == ref
    assert sum(map(bool, ref)) > len(lists) // 5   # the lists exercise the rules


# -- the wait-based costs, recomputed from the raw files

def _raw_waits(path: Path) -> dict[tuple, dict[int, float]]:
    """{(step, group, op): {rank: Wait Time in us}} of the collective ops, read straight from each
    rank's communication.json (or analysis.db's CommAnalyzerTime)."""
    out: dict[tuple, dict[int, float]] = {}
    for d in sorted(path.glob("*_ascend_pt")):
        rank = int(next(d.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        cj = d / "ASCEND_PROFILER_OUTPUT" / "communication.json"
        if cj.is_file():
            for step, kinds in json.loads(cj.read_text()).items():
                for op_group, node in (kinds.get("collective") or {}).items():
                    if op_group == "Total Op Info":
                        continue
                    op, _, group = op_group.partition("@")
                    wait = node["Communication Time Info"]["Wait Time(ms)"] * 1e3
                    out.setdefault((step.removeprefix("step"), group, op), {})[rank] = wait
        else:
            con = sqlite3.connect(d / "ASCEND_PROFILER_OUTPUT" / "analysis.db")
            for step, group, op, w, kind in con.execute(
                    "SELECT step, group_name, hccl_op_name, wait_time, type FROM CommAnalyzerTime"):
                if op != "Total Op Info" and kind == "collective":
                    out.setdefault((str(step).removeprefix("step"), group, op), {})[rank] = w * 1e3
            con.close()
    return out


def _recomputed(raw: dict[tuple, dict[int, float]]) -> dict[int, dict]:
    """Per rank: n_last and cost_to_others_us, by the definition (the smallest wait arrived last;
    each other rank waited its wait minus that one's)."""
    per: dict[int, dict] = {}
    for waits in raw.values():
        if len(waits) < 2:
            continue
        least = min(waits.values())
        last = min(r for r, w in waits.items() if w == least)
        cost = sum(w - least for w in waits.values())
        for r in waits:
            per.setdefault(r, {"n_matched": 0, "n_last": 0, "cost_to_others_us": 0.0})["n_matched"] += 1
        if cost > 0:
            per[last]["n_last"] += 1
            per[last]["cost_to_others_us"] += cost
    return per


@pytest.mark.parametrize("name", ["text_l1", "text_l2", "db_l1", "db_l2", "pp4_l2"])
def test_wait_costs_recomputed_from_raw_rows(name, ascend_sets):
    path = ascend_sets(name)
    summary, _per_rank = _job(path)
    rows = {r["rank"]: r for r in st.straggler_tables(summary["captures"])[0]}
    expect = _recomputed(_raw_waits(path))
    assert expect and set(rows) == set(expect)
    for r, e in expect.items():
        assert rows[r]["source"] == st.ASCEND_SOURCE
        assert rows[r]["n_matched"] == e["n_matched"] and rows[r]["n_last"] == e["n_last"], r
        assert rows[r]["cost_to_others_us"] == pytest.approx(e["cost_to_others_us"], rel=1e-9, abs=1e-9), r
        assert rows[r]["metric"] is None and rows[r]["is_potential_straggler"] is None
    print(name, {r: (x["n_last"], round(x["cost_to_others_us"], 1), x["worst_victim_rank"]) for r, x in rows.items()})


def test_level0_db_export_aligns_ends(ascend_sets):
    """db_l0 has no Wait Time (level 0 writes no CommAnalyzerTime): the ops of COMMUNICATION_OP with
    their ends aligned, as for Kineto; the source says so."""
    summary, per_rank = _job(ascend_sets("db_l0"))
    rows = st.straggler_tables(summary["captures"])[0]
    assert rows and {r["source"] for r in rows} == {st.ASCEND_ELAPSE_SOURCE}
    ops = {r: {x[3]: x[5] for x in b["ops"]} for r, b in per_rank.items()}
    cost = {0: 0.0, 1: 0.0}
    for op in ops[0]:
        e = {r: ops[r][op] for r in ops}
        least = min(e.values())
        cost[min(r for r in e if e[r] == least)] += sum(v - least for v in e.values())
    assert {r["rank"]: r["cost_to_others_us"] for r in rows} == pytest.approx(cost)


def _set_waits(path: Path, wait_ms) -> None:
    """Rewrite every collective op's Wait Time(ms) in each rank's communication.json: wait_ms(rank, op)."""
    for d in sorted(path.glob("*_ascend_pt")):
        rank = int(next(d.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        cj = d / "ASCEND_PROFILER_OUTPUT" / "communication.json"
        obj = json.loads(cj.read_text())
        for kinds in obj.values():
            for op_group, node in (kinds.get("collective") or {}).items():
                if op_group != "Total Op Info":
                    node["Communication Time Info"]["Wait Time(ms)"] = wait_ms(rank, op_group)
        cj.write_text(json.dumps(obj))


@pytest.mark.parametrize("name,late", [("text_l1", 0), ("text_l1", 1), ("pp4_l2", 3)])
def test_injected_straggler_is_named(name, late, ascend_sets, tmp_path):
    path = ascend_data.writable_copy(name, tmp_path / name)
    ascend_sets(name)
    _set_waits(path, lambda rank, op: 0.001 if rank == late else 30.0)
    summary, _ = _job(path)
    rows = {r["rank"]: r for r in st.straggler_tables(summary["captures"])[0]}
    assert max(rows, key=lambda r: rows[r]["cost_to_others_us"]) == late
    assert rows[late]["n_last"] == rows[late]["n_matched"] > 0
    assert all(rows[r]["n_last"] == 0 for r in rows if r != late)
    victim = rows[late]["worst_victim_rank"]
    assert victim is not None and rows[late]["worst_victim_net_us"] == rows[late]["worst_victim_cost_us"] > 0
    found = straggler_rule(summary)
    assert [f["evidence"]["rank"] for f in found] == [late], [f["title"] for f in found]
    assert found[0]["evidence"]["source"] == st.ASCEND_SOURCE


def test_balanced_job_names_nobody(ascend_sets, tmp_path):
    path = ascend_data.writable_copy("pp4_l2", tmp_path / "pp4_l2")
    ascend_sets("pp4_l2")
    _set_waits(path, lambda rank, op: 0.25)
    summary, _ = _job(path)
    rows = st.straggler_tables(summary["captures"])[0]
    assert rows and all(r["n_last"] == 0 and r["cost_to_others_us"] == 0 and r["worst_victim_rank"] is None
                        for r in rows)
    assert all(r["slow_affect_count"] == 0 for r in rows)
    assert straggler_rule(summary) == []


def test_block_is_bounded_and_kineto_rows_unchanged():
    """communication_ops keeps at most MAX_COMM_OPS ops (and says so); a job without it gets the
    Kineto rows, without the Ascend-only field."""
    rows = [{"step": 1, "type": "collective", "group": "g", "op": f"hcom_allReduce__1_{i}_1", "start_us": float(i),
             "elapse_us": 1.0, "wait_us": 0.0, "transit_us": 1.0, "sync_us": 0.0} for i in range(st.MAX_COMM_OPS + 3)]
    block = st.ascend_ops_block(rows, "communication.json")
    assert len(block["ops"]) == st.MAX_COMM_OPS and block["truncated"] and block["vote_ops"] is None
    assert st.ascend_ops_block([], "x") is None
    caps = [{"status": "ok", "rank": r, "path": str(r), "communication_ops": {"ops": "damaged"}} for r in (0, 1)]
    assert st.straggler_tables(caps) == ([], [])
