"""The training side under hostile input (issue 31, items 1, 2 and 18): a FIFO or a link where the
metrics file goes, a span text that UTF-8 cannot hold, a count that is an integer of another type.
Training is never hurt, and nothing else is lost."""
from __future__ import annotations

import glob
import json
import os
import socket
import stat
import threading

import numpy as np
import pytest

from conftest import tracer_cfg
from mindspeed_profiler import IntegratedProfiler
from mindspeed_profiler.core import formats
from mindspeed_profiler import load_config
from mindspeed_profiler.analysis.timeline.merge import build_timeline
from mindspeed_profiler.analysis.parsing.segments import read_segment
from mindspeed_profiler.tracing import init_tracer, shutdown_tracer, trace_span

# ------------------------------------------------------------------------------ 1. what sits at the metrics file's path


def _metrics_profiler(tmp_path) -> IntegratedProfiler:
    cfg = load_config({"integrated": {"profile_save_path": str(tmp_path)}, "metrics": {"enable": True}})
    return IntegratedProfiler(cfg, role="actor", rank=0, world_size=1)


def _metrics_path(tmp_path):
    path = tmp_path / formats.METRICS_DIR / formats.metrics_file_name("actor", 0)
    path.parent.mkdir(parents=True)
    return path


def _train_in_a_thread(prof: IntegratedProfiler, fifo=None, iterations: int = 3) -> None:
    """Run start / step x N / stop in a thread; fail if it has not returned within 30 s (it takes
    milliseconds). A writer stuck on the FIFO is let go by opening its read end."""
    def loop() -> None:
        prof.start()
        for i in range(iterations):
            with prof.stage("actor_update"):
                pass
            prof.step(tokens=10)
        prof.stop()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    t.join(timeout=30)
    if t.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))   # unblock the stuck open()
        t.join(timeout=5)
        pytest.fail("training hung in step() on what sits at the metrics file's path")


def test_a_fifo_at_the_metrics_path_never_blocks_training(clean_state, tmp_path, runtime_warnings):
    path = _metrics_path(tmp_path)
    os.mkfifo(path)
    prof = _metrics_profiler(tmp_path)
    _train_in_a_thread(prof, fifo=path)
    assert prof.metrics()["iteration"] == 3 and prof.metrics()["perf/tokens"] == 10   # the rows are still made
    (msg,) = runtime_warnings("could not write the iteration metrics")         # reported once
    assert str(path) in msg and "not a regular file" in msg and "training goes on" in msg


def test_a_symlink_at_the_metrics_path_never_has_its_target_written(clean_state, tmp_path, runtime_warnings):
    path = _metrics_path(tmp_path)
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's own file\n")
    path.symlink_to(precious)
    prof = _metrics_profiler(tmp_path)
    _train_in_a_thread(prof)
    assert precious.read_text() == "the user's own file\n"                   # not emptied, not appended to
    assert path.is_symlink()
    (msg,) = runtime_warnings("could not write the iteration metrics")
    assert str(path) in msg and "symbolic link" in msg


def test_a_fifo_at_the_segment_path_never_blocks_the_tracer(clean_state, tmp_path, runtime_warnings):
    """The tracer's segment file is opened by the same helper: a FIFO there hung init_tracer() (it
    writes the header at once) in the training process."""
    (tmp_path / "timeline").mkdir()
    fifo = tmp_path / "timeline" / formats.segment_name("r", 0, socket.gethostname(), os.getpid())
    os.mkfifo(fifo)
    done = []

    def trace() -> None:
        init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)
        with trace_span("a", cat="stage"):
            pass
        shutdown_tracer()
        done.append(True)

    t = threading.Thread(target=trace, daemon=True)
    t.start()
    t.join(timeout=30)
    if t.is_alive():
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))   # unblock the stuck open()
        t.join(timeout=5)
        pytest.fail("the tracer hung on a FIFO at the segment path")
    assert done and stat.S_ISFIFO(os.stat(fifo).st_mode)
    (msg,) = runtime_warnings("tracer: cannot start")
    assert fifo.name in msg and "not a regular file" in msg and "training continues" in msg


