"""The communication matrix across the ranks of a run: per link (src rank -> dst rank), group, op
and step, the transport (HCCS, PCIE, RDMA, SDMA, LOCAL), the MB moved, the transit time and the
bandwidth, as msprof-analyze 26.2.0 builds `cluster_communication_matrix.json` /
ClusterCommunicationMatrix from each rank's `communication_matrix.json` / analysis.db
CommAnalyzerMatrix (docs/diagnosis.md, "Links"), and the slow links. Pure.

Each capture keeps the aggregate ops of its own matrix (`communication.communication_matrix`,
made by capture_matrix()): the rank numbers there are local to each group. link_table() joins the
captures of one job: one run, role, stage and iteration window (captures of one rank and job
beyond the first by path are left out). Two RL stages, or two capture windows, are two
communication worlds whose matrices may share step numbers and group names; summed, they doubled
every link's MB and time. Per job:

  1. rows of one (step, group, op, local src-dst) are summed over the ranks (msprof-analyze's
     merge_same_links: in practice one rank, the source, writes each link);
  2. local ranks become global: profiler_metadata.json's parallel_group_info (group id ->
     sorted global ranks; the matrix names the group by msprof-analyze's double_hash of the id)
     first, then the self links: local rank L of group G is the rank whose file holds "L-L" in G
     (msprof-analyze: CommMatrixSum._generate_rank_map; its text path reads the self links
     only). An end neither maps keeps rank None (msprof-analyze drops the link);
  3. `Total Op Info`: per (step, group, link), the sum over the group's aggregate ops;
  4. bandwidth = MB / ms (= GB/s); 0 when the time is 0 (msprof-analyze's compute_ratio).

Slow link (our rule, stated and tested): among the rows of one (job, step, group, op, transport)
that moved at least MIN_MB in a nonzero time, at least MIN_LINKS of them, a row whose bandwidth is
below SLOW_RATIO x their median: the same op of the same group, to other peers over the same
transport (across groups and ops the message sizes differ, and small messages are slow anyway).
msprof-analyze's advisor has no per-link rule (slow_link_analyzer.py compares per-rank RDMA / SDMA
bandwidth: it reports the fastest and slowest rank when (max - min) / mean >= 0.05).
"""
from __future__ import annotations

import statistics

from mindspeed_profiler.analysis.models.rows import Field, RowModel

TOTAL_OP = "Total Op Info"
SLOW_RATIO = 0.5     # a link slower than half the median of its transport's links (same step, op)
MIN_LINKS = 2        # links of a transport needed before one is called slow
MIN_MB = 1.0         # smaller transfers are latency-bound: their bandwidth says nothing of the link
EPS = 1e-15          # msprof-analyze's Constant.EPS: a shorter time gives bandwidth 0
_SAMPLES = ("middle", "top", "bottom")   # <op>-top1 / -middle / -bottomN: single op samples


def is_aggregate(op_key: str) -> bool:
    """msprof-analyze's BaseAnalysis.check_add_op: an `<op>-total` row or a single op of an
    older file, not one of the per-type samples (`-top1`, `-middle`, `-bottom1`, ...)."""
    return not any(s in op_key for s in _SAMPLES)


def capture_matrix(rows: list[dict]) -> list[dict]:
    """A capture's own links (parsing/ascend_comm.py link_rows(), local ranks) of the ops
    msprof-analyze sums: what link_table() joins. Its own `Total Op Info` is left out (the cluster
    total is recomputed over the ranks)."""
    out = []
    for r in rows:
        op = str(r.get("op") or "")
        if r.get("src") is None or r.get("dst") is None or op.startswith("Total"):
            continue
        if not is_aggregate(f"{op}@{r.get('group')}" if r.get("group") else op):
            continue
        out.append({"step": r.get("step"), "type": r.get("type"), "group": r.get("group"), "op": op,
                    "src": r["src"], "dst": r["dst"], "transport": r.get("transport"),
                    "size_mb": r.get("size_mb") or 0.0, "time_ms": r.get("time_ms") or 0.0})
    return out


