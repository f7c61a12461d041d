"""Run a two-rank gloo job of plain processes for a test: the real collectives, on this machine.

The ranks meet in a file (init_method file://), not at a TCP port: a port picked free by the test
and bound later by rank 0 can be taken in between (EADDRINUSE, seen in CI)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

INIT = 'dist.init_process_group("gloo", init_method="file://" + os.environ["GLOO_JOB_FILE"], rank=rank, world_size=2)'
"""The line a worker script uses to join the group (it defines `rank` first)."""


def run_two_ranks(script: Path, *args: str, timeout_s: float, quiet: bool = False) -> list[int]:
    """Start ranks 0 and 1 of `script` (RANK in their environment) and wait: their exit codes."""
    rendezvous = script.with_name(script.stem + ".rendezvous")
    rendezvous.unlink(missing_ok=True)   # a FileStore's file must not hold an earlier group's keys
    env = dict(os.environ, GLOO_JOB_FILE=str(rendezvous), WORLD_SIZE="2", OMP_NUM_THREADS="1")
    out = subprocess.DEVNULL if quiet else None
    procs = [subprocess.Popen([sys.executable, str(script), *args], env=dict(env, RANK=str(r)), stdout=out, stderr=out)
             for r in (0, 1)]
    try:
        return [p.wait(timeout=timeout_s) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
