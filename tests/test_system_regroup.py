"""A tool-wrapped worker runs in a process group of its own (system/regroup.py).

Ray 2.60's raylet records a worker's process group when it registers and SIGKILLs that group as
the worker exits (`SchedulePostExitProcessGroupCleanup` in raylet.out). Under a tool the worker
inherited the tool's group, so that kill took the tool while it wrote its report after the
worker's end: an nsys report was lost (seen in CI as a rank left "incomplete", reproduced every
time with a fake nsys that takes 2 s to write, as the real one does). Here the raylet's kill is done
by the test itself, exactly as the raylet does it (the group the worker was in when it started,
SIGKILL, once the worker has exited); the slow Ray test (test_system_ray_actors) does it for real.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

from mindspeed_profiler.core import formats
from mindspeed_profiler.system.finish import wait_for_reports
from mindspeed_profiler.system.regroup import MODULE, own_group, regrouped
from mindspeed_profiler.runtime.system_settings import worker_runtime_env
from mindspeed_profiler.system.spec import WorkerSpec
from conftest import REPO_ROOT
from test_system_launch import base_path, cfg, write_fake_tools

SCRIPT = '''import json, os, sys
json.dump({"name": __name__, "argv": sys.argv, "path0": sys.path[0], "pid": os.getpid(), "pgid": os.getpgid(0),
           "file": __file__}, open(sys.argv[1], "w"))
sys.exit(int(sys.argv[2]))
'''


def test_regrouped_command():
    assert regrouped(["py", "w.py", "--x=1"]) == ["py", "-m", MODULE, "w.py", "--x=1"]
    for command in (["py"], ["py", "-u", "w.py"], ["py", "-m", "pkg"], ["py", "-c", "pass"], []):
        assert regrouped(command) == list(command)   # no script first: left as it is


def test_the_script_runs_as_main_in_a_group_of_its_own(tmp_path):
    script, out = tmp_path / "w.py", tmp_path / "out.json"
    script.write_text(SCRIPT)
    p = subprocess.run(regrouped([sys.executable, str(script), str(out), "3"]), env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
                       capture_output=True, text=True, timeout=60, cwd=tmp_path.parent)
    assert p.returncode == 3, p.stderr   # the script's own exit status
    got = json.loads(out.read_text())
    assert got["name"] == "__main__" and got["argv"] == [str(script), str(out), "3"] and got["file"] == str(script)
    assert got["path0"] == str(tmp_path)   # the script's directory, as `python w.py` has it
    assert got["pgid"] == got["pid"] != os.getpgid(0)
    assert own_group() in (True, False) and os.getpgid(0) != got["pgid"]   # this process: never raises


def test_a_report_written_after_the_worker_survives_the_raylets_group_kill(tmp_path):
    """Launcher -> fake nsys (writes its report 1 s after the worker ended) -> worker; the launcher
    started in a session of its own as Ray starts workers; the worker's group as it started is
    SIGKILLed the moment the worker has exited."""
    bin_dir = write_fake_tools(tmp_path / "bin")
    c = cfg(tmp_path, backend="nsight")
    env_cfg = worker_runtime_env(c, "actor", 0)
    script, out = tmp_path / "w.py", tmp_path / "out.json"
    script.write_text(SCRIPT)
    env = dict(os.environ, **env_cfg["env_vars"], PYTHONPATH=str(REPO_ROOT), FAKE_TOOL_LOG=str(tmp_path / "log"),
               FAKE_REPORT_DELAY_S="1", PATH=os.pathsep.join(map(str, [bin_dir, *base_path()])))
    launcher = subprocess.Popen(shlex.split(env_cfg["py_executable"]) + [str(script), str(out), "0"], env=env,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        exited = tmp_path / "log"
        while not list(exited.glob("nsys.*.exit")) and time.monotonic() < deadline:   # the fake saw its child end
            time.sleep(0.01)
        worker = json.loads(out.read_text())
        assert worker["pgid"] == worker["pid"] != launcher.pid   # not the launcher's (and the tool's) group
        try:
            os.killpg(worker["pgid"], signal.SIGKILL)   # what the raylet does as the worker exits
        except ProcessLookupError:
            pass
        assert launcher.wait(timeout=60) == 0
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    meta, = wait_for_reports([WorkerSpec.decode(env_cfg["env_vars"][formats.SYSTEM_ENV]).meta_path], timeout_s=30)
    assert meta["status"] == "complete" and (tmp_path / "prof" / "system" / "actor_rank0.nsys-rep").exists()
