"""The launcher and the launch settings, without Ray: the per-actor runtime_env, then the launcher
run as Ray would run it (`<python> -m mindspeed_profiler.system.launch <token> -- <python> <args>`)
around a small worker, with fake `nsys`, `rocprof-sys-python` and `msprof` on PATH (scripts that
record their argv and environment, run the rest of the command, and write a report only after the
child exited normally), real py-spy, a missing tool and a tool that cannot start."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mindspeed_profiler.core import formats
from mindspeed_profiler import load_config
from mindspeed_profiler.system.finish import wait_for_reports
from mindspeed_profiler.system.launch import MODULE, plan_launch, split_argv
from mindspeed_profiler.system.regroup import MODULE as REGROUP
from mindspeed_profiler.runtime.system_settings import group_selected, unmatched_groups, worker_runtime_env
from mindspeed_profiler.system.spec import WorkerSpec
from conftest import REPO_ROOT

FAKE_TOOL = r'''#!{python}
"""A fake {tool}: records argv and environment, runs the wrapped command, writes its report only
after the command exited normally (as nsys / rocprof-sys / msprof do)."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

tool = Path(sys.argv[0]).name
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print(tool + " fake 1.0")
    sys.exit(0)
log = os.environ.get("FAKE_TOOL_LOG")
if tool == "nsys" and args[:1] == ["stats"]:               # nsys stats ... --output <prefix> <report>
    prefix = args[args.index("--output") + 1]
    Path(prefix + "_cuda_gpu_kern_sum.csv").write_text(
        "Time (%),Total Time (ns),Instances,Avg (ns),Name\n70.0,700,7,100,gemm_kernel\n30.0,300,3,100,softmax\n")
    Path(prefix + "_nvtx_sum.csv").write_text("Time (%),Total Time (ns),Instances,Range\n100,900,2,:actor_update\n")
    sys.exit(0)
if tool == "msprof-analyze":                                # msprof-analyze -m all -d <dir> -o <out>
    out = Path(args[args.index("-o") + 1]) / "cluster_analysis_output"
    out.mkdir(parents=True)
    (out / "cluster_step_trace_time.csv").write_text("Step,Type,Index,Computing,Communication(Not Overlapped),Free\n,rank,0,10,2,1\n")
    sys.exit(0)
if tool == "nsys":
    assert args[0] == "profile", args
    i, opts = 1, []
    while i < len(args) and args[i].startswith("-"):
        opts.append(args[i]); i += 1
        if not args[i - 1].startswith("--"):
            opts.append(args[i]); i += 1
    cmd = args[i:]
    report = Path(next(t for t in opts if t.startswith("--output="))[len("--output="):] + ".nsys-rep")
elif tool == "rocprof-sys-python":
    cmd = args[args.index("--") + 1:]
    report = Path(os.environ["ROCPROFSYS_OUTPUT_PATH"]) / (os.environ.get("ROCPROFSYS_OUTPUT_PREFIX", "") + "wall_clock.json")
else:  # msprof --output=<dir> --key=value ... <app>
    i = 0
    while args[i].startswith("--"):
        i += 1
    cmd = args[i:]
    report = Path(next(t for t in args[:i] if t.startswith("--output="))[len("--output="):]) / "PROF_000001_fake" / "data.json"
if log:
    keep = ("ROCPROFSYS_", "MINDSPEED_PROFILER", "FAKE_", "USER_")
    Path(log).mkdir(parents=True, exist_ok=True)
    (Path(log) / f"{{tool}}.{{os.getpid()}}.json").write_text(json.dumps({{
        "tool": tool, "argv": sys.argv, "command": cmd, "pid": os.getpid(),
        "env": {{k: v for k, v in os.environ.items() if k.startswith(keep)}}}}))
child = subprocess.Popen(cmd)
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda s, f: child.send_signal(s))
rc = child.wait()
if log:  # why a report is missing: the wrapped process's exit status (negative: the signal)
    (Path(log) / f"{{tool}}.{{os.getpid()}}.exit").write_text(str(rc))
