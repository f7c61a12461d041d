"""analysis/parsing/samples.py: the reader of samples/<role>_rank<R>.jsonl (docs/rollout.md's
record format), on real files written here in that format."""
from __future__ import annotations

import json

from mindspeed_profiler.analysis.parsing.samples import read_samples


def batch_line(iteration=3, stage="actor_generate", role="actor", rank=0, n=2, **kw) -> dict:
    return {"type": "batch", "v": 1, "role": role, "rank": rank, "iteration": iteration, "stage": stage,
            "samples": n, "dropped": 0, "recorded_ns": 1, "source": "dict", "clock": "wall", "problems": [], **kw}


def sample_line(sid, start, end, tokens=10, iteration=3, stage="actor_generate", **kw) -> dict:
    return {"type": "sample", "iteration": iteration, "stage": stage, "id": sid, "prompt_tokens": 5,
            "response_tokens": tokens, "start_ns": start, "first_token_ns": start, "end_ns": end,
            "finish_reason": "stop", "truncated": False, "policy_version": None, "reward_s": None,
            "tool_s": None, "queue_s": None, "prefill_s": None, "decode_s": None, "problem": None, **kw}


def write(path, lines) -> None:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))


def test_reads_batches_and_samples(tmp_path):
    p = tmp_path / "actor_rank2.jsonl"
    write(p, [batch_line(rank=2), sample_line("a", 10, 20), sample_line(7, 10, 40, finish_reason="length", truncated=True)])
    f = read_samples(p)
    assert (f.role, f.rank, f.problems) == ("actor", 2, [])
    assert [b.iteration for b in f.batches] == [3]
    a, b = f.samples
    assert (a.id, a.start_ns, a.end_ns, a.rank, a.timed) == ("a", 10, 20, 2, True)
    assert (b.id, b.truncated, b.finish_reason) == ("7", True, "length")


def test_corrupt_line_is_a_problem_and_the_others_are_read(tmp_path):
    p = tmp_path / "actor_rank0.jsonl"
    write(p, [batch_line(), sample_line("a", 10, 20), '{"type": "sample", "iterat', "[1, 2]",
              {"type": "sample", "stage": "actor_generate"}, {"type": "what"}, sample_line("b", 10, 30)])
    f = read_samples(p)
    assert [s.id for s in f.samples] == ["a", "b"]
    assert [n for n, _ in f.problems] == [3, 4, 5, 6]
    assert "not valid JSON" in f.problems[0][1] and "iteration None" in f.problems[2][1]
    assert "unknown record type 'what'" in f.problems[3][1]


def test_inconsistent_or_bad_times_set_problem_other_bad_fields_are_nulled(tmp_path):
    p = tmp_path / "actor_rank0.jsonl"
    write(p, [batch_line(), sample_line("back", 50, 20), sample_line("text", "10", 20),
              sample_line("writer", 10, 20, problem="engine clock unknown"),
              sample_line("reward", 10, 20, reward_s="fast", response_tokens=-1),
              sample_line("nulls", None, None)])
    s = {x.id: x for x in read_samples(p).samples}
    assert s["back"].problem == "end_ns 20 before start_ns 50" and not s["back"].timed
    assert "start_ns '10'" in s["text"].problem and s["text"].start_ns is None
    assert s["writer"].problem == "engine clock unknown"
    assert s["reward"].problem is None and s["reward"].reward_s is None and s["reward"].response_tokens is None
    assert s["nulls"].problem is None and not s["nulls"].timed
    probs = read_samples(p).problems
    assert len(probs) == 1 and "reward_s 'fast'" in probs[0][1] and "response_tokens -1" in probs[0][1]


def test_truncated_from_finish_reason_when_not_given(tmp_path):
    p = tmp_path / "actor_rank0.jsonl"
    write(p, [batch_line(), sample_line("a", 1, 2, truncated=None, finish_reason="length")])
    assert read_samples(p).samples[0].truncated is True


def test_hostile_values_are_read_as_null_or_skipped_never_raised(tmp_path):
    from mindspeed_profiler.analysis.parsing import samples as mod

    p = tmp_path / "actor_rank0.jsonl"
    write(p, [batch_line(),
              '{"type": "sample", "iteration": 3, "stage": "actor_generate", "id": "nan", "start_ns": 1, "end_ns": 2, '
              '"queue_s": NaN, "response_tokens": true}',
              sample_line("huge", 10**30, 20),
              '{"type": "sample", "iteration": 3, "stage": "g", "id": "deep", "x": ' + "[" * 5000 + "]" * 5000 + "}",
              '{"type": "sample", "iteration": 3, "stage": "g", "id": "long", "pad": "' + "x" * (mod.MAX_LINE_BYTES + 1) + '"}',
              '{"type": "sample", "iteration": true, "stage": "g"}',
              '{"type": "batch", "iteration": 1, "stage": ["x"]}'])
    f = read_samples(p)
    s = {x.id: x for x in f.samples}
    assert set(s) == {"nan", "huge"}
    assert s["nan"].queue_s is None and s["nan"].response_tokens is None and s["nan"].timed
    assert s["huge"].start_ns is None and "start_ns" in s["huge"].problem and not s["huge"].timed
    msgs = " | ".join(m for _, m in f.problems)
    assert "queue_s nan" in msgs and "not valid JSON" in msgs and "bytes (at most" in msgs
    assert "iteration True" in msgs and "stage ['x']" in msgs


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    import os

    import pytest

    from mindspeed_profiler.core.fileio import UnsafeFile

    fifo = tmp_path / "actor_rank0.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFile):
        read_samples(fifo)