def double_hash(text: str) -> int:
    """msprof-analyze's common_func/utils.py double_hash: how a matrix names a group of
    profiler_metadata.json's parallel_group_info."""
    a = b = 0
    for ch in text:
        a = (a * 29 + ord(ch)) & 0xFFFFFFFF
        b = (b * 131 + ord(ch)) & 0xFFFFFFFF
    return (a << 32) | b


def bandwidth(size_mb: float, time_ms: float) -> float:
    return size_mb / time_ms if abs(time_ms) >= EPS else 0.0


def rank_maps(caps: list[dict]) -> dict[str, dict[int, int]]:
    """{group: {local rank: global rank}} of one run's captures (module doc, step 2)."""
    maps: dict[str, dict[int, int]] = {}
    for c in caps:
        for g in (c.get("ascend") or {}).get("parallel_groups") or []:
            ranks = sorted(r for r in g.get("ranks") or [] if isinstance(r, int))
            if g.get("id") is not None and ranks:
                maps.setdefault(str(double_hash(str(g["id"]))), {}).update(enumerate(ranks))
    for c in caps:
        for r in c["communication"]["communication_matrix"]:
            if r["src"] == r["dst"] and r.get("group"):
                maps.setdefault(str(r["group"]), {}).setdefault(r["src"], c["rank"])
    return maps


JOB = ("run_id", "role", "stage", "step_first", "step_last")   # what keeps two jobs' links apart


def _job(c: dict) -> dict:
    """The job of a capture (module doc): its run, role, stage and iteration window."""
    sr = c.get("step_range")
    first, last = sr if isinstance(sr, list) and len(sr) == 2 else (None, None)
    return {"run_id": c.get("run_id"), "role": c.get("role"), "stage": c.get("stage"),
            "step_first": first, "step_last": last}


def _captures(captures: list[dict]) -> dict[tuple, list[dict]]:
    """job key -> its Ascend captures with a matrix, one per rank (the first by path), by rank."""
    jobs: dict[tuple, dict[int, dict]] = {}
    for c in sorted(captures, key=lambda c: str(c.get("path"))):
        m = (c.get("communication") or {}).get("communication_matrix")
        if c.get("kind") == "ascend" and c.get("status") == "ok" and isinstance(c.get("rank"), int) and m:
            key = tuple(_job(c).values())
            jobs.setdefault(key, {}).setdefault(c["rank"], c)
    return {k: [v[r] for r in sorted(v)] for k, v in jobs.items()}


def _merge(job: tuple, caps: list[dict]) -> list[dict]:
    maps = rank_maps(caps)
    ident = dict(zip(JOB, job))
    merged: dict[tuple, dict] = {}
    for c in caps:
        for r in c["communication"]["communication_matrix"]:
            key = (r.get("step"), r.get("type"), r.get("group"), r["op"], r["src"], r["dst"])
            a = merged.setdefault(key, {**ident, "step": r.get("step"), "type": r.get("type"),
                                        "group": r.get("group"), "op": r["op"], "src_local": r["src"],
                                        "dst_local": r["dst"], "transport": r.get("transport"), "size_mb": 0.0,
                                        "time_ms": 0.0, "n_ranks": 0})
            a["transport"] = r.get("transport")   # msprof-analyze's combine_link: the last one read
            a["size_mb"] += r["size_mb"]
            a["time_ms"] += r["time_ms"]
            a["n_ranks"] += 1
    totals: dict[tuple, dict] = {}
    for (step, typ, group, _op, s, d), a in merged.items():
        t = totals.setdefault((step, typ, group, s, d), {**a, "op": TOTAL_OP, "size_mb": 0.0, "time_ms": 0.0, "n_ranks": 0})
        t["size_mb"] += a["size_mb"]
        t["time_ms"] += a["time_ms"]
        t["n_ranks"] = max(t["n_ranks"], a["n_ranks"])
    rows = list(merged.values()) + list(totals.values())
    for r in rows:
        g = maps.get(str(r["group"]), {})
        r["src_rank"], r["dst_rank"] = g.get(r["src_local"]), g.get(r["dst_local"])
        r["bandwidth_gbps"] = bandwidth(r["size_mb"], r["time_ms"])
    return rows