def test_a_fifo_at_a_collector_segment_path_is_refused_at_once(tmp_path):
    """The Ray collector (one actor writing every worker's segment) opens with the same helper: a
    FIFO there fails that write (the worker falls back to a local file), never stalls the actor."""
    from mindspeed_profiler.core.fileio import UnsafeFile
    from mindspeed_profiler.tracing.collector import TraceCollector

    os.mkfifo(tmp_path / "w.seg.jsonl")
    collector = TraceCollector(str(tmp_path))
    errors: list[Exception] = []

    def write() -> None:
        try:
            collector.write("w.seg.jsonl", b"{}\n")
        except Exception as exc:
            errors.append(exc)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    t.join(timeout=30)
    if t.is_alive():
        os.close(os.open(tmp_path / "w.seg.jsonl", os.O_RDONLY | os.O_NONBLOCK))
        t.join(timeout=5)
        pytest.fail("the collector hung on a FIFO at a segment path")
    assert len(errors) == 1 and isinstance(errors[0], UnsafeFile) and "w.seg.jsonl" in str(errors[0])
    assert collector.write("ok.seg.jsonl", b"{}\n") == 3


def test_a_fifo_at_the_process_level_iterations_file_never_blocks_a_step(tmp_path, runtime_warnings):
    """The wrapped worker's iteration follower writes its iterations file from step(), by the same
    helper: a FIFO there is reported once, and the follower still follows the iterations."""
    from mindspeed_profiler.capture import observers
    from mindspeed_profiler.system.spec import WorkerSpec
    from mindspeed_profiler.system.worker import IterationFollower, RecordWriter

    spec = WorkerSpec(backend="nsys", group="actor", rank=0, output_dir=str(tmp_path))
    os.mkfifo(spec.iterations_path)
    follower = IterationFollower(spec, RecordWriter(spec))
    prof = object()

    def steps() -> None:
        observers.notify([follower], "started", prof, 1)
        for it in range(2, 5):
            observers.notify([follower], "step", prof, it)

    t = threading.Thread(target=steps, daemon=True)
    t.start()
    t.join(timeout=30)
    if t.is_alive():
        os.close(os.open(spec.iterations_path, os.O_RDONLY | os.O_NONBLOCK))
        t.join(timeout=5)
        pytest.fail("step() hung on a FIFO at the process-level iterations file")
    assert follower.current == 4
    (msg,) = runtime_warnings("process-level capture: cannot write")
    assert str(spec.iterations_path) in msg and "not a regular file" in msg and "training goes on" in msg
    assert not runtime_warnings("iteration listener")


# ------------------------------------------------------------------------------ 2. spans with lone surrogates

NAME = os.fsdecode(b"ckpt_\xff.pt")          # a non-UTF-8 file name, as Python decodes it: 'ckpt_\udcff.pt'


def _segment_sessions(tmp_path):
    (path,) = glob.glob(str(tmp_path / "timeline" / "*.seg.jsonl"))
    seg = read_segment(path)
    assert not seg.problems, seg.problems
    (session,) = seg.sessions
    return session


