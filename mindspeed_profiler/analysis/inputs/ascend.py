"""Ascend captures: `ascend` = torch_npu's parsed output (ASCEND_PROFILER_OUTPUT text files, the db
export, or a part of them) in a *_ascend_pt/ directory or loose; `ascend_raw` = a *_ascend_pt/
directory not parsed yet, parsed here with torch_npu's offline parser where torch_npu + CANN work
(prepare). What one capture's files give: ascend_capture.py."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

from mindspeed_profiler.core import formats

from mindspeed_profiler.analysis.pipeline.discover import Capture, keep_regular, not_a_regular_file, read_identity, rel
from . import InputKind, register_input

# Discovery imports every input kind for its claims; what reads an Ascend capture is imported when
# one is analysed or prepared (5 ms of every other run's start: issue 34).

# what a directory of Ascend output holds that the analysis reads (besides ascend_pytorch_profiler*.db)
_READ = frozenset(formats.ASCEND_TEXT_FILES) | {formats.ASCEND_ANALYSIS_DB}


def _output_files(root: Path, cap: Capture, out: Path) -> list[Path]:
    """The parsed files the analysis reads in ASCEND_PROFILER_OUTPUT (text, db, torch_npu's
    analysis.db): regular files only, any other one under these names a warning of `cap`."""
    try:
        names = set(os.listdir(out))
    except OSError:   # absent (a raw capture) or unlistable
        return []
    found = [out / n for n in formats.ASCEND_TEXT_FILES if n in names]
    found += sorted(out / n for n in names if Path(n).match(formats.ASCEND_DB_GLOB))
    if formats.ASCEND_ANALYSIS_DB in names:
        found.append(out / formats.ASCEND_ANALYSIS_DB)
    return keep_regular(root, cap, found)


def _claim_capture_dir(root: Path, d: Path) -> Capture | None:
    if formats.capture_format_of_dir(d.name) != "ascend":
        return None
    cap = Capture(path=rel(root, d), kind="ascend")
    read_identity(cap, root, d)
    files = _output_files(root, cap, d / formats.ASCEND_OUTPUT_DIR)
    if files:
        snapshots = keep_regular(root, cap, sorted(d.glob("*" + formats.MEMORY_SNAPSHOT_SUFFIX)))
        cap.files = [rel(root, p) for p in files + snapshots]
    else:
        cap.kind = "ascend_raw"
    return cap


def _claim_loose_output(root: Path, d: Path, names: list[str], claimed: set[str]) -> list[Capture]:
    """A loose ASCEND_PROFILER_OUTPUT (its parent holds profiler_info_<N>.json), or a directory
    holding a copy of its files. torch_npu's analysis.db counts only beside other Ascend files (a
    lone analysis.db may be anyone's)."""
    text = [n for n in formats.ASCEND_TEXT_FILES if n in names]
    dbs = [n for n in names if Path(n).match(formats.ASCEND_DB_GLOB)]
    if not text and not dbs:
        return []
    found = text + dbs + ([formats.ASCEND_ANALYSIS_DB] if formats.ASCEND_ANALYSIS_DB in names else [])
    claimed.update(found)
    claimed.update(n for n in names if n in formats.ASCEND_SIDE_FILES or n == formats.ASCEND_METADATA_FILE)
    cap = Capture(path=rel(root, d), kind="ascend")
    files = keep_regular(root, cap, [d / n for n in found])
    if all(p.name == formats.ASCEND_ANALYSIS_DB for p in files):   # nothing of its own to analyse: each file reported
        return [c for n in text + dbs for c in [not_a_regular_file(root, d / n)] if c is not None]
    cap.files = [rel(root, p) for p in files]
    if d.name == formats.ASCEND_OUTPUT_DIR:
        cap.stage = None
    return [cap]


def capture_dir_of(root: Path, cap: Capture) -> Path:
    """Where a capture's identity files lie: the *_ascend_pt directory, or the directory above a
    loose ASCEND_PROFILER_OUTPUT, or the loose directory itself."""
    d = root / cap.path
    return d.parent if d.name == formats.ASCEND_OUTPUT_DIR and not (d / f"{formats.ASCEND_INFO_PREFIX}.json").exists() else d


def analyse(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, dict | None]:
    from .ascend_capture import AscendFiles, analyse_ascend
    from .snapshots import snapshot_memory

    paths = [root / f for f in cap.files]
    files = AscendFiles.of(capture_dir_of(root, cap), [p for p in paths if p.name in _READ or p.suffix == ".db"])
    out, events = analyse_ascend(files, cap.rank, top_n, want_events)
    snapshots = [p for p in paths if p.name.endswith(formats.MEMORY_SNAPSHOT_SUFFIX)]
    if snapshots:
        memory, warning = snapshot_memory(root, snapshots[0], top_n)
        if memory:
            out.setdefault("memory", {}).update(memory)
        if warning:
            out["warnings"].append(warning)
    return out, events


def prepare_raw(root: Path, caps: list[Capture], jobs: int, export_type: str, log: Callable[[str], None],
                python: str = sys.executable) -> dict[str, str]:
    """Parse raw Ascend captures with torch_npu when it works here (they become `ascend`); else
    a reason per capture."""
    raw = [c for c in caps if c.kind == "ascend_raw"]
    if not raw:
        return {}
    from ..parsing import ascend_raw

    ok, why = ascend_raw.npu_parser_available(python)
    reasons: dict[str, str] = {}
    for c in raw:
        where = root / c.path
        if not ok:
            reasons[c.path] = (f"raw Ascend capture, not parsed yet (no {formats.ASCEND_OUTPUT_DIR}): torch_npu with CANN "
                               f"is not usable here ({why}). Parse it on a machine with torch_npu + CANN: "
                               f"`mindspeed-profiler analyse {where}` (or torch_npu.profiler.profiler.analyse('{where}'))")
            continue
        log(f"parsing raw Ascend capture with torch_npu: {where}")
        done, msg = ascend_raw.parse_raw(where, jobs, export_type, python)
        files = _output_files(root, c, where / formats.ASCEND_OUTPUT_DIR)
        if done and files:
            c.kind = "ascend"
            c.files = [os.path.relpath(p, root) for p in files]
        else:
            reasons[c.path] = msg or f"torch_npu offline parse wrote no {formats.ASCEND_OUTPUT_DIR}"
    return reasons


def _analyse_raw(root: Path, cap: Capture, top_n: int, want_events: bool) -> tuple[dict, None]:
    raise ValueError(f"raw Ascend capture: not parsed (no {formats.ASCEND_OUTPUT_DIR})")


register_input(InputKind("ascend", analyse, order=10, claim_dir=_claim_capture_dir, claim_files=_claim_loose_output))
register_input(InputKind("ascend_raw", _analyse_raw, order=11, prepare=prepare_raw))
