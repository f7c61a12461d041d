"""The analysis under hostile layouts (issue 31, items 7, 8, 9, 19): FIFOs under input names, a
timeline line nested too deep to re-encode, a directory tree deeper than Python's recursion limit,
and merge's cost in the number of segments. Each is bounded in time, and the rest is analysed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import ascend_data
from mindspeed_profiler.core import formats

CLI = "import sys; from mindspeed_profiler.cli import main; sys.exit(main(sys.argv[1:]))"
# a real segment, written by the tracer in its own process: python -c MAKE_SEGMENT SAVE_PATH
MAKE_SEGMENT = """
import sys, time
from mindspeed_profiler import load_config
from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span
init_tracer(load_config({"integrated": {"profile_save_path": sys.argv[1]}, "tracer": {"enable": True}}), role="actor", rank=0)
for i in range(3):
    with trace_span("update", cat="stage", args={"i": i}):
        time.sleep(0.001)
shutdown_tracer()
"""


def _analyse(root: Path, timeout: float = 120) -> tuple[int, dict, str]:
    """`mindspeed-profiler analyse root` in a subprocess bounded by `timeout` (a hang fails the test,
    never the run): (exit code, summary.json, output)."""
    try:
        p = subprocess.run([sys.executable, "-c", CLI, "analyse", str(root), "--no-html", "-j", "1", "-q"],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"analyse {root} still running after {timeout} s: it hangs")
    summary = root / formats.ANALYSIS_DIR / formats.SUMMARY_FILE
    return p.returncode, (json.loads(summary.read_text()) if summary.is_file() else {}), p.stdout + p.stderr


def _bounded(fn, timeout: float = 20):
    """fn()'s result or exception, failing the test when it has not returned within `timeout`."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        pytest.fail(f"still blocked after {timeout} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture
