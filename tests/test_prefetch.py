"""parsing/prefetch.py: the analyse command's lone large gzip trace inflated by a child process while
the command imports the analysis, then served to jsonscan.chunks (this process and split_parse's
helper) from memory: the same bytes as the streaming read, never a stale or partial file."""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import time

import pytest

from conftest import REPO_ROOT
from mindspeed_profiler.core import reaper
from mindspeed_profiler.analysis.parsing import jsonscan, prefetch
from mindspeed_profiler.analysis.pipeline import forked

# a real GPU Kineto trace kept in this repository (from HTA's tests/data, MIT: tests/data/README.md)
REAL = REPO_ROOT / "tests" / "data" / "hta" / "trace_diff" / "control" / "control.json.gz"


@pytest.fixture
def small(monkeypatch):
    """Any size worth it, pieces of 1 KB (several pieces, a chunk crossing their edges)."""
    monkeypatch.setattr(prefetch, "MIN_BYTES", 0)
    monkeypatch.setattr(prefetch, "PIECE", 1 << 10)
    yield
    prefetch.release()


def _trace(tmp_path, members: int = 1):
    body = json.dumps({"traceEvents": [{"ph": "X", "name": f"op{i}", "ts": i, "dur": 1} for i in range(2000)]}).encode()
    cut = [len(body) * k // members for k in range(members + 1)]
    p = tmp_path / "t.json.gz"
    p.write_bytes(b"".join(gzip.compress(body[a:b]) for a, b in zip(cut, cut[1:])))
    return p, body


def test_served_bytes_equal_the_streaming_read_from_any_offset(tmp_path, small, monkeypatch):
    p, body = _trace(tmp_path)
    monkeypatch.setattr(jsonscan, "CHUNK", 700)
    want = {start: list(jsonscan.chunks(p, start)) for start in (0, 1, 699, 1024, len(body) // 2, len(body) - 1)}
    assert prefetch.start(p)
    for start, chunks in want.items():
        got = list(jsonscan.chunks(p, start))
        assert b"".join(got) == body[start:] == b"".join(chunks), start
        assert max(map(len, got)) <= 700
    assert prefetch.take(p) is not None
    prefetch.release(tmp_path / "other.json.gz")   # another file's release leaves it
    assert prefetch.take(p) is not None
    prefetch.release(p)
    assert prefetch.take(p) is None


def test_a_multi_member_file_is_left_to_the_streaming_read(tmp_path, small):
    """Its trailer gives the last member's size only: the child stops there and says so."""
    p, body = _trace(tmp_path, members=3)
    assert prefetch.start(p)
    assert prefetch.take(p) is None
    assert b"".join(jsonscan.chunks(p)) == body


def test_a_file_changed_after_its_inflate_is_read_again(tmp_path, small):
    p, body = _trace(tmp_path)
    assert prefetch.start(p)
    assert prefetch.take(p) is not None
    p.write_bytes(gzip.compress(body + b" "))
    assert prefetch.take(p) is None
    assert b"".join(jsonscan.chunks(p)) == body + b" "


def test_what_is_not_inflated_ahead(tmp_path, small, monkeypatch):
    p, body = _trace(tmp_path)
    plain = tmp_path / "plain.json"
    plain.write_bytes(body)
    assert not prefetch.start(plain)                       # not gzip
    assert not prefetch.start(tmp_path / "missing.json.gz")
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (40 << 20)))     # 40 MB of blanks in ~40 KB
    assert not prefetch.start(bomb)                        # parsed in a capped worker, never here
    monkeypatch.setattr(prefetch, "MIN_BYTES", len(body) + 1)
    assert not prefetch.start(p)                           # too small to be worth a process
    assert prefetch.take(p) is None


def test_a_trailer_that_understates_the_size_stops_the_inflate_there(tmp_path, small):
    p, body = _trace(tmp_path)
    data = bytearray(p.read_bytes())
    data[-4:] = (len(data) + 1).to_bytes(4, "little")      # the last member says it is smaller than the file
    p.write_bytes(bytes(data))
    assert prefetch.gzip_stream.expanded_size(p) == len(data) + 1 < len(body)
    assert prefetch.start(p)
    assert prefetch.take(p) is None                        # abandoned: the streaming read says why
    with pytest.raises(jsonscan.TraceFormatError), jsonscan.reading():
        b"".join(jsonscan.chunks(p))


def test_a_corrupt_file_is_left_to_the_streaming_read_which_reports_it(tmp_path, small):
    p, body = _trace(tmp_path)
    data = bytearray(p.read_bytes())
    data[-6] ^= 0xFF                                       # the last member's CRC
    p.write_bytes(bytes(data))
    assert prefetch.start(p)
    assert prefetch.take(p) is None
    with pytest.raises(jsonscan.TraceFormatError, match="cannot read"), jsonscan.reading():
        b"".join(jsonscan.chunks(p))


def test_release_kills_a_child_still_inflating(tmp_path, small, monkeypatch):
    p, _ = _trace(tmp_path)
    real = prefetch.gzip_stream.inflate

    def slow(f, max_out, raw_read):   # (patched here, so in the forked child too)
        for piece in real(f, max_out, raw_read):
            time.sleep(60)
            yield piece
    monkeypatch.setattr(prefetch.gzip_stream, "inflate", slow)
    assert prefetch.start(p)
    pid = prefetch._PENDING.pid
    t = time.monotonic()
    prefetch.release()
    assert time.monotonic() - t < 10 and prefetch.take(p) is None
    reaper.reap_all()   # killed (core/reaper.py collects it): at once, not after its 60 s
    assert time.monotonic() - t < 10
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_single_trace_finds_a_lone_gzip_file_only(tmp_path):
    (tmp_path / "run" / "a_pt").mkdir(parents=True)
    (tmp_path / "run" / "a_pt" / "meta.json").write_text("{}")
    assert prefetch.single_trace(str(tmp_path / "run")) is None
    one = tmp_path / "run" / "a_pt" / "w.pt.trace.json.gz"
    shutil.copy(REAL, one)
    assert prefetch.single_trace(str(tmp_path / "run")) == one
    assert prefetch.single_trace(str(one)) == one
    (tmp_path / "run" / "b_pt").mkdir()
    shutil.copy(REAL, tmp_path / "run" / "b_pt" / "w.pt.trace.json.gz")
    assert prefetch.single_trace(str(tmp_path / "run")) is None   # several: a pool analyses them


def test_the_command_with_the_trace_inflated_ahead_writes_what_it_writes_without(tmp_path, monkeypatch):
    """The real command (-j 2, the lone trace parsed by two processes) on a real GPU trace, with the
    prefetch on (any size) and off (-j 1): the same summary; the helper and this process were both
    served from memory, and nothing is left pending."""
    from mindspeed_profiler.analysis.parsing import split_parse
    from mindspeed_profiler.commands import analyse as cmd

    monkeypatch.setattr(prefetch, "MIN_BYTES", 0)
    monkeypatch.setattr(split_parse, "MIN_BYTES", 0)   # (a small trace: split all the same)
    monkeypatch.setattr(forked, "core_idle", lambda: True)   # (whatever else this box runs now)
    served = []
    real_take = prefetch.take
    def take(path):
        got = real_take(path)
        served.append((path.name, got is not None))
        return got
    monkeypatch.setattr(prefetch, "take", take)
    runs = {}
    for name, jobs in (("ahead", "2"), ("plain", "1")):
        d = tmp_path / name
        d.mkdir()
        shutil.copy(REAL, d / REAL.name)
        assert cmd.main([str(d), "-q", "-j", jobs, "--no-html"]) == 0
        s = json.loads((d / "analysis" / "summary.json").read_text())
        for k in ("elapsed_s", "created", "jobs"):
            s.pop(k, None)
        (c,) = s["captures"]
        c.pop("analyse_s", None)
        runs[name] = (s, c["path"])
    assert served and served[0] == (REAL.name, True), served   # the -j 2 run read it from memory
    assert prefetch._PENDING is None

    same = {name: re.sub(r'"jobs": \d+', "", json.dumps(s, sort_keys=True).replace(name, "X"))
            for name, (s, _) in runs.items()}
    assert same["ahead"] == same["plain"]


def test_the_command_inflates_ahead_only_onto_an_idle_core(tmp_path, monkeypatch):
    """On a busy box (no core idle by forked.core_idle) the command forks no inflating child: the
    trace is read as it is parsed, and the analysis is the same."""
    from mindspeed_profiler.commands import analyse as cmd

    monkeypatch.setattr(prefetch, "MIN_BYTES", 0)
    started = []
    real_start = prefetch.start
    monkeypatch.setattr(prefetch, "start", lambda path: started.append(path) or real_start(path))
    for idle in (False, True):
        monkeypatch.setattr(forked, "core_idle", lambda idle=idle: idle)
        d = tmp_path / str(idle)
        d.mkdir()
        shutil.copy(REAL, d / REAL.name)
        assert cmd.main([str(d), "-q", "-j", "2", "--no-html"]) == 0
        assert json.loads((d / "analysis" / "summary.json").read_text())["counts"]["ok"] == 1
        assert [p.parent.name for p in started] == (["True"] if idle else []), started
    assert prefetch._PENDING is None


def test_the_child_holds_the_bytes_until_release_then_exits(tmp_path, small):
    """The child keeps the mapping after its answer, so that this process's unmapping is cheap and the
    pages are freed by the child's own exit (core/reaper.py lets it go)."""
    p, body = _trace(tmp_path)
    assert prefetch.start(p)
    pid = prefetch._PENDING.pid
    assert bytes(prefetch.take(p)) == body   # the answer came: the child has inflated it all
    time.sleep(0.2)
    assert os.waitpid(pid, os.WNOHANG) == (0, 0)   # still there, holding the pages
    t = time.monotonic()
    prefetch.release()
    reaper.reap_all()
    assert time.monotonic() - t < 10
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
