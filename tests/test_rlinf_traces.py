"""RLinf's tracer output (trace_events.jsonl) is merged and analysed like our own timeline. The
file is written here with RLinf's event format (rlinf/scheduler/manager/tracer.py @ RLinf/RLinf
a3816b5: `{"name", "cat", "ph": "B"|"E", "ts": time_ns()//1000, "pid": worker name | "driver",
"tid": "main", "args"?}` plus one `process_name` M event per process; the runner's `step` span
carries `args.step_idx` and holds sync_weights / generate_rollouts / cal_adv_and_returns /
actor_training; a worker's timed function has its root group as the category)."""
from __future__ import annotations

import json

from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.timeline.merge import write_timeline
from mindspeed_profiler.cli import main

T0 = 1_764_500_000_000_000   # wall-clock microseconds


class RLinfTracer:
    """What RLinf's Tracer.trace_begin / trace_end / _label_process append to the JSONL file."""

    def __init__(self, path):
        self.fh = open(path, "a")
        self.labeled = set()

    def record(self, event):
        self.fh.write(json.dumps(event) + "\n")

    def begin(self, pid, name, cat, ts, args=None):
        if pid not in self.labeled:
            self.labeled.add(pid)
            self.record({"name": "process_name", "ph": "M", "ts": ts, "pid": pid, "tid": "main", "args": {"name": pid}})
        event = {"name": name, "cat": cat, "ph": "B", "ts": ts, "pid": pid, "tid": "main"}
        if args is not None:
            event["args"] = args
        self.record(event)

    def end(self, pid, name, cat, ts):
        self.record({"name": name, "cat": cat, "ph": "E", "ts": ts, "pid": pid, "tid": "main"})


def write_run(path, steps=3):
    """An embodied PPO run: per step (10 ms apart) the runner's phases on the driver, the rollout
    workers' generate inside generate_rollouts, the actor workers' run_training inside
    actor_training (actor rank 1 takes 3 ms more, every step)."""
    tr = RLinfTracer(path)
    t = T0
    for step in range(steps):
        tr.begin("driver", "step", "runner", t, {"step_idx": step})
        tr.begin("driver", "sync_weights", "runner", t)
        tr.end("driver", "sync_weights", "runner", t + 500)
        tr.begin("driver", "generate_rollouts", "runner", t + 500)
        for r in (0, 1):
            tr.begin(f"RolloutGroup:{r}", "generate", "RolloutGroup", t + 600)
            tr.end(f"RolloutGroup:{r}", "generate", "RolloutGroup", t + 4600 + 100 * r)
        tr.end("driver", "generate_rollouts", "runner", t + 4800)
        tr.begin("driver", "cal_adv_and_returns", "runner", t + 4800)
        tr.end("driver", "cal_adv_and_returns", "runner", t + 5000)
        tr.begin("driver", "actor_training", "runner", t + 5000)
        for r in (0, 1):
            tr.begin(f"ActorGroup:{r}", "run_training", "ActorGroup", t + 5100)
            tr.end(f"ActorGroup:{r}", "run_training", "ActorGroup", t + 7100 + 3000 * r)
        tr.end("driver", "actor_training", "runner", t + 10200)
        tr.end("driver", "step", "runner", t + 10300)
        t += 20_000
    tr.fh.close()


def test_rlinf_run_analysed_into_iterations_and_stages(tmp_path):
    d = tmp_path / "trace"
    d.mkdir()
    write_run(d / "trace_events.jsonl")
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    (cap,) = summary["captures"]
    assert code == 0 and cap["kind"] == "rlinf_timeline" and cap["warnings"] == []
    tl = summary["timeline"]
    assert tl["n_iterations"] == 3 and [it["iteration"] for it in tl["iterations"]] == [0, 1, 2]
    it = tl["iterations"][1]
    assert it["dur_us"] == 10300
    assert it["stages"]["actor/run_training"]["wall_us"] == 5000           # 2000 and 5000 us, overlapping
    assert it["stages"]["rollout/generate"]["total_us"] == 4000 + 4100
    assert it["stages"]["sync_weights"]["wall_us"] == 500
    path = [(p["stage"], p["worker"]) for p in it["critical_path"]]
    assert path == [("sync_weights", "driver:0"), ("generate_rollouts", "driver:0"), ("cal_adv_and_returns", "driver:0"),
                    ("actor_training", "driver:0")]
    # the runner's phases enclose the workers' calls: the one that held each phase up is named
    inner = [(p["inner"]["stage"], p["inner"]["worker"]) for p in it["critical_path"] if "inner" in p]
    assert inner == [("rollout/generate", "rollout:1"), ("actor/run_training", "actor:1")]
    workers = {(r["stage"], r["worker"]): r["median_us"] for r in tl["stage_worker"]}
    assert workers[("actor/run_training", "actor:1")] == 5000 and workers[("actor/run_training", "actor:0")] == 2000
    slow = [r for r in summary["slow_ranks"] if r["flagged"]]
    assert [(r["stage"], r["rank"]) for r in slow] == [("actor/run_training", "actor:1")]


def test_merge_makes_it_perfetto_ready_without_jq(tmp_path, capsys):
    write_run(tmp_path / "trace_events.jsonl", steps=2)
    out = write_timeline(str(tmp_path))
    trace = json.loads(out.read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M"}
    assert names == {"driver", "RolloutGroup:0", "RolloutGroup:1", "ActorGroup:0", "ActorGroup:1"}
    assert sum(e.get("cat") == "iteration" for e in trace["traceEvents"]) == 2
    assert all(e["ph"] in ("X", "M") for e in trace["traceEvents"])
    assert main(["merge", str(tmp_path), "-q"]) == 0


def test_a_line_cut_by_a_crash_is_reported(tmp_path):
    write_run(tmp_path / "trace_events.jsonl", steps=1)
    with open(tmp_path / "trace_events.jsonl", "a") as fh:
        fh.write('{"name": "step", "cat": "runner", "ph": "B", "ts": 1')   # cut mid-line
    summary, code = analyse_directory(tmp_path, jobs=1, progress=False, write=False)
    (cap,) = summary["captures"]
    assert cap["status"] == "ok" and any("not a JSON event" in w for w in cap["warnings"])
