"""Find everything analysable under a directory (any depth) and say what kind it is: the walk is
generic, each input kind (inputs/) says what it claims."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable, Iterator

import orjson

from mindspeed_profiler.core import formats

from mindspeed_profiler.analysis.inputs import DEFAULT_FILE_KIND, input_kind, input_kinds
from mindspeed_profiler.analysis.inputs.record import Capture  # noqa: F401  (where the kinds have always found it)

UNREADABLE = "unreadable"
MAX_RANK = formats.MAX_RANK


def rel(root: Path, p: Path) -> str:
    return os.path.relpath(p, root)


def _text(v) -> str | None:
    return None if v is None else v if isinstance(v, str) else str(v)


def read_identity(cap: Capture, root: Path, d: Path) -> None:
    """Fill role / rank / stage / steps of a capture directory from our metadata, else from its name."""
    meta_path = d / formats.META_FILE
    if meta_path.is_file():
        try:
            meta = orjson.loads(meta_path.read_bytes())
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
            cap.meta = meta
            # a damaged file must not leak odd types into the tables (a list as a stage name...)
            cap.role = _text(meta.get("role"))
            r = meta.get("rank")
            cap.rank = r if isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= MAX_RANK else None
            cap.stage = _text(meta.get("stage"))
            rid = meta.get(formats.RUN_ID_KEY)
            cap.run_id = rid if isinstance(rid, str) else None
            st = meta.get("steps")
            cap.step_range = (list(st) if isinstance(st, list) and len(st) == 2
                              and all(isinstance(x, int) and not isinstance(x, bool) for x in st) else None)
        except Exception as exc:  # noqa: BLE001 - a bad meta file is reported, not fatal
            cap.warnings.append(f"{rel(root, meta_path)}: unreadable metadata ({type(exc).__name__}: {exc})")
    m = formats.CAPTURE_NAME_PREFIX_RE.match(d.name)
    if m:
        numbers = [int(m[k]) for k in ("rank", "first", "last")]
        if max(numbers) > MAX_RANK:   # a name no writer of ours makes: keep the numbers out of the tables
            cap.warnings.append(f"{d.name}: rank / steps out of range in the directory name; ignored")
        else:
            cap.role = cap.role or m["role"]
            cap.rank = cap.rank if cap.rank is not None else numbers[0]
            cap.step_range = cap.step_range or numbers[1:]
    if cap.stage is None and d.parent != root:  # <save_path>/<stage or "all">/<capture>
        cap.stage = d.parent.name


def _irregular(path: Path) -> str | None:
    """Why `path` is not to be opened (a broken link, a FIFO: reading it would block, a socket...),
    or None for a regular file."""
    if os.path.isfile(path):
        return None
    if not os.path.lexists(path):
        return "missing"
    return "broken symbolic link" if os.path.islink(path) and not os.path.exists(path) else "not a regular file"


def not_a_regular_file(root: Path, path: Path) -> Capture | None:
    """An `unreadable` capture for a file that is not regular; None for a regular file. Such a file
    is reported, never opened."""
    why = _irregular(path)
    return None if why is None else Capture(path=rel(root, path), kind=UNREADABLE, warnings=[why])


def keep_regular(root: Path, cap: Capture, paths: Iterable[Path]) -> list[Path]:
    """The regular files among a capture's `paths`; each other one is a warning of `cap`, never
    opened (a FIFO named analysis.db once hung the whole analysis)."""
    keep = []
    for p in paths:
        why = _irregular(p)
        if why is None:
            keep.append(p)
        else:
            cap.warnings.append(f"{rel(root, p)}: {why}; skipped, not read")
    return keep


def dir_identity(path: Path | str) -> tuple[int, int] | None:
    """(device, inode) of what `path` names, links followed: how walk() knows a directory; None
    when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def walk(top: Path, onerror: Callable[[OSError], None] | None = None) -> Iterator[tuple[Path, list[str], list[str]]]:
    """os.walk(top, followlinks=True) top-down, names sorted, without recursion: Python 3.11's
    os.walk recurses once per level and failed with RecursionError 1,000 directories deep. The
    caller prunes the directory names in place, as with os.walk. Links are followed, each real
    directory (device, inode) once, so a symbolic link loop is cut."""
    top_id = dir_identity(top)
    seen = {top_id} if top_id is not None else set()
    stack = [Path(top)]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError as err:
            if onerror is not None:
                onerror(err)
            continue
        dirs, files = [], []
        for e in entries:
            try:
                (dirs if e.is_dir() else files).append(e.name)
            except OSError:   # vanished, or a link we cannot stat: a name like any other file
                files.append(e.name)
        dirs.sort()
        files.sort()
        yield d, dirs, files
        below = []
        for name in dirs:
            key = dir_identity(d / name)
            if key is not None and key not in seen:
                seen.add(key)
                below.append(d / name)
        stack.extend(reversed(below))   # depth first, in name order, as os.walk


def discover(root: Path, skip_dirs: tuple[str, ...] = (formats.ANALYSIS_DIR, formats.REQUESTS_DIR)) -> list[Capture]:
    root = Path(root)
    kinds = input_kinds()
    if root.is_file():
        name = root.name
        kind = next((k.name for k in kinds if k.claims_file_root and k.claims_file_root(name)), DEFAULT_FILE_KIND)
        return [Capture(path=name, kind=input_kind(kind).name, files=[name])]
    found: list[Capture] = []

    def unreadable(err: OSError) -> None:   # a directory we cannot list is reported, not skipped
        p = Path(err.filename) if err.filename else root
        found.append(Capture(path=rel(root, p), kind=UNREADABLE,
                             warnings=[f"cannot list directory: {type(err).__name__}: {err.strerror or err}"]))

    # symlinked directories are followed (captures gathered by links), each real directory once
    for d, dirnames, filenames in walk(root, unreadable):
        dirnames[:] = [x for x in dirnames if not x.startswith(".") and not (d == root and x in skip_dirs)]
        whole = next((cap for k in kinds if k.claim_dir for cap in [k.claim_dir(root, d)] if cap is not None), None)
        if whole is not None:
            dirnames[:] = []
            found.append(whole)
            continue
        claimed: set[str] = set()
        names = filenames
        for k in kinds:
            if k.claim_files:
                found += k.claim_files(root, d, names, claimed)
    return found
