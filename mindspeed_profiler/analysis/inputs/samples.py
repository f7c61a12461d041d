"""The per-sample records of the rollout (`<save>/samples/<role>_rank<R>.jsonl`, docs/rollout.md):
the whole samples/ folder is one capture of kind `samples` (a run: its batches are taken across
the folder's workers), its rows the long tail's (analyzers/long_tail.py: ROLLOUT_BATCHES,
ROLLOUT_OCCUPANCY, ROLLOUT_LENGTHS, ROLLOUT_SLOWEST)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import read_json_object

from ..analyzers.long_tail import batch_key, long_tail
from mindspeed_profiler.analysis.pipeline.discover import Capture, rel
from . import InputKind, register_input

if TYPE_CHECKING:
    from ..parsing.samples import SamplesFile

SHOWN = 3   # problems quoted per file (the count says the rest)


def _claim(root: Path, d: Path) -> Capture | None:
    if d.name != formats.SAMPLES_DIR:
        return None
    try:
        names = sorted(n for n in os.listdir(d) if formats.SAMPLES_FILE_RE.match(n) and os.path.isfile(d / n))
    except OSError:
        return None
    names = [n for n in names if _looks_like_samples(d / n)]
    if not names:
        return None
    return Capture(path=rel(root, d), kind="samples", files=[rel(root, d / n) for n in names], run_id=_run_id(d.parent))


def _looks_like_samples(path: Path) -> bool:
    """The first line is one of ours: a batch or sample record (another project's *_rank<R>.jsonl is left alone)."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(1 << 16)
    except OSError:
        return False
    return b'"type"' in first and (b'"batch"' in first or b'"sample"' in first)


def _run_id(save_path: Path) -> str | None:
    """The run id of the save path's run.json, when there is one."""
    try:
        run = read_json_object(save_path / formats.RUN_FILE)
    except (OSError, ValueError):
        return None
    rid = (run or {}).get(formats.RUN_ID_KEY)
    return rid if isinstance(rid, str) and rid else None


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    # imported here, as discovery imports every input kind for its claims: 3 ms of every other run's start
    from ..parsing.samples import read_samples

    warnings: list[str] = []
    files: list[SamplesFile] = []
    for name in cap.files:
        try:
            files.append(read_samples(root / name))
        except OSError as exc:
            warnings.append(f"{name}: not read ({exc})")
    default_run = cap.run_id or ""
    samples: list = []
    dropped: dict = {}
    for f in files:
        warnings += file_warnings(f)
        kept, batches, said = last_attempts(f, default_run)
        samples += kept
        warnings += said
        for b in batches:
            key = batch_key(b, default_run)
            dropped[key] = dropped.get(key, 0) + b.dropped
    if not samples:
        raise ValueError("no sample records in " + ", ".join(cap.files) + (": " + "; ".join(warnings) if warnings else ""))
    rows = long_tail(samples, top_n, dropped, default_run)
    untimed = [s for s in samples if not s.timed]
    if untimed:
        first = untimed[0]
        warnings.append(f"{len(untimed)} of {len(samples)} sample(s) with a problem or without a start / end time: "
                        f"left out of the times, counted in the lengths (the first: {first.role}:{first.rank} "
                        f"iteration {first.iteration} id {first.id!r}: {first.problem or 'start_ns / end_ns null'})")
    lost = sum(dropped.values())
    if lost:
        warnings.append(f"{lost} sample(s) not written by the workers (over {formats.MAX_SAMPLES_PER_ITERATION} "
                        "per worker and iteration): not in these figures")
    # a file per writer: two processes of one role and rank are two workers
    return {"rollout": {**rows, "workers": len({(f.role, f.rank, f.pid) for f in files}), "n_samples": len(samples)},
            "warnings": warnings}, None


def last_attempts(f: SamplesFile, default_run: str = "") -> tuple[list, list, list[str]]:
    """Pure: a file's samples and batch lines, each (run, iteration, stage) of them from its last
    attempt only (the batch lines' `attempt`; lines without one are the earliest), and a warning
    naming what was left out. A run resumed after a crash re-runs iterations into the same file:
    pooled, one batch would span the restart."""
    def attempt(x) -> int:
        return -1 if x.attempt is None else x.attempt

    last: dict = {}
    for b in f.batches:
        key = batch_key(b, default_run)
        last[key] = max(last.get(key, -1), attempt(b))
    samples, earlier = [], []
    for s in f.samples:
        (samples if attempt(s) == last.get(batch_key(s, default_run), attempt(s)) else earlier).append(s)
    batches = [b for b in f.batches if attempt(b) == last[batch_key(b, default_run)]]
    if not earlier:
        return samples, batches, []
    again = sorted({s.iteration for s in earlier})
    shown = ", ".join(map(str, again[:8])) + (" ..." if len(again) > 8 else "")
    return samples, batches, [f"{Path(f.path).name}: iteration(s) {shown} recorded by more than one attempt (the run "
                              f"resumed and ran them again): each keeps its last attempt's samples, {len(earlier)} "
                              "sample(s) of an earlier attempt left out"]


def file_warnings(f: SamplesFile) -> list[str]:
    """One warning for a file's unread lines and one for its writers' own problems (batch lines)."""
    name = Path(f.path).name
    out = []
    if f.problems:
        shown = "; ".join(f"line {n}: {m}" for n, m in f.problems[:SHOWN])
        out.append(f"{name}: {len(f.problems)} line(s) not read as records{' (the first ' + str(SHOWN) + ')' if len(f.problems) > SHOWN else ''}: {shown}")
    said = [p for b in f.batches for p in b.problems]
    if said:
        out.append(f"{name}: the writer said {len(said)} problem(s), e.g. {said[0]}")
    return out


register_input(InputKind("samples", analyse, order=34, claim_dir=_claim))
