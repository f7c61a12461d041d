"""`analyse DIR --ray` on a simulated 3-node Ray cluster (ray.cluster_utils.Cluster), each node with
its own capture directory: DIR is `$MSP_TEST_NODE_DIR`, which every node's raylet (and so its
workers) sets to a different directory, as a node-local `./profiler_data` would differ. Each node
also has a custom resource, and its torch captures and timeline segments are written by a real
training loop (IntegratedProfiler + the tracer) run in a Ray task on that node, so their metadata
carries that node's Ray node id.

Checked: every capture is analysed on the node that holds it (a wrapped analysis function records
which node opened which files), the summary equals a local analysis of all the captures copied
together, one corrupt capture fails alone (through the CLI, exit code 1), a shared directory seen by
every node is analysed once per capture on the node that wrote it, and a node that leaves mid-run
fails only its captures.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray")
from profiler_testutil import train  # noqa: E402 - pickled by value into the node tasks (see the fixture)

ENV = "MSP_TEST_NODE_DIR"
N_NODES = 3
VOLATILE = ("created", "elapsed_s", "root", "ray")


class Recorder:
    """An analysis function that records, per call, the Ray node it ran on and what it opened, then
    analyses as usual (pickled by value to the workers: see the fixture)."""

    def __init__(self, log: str, slow_marker: str | None = None):
        self.log, self.slow_marker = log, slow_marker

    def __call__(self, root, cap_dict, top_n, want_events):
        import ray as _ray

        from mindspeed_profiler.analysis.pipeline.capture import analyse_capture

        node = _ray.get_runtime_context().get_node_id() if _ray.is_initialized() else None
        rec = {"node": node, "root": str(root), "path": cap_dict["path"], "files": cap_dict["files"], "pid": os.getpid()}
        with open(self.log, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        if self.slow_marker and self.slow_marker in cap_dict["path"]:
            time.sleep(600)   # until its node is removed
        return analyse_capture(root, cap_dict, top_n, want_events)


def records(log: Path) -> list[dict]:
    return [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []


def make_captures(rank: int, world: int) -> dict:
    """Runs in a task on one node: a real training loop with the integrated profiler (actor_update
    captured at iteration 2) and the tracer on, writing under that node's own directory."""
    import ray as _ray

    from mindspeed_profiler import IntegratedProfiler, load_config, tracing

    d = Path(os.environ[ENV])
    cfg = load_config({
        "integrated": {"profile": True, "profile_save_path": str(d), "backend": "torch", "stage": "actor_update",
                       "profile_step_start": 2, "profile_step_end": 3},
        "tracer": {"enable": True, "output_dir": str(d / "timeline")},
    })
    tracing.init_tracer(cfg, role="actor", rank=rank)
    try:
        train(IntegratedProfiler(cfg, role="actor", rank=rank, world_size=world), 3)
    finally:
        tracing.shutdown_tracer()
    return {"node": _ray.get_runtime_context().get_node_id(), "dir": str(d)}


def place_samples(shared_data: Path, dirs: list[Path]) -> None:
    """The shared real traces, spread over the nodes' directories (written by the test, read by the nodes)."""
    k = shared_data / "kineto"
    shutil.copy(k / "gpu_rank0.json.gz", dirs[0] / "gpu_rank0.json.gz")
    shutil.copy(k / "gpu_rank1.json.gz", dirs[1] / "gpu_rank1.json.gz")
    asc = dirs[1] / "all" / "actor_rank1_step1-1_host_99_20261130120000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    asc.mkdir(parents=True)
    for n in ("trace_view.json", "kernel_details.csv"):
        shutil.copy(shared_data / "ascend" / n, asc / n)
    shutil.copy(shared_data / "ascend" / "cluster_step_trace_time.csv", dirs[1] / "cluster_step_trace_time.csv")
    shutil.copy(k / "cpu_only_rank34.pt.trace.json.gz", dirs[2] / "cpu_only_rank34.pt.trace.json.gz")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, shared_data):
    from ray import cloudpickle
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    import profiler_testutil

    base = tmp_path_factory.mktemp("ray_nodes")
    dirs = [base / f"node{k}" / "profiler_data" for k in range(N_NODES)]
    for d in dirs:
        d.mkdir(parents=True)
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"msp_node0": 1}, "env_vars": {ENV: str(dirs[0])}, "include_dashboard": False})
    for k in range(1, N_NODES):
        c.add_node(num_cpus=1, resources={f"msp_node{k}": 1}, env_vars={ENV: str(dirs[k])})
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    for mod in (sys.modules[__name__], profiler_testutil):   # the tests dir is not on the workers' path
        cloudpickle.register_pickle_by_value(mod)
    try:
        by_res = {k: n["NodeID"] for n in ray.nodes() if n["Alive"] for k in range(N_NODES)
                  if f"msp_node{k}" in n["Resources"]}
        assert len(by_res) == N_NODES
        task = ray.remote(make_captures)
        made = ray.get([task.options(num_cpus=0.5, resources={f"msp_node{k}": 0.01},
                                     scheduling_strategy=NodeAffinitySchedulingStrategy(by_res[k], soft=False))
                        .remote(k, N_NODES) for k in range(N_NODES)], timeout=180)
        assert [m["node"] for m in made] == [by_res[k] for k in range(N_NODES)]
        assert [m["dir"] for m in made] == [str(d) for d in dirs]   # each node saw its own directory
        place_samples(shared_data, dirs)
        yield {"cluster": c, "dirs": dirs, "node_ids": [by_res[k] for k in range(N_NODES)], "base": base}
    finally:
        for mod in (sys.modules[__name__], profiler_testutil):
            cloudpickle.unregister_pickle_by_value(mod)
        ray.shutdown()
        c.shutdown()


