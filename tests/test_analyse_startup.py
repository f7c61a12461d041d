"""The analyse command loads numpy with one OpenBLAS thread (issue 34: OpenBLAS starts a thread per
core at import, ~56 ms of a 2-core box's numpy import; the analysis does no linear algebra), keeps
a value the user set, and leaves the environment of its child processes as it found it. Fresh
interpreters: numpy is loaded once per process."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = ("import os, sys; from mindspeed_profiler.commands import analyse as a; a._load_numpy(); "
         "import numpy; threads = open('/proc/self/status').read().split('Threads:')[1].split()[0]; "
         "print(threads, os.environ.get('OPENBLAS_NUM_THREADS'))")


def _probe(**env: str) -> list[str]:
    e = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=e, capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="threads counted in /proc; one core gives one thread either way")
def test_numpy_loaded_with_one_thread_and_env_put_back():
    assert _probe() == ["1", "None"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2, reason="as above")
def test_the_users_setting_is_kept():
    assert _probe(OPENBLAS_NUM_THREADS="2") == ["2", "2"]
