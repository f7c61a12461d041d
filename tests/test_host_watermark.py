"""The host watermark (issue 47): a process whose resident memory grows past a low
`metrics.host_memory_watermark` writes one record, once per crossing, from the profiler's background
thread while its training thread is still inside the stage (the kernel's OOM killer would give no
second chance); falling back below the line arms it again. A real process, really growing."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import REPO_ROOT
from mindspeed_profiler.metrics.host_watermark import REARM, HostWatermark

GROWER = textwrap.dedent("""
    import json, os, sys, time
    from mindspeed_profiler import IntegratedProfiler, load_config
    from mindspeed_profiler.runtime.host_memory import host_limit, rss_bytes

    MIB, PAGE = 2**20, os.sysconf("SC_PAGE_SIZE")
    def touch(n):
        b = bytearray(n); b[::PAGE] = b"\\x01" * len(range(0, n, PAGE)); return b
    def wait_for(n, timeout=20.0):
        d = os.path.join(sys.argv[1], "metrics", "memory")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if os.path.isdir(d) and sum(f.endswith(".memory.json") for f in os.listdir(d)) >= n:
                return
            time.sleep(0.05)

    limit = host_limit()[0]
    line = rss_bytes() + 120 * MIB                 # a low watermark: 120 MB above where the process starts
    cfg = load_config({"integrated": {"profile_save_path": sys.argv[1]},
                       "metrics": {"enable": True, "host_memory_watermark": line / limit}})
    prof = IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)
    prof.start()
    with prof.stage("actor_generate"):
        held = [touch(40 * MIB) for _ in range(5)]  # past the line, and on growing
        wait_for(1)
        held.append(touch(40 * MIB))
        time.sleep(1.6)                            # three more checks above the line: still one record
    prof.step()
    del held                                       # back below REARM x the line: armed again
    time.sleep(1.2)
    with prof.stage("actor_update"):
        held = [touch(220 * MIB)]                  # a second crossing
        wait_for(2)
    prof.step()
    prof.stop()
    print(json.dumps({"line": line, "limit": limit}))
""")


def test_a_process_past_a_low_watermark_writes_one_record_per_crossing(tmp_path):
    out = subprocess.run([sys.executable, "-c", GROWER, str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    said = json.loads(out.stdout.strip().splitlines()[-1])
    memory = tmp_path / "metrics" / "memory"
    recs = sorted((json.loads(p.read_text()) for p in memory.glob("*.host_watermark.*.memory.json")),
                  key=lambda r: r["time_ns"])
    assert [(r["stage"], r["iteration"], r["watermark"]["crossing"]) for r in recs] == [
        ("actor_generate", 1, 1), ("actor_update", 2, 2)]
    stages = [json.loads(x) for x in (memory / "actor_rank0.stages.jsonl").read_text().splitlines()]
    ends = {x["stage"]: x["end_ns"] for x in stages if x["type"] == "stage"}
    for r, stage in zip(recs, ("actor_generate", "actor_update")):
        w = r["watermark"]
        assert w["line_bytes"] == int(w["share"] * w["limit_bytes"]) and abs(w["line_bytes"] - said["line"]) < 2**20
        assert w["rss_bytes"] >= w["line_bytes"] and r["host"]["rss_bytes"] >= w["line_bytes"]
        assert r["kind"] == "host_watermark" and r["exception"] is None and r["host"]["limit_bytes"] == said["limit"]
        assert r["time_ns"] < ends[stage]      # written while the training thread was still inside the stage


def test_the_watermark_is_armed_again_only_below_rearm_of_the_line():
    seen = []
    w = HostWatermark(0.5, seen.append, limit=1000, source="test")
    for rss in (100, 499, 500, 900, 600, 480, 476, 700, 474, 501):
        w.check(rss)
    # 500 crosses; 900 / 600 / 480 / 476 stay above 0.95 x 500 = 475; 474 re-arms; 501 crosses again
    assert [(r["rss_bytes"], r["crossing"]) for r in seen] == [(500, 1), (501, 2)] and REARM == 0.95