if rc == 0:
    time.sleep(float(os.environ.get("FAKE_REPORT_DELAY_S", "0")))  # a real tool takes a while to write it
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({{"fake": tool, "child_exit": rc}}))
sys.exit(rc)
'''
FAKE_TOOLS = ("nsys", "rocprof-sys-python", "msprof", "msprof-analyze")


def write_script_tool(bin_dir: Path, name: str, script: str) -> Path:
    """`bin_dir/name`: an executable holding `script` (a tool that misbehaves); returns bin_dir."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / name).write_text(script)
    (bin_dir / name).chmod(0o755)
    return bin_dir


def write_fake_tools(bin_dir: Path, tools=FAKE_TOOLS) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        path = bin_dir / tool
        path.write_text(FAKE_TOOL.format(python=sys.executable, tool=tool))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


def tool_logs(log_dir: Path, tool: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(log_dir.glob(f"{tool}.*.json"))]


# ------------------------------------------------------------------------------ launch settings (driver)

def cfg(tmp_path, **system):
    return load_config({"integrated": {"profile_save_path": str(tmp_path / "prof")},
                        "system": {"enabled": True, "worker_groups": ["actor"], **system}}, check_paths=False)


def test_runtime_env_wraps_through_the_launcher(tmp_path):
    c = cfg(tmp_path, backend="rocprof_sys", args={"T": "hip"}, env={"ROCPROFSYS_OUTPUT_PREFIX": "mine_", "USER_X": 1})
    env = worker_runtime_env(c, "actor", 1, python="/opt/my python/bin/python3")
    tokens = shlex.split(env["py_executable"])    # Ray runs it through `bash -c "exec <py_executable> <args>"`
    assert tokens[:3] == ["/opt/my python/bin/python3", "-m", MODULE] and tokens[4:] == ["--", "/opt/my python/bin/python3"]
    spec = WorkerSpec.decode(tokens[3])
    assert (spec.backend, spec.group, spec.rank, spec.output_dir) == ("rocprof_sys", "actor", 1, str(tmp_path / "prof" / "system"))
    assert env["env_vars"][formats.SYSTEM_ENV] == tokens[3]
    # derived from the output dir; the user's env wins
    assert env["env_vars"]["ROCPROFSYS_OUTPUT_PATH"] == str(tmp_path / "prof" / "system" / "actor_rank1.rocprof-sys")
    assert env["env_vars"]["ROCPROFSYS_OUTPUT_PREFIX"] == "mine_" and env["env_vars"]["USER_X"] == "1"
    assert spec.env["ROCPROFSYS_OUTPUT_PREFIX"] == "mine_"   # recorded in the metadata as set


@pytest.mark.parametrize("system,group,aliases,wrapped", [
    ({"worker_groups": ["actor"]}, "actor", (), True),
    ({"worker_groups": ["actor"]}, "reference", (), False),
    ({"worker_groups": ["ActorGroup"]}, "actor", ("ActorGroup",), True),       # the class-style name, mapped
    ({"worker_groups": "all"}, "reference", (), True),
    ({"worker_groups": None}, "actor", (), False),
    ({"worker_groups": []}, "actor", (), False),
    ({"worker_groups": ["actor"], "enabled": False}, "actor", (), False),      # off: nothing wrapped
])
def test_which_groups_are_wrapped(tmp_path, system, group, aliases, wrapped):
    c = cfg(tmp_path, backend="py_spy", **system)
    assert (worker_runtime_env(c, group, 0, aliases=aliases) is not None) is wrapped
    assert worker_runtime_env(load_config({}), "actor", 0) is None   # no system section


def test_unmatched_group_names():
    started = {"actor": ("ActorGroup",), "reference": ("ReferenceGroup",)}
    assert unmatched_groups(("ActorGroup", "RolloutGroup", "reference"), started) == ["RolloutGroup"]
    assert unmatched_groups("all", started) == [] and unmatched_groups(None, started) == []
    assert group_selected(("ActorGroup",), "actor", ("ActorGroup",)) and not group_selected((), "actor")


def test_plan_launch_and_argv():
    spec = WorkerSpec("nsight", "actor", 0, "/out", steps=(3,))
    plan = plan_launch(spec, ["py", "w.py"], which=lambda t: None, host="node-7")
    assert not plan.wrapped and plan.argv == ["py", "w.py"]
    assert "nsys not found on PATH" in plan.reason and "on node node-7 (group actor, rank 0)" in plan.reason
    plan = plan_launch(spec, ["py", "w.py"], which=lambda t: f"/bin/{t}")
    # the worker's script runs through regroup (a process group of its own, away from the tool's)
    assert plan.wrapped and plan.argv[:2] == ["/bin/nsys", "profile"] and plan.argv[-4:] == ["py", "-m", REGROUP, "w.py"]
    rocprof = plan_launch(WorkerSpec("rocprof_sys", "actor", 0, "/out"), ["py", "w.py"], which=lambda t: f"/bin/{t}")
    assert rocprof.argv[-5:] == ["--", "py", "-m", REGROUP, "w.py"]   # a wrapper around the worker is kept out of its group too
    assert split_argv(["tok", "--", "py", "a"]) == ("tok", ["py", "a"])
    with pytest.raises(ValueError):
        split_argv(["tok", "py"])


# ------------------------------------------------------------------------------ the launcher, run for real

WORKER = '''import json, os, sys, time
out = sys.argv[1]
json.dump({"pid": os.getpid(), "status": os.environ.get("MINDSPEED_PROFILER_SYSTEM_STATUS"),
           "argv": sys.argv}, open(out, "w"))
