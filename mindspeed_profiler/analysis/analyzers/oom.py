"""Out-of-memory and host watermark records (issue 47; metrics/oom.py writes them) as rows: one per
record (OOM_RECORDS: who, where, what it tried to allocate, the device's and the host's memory at
that moment), and when the allocator's snapshot was dumped beside it, what was alive at the failure
(OOM_LIVE): the live blocks grouped by allocation site (the first frame outside torch's code) and by
the stage that allocated them (each block's last `alloc` event in the history, placed in the
record's stage calls by its wall-clock time), and tracemalloc's largest Python sites for a host
record. Pure."""
from __future__ import annotations


from mindspeed_profiler.analysis.analyzers.memory import site_of
from mindspeed_profiler.analysis.parsing.numbers import json_int
from mindspeed_profiler.analysis.models.rows import Field, RowModel, each_capture, inside

BEFORE_HISTORY = "(before the history)"   # allocated before the ring's oldest event
OUTSIDE_STAGES = "(outside stages)"       # allocated between stage calls
NO_STACK = "(no stack recorded)"          # a block whose allocation the history did not see
MESSAGE_SHOWN = 300


def _calls(rec: dict) -> list[tuple[str, int, int]]:
    """The record's stage calls as (stage, start_ns, end_ns), the unfinished one ending at the record."""
    out = []
    for c in rec.get("stage_calls") or []:
        if isinstance(c, list) and len(c) == 4 and isinstance(c[2], int):
            out.append((str(c[0]), c[2], c[3] if isinstance(c[3], int) else rec.get("time_ns") or c[2]))
    return out


def _stage_at(calls: list[tuple[str, int, int]], t_ns: int | None) -> str:
    if t_ns is None:
        return BEFORE_HISTORY
    inside_ = [c for c in calls if c[1] <= t_ns <= c[2]]
    return max(inside_, key=lambda c: c[1])[0] if inside_ else OUTSIDE_STAGES   # the innermost: the latest start


def live_at_failure(snapshot: dict, rec: dict, top_n: int) -> tuple[list[dict], dict]:
    """OOM_LIVE rows (by site: the top_n; by stage: all) of the snapshot's live blocks, and a summary:
    live bytes, the snapshot's last `oom` event (size asked, device_free)."""
    alloc_time: dict[int, int | None] = {}
    alloc_frames: dict[int, list] = {}
    oom_event: dict | None = None
    traces = snapshot.get("device_traces") if isinstance(snapshot.get("device_traces"), list) else []
    for trace in traces:
        for e in trace if isinstance(trace, list) else []:
            if not isinstance(e, dict):
                continue
            if e.get("action") == "alloc" and isinstance(e.get("addr"), int):
                t = json_int(e.get("time_us"))
                alloc_time[e["addr"]] = t * 1000 if t is not None else None
                alloc_frames[e["addr"]] = e.get("frames") if isinstance(e.get("frames"), list) else []
            elif e.get("action") == "oom":
                oom_event = e
    calls = _calls(rec)
    by: dict[tuple[str, str], list[int]] = {}
    live = 0
    for seg in snapshot.get("segments") if isinstance(snapshot.get("segments"), list) else []:
        blocks = seg.get("blocks") if isinstance(seg, dict) and isinstance(seg.get("blocks"), list) else []
        for b in blocks:
            if not isinstance(b, dict) or b.get("state") != "active_allocated" or json_int(b.get("size")) is None:
                continue
            size, addr = b["size"], b.get("address")
            live += size
            frames = b.get("frames") if isinstance(b.get("frames"), list) and b.get("frames") else alloc_frames.get(addr, [])
            site = site_of(frames) if frames else NO_STACK
            for key in (("site", site), ("stage", _stage_at(calls, alloc_time.get(addr)))):
                acc = by.setdefault(key, [0, 0])
                acc[0] += size
                acc[1] += 1
    rows = []
    for kind in ("site", "stage"):
        ranked = sorted(((k[1], v) for k, v in by.items() if k[0] == kind), key=lambda kv: -kv[1][0])
        for key, (nbytes, count) in ranked[:top_n] if kind == "site" else ranked:
            rows.append(OOM_LIVE.row(record=rec.get("_file"), by=kind, key=key, bytes=nbytes, count=count))
    summary = {"live_bytes": live}
    if oom_event is not None:
        summary["snapshot_tried_bytes"] = json_int(oom_event.get("size"))
        summary["snapshot_device_free_bytes"] = json_int(oom_event.get("device_free"))
    return rows, summary


def python_rows(rec: dict, top_n: int) -> list[dict]:
    """tracemalloc's largest Python sites kept in a record's host section (OOM_LIVE, by python)."""
    top = (rec.get("host") or {}).get("python_top") if isinstance(rec.get("host"), dict) else None
    return [OOM_LIVE.row(record=rec.get("_file"), by="python", key=str(t.get("site")), bytes=json_int(t.get("bytes")),
                         count=json_int(t.get("count")))
            for t in (top or [])[:top_n] if isinstance(t, dict)]


