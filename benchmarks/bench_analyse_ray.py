"""Benchmark `analyse DIR --ray` at scale on a simulated Ray cluster (run by hand; the figures go to
docs/perf_analysis.md).

    python benchmarks/bench_analyse_ray.py [--captures 1200] [--nodes 3] [--scale 1] [--jobs 2] [--task-cpus 0.5] [--db]

Builds `--nodes` simulated nodes (ray.cluster_utils.Cluster on this machine), each with its own
capture directory (`$MSP_BENCH_NODE_DIR`, set per node: a node-local `./profiler_data`), and spreads
`--captures` synthetic captures over them: our layout (`actor_update/<worker>_pt/` with metadata,
whose `node` names the node that holds it) around a Kineto trace, the real GPU traces of
../shared/data/kineto (their events replicated `--scale` times when > 1). Files are hard links of two
templates: the analysis reads each one like any other file, the disk holds two.

Then, each in a fresh process (so its peak RSS is the driver's own):
  ray:   analyse_directory("$MSP_BENCH_NODE_DIR", ray=True) against the cluster;
  local: analyse_directory(all the captures linked together, jobs=--jobs), the process pool;
and reports: the bytes that came back to the driver (listings + summaries + segments, as sent:
pickled and compressed on the nodes) as a share of the trace bytes (on disk, and as JSON), the
driver's peak RSS, and both wall times. `--db` adds a run of each with --export-type db (the events
come back too).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MSP_SHARED_DATA", REPO.parent / "shared" / "data")) / "kineto"
ENV = "MSP_BENCH_NODE_DIR"

CHILD = r"""
import json, os, sys, time
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
args = json.loads(sys.argv[1])

def peak_mb():   # VmHWM: this process's own peak (ru_maxrss keeps the forking parent's across exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

t = time.perf_counter()
summary, code = analyse_directory(args["dir"], jobs=args["jobs"], html=False, progress=False, out_dir=args["out"],
                                  export_type=args["export_type"], log=lambda m: None, **args["ray"])
wall = time.perf_counter() - t
print("RESULT=" + json.dumps({"wall_s": wall, "code": code, "counts": summary["counts"], "ray": summary.get("ray"),
                              "maxrss_mb": peak_mb(),
                              "summary_json_mb": os.path.getsize(os.path.join(args["out"], "summary.json")) / 2**20}))
