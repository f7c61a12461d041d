"""summary.json and its documentation (docs/analysis.md) agree: every key the analysis writes is named."""
from __future__ import annotations

import re
import shutil

from analysis_testutil import stage_timeline, write_json
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory


def _keys_of(c: dict) -> set:
    """A capture's keys, its rows' keys and those of its nested blocks (Ascend, cluster)."""
    keys = set(c)
    for k in ("ranks", "stages", "steps", "top_kernels", "top_ops", "annotations", "step_trace", "groups"):
        for row in c.get(k) or []:
            keys |= set(row)
    comm = c.get("communication") or {}
    keys |= set(comm)
    for block in ("collectives",):
        if comm.get(block):
            keys |= set(comm[block])
            for row in comm[block].get("top") or []:
                keys |= set(row)
    for rows in (comm.get("links"), comm.get("per_rank"), (c.get("memory") or {}).get("npu")):
        for row in rows or []:
            keys |= set(row)
    keys |= set(c.get("ascend") or {}) | set(c.get("memory") or {})
    for g in (c.get("ascend") or {}).get("parallel_groups") or []:
        keys |= set(g)
    return keys


def test_every_ascend_and_cluster_field_is_documented(ascend_sets, repo_root):
    doc = (repo_root / "docs" / "analysis.md").read_text()
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", doc)) | set(re.findall(r"[{ ,]([a-z_]+)[,}]", doc))
    keys = set()
    for name, sub in (("text_l1", ""), ("db_l1", ""), ("pp4_l2", ""), ("gpt3_cluster16", "cluster_analysis_output")):
        summary, code = analyse_directory(ascend_sets(name) / sub, jobs=1, progress=False, write=False)
        for c in summary["captures"]:
            keys |= _keys_of(c)
    assert keys - named == set()


def test_every_summary_field_is_documented(tmp_path, shared_data, repo_root):
    """summary.json vs docs/analysis.md: each key the analysis writes (top level, captures of every
    kind on the real data, cluster rows, steps, kernels, the timeline) is named in the doc."""
    shutil.copytree(shared_data, tmp_path / "data")
    write_json(tmp_path / "data" / "timeline" / "timeline.json",
               stage_timeline([("w1", "a", 1, 0, 50), ("w2", "b", 1, 10, 50)], [(1, 0, 100)]))
    summary, code = analyse_directory(tmp_path / "data", jobs=1, progress=False, html=False)
    doc = (repo_root / "docs" / "analysis.md").read_text()
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", doc)) | set(re.findall(r"[{ ,]([a-z_]+)[,}]", doc))
    keys = set(summary)
    for c in summary["captures"]:
        keys |= set(c)
        for k in ("ranks", "stages", "steps", "top_kernels", "top_ops", "annotations"):
            for row in c.get(k) or []:
                keys |= set(row)
    tl = summary["timeline"]
    keys |= set(tl) | set(tl["iterations"][0]) | set(tl["stage_worker"][0]) | set(tl["gantt"][0])
    assert keys - named == set()
