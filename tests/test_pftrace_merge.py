"""The streaming merge: the same JSON as the in-memory merge (byte for byte, sorted runs spilled),
the order of the old global sort, --max-spans / --window (what was cut is said), a corrupt segment
among good ones, and memory that does not grow with the number of spans (tracemalloc, no timing)."""
from __future__ import annotations

import random
import tracemalloc

import orjson
import pytest

from mindspeed_profiler.analysis.timeline import merge, spill as timeline_spill
from mindspeed_profiler.analysis.timeline.merge import build_timeline, merge_timeline_dir, read_segments
from mindspeed_profiler.cli import main as cli_main
from pftrace_decode import decode
from test_pftrace import _assert_same_timeline
from test_tracing_merge import T0, _header, _write_segment


def _random_dir(tmp_path, workers=5, spans=1500, seed=3):
    """Random spans (ties, zero lengths, negative lengths, instants, crossing spans, a second
    session in one file, asyncio lanes, clock offsets, a truncated line): the merge's hard cases."""
    rnd = random.Random(seed)
    d = tmp_path / "timeline"
    for w in range(workers):
        lines = []
        for sess in range(2 if w == 2 else 1):
            lines += [_header("driver" if w == 0 else "actor", w, 100 + w, T0 + 1000 * w + sess, 500 * w),
                      {"type": "thread", "lane": 1, "tid": 100 + w, "name": "MainThread", "task": None},
                      {"type": "thread", "lane": 2, "tid": 100 + w, "name": "MainThread", "task": "Task-2"}]
            for i in range(spans):
                lines.append(["X" if rnd.random() < 0.9 else "i", rnd.choice("abc"), rnd.choice(["rpc", "stage", "user"]),
                              rnd.randrange(0, 10_000_000, 1000), rnd.choice([0, 1000, 5000, 20000, -5]),
                              rnd.choice([1, 2, 3]), rnd.choice([None, {"k": i}, {"iteration": 2, "stage": "s"}])])
            lines.append({"type": "clock", "offset_ns": -777 * w, "uncertainty_ns": 10, "rtt_ns": 20, "reference": "driver"})
        _write_segment(d, f"w{w}_rank{w}_h_{100 + w}.seg.jsonl", lines[0], lines[1:])
    with open(d / "w1_rank1_h_101.seg.jsonl", "ab") as fh:
        fh.write(b'["X","trunc')
    return d


@pytest.fixture
def small_runs(monkeypatch):
    """Spill every 100 events: each session becomes many sorted runs."""
    real = timeline_spill.scan_segments
    monkeypatch.setattr(merge, "scan_segments", lambda paths, spill_dir=None: real(paths, spill_dir, chunk=100))


def test_streamed_json_is_byte_equal_to_the_in_memory_merge(tmp_path, small_runs):
    d = _random_dir(tmp_path)
    expected = orjson.dumps(build_timeline(str(d)))
    merge_timeline_dir(str(d))
    assert (d / "timeline.json").read_bytes() == expected
    _assert_same_timeline(d)


def test_the_json_pieces_are_what_orjson_writes(tmp_path, small_runs):
    """The streamed JSON is assembled from pieces (record heads, args text, orjson's floats): it
    must be the bytes orjson.dumps gives for the events it holds, args that say role / rank
    included (theirs win, in role / rank's place), names that are not text, odd values."""
    d = tmp_path / "timeline"
    odd = [None, {}, {"role": "x", "k": 1}, {"rank": 5}, {"s": "é\u2028\"", "f": 1e20, "t": 1e-7, "l": [1, {"a": 2}],
                                                             "n": None, "b": False, "big": 2**63 - 1, "neg": -2**63}]
    lines = [{"type": "thread", "lane": 1, "tid": 7, "name": "MainThread", "task": None}]
    lines += [["X" if i % 3 else "i", [f"n{i % 4}", 7, None, 1.5][i % 4], ["rpc", "user", 3][i % 3], i * 1_234_567,
               (i % 5) * 999_999_999, 1, odd[i % len(odd)]] for i in range(400)]
    _write_segment(d, "w_rank0_h_7.seg.jsonl", _header("actor", 0, 7, T0, 0), lines)
    merge_timeline_dir(str(d))
    raw = (d / "timeline.json").read_bytes()
    trace = orjson.loads(raw)
    assert orjson.dumps(trace) == raw == orjson.dumps(build_timeline(str(d)))
    events = [e for e in trace["traceEvents"] if e["ph"] != "M"]
    by_ts = {round(e["ts"] * 1000): e for e in events}
    for ln in lines[1:]:
        e = by_ts[ln[3]]
        assert e["name"] == str(ln[1]) and e["cat"] == str(ln[2])
        assert e["args"] == {"role": "actor", "rank": 0, **(ln[6] or {})}
        assert list(e["args"])[:2] == ["role", "rank"]
    _assert_same_timeline(d)