"""


def templates(work: Path, scale: int) -> list[Path]:
    out = []
    for k, name in enumerate(("gpu_rank0.json.gz", "gpu_rank1.json.gz")):
        dst = work / f"template{k}.pt.trace.json.gz"
        if scale > 1:
            sys.path.insert(0, str(REPO / "benchmarks"))
            from bench_analyse import scaled
            scaled(DATA / name, dst, scale)
        else:
            shutil.copy(DATA / name, dst)
        out.append(dst)
    return out


def write_captures(dirs: list[Path], node_ids: list[str], n: int, tmpl: list[Path]) -> None:
    from mindspeed_profiler.core import formats

    for i in range(n):
        k = i % len(dirs)
        pid = 10_000 + i
        cap = dirs[k] / "actor_update" / f"actor_rank{i}_step3-3_node{k}_{pid}_20261201120000{i % 1000:03d}_pt"
        cap.mkdir(parents=True)
        trace = f"actor_rank{i}.{pid}.pt.trace.json.gz"
        os.link(tmpl[i % 2], cap / trace)
        meta = {key: None for key in formats.META_KEYS}
        meta.update(schema=formats.META_SCHEMA, run_id="bench", role="actor", stage="actor_update", rank=i,
                    world_size=n, steps=[3, 3], backend="torch", device="cuda", host=f"node{k}", pid=pid,
                    node={"host": f"node{k}", "ray_node_id": node_ids[k]}, status="ok", errors=[],
                    trace_files=[trace], notes=[])
        (cap / formats.META_FILE).write_text(json.dumps(meta))


def child(dir_: str, out: Path, jobs: int, export_type: str, ray: dict, env: dict) -> dict:
    args = {"dir": dir_, "out": str(out), "jobs": jobs, "export_type": export_type, "ray": ray}
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True, text=True, env=env,
                       cwd=REPO, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    return json.loads(p.stdout.split("RESULT=")[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--captures", type=int, default=1200)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--scale", type=int, default=1, help="replicate each template trace's events this many times")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="the local pool's workers")
    ap.add_argument("--node-cpus", type=float, default=1.0, help="logical CPUs of each simulated node")
    ap.add_argument("--task-cpus", type=float, default=0.5)
    ap.add_argument("--db", action="store_true", help="also measure --export-type db (events come back)")
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from mindspeed_profiler.analysis.parsing.jsonscan import expanded_size

    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench-ray-"))
    dirs = [work / f"node{k}" / "profiler_data" for k in range(a.nodes)]
    for d in dirs:
        d.mkdir(parents=True)
    t = time.perf_counter()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": a.node_cpus, "env_vars": {ENV: str(dirs[0])},
                                                      "include_dashboard": False})
    for k in range(1, a.nodes):
        c.add_node(num_cpus=a.node_cpus, env_vars={ENV: str(dirs[k])})
    c.wait_for_nodes()
    print(f"cluster of {a.nodes} nodes up in {time.perf_counter() - t:.1f} s", flush=True)
    try:
        ray.init(address=c.address, log_to_driver=False)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as Pin

        @ray.remote(num_cpus=0)
        def node_env():
            return ray.get_runtime_context().get_node_id(), os.environ[ENV]
        ids = dict(ray.get([node_env.options(scheduling_strategy=Pin(n["NodeID"], soft=False)).remote()
                            for n in ray.nodes() if n["Alive"]], timeout=120))
        ray.shutdown()
        node_ids = [next(i for i, d in ids.items() if d == str(dirs[k])) for k in range(a.nodes)]

        tmpl = templates(work, a.scale)
        t = time.perf_counter()
        write_captures(dirs, node_ids, a.captures, tmpl)
        together = work / "together"
        for d in dirs:
            shutil.copytree(d, together, dirs_exist_ok=True, copy_function=os.link)
        on_disk = sum(os.path.getsize(p) for p in tmpl[:1]) * ((a.captures + 1) // 2) + \
            os.path.getsize(tmpl[1]) * (a.captures // 2)
        as_json = expanded_size(tmpl[0]) * ((a.captures + 1) // 2) + expanded_size(tmpl[1]) * (a.captures // 2)
        print(f"{a.captures} captures written in {time.perf_counter() - t:.1f} s: {on_disk / 2**20:.1f} MB on disk, "
              f"{as_json / 2**20:.1f} MB of JSON", flush=True)

        env = {k: v for k, v in os.environ.items() if k != ENV}
        rows = []
        for export_type in ("text", "db") if a.db else ("text",):
            for mode in ("local", "ray"):
                out = work / f"out_{mode}_{export_type}"
                if mode == "ray":
                    r = child(f"${ENV}", out, a.jobs, export_type,
                              {"ray": True, "ray_address": c.address, "ray_task_cpus": a.task_cpus}, env)
                else:
                    r = child(str(together), out, a.jobs, export_type, {}, env)
                assert r["code"] == 0 and r["counts"]["ok"] == a.captures, r["counts"]
                r.update(mode=mode, export_type=export_type)
                rows.append(r)
                back = r["ray"]["returned_bytes"]["total"] if r["ray"] else None
                print(json.dumps({k: v for k, v in r.items() if k != "ray"}), "returned_bytes", back, flush=True)
    finally:
        c.shutdown()
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\n{a.captures} captures over {a.nodes} simulated nodes ({a.node_cpus:g} CPU each, --ray-task-cpus "
          f"{a.task_cpus:g}); traces: {on_disk / 2**20:.1f} MB on disk (gzip), {as_json / 2**20:.1f} MB of JSON "
          f"(scale {a.scale}); local pool -j {a.jobs}\n")
    print("| export | mode | wall s | driver peak RSS MB | back to the driver MB | share of on-disk bytes | share of JSON bytes |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["ray"]:
            b = r["ray"]["returned_bytes"]
            back = f"{b['total'] / 2**20:.2f} (listings {b['listings'] / 2**20:.2f}, summaries {b['summaries'] / 2**20:.2f})"
            share = f"{100 * b['total'] / on_disk:.2f}%", f"{100 * b['total'] / as_json:.3f}%"
        else:
            back, share = "-", ("-", "-")
        print(f"| {r['export_type']} | {r['mode']} | {r['wall_s']:.1f} | {r['maxrss_mb']:.0f} | {back} | {share[0]} | {share[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