def normalised(summary: dict) -> dict:
    s = copy.deepcopy(summary)
    for k in VOLATILE:
        s.pop(k, None)
    s["options"].pop("jobs", None)
    for c in s["captures"]:
        c.pop("analyse_s", None)
    return s


def test_each_capture_is_analysed_on_its_node_and_the_result_equals_a_local_analysis(cluster, tmp_path):
    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

    dirs, ids = cluster["dirs"], cluster["node_ids"]
    log = tmp_path / "opened.jsonl"
    summary, code = analyse_directory(f"${ENV}", ray=True, jobs=2, export_type="db", progress=False,
                                      out_dir=tmp_path / "ray_out", fn=Recorder(str(log)), log=lambda m: None)
    assert code == 0, [(c["path"], c.get("error")) for c in summary["captures"]]

    # where each capture was opened: every file of node k's directory by a task on node k only
    recs = records(log)
    on_nodes = [r for r in recs if any(r["root"].startswith(str(d)) for d in dirs)]
    for r in on_nodes:
        k = next(k for k, d in enumerate(dirs) if r["root"].startswith(str(d)))
        assert r["node"] == ids[k], r
        assert all((Path(r["root"]) / f).is_file() for f in r["files"])
    per_node = {k: sorted(r["path"] for r in on_nodes if r["node"] == ids[k]) for k in range(N_NODES)}
    assert [len(per_node[k]) for k in range(N_NODES)] == [2, 4, 2]   # own capture + samples of each node
    assert sum(len(v) for v in per_node.values()) == len(on_nodes)   # each analysed once
    # the timeline is the one thing analysed on the driver: merged from the three nodes' segments
    (tl_rec,) = [r for r in recs if r not in on_nodes]
    assert tl_rec["path"] == "timeline"
    tl = summary["timeline"]
    assert {w["worker"] for w in tl["stage_worker"]} == {f"actor:{k}" for k in range(N_NODES)}
    assert tl["n_iterations"] == 3

    # the metadata says where each own capture was written; the analysis agrees (no warning)
    own = [c for c in summary["captures"] if c["kind"] == "torch"]
    assert len(own) == N_NODES
    for c in own:
        k = c["rank"]
        assert c["meta"]["node"]["ray_node_id"] == ids[k]
        assert per_node[k].count(c["path"]) == 1
        assert not [w for w in c["warnings"] if "analysed on" in w]
    block = summary["ray"]
    assert block["not_where_written"] == 0 and block["shared_captures"] == 0 and block["path_collisions"] == 0
    assert sorted(n["node_id"] for n in block["nodes"]) == sorted(ids)
    assert all(n["dir_found"] and n["failed"] == 0 for n in block["nodes"])
    assert block["returned_bytes"]["total"] == sum(n["returned_bytes"] for n in block["nodes"])
    assert 0 < block["returned_bytes"]["summaries"]
    assert (tmp_path / "ray_out" / "summary.json").is_file() and (tmp_path / "ray_out" / "analysis.db").is_file()
    assert (tmp_path / "ray_out" / "report.html").is_file()

    # the same captures copied together and analysed here: the same summary
    together = tmp_path / "together"
    for d in dirs:
        shutil.copytree(d, together, dirs_exist_ok=True)
    local, lcode = analyse_directory(together, jobs=2, export_type="db", progress=False)
    assert lcode == 0
    assert normalised(summary) == normalised(local)
    import sqlite3
    q = "SELECT count(*), sum(dur_us) FROM events"
    assert (sqlite3.connect(tmp_path / "ray_out" / "analysis.db").execute(q).fetchone()
            == sqlite3.connect(together / "analysis" / "analysis.db").execute(q).fetchone())


