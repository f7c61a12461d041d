"""The process's host memory, read cheaply from /proc: its resident size (the per-capture memory
budget, captures.py), its resident peak since a moment of our choosing (the per-stage host peak,
metrics/stage_memory.py) and the memory it may use (the host watermark, metrics/host_watermark.py).

- `rss_bytes()`: /proc/self/statm, a few microseconds.
- `HostPeak`: the kernel's high-water mark of the resident set (VmHWM, /proc/self/status), reset to
  the current size by writing "5" to /proc/self/clear_refs (Linux >= 4.0): a peak per stage call,
  exact to the page, with no sampling. The reset moves the process's VmHWM for everyone who reads
  it (and `getrusage`'s ru_maxrss, which is VmHWM's maximum with what exited threads saw), which is
  why the tracker keeps the run's peak itself. Where clear_refs cannot be written (another OS, a
  locked-down /proc) the peak is the process's since it started, and `resettable` says so.
- `host_limit()`, `available_bytes()`: the cgroup's memory limit (v2 `memory.max`, v1
  `memory.limit_in_bytes`) or the machine's (MemTotal), and what is still free of it.

None where there is no /proc (macOS, Windows): the figures are then left out, never guessed.
"""
from __future__ import annotations

import os

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_STATM = "/proc/self/statm"
_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
_MEMINFO = "/proc/meminfo"
_RESET_HWM = b"5"          # clear_refs: reset the peak resident set size to the current one
_NO_LIMIT = 1 << 60         # cgroup v1 writes "no limit" as a huge number (9223372036854771712)


def rss_bytes() -> int | None:
    """Resident set size of this process in bytes, or None when it cannot be read."""
    try:
        with open(_STATM, "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def status_field(text: bytes, name: bytes) -> int | None:
    """Pure: a `Name:   N kB` line of /proc/<pid>/status, in bytes (None when absent or unreadable)."""
    i = text.find(b"\n" + name + b":")
    if i < 0:
        if not text.startswith(name + b":"):
            return None
        i = -1
    start = i + len(name) + 2
    end = text.find(b"kB", start)
    try:
        return int(text[start:end]) * 1024 if end > 0 else None
    except ValueError:
        return None


class HostPeak:
    """This process's resident peak: `reset()` (the peak becomes the current size), `peak_bytes()`
    (the peak since the last reset, or since the process began when it cannot reset). Two file
    descriptors kept open: a read is one pread of /proc/self/status (~20 us on the 2-core dev box,
    the kernel formats the whole file), a reset one write (~3 us). Never raises; not thread-safe
    for one object across threads (each reader makes its own)."""

    def __init__(self) -> None:
        self._status = _open(_STATUS, os.O_RDONLY)
        self._clear = _open(_CLEAR_REFS, os.O_WRONLY)
        self.resettable = self._clear is not None and self.reset()

    def reset(self) -> bool:
        """The peak becomes the current resident size; False when that cannot be done."""
        if self._clear is None:
            return False
        try:
            os.write(self._clear, _RESET_HWM)
            return True
        except OSError:
            self._close_clear()
            self.resettable = False
            return False

    def status(self) -> bytes | None:
        if self._status is None:
            return None
        try:
            return os.pread(self._status, 4096, 0)
        except OSError:
            return None

    def peak_bytes(self) -> int | None:
        """VmHWM in bytes (None without /proc)."""
        text = self.status()
        return status_field(text, b"VmHWM") if text is not None else None

    def rss_and_peak(self) -> tuple[int | None, int | None]:
        """(VmRSS, VmHWM) in bytes from one read."""
        text = self.status()
        if text is None:
            return None, None
        return status_field(text, b"VmRSS"), status_field(text, b"VmHWM")

    def _close_clear(self) -> None:
        _close(self._clear)
        self._clear = None

    def close(self) -> None:
        self._close_clear()
        _close(self._status)
        self._status = None

    def __del__(self) -> None:
        self.close()


def _close(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def _open(path: str, flags: int) -> int | None:
    try:
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None


def _read_int(path: str) -> int | None:
    try:
        with open(path, "rb") as fh:
            text = fh.read(64).strip()
    except OSError:
        return None
    if text == b"max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value < _NO_LIMIT else None


def meminfo() -> dict[str, int]:
    """/proc/meminfo's MemTotal and MemAvailable in bytes (what it has of them)."""
    out: dict[str, int] = {}
    try:
        with open(_MEMINFO, "rb") as fh:
            text = fh.read(8192)
    except OSError:
        return out
    for key in (b"MemTotal", b"MemAvailable"):
        value = status_field(text, key)
        if value is not None:
            out[key.decode()] = value
    return out


def _cgroup_dirs() -> list[tuple[str, str, str]]:
    """(limit file, usage file, what) of this process's memory cgroup, its own and the mount's root
    (inside a container the root is the container's), v2 then v1."""
    own_v2 = own_v1 = ""
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) != 3:
                    continue
                if parts[0] == "0" and parts[1] == "":
                    own_v2 = parts[2]
                elif "memory" in parts[1].split(","):
                    own_v1 = parts[2]
    except OSError:
        pass
    out = []
    for rel in dict.fromkeys((own_v2.strip("/"), "")):
        d = os.path.join("/sys/fs/cgroup", rel) if rel else "/sys/fs/cgroup"
        out.append((os.path.join(d, "memory.max"), os.path.join(d, "memory.current"), "cgroup v2 memory.max"))
    for rel in dict.fromkeys((own_v1.strip("/"), "")):
        d = os.path.join("/sys/fs/cgroup/memory", rel) if rel else "/sys/fs/cgroup/memory"
        out.append((os.path.join(d, "memory.limit_in_bytes"), os.path.join(d, "memory.usage_in_bytes"),
                    "cgroup v1 memory.limit_in_bytes"))
    return out


def host_limit() -> tuple[int | None, str | None, int | None]:
    """(the memory this process may use in bytes, where that comes from, the cgroup's usage when the
    limit is a cgroup's): the smallest of its memory cgroup's limit and the machine's MemTotal;
    (None, None, None) without /proc."""
    total = meminfo().get("MemTotal")
    best: tuple[int | None, str | None, int | None] = (total, "MemTotal" if total else None, None)
    for limit_file, usage_file, what in _cgroup_dirs():
        limit = _read_int(limit_file)
        if limit is not None and (best[0] is None or limit < best[0]):
            best = (limit, what, _read_int(usage_file))
    return best


def available_bytes(limit: int | None = None, source: str | None = None, usage: int | None = None) -> int | None:
    """What is still free for this process: MemAvailable, and under a cgroup limit no more than the
    limit minus the cgroup's usage (host_limit()'s three values; read when not given)."""
    if limit is None:
        limit, source, usage = host_limit()
    avail = meminfo().get("MemAvailable")
    if source is not None and source.startswith("cgroup") and limit is not None and usage is not None:
        room = max(0, limit - usage)
        avail = room if avail is None else min(avail, room)
    return avail
