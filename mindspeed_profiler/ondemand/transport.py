"""How requests reach the workers and how their answers come back.

Files (one node, or storage shared by the nodes), under the job's `profile_save_path` (RUN_DIR):

    RUN_DIR/requests/<id>.json                 a request (trigger writes it; requests.parse_request)
    RUN_DIR/requests/workers/<role>_rank<R>.json   one worker's heartbeat and request states
    RUN_DIR/profiler_config.json               torch_npu's dynamic-profiler file, also accepted

Ray (workers on nodes that do not share RUN_DIR): a small named actor per run, the mailbox, holds
the requests and the workers' states; workers reach it from their listener thread, `trigger` and
`status` with `--ray-address`.

Every poll is one stat or one remote call, made by the listener's background thread, never by
step(): see listener.py.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import UnsafeFile, read_regular_file, write_json_atomic
from mindspeed_profiler.ondemand import states as state_shape

REQUESTS_DIR = formats.REQUESTS_DIR
WORKERS_DIR = "workers"
NPU_CONFIG_FILE = formats.TORCH_NPU_DYNAMIC_FILE
MAX_REQUEST_BYTES = 1 << 20  # a request is a few hundred bytes; a bigger file is not one
MAX_MAILBOX_REQUESTS = 1000  # requests one run's Ray mailbox keeps
MAILBOX_NAMESPACE = "mindspeed_profiler"
# A directory's modification time on ext3, many NFS / Lustre / FUSE mounts has whole seconds: a
# request written in the same second as the last poll leaves it unchanged, so the listing is
# repeated while the directory changed less than this long ago.
COARSE_MTIME_S = 2.0
# A request file that does not parse may still be being written (an editor, `cat >`, scp): it is
# read again when its size or time changes, and reported malformed once it stayed so this long.
SETTLE_S = 2.0


class UnsafeTree(OSError):
    """RUN_DIR/requests (or its workers/) is a symbolic link, or not a directory: nothing of ours
    is written there (others may write in the requests tree; a link would send our files elsewhere)."""


def requests_dir(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / REQUESTS_DIR


def worker_key(role: str, rank: int) -> str:
    return f"{role}_rank{rank}"


class NotJson(ValueError):
    """A request file that is not (yet) UTF-8 JSON: perhaps still being written."""


def read_json_bounded(path: Path, follow_links: bool = True) -> Any:
    """The JSON in `path`; ValueError with the reason when it is not a regular file (a FIFO would
    block the reader for ever: opened without blocking and refused), too big, not UTF-8 or not JSON."""
    try:
        data = read_regular_file(path, MAX_REQUEST_BYTES, follow_links=follow_links)
    except UnsafeFile as exc:
        raise ValueError(f"{exc}: not a request") from None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise NotJson(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise NotJson(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


# ----------------------------------------------------------------------------- trigger / status side


def submit_file(run_dir: str | os.PathLike, request: dict[str, Any]) -> Path:
    """Write a request where the workers' listeners look (atomically: a listener never reads half)."""
    return write_json_atomic(safe_dir(run_dir) / f"{request['id']}.json", request)


def safe_dir(run_dir: str | os.PathLike, *sub: str) -> Path:
    """RUN_DIR/requests[/sub...], made if missing, each part a real directory (not a link): RUN_DIR
    itself may be a link (a save path on a bigger disk), the tree others write into may not."""
    d = Path(run_dir)
    d.mkdir(parents=True, exist_ok=True)   # the job's own save path (a link to another disk is fine)
    for part in (REQUESTS_DIR, *sub):
        d = d / part
        try:
            d.mkdir(exist_ok=True)
        except FileExistsError:
            pass
        if os.path.islink(d) or not d.is_dir():
            raise UnsafeTree(f"{d} is a symbolic link or not a directory: on-demand capture writes nothing there")
    return d


