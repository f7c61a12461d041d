"""tools/summary_diff.py --inline: a summary whose totals are in capture_totals.jsonl (today's) compares
key by key with the same summary written whole (as before the totals moved), the lines put back by the
tool's own stdlib reader equal to what outputs.load_summary puts back; bad references are usage errors."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, SHARED_DATA
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.outputs import TotalsReader, load_summary

KINETO = SHARED_DATA / "kineto"
TOOL = REPO_ROOT / "tools" / "summary_diff.py"


def _diff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    if not KINETO.is_dir():
        pytest.skip(f"{KINETO}: the shared Kineto traces are not here")
    base = tmp_path_factory.mktemp("sd")
    new = base / "new"
    analyse_directory(KINETO, jobs=1, progress=False, out_dir=new, html=False)
    assert (new / "capture_totals.jsonl").is_file()
    whole = load_summary(new / "summary.json")   # the library's way back: totals read from the file
    with TotalsReader(whole) as rd:
        for c in whole["captures"]:
            line = rd.line(c)
            c.update((k, v) for k, v in (line or {}).items() if k != "path")
            c.pop("totals", None)
    old = base / "old"
    old.mkdir()
    (old / "summary.json").write_text(json.dumps(dict(whole), indent=2))
    return old, new


def test_inline_makes_the_two_forms_equal(two):
    old, new = two
    raw = _diff(old / "summary.json", new / "summary.json")
    assert raw.returncode == 1 and "op_totals: only in A" in raw.stdout and "totals: only in B" in raw.stdout
    same = _diff(old / "summary.json", new / "summary.json", "--inline")
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("equal")
    # a changed number inside the file is found once the lines are put back
    lines = (new / "capture_totals.jsonl").read_bytes().split(b"\n")
    first = json.loads(lines[0])
    key = next(k for k in ("op_totals", "kernel_totals") if first.get(k))
    changed = new.parent / "changed"
    shutil.copytree(new, changed)
    row = first[key][0]
    row[2] = row[2] + 1.0 if isinstance(row[2], (int, float)) else row[2]
    body = json.dumps(first, separators=(",", ":")).encode()
    summary = json.loads((changed / "summary.json").read_text())
    c0 = next(c for c in summary["captures"] if c.get("totals", {}).get("offset") == 0)
    rest = b"\n".join(lines[1:])
    (changed / "capture_totals.jsonl").write_bytes(body + b"\n" + rest)
    shift = len(body) + 1 - c0["totals"]["bytes"]
    for c in summary["captures"]:
        ref = c.get("totals")
        if isinstance(ref, dict):
            if ref["offset"] == 0:
                ref["bytes"] = len(body) + 1
            else:
                ref["offset"] += shift
    (changed / "summary.json").write_text(json.dumps(summary))
    found = _diff(old / "summary.json", changed / "summary.json", "--inline")
    assert found.returncode == 1 and f".{key}[0][2]:" in found.stdout, found.stdout


def test_bad_references_are_usage_errors(two, tmp_path):
    _, new = two
    summary = json.loads((new / "summary.json").read_text())
    cases = {
        "missing_file": lambda s: (new / "capture_totals.jsonl", None),
        "outside": lambda s: s["captures"][0]["totals"].update(file="../x.jsonl"),
        "not_json": lambda s: s["captures"][0]["totals"].update(offset=1),
        "other_capture": lambda s: s["captures"][0].update(path="elsewhere/x.json"),
    }
    for name, change in cases.items():
        d = tmp_path / name
        d.mkdir()
        s = json.loads(json.dumps(summary))
        change(s)
        (d / "summary.json").write_text(json.dumps(s))
        if name != "missing_file":
            shutil.copy(new / "capture_totals.jsonl", d / "capture_totals.jsonl")
        out = _diff(d / "summary.json", new / "summary.json", "--inline")
        assert out.returncode == 2 and "summary_diff:" in out.stderr, (name, out.stdout, out.stderr)