def test_a_lone_surrogate_in_a_span_never_loses_the_batch(clean_state, tmp_path, runtime_warnings):
    init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)   # one flush: at the end
    with trace_span("before", cat="stage"):
        pass
    with trace_span(NAME, cat="stage"):
        pass
    with trace_span("in_cat", cat="io\udcff"):
        pass
    with trace_span("in_args", cat="stage", args={"file": NAME, NAME: 1, "nested": [{"f": NAME}]}):
        pass
    with trace_span("after", cat="stage"):
        pass
    shutdown_tracer()
    session = _segment_sessions(tmp_path)
    names = [e[1] for e in session.events]
    assert names == ["before", "ckpt_\\udcff.pt", "in_cat", "in_args", "after"]   # the escape, as text
    assert session.events[2][2] == "io\\udcff"
    assert session.events[3][6]["file"] == "ckpt_\\udcff.pt" and session.events[3][6]["ckpt_\\udcff.pt"] == 1
    assert session.events[3][6]["nested"] == [{"f": "ckpt_\\udcff.pt"}]
    assert session.stats == {"type": "stats", "recorded": 5, "dropped": 0, "failed_writes": 0}
    merged = [e["name"] for e in build_timeline(str(tmp_path / "timeline"))["traceEvents"] if e.get("ph") == "X"]
    assert {"before", "ckpt_\\udcff.pt", "in_cat", "in_args", "after"} <= set(merged)
    assert not runtime_warnings("tracer")


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("repr refused")


def test_an_event_that_cannot_be_encoded_is_dropped_alone_and_counted(clean_state, tmp_path, runtime_warnings):
    init_tracer(tracer_cfg(tmp_path, flush_interval_s=60.0), role="r", rank=0)
    for i in range(3):
        with trace_span(f"good{i}", cat="stage"):
            pass
        with trace_span("bad", cat="stage", args={"x": _Unprintable()}):
            pass
    shutdown_tracer()
    session = _segment_sessions(tmp_path)
    assert [e[1] for e in session.events] == ["good0", "good1", "good2"]
    assert session.stats == {"type": "stats", "recorded": 3, "dropped": 3, "failed_writes": 0}   # honest
    (msg,) = runtime_warnings("could not be written")
    assert "'bad'" in msg and "repr refused" in msg and "dropped and counted" in msg


# ------------------------------------------------------------------------------ 18. counts of any integer type


def test_any_integral_count_is_an_integer(tmp_path, clean_state):
    torch = pytest.importorskip("torch")
    prof = _metrics_profiler(tmp_path)
    prof.start()
    given = [np.int64(4096), np.int32(7), np.uint64(2**40), np.uint8(3), torch.tensor(5),
             torch.tensor(6, dtype=torch.int32)]
    for value in given:
        prof.step(tokens=value, samples=np.int16(2), response_tokens=value)
        row = prof.metrics()
        assert row["perf/tokens"] == int(value) and type(row["perf/tokens"]) is int, (value, row)
        assert row["perf/samples"] == 2 and row["perf/response_tokens"] == int(value)
    prof.stop()
    lines = (tmp_path / formats.METRICS_DIR / formats.metrics_file_name("actor", 0)).read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["perf/tokens"] for r in rows] == [int(v) for v in given]       # written, not only kept in memory


@pytest.mark.parametrize("make,words", [
    (lambda torch: np.True_, ["True", "bool"]),
    (lambda torch: torch.tensor(True), ["tensor(True)"]),
    (lambda torch: torch.tensor(5.0), ["tensor(5.)"]),
    (lambda torch: np.float64(4096.0), ["4096.0", "float64"]),
    (lambda torch: 2.5, ["2.5", "float"]),
    (lambda torch: np.int64(-3), ["-3", "int64"]),
    (lambda torch: torch.tensor([1, 2]), ["tensor([1, 2])"]),
])
def test_flags_fractions_and_negatives_of_any_type_stay_value_errors(tmp_path, clean_state, make, words):
    torch = pytest.importorskip("torch")
    prof = _metrics_profiler(tmp_path)
    prof.start()
    with pytest.raises(ValueError) as e:                           # docs/metrics.md: a ValueError, before stepping
        prof.step(tokens=make(torch))
    assert "step(tokens=...)" in str(e.value) and "non-negative integer" in str(e.value)
    assert all(w in str(e.value) for w in words), str(e.value)
    assert prof.iteration == 1
    prof.stop()