def slow_links(rows: list[dict], ratio: float = SLOW_RATIO, min_links: int = MIN_LINKS,
               min_mb: float = MIN_MB) -> list[dict]:
    """Sets `median_gbps`, `ratio` and `slow` on each row (module doc: the rule); rows not compared
    (no transit time, under `min_mb`, fewer than `min_links` alike) get None, None, False."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        r["median_gbps"], r["ratio"], r["slow"] = None, None, False
        if r["time_ms"] >= EPS and r["size_mb"] >= min_mb:
            groups.setdefault((*(r.get(k) for k in JOB), r["step"], r["group"], r["op"], r["transport"]), []).append(r)
    for rs in groups.values():
        if len(rs) < min_links:
            continue
        med = statistics.median(r["bandwidth_gbps"] for r in rs)
        for r in rs:
            r["median_gbps"] = med
            r["ratio"] = r["bandwidth_gbps"] / med if med > 0 else None
            r["slow"] = r["ratio"] is not None and r["ratio"] < ratio
    return rows


def _order(r: dict) -> tuple:
    return (*(str(r.get(k)) for k in JOB), str(r["step"]), str(r["type"]), str(r["group"]), r["op"] == TOTAL_OP,
            r["op"], r["src_local"], r["dst_local"])


def link_table(captures: list[dict]) -> list[dict]:
    """One row per (job, step, group, op, link) of the Ascend captures of a summary (module doc)."""
    rows = [r for job, caps in _captures(captures).items() for r in _merge(job, caps)]
    return sorted(slow_links(rows), key=_order)


# -- rows (rows.py): computed from captures[*].communication.communication_matrix


def _select(summary: dict):
    return ((None, None, r) for r in link_table(summary.get("captures") or []))


LINKS = RowModel(
    "links", "(step, group, op, src-dst link) of the Ascend communication matrices of one run, role, stage and "
    "iteration window",
    "computed from captures[*].communication.communication_matrix", table="links", method="links",
    per_capture=False, select=_select, fields=(
        Field("run_id", "text", "the run (only when the directory holds several)", computed=True),
        Field("role", "text", "the captures' role", computed=True),
        Field("stage", "text", "the captures' stage (null: whole iterations)", computed=True),
        Field("step_first", "step", "the first iteration of the captures' window", computed=True),
        Field("step_last", "step", "the last", computed=True),
        Field("step", "step", "the step of the matrix (step<N>)", computed=True),
        Field("type", "text", "collective or p2p", computed=True),
        Field("group", "text", "the communication group (msprof-analyze's hashed group name)", computed=True),
        Field("op", "text", "`<op>-total` (one op type's sum), a single op of an older file, or "
              "`Total Op Info` (every op of the group)", computed=True),
        Field("src_rank", "rank", "global source rank (null: no metadata or self link maps it)", computed=True),
        Field("dst_rank", "rank", "global destination rank (null: as src_rank)", computed=True),
        Field("src_local", "rank", "the source's rank in the group, as the matrix names it", computed=True),
        Field("dst_local", "rank", "the destination's rank in the group", computed=True),
        Field("transport", "text", "HCCS, PCIE, RDMA, SDMA or LOCAL", computed=True),
        Field("size_mb", "MB", "Transit Size(MB), summed over the ranks' files", computed=True),
        Field("time_ms", "ms", "Transit Time(ms), summed likewise", computed=True),
        Field("bandwidth_gbps", "GB/s", "size_mb / time_ms (0 without a time)", computed=True),
        Field("n_ranks", "count", "rank files that wrote the link (Total Op Info: the most of its ops)", computed=True),
        Field("median_gbps", "GB/s", "median bandwidth of the links compared: same job, step, group, op and transport, "
              f"at least {MIN_MB:g} MB each", computed=True),
        Field("ratio", "ratio", "bandwidth_gbps / median_gbps", computed=True),
        Field("slow", "flag", f"ratio < {SLOW_RATIO:g} among at least {MIN_LINKS} links (docs/diagnosis.md)",
              computed=True),
    ))
