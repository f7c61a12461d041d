"""Assemble docs/performance.md from the per-area benchmark pages (docs/perf_*.md).

Each benchmark writes (or its author records) its own page; this puts them on one page, headings
demoted one level, in a fixed order. Run after re-running a benchmark:
    python benchmarks/assemble_performance_doc.py
"""
from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
ORDER = ["perf_profiler.md", "perf_capture.md", "perf_ondemand.md", "perf_memory.md", "perf_rollout.md", "perf_tracing.md",
         "perf_analysis.md",
         "perf_scale.md", "perf_timeline.md"]

HEADER = """# Performance: overhead and speed, measured

All figures are measured by the scripts in `benchmarks/` (run by hand), each as ratios taken in one
run on the same machine, because these machines are shared and noisy: read a ratio, not an absolute
time. The sections below are assembled from `docs/perf_*.md` by `benchmarks/assemble_performance_doc.py`.

| script | what | section |
|---|---|---|
| `bench_profiler_overhead.py` | time per training step with profiling off / lightweight / level0 / level1 / level2 | Profiler overhead |
| `bench_capture_cost.py` | a captured iteration / an uncaptured one per level, export included, the export's phases, peak RSS; gzip levels; writer thread vs process (CPU and an H200) | Capture cost |
| `bench_ondemand.py` | the idle cost of `dynamic: true` (listening for on-demand requests) per step() and stage() | On-demand capture |
| `bench_memory.py` | the per-stage memory's cost per stage call (host and device peaks), an out-of-memory snapshot's dump, the host watermark's check; the allocator history's cost per iteration on a GPU | Memory tracking |
| `bench_vllm_rollout.py` | on the real vLLM CPU engine: the per-sample records and an attached, idle engine capture per rollout iteration, against the generation | The rollout on a real engine |
| `bench_markers.py`, `bench_tracer.py` | a decorated call with profiling off; a span with the tracer on vs RLinf's per-event Ray call | Markers and tracer |
| `bench_analyse.py` | analysis vs raw JSON parse vs HolisticTraceAnalysis; a 500 MB trace in bounded memory | Offline analysis |
| `bench_analyse_ray.py` | `analyse --ray` on 1,200 captures over simulated nodes: bytes sent to the driver, driver memory, wall time vs the local pool | Offline analysis |
| `bench_parse_floor.py` | one large trace: the floor (gunzip + orjson.loads), our parse and analysis, HTA; real >= 50 MB traces and a synthetic 500 MB one; the decoding candidates | Offline analysis: past the floor |
| `bench_parse_bound.py` | one large trace: a cold command's pieces (start, imports, inflate, typed decode, our columns, our analysis) and the least wall time they allow on N cores, against 0.5x the floor | Offline analysis: the cold command, the bound |
| `bench_ascend.py` | ours vs msprof-analyze `cluster -m all` on the real Ascend sets (whole processes) | Offline analysis: against msprof-analyze |
| `bench_scale.py` | `analyse -j 2` on 10 / 100 / 1,000 / 10,000 captures of a real GPU rank: wall time, driver peak RSS, summary.json, capture_totals.jsonl and analysis.db sizes | Cluster scale |
| `bench_merge.py` | the timeline merge (timeline.json + timeline.pftrace) of 200 / 1,000 segments x 20,000 spans: wall, peak RSS, sizes; old vs new | Timeline merge at scale |
"""


def demote(text: str) -> str:
    return "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())


def main() -> int:
    parts = [HEADER]
    for name in ORDER:
        page = DOCS / name
        if page.exists():
            parts.append(demote(page.read_text(encoding="utf-8")).strip() + f"\n\n*(source: docs/{name})*\n")
    out = DOCS / "performance.md"
    out.write_text("\n\n".join(parts), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