def fifo(tmp_path):
    """A FIFO factory; each FIFO is opened for writing at the end, so a reader stuck on it (a
    failing test) is released."""
    made: list[Path] = []

    def make(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
        made.append(path)
        return path
    yield make
    for p in made:
        try:
            os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass   # nobody reading it: nothing to release


# ---------------------------------------------------------------- item 7: FIFOs under input names


def test_fifos_named_analysis_db_and_snapshot_never_hang_analyse(tmp_path, fifo, ascend_sets):
    text = ascend_sets("text_l0")
    shutil_copy = __import__("shutil").copytree
    shutil_copy(text / "rank0_ascend_pt", tmp_path / "rank0_ascend_pt")
    fifo(tmp_path / "rank0_ascend_pt" / "worker.7.memory_snapshot.pickle")           # in a *_ascend_pt
    loose = tmp_path / "loose" / formats.ASCEND_OUTPUT_DIR                           # a loose output directory
    loose.mkdir(parents=True)
    (loose / "kernel_details.csv").write_bytes((text / "rank1_ascend_pt" / formats.ASCEND_OUTPUT_DIR / "kernel_details.csv").read_bytes())
    fifo(loose / formats.ASCEND_ANALYSIS_DB)
    code, summary, out = _analyse(tmp_path)
    caps = {c["path"]: c for c in summary["captures"]}
    assert caps["rank0_ascend_pt"]["status"] == "ok", out
    assert caps["loose/ASCEND_PROFILER_OUTPUT"]["status"] == "ok", out
    assert any("worker.7.memory_snapshot.pickle: not a regular file" in w for w in caps["rank0_ascend_pt"]["warnings"])
    assert any("analysis.db: not a regular file" in w for w in caps["loose/ASCEND_PROFILER_OUTPUT"]["warnings"])


def test_a_fifo_listed_in_a_captures_metadata_never_hangs_analyse(tmp_path, fifo, shared_data):
    good = tmp_path / "actor_rank0_step1-1_h_1_20261130000000000_pt"
    good.mkdir()
    (good / "t.pt.trace.json.gz").write_bytes((shared_data / "kineto" / "gpu_rank0.json.gz").read_bytes())
    (good / formats.META_FILE).write_text(json.dumps({"trace_files": ["t.pt.trace.json.gz", "f.pt.trace.json.gz"]}))
    fifo(good / "f.pt.trace.json.gz")
    code, summary, out = _analyse(tmp_path)
    cap = summary["captures"][0]
    assert cap["status"] == "ok" and any("f.pt.trace.json.gz: not a regular file" in w for w in cap["warnings"]), out


def test_every_reader_of_an_input_refuses_a_fifo_without_blocking(tmp_path, fifo):
    """The readers themselves (not only discovery) open an input only as a regular file."""
    from mindspeed_profiler.analysis.parsing import jsonscan, segments
    from mindspeed_profiler.analysis.parsing.ascend_db import read_analysis_db
    from mindspeed_profiler.analysis.parsing.memory_snapshot import read_memory_snapshot
    from mindspeed_profiler.core.fileio import UnsafeFile

    p = fifo(tmp_path / "x")
    with pytest.raises(UnsafeFile, match="not a regular file"):
        _bounded(lambda: read_memory_snapshot(p))
    with pytest.raises(UnsafeFile, match="not a regular file"):
        _bounded(lambda: read_analysis_db(p))
    with pytest.raises(jsonscan.TraceFormatError, match="not a regular file"):
        _bounded(lambda: jsonscan.load_trace(p, lambda batch: None, stream=False))
    with pytest.raises(jsonscan.TraceFormatError, match="not a regular file"):
        _bounded(lambda: jsonscan.load_trace(p, lambda batch: None, stream=True))
    assert _bounded(lambda: jsonscan.expanded_size(p)) == 0
    with pytest.raises(UnsafeFile, match="not a regular file"):
        _bounded(lambda: segments.read_segment(str(p)))


def test_a_fifo_named_run_json_never_hangs_merge(tmp_path, fifo):
    """merge reads the run's run.json (tracer.gzip, metrics and system directories): a FIFO there
    once blocked it for ever; now it is read as no run.json."""
    subprocess.run([sys.executable, "-c", MAKE_SEGMENT, str(tmp_path)], check=True, timeout=120)
    fifo(tmp_path / formats.RUN_FILE)
    try:
        p = subprocess.run([sys.executable, "-c", CLI, "merge", str(tmp_path), "-q"], capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("merge still running after 60 s: it hangs on the FIFO")
    assert p.returncode == 0, p.stderr
    trace = json.loads((tmp_path / formats.TIMELINE_DIR / formats.TIMELINE_FILE).read_text())
    assert [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"] == ["update"] * 3


# ---------------------------------------------------------------- item 9: a tree deeper than the recursion limit


def _nested(top: Path, name: str, depth: int) -> Path:
    """`depth` directories `name` one in another under `top` (made one by one: makedirs recurses)."""
    p = str(top)
    for _ in range(depth):
        p = os.path.join(p, name)
        os.mkdir(p)
    return Path(p)


def _remove_tree(top: Path) -> None:
    """rm -r without recursion (shutil.rmtree, and so pytest's clean-up of old temporary
    directories, recurse per level and fail on these trees); links are removed, never followed."""
    stack = [(str(top), False)]
    while stack:
        p, emptied = stack.pop()
        if emptied:
            os.rmdir(p)
            continue
        stack.append((p, True))
        with os.scandir(p) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append((e.path, False))
                else:
                    os.unlink(e.path)


@pytest.fixture
def deep_tmp(tmp_path):
    """tmp_path, emptied at the end without recursion."""
    yield tmp_path
    for child in list(tmp_path.iterdir()):
        _remove_tree(child)


def test_a_tree_1100_directories_deep_is_analysed_and_a_link_loop_is_cut(deep_tmp, shared_data):
    """Python 3.11's os.walk (and pathlib's rglob) recurse once per level: 1,100 nested directories
    (a 2.2 KB path) ended `analyse` in a RecursionError. Here a trace lies at the bottom of such a
    tree, another at the bottom of one inside a capture directory, and a link back to the top
    (followed links: a loop) lies beside the first."""
    trace = (shared_data / "kineto" / "gpu_rank0.json.gz").read_bytes()
    deep = _nested(deep_tmp, "d", 1100)
    (deep / "bottom.pt.trace.json.gz").write_bytes(trace)
    os.symlink(deep_tmp, deep / "loop")
    cap = deep_tmp / "actor_rank0_step1-1_h_1_20261130000000000_pt"
    cap.mkdir()
    inner = _nested(cap, "e", 1100)
    (inner / "t.pt.trace.json.gz").write_bytes(trace)
    assert len(str(deep)) > 2200
    code, summary, out = _analyse(deep_tmp)
    caps = {c["path"]: c for c in summary.get("captures", [])}
    assert code == 0 and len(caps) == 2, out[-3000:]
    assert all(c["status"] == "ok" for c in caps.values())
    assert caps[cap.name]["files"] == [str((inner / "t.pt.trace.json.gz").relative_to(deep_tmp))]


# ---------------------------------------------------------------- item 8: a segment line nested too deep to write back


def _nest(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.fixture
def deep_segment(tmp_path) -> Path:
    """A real segment (the tracer's, in its own process) with one event line whose args nest 300
    deep (orjson reads 1,024 levels, writes 254) and a thread record nested as deep."""
    subprocess.run([sys.executable, "-c", MAKE_SEGMENT, str(tmp_path)], check=True, timeout=120)
    (seg,) = (tmp_path / formats.TIMELINE_DIR).glob("*" + formats.SEGMENT_SUFFIX)
    lines = seg.read_text().splitlines()
    first = json.loads(lines[2])
    assert first[1] == "update"
    lines.insert(3, json.dumps(["X", "deep", "stage", first[3] + 10, 1000, first[5]])[:-1] + "," + _nest(300) + "]")
    lines.insert(4, '{"type":"thread","lane":7,"tid":7,"name":' + _nest(300) + "}")
    seg.write_text("\n".join(lines) + "\n")
    return tmp_path


def test_a_segment_line_nested_300_deep_is_reported_and_the_rest_merged(deep_segment, capsys):
    from mindspeed_profiler.analysis.timeline.merge import build_timeline
    from mindspeed_profiler.cli import main

    assert main(["merge", str(deep_segment), "-q"]) == 0
    streamed = json.loads((deep_segment / formats.TIMELINE_DIR / formats.TIMELINE_FILE).read_text())
    in_memory = build_timeline(str(deep_segment / formats.TIMELINE_DIR))
    for trace in (streamed, in_memory):
        names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
        assert names.count("update") == 3 and names.count("deep") == 1
        deep = next(e for e in trace["traceEvents"] if e.get("name") == "deep")
        assert deep["args"]["dropped"] == "args nested more than 200 levels deep"
        warnings = trace["otherData"]["warnings"]
        assert any(":4: event args nested more than 200 levels deep" in w for w in warnings), warnings
        assert any(":5: a line nested more than 200 levels deep: skipped" in w for w in warnings), warnings
    assert streamed["traceEvents"] == in_memory["traceEvents"]


def test_a_segment_line_nested_300_deep_leaves_the_timeline_analysed(deep_segment):
    code, summary, out = _analyse(deep_segment)
    (cap,) = summary["captures"]
    assert cap["kind"] == "timeline" and cap["status"] == "ok", out
    assert any("event args nested more than 200 levels deep" in w for w in cap["warnings"]), cap["warnings"]


# ---------------------------------------------------------------- item 19: naming the workers of a merge


def test_naming_60000_workers_is_linear():
    """merge names each process `role:rank` (a duplicate also by pid@host); the names were counted
    with a list.count per process: 4.8 s of a 20,000-segment merge, about 43 s at 60,000. One
    Counter pass takes about 0.05 s here; the bound is far from both."""
    import time

    from mindspeed_profiler.analysis.timeline.stream import _Proc, _process_names

    procs = [_Proc((), "ActorGroup", k, "h", 1000 + k) for k in range(60_000)]
    procs += [_Proc((), "driver", 0, "h", 1), _Proc((), "ActorGroup", 7, "h2", 5)]
    t = time.perf_counter()
    names = _bounded(lambda: _process_names(procs), timeout=60)
    assert time.perf_counter() - t < 5
    assert names[0] == "ActorGroup:0" and names[-2] == "driver"
    assert names[7] == "ActorGroup:7 (pid 1007@h)" and names[-1] == "ActorGroup:7 (pid 5@h2)"


def test_a_report_directory_1100_deep_is_listed(deep_tmp, monkeypatch):
    """An unparsed vendor report (here msprof's, without msprof-analyze) is listed by its files: a
    listing by pathlib's rglob, which recursed per level, failed the system capture."""
    from test_system_analysis import write_system_dir

    from mindspeed_profiler.analysis.pipeline.batch import analyse_directory

    monkeypatch.setenv("PATH", "/usr/bin:/bin")   # no msprof-analyze
    write_system_dir(deep_tmp)
    d = write_system_dir(deep_tmp, backend="msprof", group="reference")
    report = d / formats.system_report_name("msprof", "reference", 0)
    (_nested(report, "p", 1100) / "bottom.bin").write_bytes(b"x")
    summary, code = analyse_directory(deep_tmp, jobs=1, progress=False, html=False, write=False)
    cap, = summary["captures"]
    assert cap["status"] == "ok", cap.get("error")
    row, = [w for w in cap["system"]["workers"] if w["backend"] == "msprof"]
    assert row["parsed"] == "unparsed" and row["files"][0] == os.path.join("PROF_1", "msprof_1.json")
    assert row["files"][1].endswith(os.path.join("p", "p", "bottom.bin")) and len(row["files"][1]) > 2200