def record_row(rec: dict, live: list[dict], live_summary: dict | None, snapshot_problem: str | None) -> dict:
    """One OOM_RECORDS row."""
    dev = rec.get("device") if isinstance(rec.get("device"), dict) else {}
    stats = dev.get("stats") if isinstance(dev.get("stats"), dict) else {}
    host = rec.get("host") if isinstance(rec.get("host"), dict) else {}
    exc = rec.get("exception") if isinstance(rec.get("exception"), dict) else {}
    mark = rec.get("watermark") if isinstance(rec.get("watermark"), dict) else {}
    snap = rec.get("snapshot") if isinstance(rec.get("snapshot"), dict) else {}

    def largest(kind: str) -> dict:
        return next((r for r in live if r["by"] == kind), {})
    site, stage = largest("site"), largest("stage")
    message = exc.get("message")
    return OOM_RECORDS.row(
        record=rec.get("_file"), kind=rec.get("kind"), run_id=rec.get("run_id"), role=rec.get("role"),
        rank=json_int(rec.get("rank")), stage=rec.get("stage"), iteration=json_int(rec.get("iteration")),
        time_ns=json_int(rec.get("time_ns")), exception=exc.get("type"),
        message=message[:MESSAGE_SHOWN] if isinstance(message, str) else None,
        tried_bytes=json_int(rec.get("tried_bytes")), device_free_bytes=json_int(dev.get("free_bytes")),
        device_allocated_bytes=json_int(stats.get("allocated_bytes_current")),
        device_reserved_bytes=json_int(stats.get("reserved_bytes_current")),
        capacity_bytes=json_int(dev.get("capacity_bytes")), host_rss_bytes=json_int(host.get("rss_bytes")),
        host_available_bytes=json_int(host.get("available_bytes")), host_limit_bytes=json_int(host.get("limit_bytes")),
        watermark_share=mark.get("share") if isinstance(mark.get("share"), (int, float)) else None,
        snapshot=snap.get("file"), snapshot_seconds=snap.get("seconds"),
        live_bytes=(live_summary or {}).get("live_bytes"), top_site=site.get("key"), top_site_bytes=site.get("bytes"),
        top_stage=stage.get("key"), top_stage_bytes=stage.get("bytes"), snapshot_problem=snapshot_problem)


OOM_RECORDS = RowModel(
    "oom_records", "out-of-memory error or host watermark crossing (metrics/memory/*.memory.json)",
    "captures[*].stage_memory.records[*] (kind memory)", table="oom_records", method="oom_records",
    select=each_capture(inside("stage_memory", "records")), fields=(
        Field("record", "text", "the record's file name"),
        Field("kind", "text", "`device_oom`, `host_oom` (an error escaping a stage) or `host_watermark`"),
        Field("run_id", "text", "the run that wrote it"),
        Field("role", "text", "the worker's role"),
        Field("rank", "rank", "the worker's rank"),
        Field("stage", "text", "the stage the error escaped (the stage running at a watermark crossing)"),
        Field("iteration", "iteration", "the iteration"),
        Field("time_ns", "number", "when (Unix ns)"),
        Field("exception", "text", "the exception's type (module.name); null for a watermark"),
        Field("message", "text", "its message, first 300 characters"),
        Field("tried_bytes", "bytes", "what the failed allocation asked for (from the message)"),
        Field("device_free_bytes", "bytes", "free device memory (mem_get_info) at the record"),
        Field("device_allocated_bytes", "bytes", "allocated by the caching allocator at the record"),
        Field("device_reserved_bytes", "bytes", "reserved by the caching allocator at the record"),
        Field("capacity_bytes", "bytes", "the device's memory"),
        Field("host_rss_bytes", "bytes", "the process's resident memory at the record"),
        Field("host_available_bytes", "bytes", "host memory still available to it (MemAvailable, within its cgroup)"),
        Field("host_limit_bytes", "bytes", "the host memory it may use (its cgroup's limit, else MemTotal)"),
        Field("watermark_share", "share", "the watermark crossed (host_watermark)"),
        Field("snapshot", "text", "the allocator's snapshot beside it (opens in https://pytorch.org/memory_viz), or null"),
        Field("snapshot_seconds", "s", "the time its dump took"),
        Field("live_bytes", "bytes", "allocated blocks alive in the snapshot"),
        Field("top_site", "text", "the allocation site holding the most of them"),
        Field("top_site_bytes", "bytes", "... its bytes"),
        Field("top_stage", "text", "the stage that allocated the most of them"),
        Field("top_stage_bytes", "bytes", "... its bytes"),
        Field("snapshot_problem", "text", "why the snapshot could not be read, when it could not"),
    ))
OOM_LIVE = RowModel(
    "oom_live", "group of what was alive at an out-of-memory error (by allocation site, by stage, by Python site)",
    "captures[*].stage_memory.live[*] (kind memory)", table="oom_live", method="oom_live",
    select=each_capture(inside("stage_memory", "live")), fields=(
        Field("record", "text", "the record's file name (oom_records.record)"),
        Field("by", "text", "`site` (the snapshot's allocation sites, the top ones), `stage` (the stage whose call "
              "allocated the block; `(before the history)`, `(outside stages)`), `python` (tracemalloc's top sites)"),
        Field("key", "text", "the site or the stage"),
        Field("bytes", "bytes", "live bytes in the group"),
        Field("count", "count", "blocks (allocations) in the group"),
    ))