def test_the_order_is_the_old_global_sort(tmp_path, small_runs):
    """Every event in (ts, longest first) order, ties in (process, session, line) order: what the
    merge did when it sorted one list of all spans."""
    d = _random_dir(tmp_path)
    merge_timeline_dir(str(d))
    got = [e for e in orjson.loads((d / "timeline.json").read_bytes())["traceEvents"] if e["ph"] != "M"]
    segs = read_segments(str(d))
    pids = {}
    old = []
    for _path, sess in sorted(segs.sessions, key=lambda s: (s[1].header["role"] != "driver", s[1].header["rank"])):
        h = sess.header
        pid = pids.setdefault((h["host"], h["pid"], h["role"], h["rank"]), len(pids) + 1)
        shift = h["clock"]["wall_ns"] - h["clock"]["mono_ns"] + sess.clock["offset_ns"]
        old += [(ev[3] + shift, max(0, ev[4]) if ev[0] == "X" else 0, pid, ev[1], ev[6]) for ev in sess.events]
    origin = min(o[0] for o in old)
    old.sort(key=lambda o: ((o[0] - origin) / 1000.0, -o[1] / 1000.0))
    assert [(round(e["ts"] * 1000), round(e.get("dur", 0) * 1000), e["pid"], e["name"]) for e in got] == \
        [(o[0] - origin, o[1], o[2], o[3]) for o in old]


def test_max_spans_and_window_say_what_was_cut(tmp_path, capsys):
    d = _random_dir(tmp_path, workers=3, spans=400)
    assert cli_main(["merge", str(d), "--max-spans", "50", "--window", "0.002:0.008"]) == 0
    err = capsys.readouterr().err
    assert "timeline cut (--max-spans 50, --window 0.002:0.008): kept 50 of 1600 events" in err
    trace = orjson.loads((d / "timeline.json").read_bytes())
    events = [e for e in trace["traceEvents"] if e["ph"] != "M"]
    cut = trace["otherData"]["cut"]
    assert len(events) == 50 == cut["events_kept"] and cut["events_dropped"] == 1550
    assert sum(cut["dropped_by_worker"].values()) == 1550 and set(cut["dropped_by_worker"]) <= {"driver", "actor:1", "actor:2"}
    assert all(e["ts"] < 8000 and e["ts"] + e.get("dur", 0) >= 2000 for e in events)
    assert cut["kept_s"][0] == events[0]["ts"] / 1e6 and cut["window_s"] == [0.002, 0.008]
    dec = decode(d / "timeline.pftrace")
    assert len([s for s in dec.slices if s[0] != 0]) == 50
    (note,) = [s for s in dec.slices if s[0] == 0]
    assert note[2] == "timeline cut" and note[6]["events_dropped"] == 1550

    assert cli_main(["merge", str(d), "--window", "0.009:"]) == 0
    events = [e for e in orjson.loads((d / "timeline.json").read_bytes())["traceEvents"] if e["ph"] != "M"]
    assert events and all(e["ts"] + e.get("dur", 0) >= 9000 for e in events)
    assert cli_main(["merge", str(d)]) == 0    # no cut unless asked
    assert "cut" not in orjson.loads((d / "timeline.json").read_bytes())["otherData"]
    with pytest.raises(SystemExit):
        cli_main(["merge", str(d), "--window", "5"])


def test_a_corrupt_segment_is_reported_and_the_others_merged(tmp_path):
    d = _random_dir(tmp_path, workers=2, spans=50)
    (d / "junk_rank9_h_9.seg.jsonl").write_bytes(b"\x00\xff garbage\n{\"type\": \"header\"}\n")
    res = merge_timeline_dir(str(d))
    assert [p["name"] for p in res.other["processes"]] == ["driver", "actor:1"]
    assert any(w.startswith("junk_rank9_h_9.seg.jsonl") for w in res.other["warnings"])
    _assert_same_timeline(d)


def test_the_json_too_big_for_a_browser_is_said(tmp_path, monkeypatch, capsys):
    d = _random_dir(tmp_path, workers=2, spans=50)
    monkeypatch.setattr(merge, "BROWSER_MAX_EVENTS", 10)
    assert cli_main(["merge", str(d), "-q"]) == 0
    assert "timeline.pftrace in https://ui.perfetto.dev" in capsys.readouterr().err


def _peak_bytes(tmp_path, segments, spans):
    d = tmp_path / f"mem{segments}"
    for w in range(segments):
        evs = [["X", "s", "user", i * 1000, 900, 1, {"i": i, "stage": "update"}] for i in range(spans)]
        random.Random(w).shuffle(evs)   # segments are not sorted by start (spans are written when they end)
        _write_segment(d, f"w_rank{w}_h_{w}.seg.jsonl", _header("w", w, w + 1, T0, 0),
                       [{"type": "thread", "lane": 1, "tid": 1, "name": "MainThread", "task": None}, *evs])
    tracemalloc.start()
    try:
        merge_timeline_dir(str(d))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_spans(tmp_path):
    """10x the segments (10x the spans) costs far less than 10x the memory: nothing holds every span.
    (The old merge held ~1.5 KB per span: 4 MB for 3,000 spans, 40 MB for 30,000.)"""
    small = _peak_bytes(tmp_path, 3, 1000)
    large = _peak_bytes(tmp_path, 30, 1000)
    assert large < 3 * small, (small, large)
    assert large < 30_000 * 400, large   # well under the old ~1.5 KB per span


def test_no_pftrace_writes_the_json_only(tmp_path, capsys):
    d = _random_dir(tmp_path, workers=2, spans=20)
    assert cli_main(["merge", str(d), "--no-pftrace"]) == 0
    assert (d / "timeline.json").is_file() and not (d / "timeline.pftrace").exists()
    assert "ui.perfetto.dev" not in capsys.readouterr().out
    assert cli_main(["merge", str(d)]) == 0 and (d / "timeline.pftrace").is_file()
