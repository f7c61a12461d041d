"""Writing the output layout (the names themselves are in formats.py): capture directories and
worker names that fit torch_npu's limits. Pure naming functions plus two small I/O helpers (make a
capture directory, measure a directory); atomic writes and time stamps are fileio.py's (still
importable from here).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import os
import socket
import time
from pathlib import Path

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import (  # noqa: F401 - their old home, still importable
    utc_now_iso,
    write_json_atomic,
)
# re-exported: documented here since the first release (docs/profiling.md)
from mindspeed_profiler.core.formats import (  # noqa: F401
    ALL_DIR,
    CAPTURE_DIR_RE,
    META_FILE,
    RUN_FILE,
    parse_capture_dir_name,
)


def check_role(role: object) -> str:
    if not isinstance(role, str) or not formats.ROLE_RE.match(role):
        raise ValueError(f"role {role!r} is not usable in a directory name: use letters, digits, '_', '.', '-' (e.g. 'actor')")
    return role


def host_token(host: str | None = None) -> str:
    """This (or the given) host's name, safe in a capture name (formats.host_token)."""
    return formats.host_token(host or socket.gethostname())


def time_token(when: _dt.datetime | None = None) -> str:
    """Local time with milliseconds, as torch_npu writes it: YYYYmmddHHMMSSmmm."""
    return (when or _dt.datetime.now()).strftime("%Y%m%d%H%M%S%f")[:-3]


def stage_dir(save_path: str, stage: str | None) -> Path:
    return Path(save_path) / (stage or formats.ALL_DIR)


# torch_npu replaces a worker_name of 226 characters or more (`len(worker_name) <
# MAX_WORKER_NAME_LENGTH` in ProfPathCreator.init, torch-npu 2.14; the signature snapshot records
# it) by the host name, and the directory name adds `_<pid>_<17-digit time>_ascend_pt` (at most 36
# characters with 7-digit pids) under the 255-byte file name limit of common filesystems.
MAX_WORKER_NAME = 255 - 36


def worker_name(role: str, rank: int, first: int, last: int, call: int = 1, host: str | None = None) -> str:
    """`<role>_rank<R>_step<A>-<B>[_c<K>]_<host>`: the part of the name before `_<pid>_<time>`.
    Longer than MAX_WORKER_NAME, the host (then the role) becomes a prefix plus a hash of the whole:
    deterministic, so the npu backend finds the directory torch_npu names after it, and rank,
    steps and call stay readable."""
    role, tail = formats.worker_prefix(role, rank, first, last, call)
    host = host_token(host)
    if len(role) + len(tail) + 1 + len(host) > MAX_WORKER_NAME:
        host = _shorten(host, max(MAX_WORKER_NAME - len(role) - len(tail) - 1, 10))
        role = _shorten(role, MAX_WORKER_NAME - len(tail) - 1 - len(host))
    return f"{role}{tail}_{host}"


def _shorten(text: str, room: int) -> str:
    """`text` if it fits in `room` characters, else a prefix of it, '-' and 8 hex digits of its sha1."""
    if len(text) <= room:
        return text
    return f"{text[:max(room - 9, 1)]}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


# The longest file name written in a capture directory is `<basename>.<pid>.memory_snapshot.pickle`
# (a 7-digit pid): what is left of 255 bytes for `<role>_rank<R>`.
MAX_BASENAME = 255 - len(".4194304" + formats.MEMORY_SNAPSHOT_SUFFIX) - 8


def trace_basename(role: str, rank: int) -> str:
    """formats.trace_basename (`<role>_rank<R>`, the on-disk contract) for the files of a capture;
    a role too long for a file name becomes a prefix plus a hash (deterministic), as in worker_name."""
    tail = formats.trace_basename("", rank)
    return formats.trace_basename(_shorten(role, MAX_BASENAME - len(tail)), rank)


def capture_dir_name(worker: str, suffix: str, pid: int | None = None, when: _dt.datetime | None = None) -> str:
    """formats.capture_dir_name for this process now (or the given pid and time)."""
    return formats.capture_dir_name(worker, suffix, os.getpid() if pid is None else pid, time_token(when))


def make_capture_dir(save_dir: str | Path, worker: str, suffix: str) -> Path:
    """Create and return a new `<save_dir>/<worker>_<pid>_<time>_<suffix>` directory. The profiler
    keeps worker names unique within a process; should the name still be taken (a pid reused
    within the same millisecond), take the next millisecond: the name keeps its format and a true
    start time, and no capture writes into another's directory."""
    for _ in range(100):
        path = Path(save_dir) / capture_dir_name(worker, suffix)
        try:
            path.mkdir(parents=True, exist_ok=False)
            return path
        except FileExistsError:
            time.sleep(0.001)
    raise FileExistsError(f"no free capture directory name for {worker} under {save_dir}")


def trace_file_name(basename: str, pid: int | None = None) -> str:
    """formats.trace_file_name for this process (or the given pid)."""
    return formats.trace_file_name(basename, os.getpid() if pid is None else pid)


def dir_size(path: Path) -> int:
    """Total bytes of the regular files under `path` (0 if it does not exist)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total