def read_worker_states(run_dir: str | os.PathLike, problems: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every worker's last state file, by worker key. A file that cannot be read or has the wrong
    shape (states.problem) is skipped; `problems` gets one line for it, naming the file and why."""
    out: dict[str, dict[str, Any]] = {}
    folder = requests_dir(run_dir) / WORKERS_DIR
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            state = read_json_bounded(path)
            bad = state_shape.problem(state)
        except (OSError, ValueError) as exc:
            bad = str(exc)
        if bad is None:
            out[path.stem] = state
        elif problems is not None:
            problems.append(f"{path}: {bad}: skipped")
    return out


def read_requests(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Every request file of the run by id (a malformed one as {"error": ...})."""
    out: dict[str, Any] = {}
    folder = requests_dir(run_dir)
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns):
        try:
            out[path.stem] = read_json_bounded(path)
        except (OSError, ValueError) as exc:
            out[path.stem] = {"error": str(exc)}
    return out


# ----------------------------------------------------------------------------- worker side: sources


class RequestDirSource:
    """New `RUN_DIR/requests/*.json` files: one stat of the directory per poll; the directory is
    listed when its modification time changed, or changed less than COARSE_MTIME_S ago (whole-second
    time stamps), or a file is still settling. A file is read once it parses (or, still malformed,
    once it stopped changing for SETTLE_S); links are not followed."""

    kind = "file"

    def __init__(self, run_dir: str | os.PathLike, clock=time.time):
        self.dir = requests_dir(run_dir)
        self._mtime: int | None = None
        self._seen: set[str] = set()
        self._settling: dict[str, tuple[int, int, float]] = {}   # name -> (mtime_ns, size, first seen bad)
        self._clock = clock

    def _stat_of(self, name: str) -> tuple[int, int]:
        try:
            st = os.lstat(self.dir / name)
            return st.st_mtime_ns, st.st_size
        except OSError:
            return 0, 0

    def poll(self) -> list[tuple[str, Any]]:
        """[(request id, parsed JSON or the ValueError saying why it is unreadable)] of new files."""
        try:
            mtime = os.stat(self.dir).st_mtime_ns
        except OSError:
            return []
        now = self._clock()
        if mtime == self._mtime and not self._settling and now - mtime / 1e9 > COARSE_MTIME_S:
            return []
        self._mtime = mtime
        out: list[tuple[str, Any]] = []
        try:
            # in the order they were written (trigger's ids sort by time too; equal mtimes by name)
            names = [n for n in os.listdir(self.dir) if n.endswith(".json") and not n.startswith(".") and n not in self._seen]
            stats = {n: self._stat_of(n) for n in names}
            names.sort(key=lambda n: (stats[n][0], n))
        except OSError:
            return []
        for name in names:
            path = self.dir / name
            try:
                got: Any = read_json_bounded(path, follow_links=False)
            except (OSError, ValueError) as exc:
                got = exc if isinstance(exc, ValueError) else ValueError(str(exc))
                partial = isinstance(exc, NotJson)
                if partial and not _settled(self._settling, name, stats[name], now):
                    continue   # perhaps still being written: read again on a later poll
            self._settling.pop(name, None)
            self._seen.add(name)
            out.append((name[:-5], got))
        return out


def _settled(settling: dict, name: str, stat: tuple[int, int], now: float) -> bool:
    """Whether a file that does not parse has kept its size and time for SETTLE_S (then it is
    malformed, not half-written)."""
    old = settling.get(name)
    if old is None or old[:2] != stat:
        settling[name] = (*stat, now)
        return False
    return now - old[2] >= SETTLE_S


class NpuConfigSource:
    """torch_npu's `profiler_config.json` in RUN_DIR: each change of the file after the listener
    started is one request (the content found at start is the baseline, not a request)."""

    kind = "torch_npu"

    def __init__(self, run_dir: str | os.PathLike):
        self.path = Path(run_dir) / NPU_CONFIG_FILE
        self._mtime = self._stat()

    def _stat(self) -> int | None:
        try:
            return os.stat(self.path).st_mtime_ns
        except OSError:
            return None

    def poll(self) -> list[tuple[str, Any]]:
        mtime = self._stat()
        if mtime is None or mtime == self._mtime:
            return []
        self._mtime = mtime
        rid = f"npu-{mtime}"
        try:
            return [(rid, read_json_bounded(self.path))]
        except (OSError, ValueError) as exc:
            return [(rid, exc if isinstance(exc, ValueError) else ValueError(str(exc)))]


