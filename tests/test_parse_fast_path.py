"""The typed parse (parsing/typed_events.py, msgspec) gives the EventTable of the dict path
(orjson dicts), on real traces and on hostile ones; where it cannot take a batch, that batch falls
back to the dict path."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from mindspeed_profiler.analysis.parsing import jsonscan, typed_events
from mindspeed_profiler.analysis.parsing.events import COMM_ARG_FIELDS, EventTable, Events

ROOT = Path(__file__).resolve().parent
REAL = sorted([*ROOT.glob("data/hta/**/*.json.gz"), *Path("/work/shared/data/kineto").glob("*.json.gz"),
               *Path("/work/shared/kineto-torch19").glob("*.json.gz")])


def _read(path: Path, typed: bool) -> tuple[Events | str, typed_events.BatchDecoder]:
    dec = typed_events.BatchDecoder()
    table = EventTable()
    try:
        jsonscan.load_trace(path, table.add_batch, stream=True, decode=dec if typed else None)
    except jsonscan.TraceFormatError as exc:
        return f"TraceFormatError: {exc}", dec
    return table.finish(), dec


def _same(a: Events | str, b: Events | str) -> None:
    assert type(a) is type(b), (a, b)
    if isinstance(a, str):
        assert a == b
        return
    for k in Events.ARRAYS:
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), k
    for k in ("names", "cats", "pids", "tids", "tasks"):
        assert [(type(v), v) for v in getattr(a, k)] == [(type(v), v) for v in getattr(b, k)], k
    for k in ("t0_us", "process_names", "thread_names", "n_raw", "n_bad", "n_memory"):
        assert getattr(a, k) == getattr(b, k), k
    assert list(a.process_names.items()) == list(b.process_names.items())
    assert list(a.thread_names.items()) == list(b.thread_names.items())
    assert repr(sorted(a.comm_args.items())) == repr(sorted(b.comm_args.items()))


@pytest.fixture
def small_chunks(monkeypatch):
    # many batches per file: every chunk boundary case is hit on small traces too
    monkeypatch.setattr(jsonscan, "CHUNK", 4096)
    monkeypatch.setattr(jsonscan, "_FAST_WINDOW", 2048)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_traces_same_table(path, small_chunks):
    typed, dec = _read(path, True)
    plain, _ = _read(path, False)
    _same(typed, plain)
    assert dec.typed > 0    # the fast path was taken


def _good(i: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": f"k{i % 5}", "pid": 0, "tid": 7, "ts": 1000 + i, "dur": 2,
            "args": {"correlation": i, "External id": i, "grid": [1, 2, 3]}}


HOSTILE = [
    {"ph": "X", "name": "s", "cat": "cpu_op", "pid": "1", "tid": "2", "ts": "1704161511420306.491", "dur": "3.5"},
    {"ph": "X", "name": 5, "cat": ["x"], "pid": [1], "tid": {"a": 1}, "ts": 10, "dur": 1},
    {"ph": "X", "name": None, "ts": None},
    {"ph": "X"},
    {"ph": "X", "name": "b", "pid": True, "tid": False, "ts": True, "dur": 1.5},
    {"ph": "X", "name": "big", "pid": 2**70, "tid": -(2**64), "ts": 2**63, "dur": 2**64 - 1},
    {"ph": "X", "name": "big2", "pid": 2**63 - 1, "tid": -(2**63), "ts": 10, "dur": 1, "args": {"correlation": 2**65}},
    {"ph": "X", "name": "nulls", "ts": 5, "dur": 1, "args": None},
    {"ph": "X", "name": "argjunk", "ts": 5, "dur": 1, "args": ["In msg nelems"]},
    {"ph": "X", "name": "argstr", "ts": 5, "dur": 1, "args": "In msg nelems"},
    {"ph": "X", "name": "corrjunk", "ts": 5, "dur": 1, "args": {"correlation": "7", "Task Type": 3}},
    {"ph": "X", "name": "conn", "ts": 5, "dur": 1, "args": {"connection_id": 9, "Task Type": "AI_CORE"}},
    {"ph": "X", "name": "corrnull", "ts": 5, "dur": 1, "args": {"correlation": None, "connection_id": 4}},
    {"ph": "X", "name": "ncclKernel", "ts": 6, "dur": 1, "args": {"In msg nelems": 1024, "Out msg nelems": 2**70,
                                                                 "Group size": 8, "dtype": "Float", "Process Group Ranks": [0, 1],
                                                                 "Collective name": None}},
    {"ph": "X", "name": "neg", "ts": 5, "dur": -1},
    {"ph": "X", "name": "far", "ts": 1e300, "dur": 1},
    {"ph": "B", "name": "be", "pid": 1, "tid": 1, "ts": 20, "args": {"correlation": 3}},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 25, "args": {"x": 1}},
    {"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "python3"}},
    {"ph": "M", "name": "thread_name", "pid": 3, "tid": 4, "args": {"name": None}},
    {"ph": "M", "name": "thread_name", "pid": 3, "tid": 5, "args": {}},
    {"ph": "M", "name": "thread_name", "pid": 3, "tid": 6},
    {"ph": "M", "name": "thread_name", "pid": 3, "tid": 6, "args": None},
    {"ph": "M", "name": "process_name", "pid": 4, "args": {"name": 12}},
    {"ph": "M", "name": "process_name", "pid": [4], "args": {"name": "unhashable pid"}},
    {"ph": "i", "name": "[memory]", "s": "t", "ts": 7, "args": {"Bytes": 5}},
    {"ph": "I", "name": "[memory]", "ts": 7},
    {"ph": 5, "name": "x"},
    {"ph": "f", "id": 1, "ts": 3},
    3, "str", None, [1, 2], {},
]


@pytest.mark.parametrize("k", range(len(HOSTILE)))
def test_hostile_event_same_table(k, tmp_path, small_chunks):
    # the hostile event amid good ones, so that its batch (and only it) may fall back
    ev = [_good(i) for i in range(60)] + [HOSTILE[k]] + [_good(i) for i in range(60, 120)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev, "baseTimeNanoseconds": 5}))
    typed, dec = _read(p, True)
    plain, _ = _read(p, False)
    _same(typed, plain)
    assert dec.typed > 0


def _meta(name: str, pid, tid, value) -> dict:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": {"name": value}}


@pytest.mark.parametrize("case", ["repeats", "renamed in a batch", "renamed later", "mixed"])
def test_repeated_metadata_same_names_in_the_same_order(case, tmp_path, small_chunks, monkeypatch):
    """A trace that repeats its "M" events (HTA's MTIA trace: 310k for 10 threads): the typed path
    reads a batch's repeats once where each key is named one way (typed_events._meta_names) and
    gives the dict path's names, last one of each key, keys in first-seen order; a key named two
    ways in a batch is read event by event."""
    block = [_meta("process_name", 1, 0, "MTIA 1"), _meta("process_labels", 1, 0, "x"),
             _meta("process_name", 1, 9, "MTIA 1"),            # the same pid from another tid
             _meta("thread_name", 1, 2, "stream 2"), _meta("thread_name", 1, 3, "stream 3"),
             _meta("process_name", "Spans", 0, "Spans"), {"ph": "M", "name": "thread_name", "pid": 1, "tid": 4}]
    ev = []
    for i in range(40):
        ev += [_good(i)] + block
        if case == "renamed in a batch" and i % 3 == 1:
            ev += [_meta("thread_name", 1, 2, "renamed"), _meta("process_name", 1, 0, "renamed too")]
        if case == "renamed later" and i >= 30:
            ev += [_meta("thread_name", 1, 3, f"late {i}"), _meta("thread_name", 7, 7, "new")]
        if case == "mixed" and i % 7 == 0:
            ev += [_meta("thread_name", 1, 2, None), _meta("process_name", 1, 0, 12),
                   {"ph": "M", "name": "thread_name", "pid": 1, "tid": 3, "args": None}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    calls = []
    real = typed_events._names_of
    monkeypatch.setattr(typed_events, "_names_of", lambda ms: calls.append(len(ms)) or real(ms))
    typed, dec = _read(p, True)
    plain, _ = _read(p, False)
    _same(typed, plain)
    assert dec.typed > 0
    n_meta = sum(1 for e in ev if e["ph"] == "M")
    if case == "renamed in a batch":   # every batch holds a rename: each read event by event too
        assert sum(calls) > n_meta
    else:
        assert sum(calls) < n_meta   # the repeats were read once


def test_all_hostile_together(tmp_path, small_chunks):
    ev = [x for i, h in enumerate(HOSTILE) for x in (_good(i), h)]
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"traceEvents": ev}).encode()))
    _same(_read(p, True)[0], _read(p, False)[0])


@pytest.mark.parametrize("blob", [
    b'{"ph": "X", "name": "nan", "ts": NaN, "dur": 1}',
    b'{"ph": "X", "name": "inf", "ts": 1, "dur": Infinity}',
    b'{"ph": "X", "name": "bad\xff utf8", "ts": 1, "dur": 1}',
    b'{"ph": "X", "name": "ok", "ts": 1, "dur": 1, "args": {"skipped": "bad \xff utf8"}}',
    b'{"ph": "X", "na\\u006de": "escaped key", "ts": 1, "dur": 1}',
    b'{"ph": "X", "name": "dup", "name": "dup2", "ts": 1, "dur": 1, "args": {"correlation": 1}, "args": {"correlation": 2}}',
    b'{"ph": "X", "name": "deep", "ts": 1, "dur": 1, "args": {"x": ' + b"[" * 1000 + b"]" * 1000 + b'}}',
    b'{"ph": "X", "name": "trunc", "ts": 1, "dur": 1',
    b'{"ph": "X", "name": "ctl\x01", "ts": 1, "dur": 1}',
])
def test_hostile_bytes_same_table_or_error(blob, tmp_path, small_chunks):
    good = b", ".join(json.dumps(_good(i)).encode() for i in range(60))
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": [' + good + b", " + blob + b", " + good + b"]}")
    typed, _ = _read(p, True)
    plain, _ = _read(p, False)
    _same(typed, plain)


def test_truncated_file_same_error(tmp_path, small_chunks):
    body = json.dumps({"traceEvents": [_good(i) for i in range(300)]}).encode()
    gz = gzip.compress(body)
    for k, data in enumerate((gz[: len(gz) // 2], gzip.compress(body[:-3]), body[: len(body) // 2])):
        p = tmp_path / f"t{k}.json.gz"
        p.write_bytes(data)
        typed, _ = _read(p, True)
        plain, _ = _read(p, False)
        assert isinstance(typed, str) and typed == plain


def test_type_mismatch_falls_back_per_batch(tmp_path, small_chunks):
    ev = [_good(i) for i in range(400)]
    ev[200]["name"] = ["a list"]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    typed, dec = _read(p, True)
    _same(typed, _read(p, False)[0])
    assert dec.typed > 0 and ["a list"] not in typed.names and "['a list']" in typed.names


def test_a_file_the_typed_path_never_takes_is_read_as_dicts(tmp_path, small_chunks):
    ev = [{"ph": "B", "name": f"f{i}", "pid": 1, "tid": 1, "ts": i} for i in range(300)]
    ev += [{"ph": "E", "pid": 1, "tid": 1, "ts": 1000 + i} for i in range(300)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    typed, dec = _read(p, True)
    _same(typed, _read(p, False)[0])
    assert dec.typed == 0 and dec.misses == typed_events.MAX_MISSES


def test_comm_args_kept_in_field_order(tmp_path, small_chunks):
    args = {k: i for i, k in enumerate(reversed(COMM_ARG_FIELDS))}
    ev = [dict(_good(i), args=dict(args, correlation=i)) for i in range(200)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    typed, dec = _read(p, True)
    assert dec.typed > 0 and len(typed.comm_args) == 200
    assert list(typed.comm_args[0]) == list(COMM_ARG_FIELDS)
    _same(typed, _read(p, False)[0])


def test_a_number_past_float_range_in_an_unread_field_fails_neither_path(tmp_path, small_chunks):
    # orjson refuses 1e400 anywhere; the typed path skips the fields nothing reads without
    # converting them, and the dict path reads that batch with Python's json (jsonscan._lenient),
    # so such a number there fails neither (docs/perf_analysis.md)
    ev = b", ".join(json.dumps(_good(i)).encode() for i in range(100))
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": [' + ev + b', {"ph": "X", "name": "x", "ts": 1, "dur": 1, "args": {"v": 1e400}}, ' + ev + b"]}")
    typed, _ = _read(p, True)
    plain, _ = _read(p, False)
    assert isinstance(plain, Events) and isinstance(typed, Events) and typed.n_raw == plain.n_raw == 201


def test_gzip_read_as_gzip_reads_it(tmp_path, small_chunks, monkeypatch):
    """jsonscan inflates with zlib directly (not gzip.GzipFile): the same bytes for multi-member
    files and zero padding after a member, and gzip's own errors for a bad CRC, a truncated file
    and bytes after a member that start no other."""
    monkeypatch.setattr(jsonscan, "RAW_READ", 512)   # members end inside a read, and across reads
    body = json.dumps({"traceEvents": [_good(i) for i in range(300)]}).encode()
    half = len(body) // 2
    good_crc = gzip.compress(body)
    bad_crc = bytearray(good_crc)
    bad_crc[-6] ^= 0xFF
    cases = {
        "one": good_crc,
        "members": gzip.compress(body[:half]) + gzip.compress(b"") + gzip.compress(body[half:]),
        "padded": gzip.compress(body[:half]) + b"\0" * 700 + gzip.compress(body[half:]) + b"\0" * 3,
        "bad_crc": bytes(bad_crc),
        "truncated": good_crc[:-5],
        "junk_after": good_crc + b"PK\x03\x04",
        "one_byte_after": good_crc + b"\x1f",
    }
    for name, data in cases.items():
        p = tmp_path / f"{name}.json.gz"
        p.write_bytes(data)
        try:
            want = ("ok", gzip.open(p).read())
        except (OSError, EOFError) as exc:
            want = (type(exc).__name__, None)
        try:
            got = ("ok", b"".join(jsonscan.chunks(p)))
        except (OSError, EOFError) as exc:
            got = (type(exc).__name__, None)
        assert got == want, name
        assert all(len(c) <= jsonscan.CHUNK for c in jsonscan.chunks(p)) if want[0] == "ok" else True
    # pieces of every size: compressed reads of 1 byte to 64 KB, output chunks of 64 bytes up
    p = tmp_path / "members.json.gz"
    for raw_read, chunk in ((1, 64), (7, 100), (512, 4096), (1 << 16, 64)):
        monkeypatch.setattr(jsonscan, "RAW_READ", raw_read)
        monkeypatch.setattr(jsonscan, "CHUNK", chunk)
        got = list(jsonscan.chunks(p))
        assert b"".join(got) == body and max(map(len, got)) <= chunk, (raw_read, chunk)
    monkeypatch.setattr(jsonscan, "CHUNK", 4096)
    # and through the parse: the members' file gives the one-member file's table
    a, _ = _read(tmp_path / "members.json.gz", True)
    b, _ = _read(tmp_path / "one.json.gz", True)
    _same(a, b)


def _fast_cut_everywhere(buf: bytes) -> int:
    """jsonscan._fast_cut's rule spelt out: the last separator starting in the window."""
    last = None
    for m in jsonscan._SEP.finditer(buf, max(0, len(buf) - jsonscan._FAST_WINDOW)):
        last = m
    return last.start() + 1 if last is not None else -1


@pytest.mark.parametrize("window", [64 << 10, 2048, 100])
def test_fast_cut_finds_the_windows_last_separator(window, monkeypatch):
    """_fast_cut looks in the last _FAST_NEAR bytes first: the same cut as a walk of the whole
    window, whether the near part holds a separator or not, a window smaller than it, separators
    with spaces and newlines, one cut by the window's edge, none at all."""
    import random

    monkeypatch.setattr(jsonscan, "_FAST_WINDOW", window)
    rng = random.Random(7)
    small = b'{"ph": "M", "pid": 1}'
    cases = [b"", b"{}", b"}, {", small * 3, b"[" + b", ".join([small] * 2000) + b"]",
             b"}, {" + b"x" * 9000, b"}\n  ,\n  {" + b"y" * 5000 + b"}, {" + b"z" * 100,
             b"a" * 70000 + b"} ,{" + b"b" * 10, b"}, {" * 3000]
    for _ in range(200):
        parts = [rng.choice([b"}, {", b"},{", b"}\n,\n{", b"} x {", b"}}", b"{", b"abc" * rng.randint(0, 3000)])
                 for _ in range(rng.randint(0, 40))]
        cases.append(b"".join(parts))
    for buf in cases:
        assert jsonscan._fast_cut(buf) == _fast_cut_everywhere(buf), buf[:80]


def test_interner_ids_are_first_seen_order_whatever_the_batches():
    """events.Interner.ids_of: each value's id is its first-seen position across batches, whether a
    batch holds one distinct value (its fast path), several, none, or unhashable junk (its text)."""
    from mindspeed_profiler.analysis.parsing.events import Interner

    batches = [["a"] * 5, ["b", "a", "b"], [], [7] * 3, ["a"], [None, None], [["x"], "c", ["x"]], [("t", 1)] * 2]
    it = Interner()
    seen: dict = {}
    for b in batches:
        got = it.ids_of(b)
        want = [seen.setdefault(v if not isinstance(v, list) else str(v), len(seen)) for v in b]
        assert got.dtype == np.int32 and got.tolist() == want, b
    assert it.values == list(seen)