def test_a_corrupt_capture_on_one_node_fails_alone_through_the_cli(cluster, tmp_path):
    """Also a raw Ascend capture on node 0: its prepare step runs there, and without torch_npu + CANN
    there it is `unparsed`, saying where it lies."""
    d2 = cluster["dirs"][2]
    bad = d2 / "corrupt_rank9.pt.trace.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00 this is not gzip data")
    raw = cluster["dirs"][0] / "all" / "actor_rank0_step1-1_host_1_20261130120000000_ascend_pt"
    (raw / "FRAMEWORK").mkdir(parents=True)
    (raw / "FRAMEWORK" / "torch.op_range").write_bytes(b"\0" * 64)
    out = tmp_path / "cli_out"
    env = {k: v for k, v in os.environ.items() if k != ENV}
    try:
        # DIR names a variable the driver lacks: the outputs need -o (a usage error without it)
        p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.analyse", f"${ENV}", "--ray", "--address",
                            cluster["cluster"].address, "-q"], env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 2 and "give -o" in p.stderr
        p = subprocess.run([sys.executable, "-m", "mindspeed_profiler.analyse", f"${ENV}", "--ray", "--address",
                            cluster["cluster"].address, "--ray-task-cpus", "0.25", "-o", str(out), "-q"],
                           env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    finally:
        bad.unlink()
        shutil.rmtree(raw)
    assert p.returncode == 1, p.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    failed = [c for c in summary["captures"] if c["status"] == "failed"]
    assert [c["path"] for c in failed] == [bad.name]
    assert cluster["node_ids"][2][:8] in failed[0]["error"]   # says which node holds it
    (unparsed,) = [c for c in summary["captures"] if c["status"] == "unparsed"]
    assert unparsed["kind"] == "ascend_raw" and "torch_npu" in unparsed["error"]
    assert str(raw) in unparsed["error"] and cluster["node_ids"][0][:8] in unparsed["error"]
    assert summary["counts"] == {"found": 11, "ok": 9, "failed": 1, "unparsed": 1}
    (n2,) = [n for n in summary["ray"]["nodes"] if n["node_id"] == cluster["node_ids"][2]]
    assert n2["failed"] == 1 and summary["ray"]["task_cpus"] == 0.25
    assert ray.is_initialized()   # the CLI disconnected its own session only; the cluster is still up
    assert len([n for n in ray.nodes() if n["Alive"]]) == N_NODES


def test_a_shared_directory_is_analysed_once_per_capture_where_it_was_written(cluster, tmp_path):
    """Every node sees the same directory (shared storage): each capture is analysed once, on the
    node its metadata names."""
    from mindspeed_profiler.analysis.pipeline.batch import RunNotFound, analyse_directory

    shared = cluster["base"] / "shared"
    for d in cluster["dirs"]:
        shutil.copytree(d, shared, dirs_exist_ok=True, ignore=shutil.ignore_patterns("analysis"))
    log = tmp_path / "opened.jsonl"
    summary, code = analyse_directory(shared, ray=True, jobs=2, progress=False, html=False,
                                      out_dir=tmp_path / "out", fn=Recorder(str(log)), log=lambda m: None)
    assert code == 0
    recs = [r for r in records(log) if r["root"] == str(shared)]
    assert len(recs) == len({r["path"] for r in recs}) == summary["counts"]["found"] - 1   # all but the timeline
    ids = cluster["node_ids"]
    for c in summary["captures"]:
        if c["kind"] == "torch":
            (r,) = [r for r in recs if r["path"] == c["path"]]
            assert r["node"] == ids[c["rank"]] == c["meta"]["node"]["ray_node_id"]
    block = summary["ray"]
    assert block["shared_captures"] == len(recs) and block["not_where_written"] == 0
    local, _ = analyse_directory(shared, jobs=2, progress=False, html=False, out_dir=tmp_path / "local")
    assert normalised(summary) == normalised(local)
    with pytest.raises(RunNotFound, match="no capture of run 'nope'"):   # --run, as locally
        analyse_directory(shared, ray=True, run="nope", progress=False, write=False, log=lambda m: None)


def test_a_node_that_leaves_fails_only_its_captures(cluster, tmp_path, shared_data):
    """Runs last: a fourth node joins with its own directory, then is removed while its capture is
    being analysed."""
    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

    c = cluster["cluster"]
    d3 = cluster["base"] / "node3" / "profiler_data"
    d3.mkdir(parents=True)
    shutil.copy(shared_data / "kineto" / "cpu_only_rank34.pt.trace.json.gz", d3 / "slow_rank3.pt.trace.json.gz")
    node3 = c.add_node(num_cpus=1, resources={"msp_node3": 1}, env_vars={ENV: str(d3)})
    c.wait_for_nodes()
    log = tmp_path / "opened.jsonl"
    got: dict = {}

    def analyse():
        got["summary"], got["code"] = analyse_directory(f"${ENV}", ray=True, jobs=2, progress=False, html=False,
                                                        out_dir=tmp_path / "out", log=lambda m: None,
                                                        fn=Recorder(str(log), slow_marker="slow_rank3"))
    t = threading.Thread(target=analyse, daemon=True)
    t.start()
    deadline = time.monotonic() + 90
    while not any("slow_rank3" in r["path"] for r in records(log)):
        assert time.monotonic() < deadline, "the slow capture never started"
        time.sleep(0.2)
    c.remove_node(node3, allow_graceful=False)
    t.join(90)
    assert not t.is_alive()
    summary = got["summary"]
    assert got["code"] == 1
    failed = [x for x in summary["captures"] if x["status"] != "ok"]
    assert [x["path"] for x in failed] == ["slow_rank3.pt.trace.json.gz"]
    assert "left the cluster" in failed[0]["error"], failed[0]["error"]
    (n3,) = [n for n in summary["ray"]["nodes"] if n["dir"] == str(d3)]
    assert n3["failed"] == 1 and not n3["alive"]
    assert summary["counts"]["ok"] == 9