# ----------------------------------------------------------------------------- Ray mailbox


def mailbox_name(run_id: str) -> str:
    return f"requests.{run_id}"


def _mailbox_class():
    import ray

    @ray.remote(num_cpus=0, max_restarts=0)
    class RequestMailbox:
        """The run's requests and its workers' states, for workers that do not share RUN_DIR."""

        def __init__(self) -> None:
            self.requests: list[dict[str, Any]] = []
            self.states: dict[str, dict[str, Any]] = {}

        def submit(self, request: dict[str, Any]) -> int:
            # the mailbox is another way in: the same bounds as a request file
            if not isinstance(request, dict) or len(json.dumps(request, default=str)) > MAX_REQUEST_BYTES:
                raise ValueError(f"a request is a JSON object of at most {MAX_REQUEST_BYTES} bytes")
            if len(self.requests) >= MAX_MAILBOX_REQUESTS:
                raise ValueError(f"this run's mailbox holds {MAX_MAILBOX_REQUESTS} requests already")
            if not any(r.get("id") == request.get("id") for r in self.requests):
                self.requests.append(request)
            return len(self.requests)

        def fetch(self, since: int) -> list[dict[str, Any]]:
            return self.requests[since:]

        def report(self, key: str, state: dict[str, Any]) -> None:
            self.states[key] = state

        def worker_states(self) -> dict[str, dict[str, Any]]:
            return dict(self.states)

    return RequestMailbox


def get_mailbox(run_id: str, create: bool = False, timeout_s: float = 10.0) -> Any:
    """The run's mailbox actor handle (made when `create` and missing), or None."""
    import ray

    name = mailbox_name(run_id)
    if create:
        return _mailbox_class().options(name=name, namespace=MAILBOX_NAMESPACE, get_if_exists=True).remote()
    try:
        return ray.get_actor(name, namespace=MAILBOX_NAMESPACE)
    except ValueError:
        return None


class MailboxSource:
    """Requests from the run's Ray mailbox: one remote call per poll."""

    kind = "ray"

    def __init__(self, mailbox: Any, timeout_s: float = 10.0):
        self.mailbox = mailbox
        self.timeout_s = timeout_s
        self._cursor = 0

    def poll(self) -> list[tuple[str, Any]]:
        import ray

        new = ray.get(self.mailbox.fetch.remote(self._cursor), timeout=self.timeout_s)
        out = []
        for k, r in enumerate(new, self._cursor + 1):
            rid = str(r.get("id"))[:128] if isinstance(r, dict) else f"ray-{k}"
            if len(json.dumps(r, default=str)) > MAX_REQUEST_BYTES:   # an old mailbox without the bound
                r = ValueError(f"larger than {MAX_REQUEST_BYTES} bytes: not a request")
            out.append((rid, r))
        self._cursor += len(new)
        return out

    def report(self, key: str, state: dict[str, Any]) -> None:
        self.mailbox.report.remote(key, state)  # fire and forget: the thread does not wait for it

    def submit(self, request: dict[str, Any]) -> None:
        """A request for the run's other workers (an automatic capture's: auto_capture.py); fire
        and forget, like report."""
        self.mailbox.submit.remote(request)


def report_file(run_dir: str | os.PathLike, key: str, state: dict[str, Any]) -> None:
    """This worker's state under RUN_DIR/requests/workers/ (UnsafeTree when that is a link)."""
    write_json_atomic(safe_dir(run_dir, WORKERS_DIR) / f"{key}.json", state)


def merge_states(*many: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Worker states from several places: per worker, the most recent heartbeat wins."""
    out: dict[str, dict[str, Any]] = {}
    for states in many:
        for key, state in states:
            old = out.get(key)
            if old is None or (state.get("heartbeat") or {}).get("time", 0) >= (old.get("heartbeat") or {}).get("time", 0):
                out[key] = state
    return out