t = time.time()
while time.time() - t < float(os.environ.get("FAKE_WORKER_S", "0.2")):
    pass
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
'''


def launch(tmp_path, c, path_dirs, *worker_args, group="actor", rank=0, worker_s: float = 0.2):
    """Run the launcher as Ray would, around WORKER (busy for `worker_s`); returns (marker the worker
    wrote, stderr, metadata)."""
    env_cfg = worker_runtime_env(c, group, rank)
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    marker = tmp_path / f"ran_{group}_{rank}.json"
    env = dict(os.environ, **env_cfg["env_vars"], PYTHONPATH=str(REPO_ROOT), FAKE_TOOL_LOG=str(tmp_path / "log"),
               FAKE_WORKER_S=str(worker_s), PATH=os.pathsep.join(map(str, path_dirs)))
    cmd = shlex.split(env_cfg["py_executable"]) + [str(script), str(marker), *worker_args]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    spec = WorkerSpec.decode(env_cfg["env_vars"][formats.SYSTEM_ENV])
    meta, = wait_for_reports([spec.meta_path], timeout_s=60)
    return (json.loads(marker.read_text()) if marker.exists() else None), out, meta


def base_path():
    return [Path(sys.executable).parent, "/usr/bin", "/bin"]


@pytest.mark.parametrize("backend,system,report", [
    ("nsight", {"options": {"t": "cuda,nvtx"}, "steps": [2, 4]}, "actor_rank0.nsys-rep"),
    ("rocprof_sys", {"args": {"T": "hip"}}, "actor_rank0.rocprof-sys"),
    ("msprof", {"options": {"aic-metrics": "PipeUtilization"}}, "actor_rank0.msprof"),
])
def test_launcher_wraps_with_each_fake_tool(tmp_path, backend, system, report):
    bin_dir = write_fake_tools(tmp_path / "bin")
    c = cfg(tmp_path, backend=backend, **system)
    ran, out, meta = launch(tmp_path, c, [bin_dir, *base_path()])
    assert out.returncode == 0, out.stderr
    assert json.loads(ran["status"])["status"] == "wrapped"
    tool = {"nsight": "nsys", "rocprof_sys": "rocprof-sys-python", "msprof": "msprof"}[backend]
    rec, = tool_logs(tmp_path / "log", tool)
    assert rec["command"][-2:] == [str(tmp_path / "worker.py"), ran["argv"][1]]   # the worker's own command, last
    assert rec["argv"][1:] == meta["command"][1:] and meta["tool_path"] == str(bin_dir / tool)
    sysdir = tmp_path / "prof" / "system"
    assert meta["status"] == "complete" and meta["report"] == report and (sysdir / report).exists()
    assert meta["version"] == f"{tool} fake 1.0" and meta["host"] == socket.gethostname()
    assert meta["steps"] == system.get("steps") and meta["group"] == "actor" and meta["rank"] == 0
    assert tuple(k for k in meta if k != "meta_path") == formats.SYSTEM_META_KEYS
    assert meta["report_bytes"] > 0 and meta["ended_wall_ns"] > meta["launched_wall_ns"]
    assert rec["env"][formats.SYSTEM_ENV]


def test_launcher_with_real_py_spy(tmp_path):
    if not shutil.which("py-spy", path=os.pathsep.join(map(str, base_path()))):
        pytest.skip("py-spy not installed")
    c = cfg(tmp_path, backend="py_spy", args={"rate": 200})
    # a worker of 1 s, not 0.2: py-spy must find the interpreter and sample it, on a busy box too
    ran, out, meta = launch(tmp_path, c, base_path(), worker_s=1.0)
    assert out.returncode == 0, out.stderr
    assert meta["status"] == "complete" and meta["version"].startswith("py-spy")
    events = json.loads((tmp_path / "prof" / "system" / "actor_rank0.py-spy.json").read_text())
    assert {e["pid"] for e in events} == {ran["pid"]}     # py-spy sampled the worker itself
    assert "--idle" in meta["command"] and "--rate=200" in meta["command"]


def test_missing_tool_runs_the_worker_unwrapped(tmp_path):
    c = cfg(tmp_path, backend="nsight")
    ran, out, meta = launch(tmp_path, c, base_path())   # no nsys on PATH
    assert out.returncode == 0 and ran is not None
    assert json.loads(ran["status"])["status"] == "unwrapped"
    assert meta["status"] == "unwrapped" and "nsys not found on PATH" in meta["reason"]
    assert f"on node {socket.gethostname()}" in meta["reason"]
    assert "group actor, rank 0" in meta["reason"] and meta["tool_path"] is None
    assert out.stderr.count("process-level capture: nsys not found") == 1
    assert not (tmp_path / "prof" / "system" / "actor_rank0.nsys-rep").exists()


def test_tool_that_cannot_start_runs_the_worker_unwrapped(tmp_path):
    bin_dir = write_script_tool(tmp_path / "bin", "nsys", "#!/nonexistent/interpreter\n")
    ran, out, meta = launch(tmp_path, cfg(tmp_path, backend="nsight"), [bin_dir, *base_path()])
    assert out.returncode == 0 and ran is not None
    assert meta["status"] == "unwrapped" and "could not start" in meta["reason"]


def test_failed_worker_leaves_an_incomplete_report(tmp_path):
    bin_dir = write_fake_tools(tmp_path / "bin")
    ran, out, meta = launch(tmp_path, cfg(tmp_path, backend="nsight"), [bin_dir, *base_path()], "3")
    assert out.returncode == 3 and ran is not None
    assert meta["status"] == "incomplete" and "exited without writing actor_rank0.nsys-rep" in meta["reason"]


def test_a_rerun_replaces_the_previous_files(tmp_path):
    bin_dir = write_fake_tools(tmp_path / "bin")
    sysdir = tmp_path / "prof" / "system"
    sysdir.mkdir(parents=True)
    (sysdir / "actor_rank0.nsys-rep").write_text("old")
    (sysdir / "actor_rank0.iterations.jsonl").write_text("old\n")
    (sysdir / "actor_rank1.nsys-rep").write_text("another worker's")
    _, _, meta = launch(tmp_path, cfg(tmp_path, backend="nsight"), [bin_dir, *base_path()])
    assert meta["status"] == "complete" and "fake" in (sysdir / "actor_rank0.nsys-rep").read_text()
    assert not (sysdir / "actor_rank0.iterations.jsonl").exists()
    assert (sysdir / "actor_rank1.nsys-rep").read_text() == "another worker's"


def test_damaged_settings_still_start_the_worker(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    marker = tmp_path / "ran.json"
    out = subprocess.run([sys.executable, "-m", MODULE, "bm90IGpzb24=", "--", sys.executable, str(script), str(marker)],
                         env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and marker.exists() and "unreadable process-level capture settings" in out.stderr


def test_wait_for_reports_is_bounded(tmp_path):
    running = tmp_path / "a.system.json"
    running.write_text(json.dumps({"status": "running"}))
    timeout, missing = wait_for_reports([running, tmp_path / "b.system.json"], timeout_s=0.3, poll_s=0.05)
    assert timeout["status"] == "timeout" and timeout["last_status"] == "running"
    assert missing["status"] == "missing"


def test_disabled_capture_wraps_nothing_and_creates_nothing(tmp_path):
    from mindspeed_profiler.integrations.ray import SystemCapture

    for system in ({"backend": "nsight", "enabled": False, "worker_groups": "all"}, None):
        block = {"integrated": {"profile_save_path": str(tmp_path / "prof")}}
        if system:
            block["system"] = system
        capture = SystemCapture(load_config(block))
        assert not capture.enabled and capture.runtime_env("actor", 0) is None
        capture.add("actor", [object(), object()])
        assert capture.check() == [] and capture.finish() == []
    assert not (tmp_path / "prof").exists()


def test_group_names_no_group_answers_to_are_warned_about_at_the_end(tmp_path, runtime_warnings):
    from mindspeed_profiler.integrations.ray import SystemCapture

    capture = SystemCapture(cfg(tmp_path, backend="py_spy", worker_groups=["ActorGroup", "RolloutGroup"]))
    assert capture.runtime_env("actor", 0, aliases=("ActorGroup",)) is not None
    capture.add("actor", [], aliases=("ActorGroup",))
    capture.add("reference", [], aliases=("ReferenceGroup",))
    assert capture.check() == [] and runtime_warnings() == []
    capture.finish()
    said, = runtime_warnings("RolloutGroup")
    assert "no worker group of this run has that name" in said and "actor (ActorGroup)" in said
    run = json.loads((tmp_path / "prof" / formats.RUN_FILE).read_text())["system"]
    assert run["backend"] == "py_spy" and run["workers"] == [] and run["failures"] == []
