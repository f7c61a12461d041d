"""The real Ascend capture sets the tests use (tests/data/ascend/README.md and ../shared/ascend-2rank/
say where each comes from), unpacked once per test session into a read-only temporary copy.

A set is a directory of `*_ascend_pt` rank directories, or msprof-analyze's own output. Use
`ascend_set(name)` (conftest fixture `ascend_sets`) and copy before writing beside the files."""
from __future__ import annotations

import os
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT / "tests" / "data" / "ascend"
SHARED_2RANK = Path(os.environ.get("MSP_SHARED_ASCEND", REPO_ROOT.parent / "shared" / "ascend-2rank"))


@dataclass(frozen=True)
class AscendSet:
    name: str
    source: str            # "shared:<subdir>", "tar:<file>:<subdir>" or "dir:<subdir>"
    export: str            # text / db / cluster (msprof-analyze's output)
    ranks: tuple[int, ...]
    level: str | None = None
    devices: tuple[int, ...] | None = None
    note: str = ""


SETS: dict[str, AscendSet] = {s.name: s for s in (
    AscendSet("text_l0", "shared:text", "text", (0, 1), "Level0", note="2-rank HCCL DP, level 0"),
    AscendSet("db_l0", "shared:db", "db", (0, 1), "Level0", (0, 1)),
    AscendSet("text_l1", "tar:msinsight_pytorch_levels.tar.gz:text/level1", "text", (0, 1), "Level1"),
    AscendSet("text_l2", "tar:msinsight_pytorch_levels.tar.gz:text/level2", "text", (0, 1), "Level2"),
    AscendSet("db_l1", "tar:msinsight_pytorch_levels.tar.gz:db/level1", "db", (0, 1), "Level1", (0, 1)),
    AscendSet("db_l2", "tar:msinsight_pytorch_levels.tar.gz:db/level2", "db", (0, 1), "Level2", (0, 1)),
    AscendSet("pp4_l2", "tar:msinsight_st_level2_4rank.tar.gz:level2", "text", (0, 1, 2, 3), "Level2", (0, 1, 4, 5),
              note="4-rank PP=2 DP=2 Qwen3-0.6B; no trace_view.json / db (too big for the mirror); ranks 1, 3 "
                   "cut to step_trace_time.csv + communication files + analysis.db"),
    AscendSet("gpt3_cluster16", "dir:msinsight_cluster", "cluster", tuple(range(16)), "Level1",
              note="msprof-analyze's output of a 16-rank PP job + the files of ranks 0 and 1 (loose layout)"),
    AscendSet("advisor_cluster8", "dir:mstt_advisor_cluster", "cluster", tuple(range(8))),
)}
# the sets msprof-analyze can be run on (rank directories, not its own output)
CAPTURE_SETS = tuple(n for n, s in SETS.items() if s.export != "cluster")

_ROOT: Path | None = None


def use_root(path: Path) -> None:
    """Unpack under `path` (the test session's temporary directory) from now on."""
    global _ROOT
    _ROOT = Path(path)


def _unpack_root() -> Path:
    global _ROOT
    if _ROOT is None:   # outside pytest (tools/msprof_reference.py)
        _ROOT = Path(tempfile.mkdtemp(prefix="msp_ascend_sets_"))
    return _ROOT


def available(name: str) -> bool:
    src = SETS[name].source
    return SHARED_2RANK.is_dir() if src.startswith("shared:") else True


def ascend_set(name: str) -> Path:
    """The set's directory (unpacked / copied once, read-only)."""
    s = SETS[name]
    dest = _unpack_root() / name
    if dest.is_dir():
        return dest
    kind, _, rest = s.source.partition(":")
    tmp = _unpack_root() / f".{name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    if kind == "shared":
        shutil.copytree(SHARED_2RANK / rest, tmp)
    elif kind == "dir":
        shutil.copytree(DATA / rest, tmp)
    else:
        tar, _, sub = rest.partition(":")
        work = _unpack_root() / f".{name}.x"
        shutil.rmtree(work, ignore_errors=True)
        with tarfile.open(DATA / tar) as tf:
            tf.extractall(work, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        (work / sub).rename(tmp)
        shutil.rmtree(work)
    _read_only(tmp)
    tmp.rename(dest)
    return dest


def _read_only(root: Path) -> None:
    for d, _dirs, files in os.walk(root):
        for f in files:
            p = Path(d) / f
            p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def writable_copy(name: str, dest: Path, drop: tuple[str, ...] = ()) -> Path:
    """A writable copy of a set under `dest`, without the files named in `drop` (e.g. step_trace_time.csv)."""
    shutil.copytree(ascend_set(name), dest, ignore=shutil.ignore_patterns(*drop) if drop else None)
    for d, _dirs, files in os.walk(dest):
        for f in files:
            p = Path(d) / f
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dest
