"""Issue 31, items 11 and 20.

11: the `links` table (analyzers/links.py) joins the Ascend captures of one job (run, role, stage,
iteration window), never two RL stages' or two windows' matrices into one (that doubled every
link's MB and time, n_ranks 2). Checked on a real capture set (text_l1: torch_npu's text export
with communication_matrix.json; ../shared/ascend-2rank's level-0 export writes no matrix) copied
under two stage directories, the expected MB and ms recomputed from the raw files.

20: the tracker's tokens/s and MFU per iteration (metrics/<role>_rank<R>.jsonl, written here by the
real tracker) are shown in the terminal's iteration table and in report.html (a column and a
plot), equal to the tracker's rows; without them, no such column."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

import ascend_data
from mindspeed_profiler import IntegratedProfiler, load_config, tracing
from mindspeed_profiler.analysis import RunAnalysis
from mindspeed_profiler.analysis.models import display
from mindspeed_profiler.analysis.analyzers import links
from mindspeed_profiler.analysis.pipeline.batch import analyse_directory
from mindspeed_profiler.analysis.results.console import print_summary
from mindspeed_profiler.analysis.parsing.ascend_files import step_label
from test_metrics_tracker import N, PEAK, rows_of, run_loop

SET = "text_l1"


def _stage_copy(root: Path, stage: str, steps: list[int]) -> Path:
    """The set's rank directories under root/<stage>/, each with our metadata naming the stage and window."""
    d = ascend_data.writable_copy(SET, root / stage)
    for cap in d.iterdir():
        (cap / "mindspeed_profiler_meta.json").write_text(
            json.dumps({"stage": stage, "run_id": "run1", "role": "actor", "steps": steps}))
    return d


def _raw_links(d: Path) -> dict[tuple, list[float]]:
    """{(step, group, op, src, dst): [MB, ms]} summed over the rank files of one copy, from the raw
    communication_matrix.json (the aggregate `<op>-total` ops only, as links.py keeps)."""
    out: dict[tuple, list[float]] = {}
    for f in sorted(d.glob("*/ASCEND_PROFILER_OUTPUT/communication_matrix.json")):
        for step, kinds in json.loads(f.read_text()).items():
            for ops in kinds.values():
                for key, lks in (ops.items() if isinstance(ops, dict) else ()):
                    op, _, group = key.partition("@")
                    if not links.is_aggregate(key):
                        continue
                    for lk, v in lks.items():
                        s, t = (int(x) for x in lk.split("-"))
                        acc = out.setdefault((step_label(step.removeprefix("step")), group, op, s, t), [0.0, 0.0])
                        acc[0] += v["Transit Size(MB)"]
                        acc[1] += v["Transit Time(ms)"]
    assert out, f"{SET}: no aggregate links in the raw matrices"
    return out


def _links(root: Path) -> list[dict]:
    summary, _ = analyse_directory(root, jobs=1, progress=False, write=False)
    ascend = [c for c in summary["captures"] if c["kind"] == "ascend"]
    assert ascend and all(c["status"] == "ok" for c in ascend), [(c["path"], c.get("error")) for c in ascend]
    return RunAnalysis.from_summary(summary).links()


def _check_group(rows: list[dict], want: dict[tuple, list[float]]) -> None:
    got = {(r["step"], r["group"], r["op"], r["src_local"], r["dst_local"]): r for r in rows if r["op"] != links.TOTAL_OP}
    assert set(got) == set(want)
    for k, (mb, ms) in want.items():
        assert got[k]["size_mb"] == pytest.approx(mb, rel=1e-9), k
        assert got[k]["time_ms"] == pytest.approx(ms, rel=1e-9), k
        assert got[k]["n_ranks"] == 1, k


def test_two_stages_of_one_iteration_are_two_link_groups_not_summed(tmp_path, ascend_sets):
    ascend_sets(SET)
    gen = _stage_copy(tmp_path / "run", "actor_generate", [3, 3])
    _stage_copy(tmp_path / "run", "actor_update", [3, 3])
    want = _raw_links(gen)   # both copies hold the same files: each stage's links are these, once
    rows = _links(tmp_path / "run")
    for r in rows:   # every link's MB and ms are one stage's, never the two stages' sum
        if r["op"] != links.TOTAL_OP:
            k = (r["step"], r["group"], r["op"], r["src_local"], r["dst_local"])
            assert (r["size_mb"], r["time_ms"]) == pytest.approx(tuple(want[k]), rel=1e-9), (k, r)
    by_stage: dict[str, list[dict]] = {}
    for r in rows:
        by_stage.setdefault(r["stage"], []).append(r)
    assert sorted(by_stage) == ["actor_generate", "actor_update"]
    for stage, rs in by_stage.items():
        assert {(r["run_id"], r["role"], r["step_first"], r["step_last"]) for r in rs} == {("run1", "actor", 3, 3)}
        _check_group(rs, want)
    # the slow-link median compares a stage's links only: a twin stage's copies do not count twice
    compared = [r for r in rows if r["median_gbps"] is not None]
    assert compared and all(r["n_ranks"] == 1 for r in compared)


def test_two_windows_of_one_stage_are_two_groups_and_a_repeated_rank_counts_once(tmp_path, ascend_sets):
    ascend_sets(SET)
    first = _stage_copy(tmp_path / "run" / "w3", "actor_update", [3, 3])
    _stage_copy(tmp_path / "run" / "w7", "actor_update", [7, 7])
    want = _raw_links(first)
    # rank 0 of the first window captured twice (a copy beside it): the first by path is taken, not both
    dup = tmp_path / "run" / "w3" / "actor_update" / "rank0_ascend_pt_copy_ascend_pt"
    ascend_data.writable_copy(SET, tmp_path / "spare")
    (tmp_path / "spare" / "rank0_ascend_pt").rename(dup)
    (dup / "mindspeed_profiler_meta.json").write_text(
        json.dumps({"stage": "actor_update", "run_id": "run1", "role": "actor", "steps": [3, 3]}))
    rows = _links(tmp_path / "run")
    assert all(r["n_ranks"] == 1 for r in rows), "a window's or a repeated capture's links were summed"
    windows = {(r["step_first"], r["step_last"]) for r in rows}
    assert windows == {(3, 3), (7, 7)}
    for w in windows:
        _check_group([r for r in rows if (r["step_first"], r["step_last"]) == w], want)


# -- item 20: the tracker's tokens/s and MFU per iteration in the terminal and in report.html


def _tracked_run(root: Path, ranks: tuple[int, ...], timeline: bool, metrics: bool = True) -> None:
    """Real profilers (the real tracker writes metrics/actor_rank<R>.jsonl) over 3 iterations of
    known sleeps; the tracer's timeline when asked (one rank: the tracer is one per process)."""
    cfg = {"integrated": {"profile": False, "profile_save_path": str(root)}}
    if metrics:
        cfg["metrics"] = {"enable": True, "peak_tflops": PEAK}
    if timeline:
        cfg["tracer"] = {"enable": True, "output_dir": str(root / "timeline")}
    cfg = load_config(cfg)
    for rank in ranks:
        if timeline:
            tracing.init_tracer(cfg, role="actor", rank=rank)
        try:
            prof = IntegratedProfiler(cfg, role="actor", rank=rank, world_size=len(ranks))
            prof.set_model(parameters=N)
            run_loop(prof, 3, tokens=lambda it, r=rank: 100 * it + 10 * r)
        finally:
            if timeline:
                tracing.shutdown_tracer()


def _expected(root: Path) -> dict[int, tuple[float, float]]:
    """iteration -> (tokens/s, MFU of actor_update), the mean over the ranks' tracker rows on disk."""
    per: dict[int, list[tuple[float, float]]] = {}
    for f in sorted((root / "metrics").glob("actor_rank*.jsonl")):
        for row in rows_of(f):
            per.setdefault(row["iteration"], []).append((row["perf/throughput"], row["perf/mfu/actor_update"]))
    assert sorted(per) == [1, 2, 3]
    return {it: (sum(a for a, _ in v) / len(v), sum(b for _, b in v) / len(v)) for it, v in per.items()}


def _analyse(root: Path) -> tuple[str, str]:
    """(the terminal's output, report.html) of an analysis of root."""
    summary, _ = analyse_directory(root, jobs=1, progress=False, write=True, html=True)
    con = Console(file=io.StringIO(), width=260)
    print_summary(summary, console=con)
    return con.file.getvalue(), (root / "analysis" / "report.html").read_text()


def _console_cells(out: str, iteration: int) -> list[str]:
    """The cells of the iteration table's row of `iteration`."""
    start = out.index("RL iterations")
    for line in out[start:].splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if cells and cells[0] == str(iteration):
            return cells
    raise AssertionError(f"no row of iteration {iteration} in the iteration table:\n{out[start:]}")


def _report_rows(html: str, after: str) -> dict[int, dict[str, str]]:
    """The first table after `after`: iteration -> {header: data-v (or text)}."""
    table = html[html.index(after):]
    table = table[table.index("<table"):table.index("</table>")]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    rows = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", table):
        cells = [(m[1] if (m := re.search(r'data-v="([^"]*)"', attrs)) else text)
                 for attrs, text in re.findall(r"<td([^>]*)>(.*?)</td>", tr)]
        if cells:
            rows[int(cells[0])] = dict(zip(heads, cells))
    return rows


def _check_shown(out: str, html: str, want: dict[int, tuple[float, float]], table_after: str) -> None:
    for it, (tps, mfu) in want.items():
        cells = _console_cells(out, it)
        assert f"{tps:,.1f}" in cells and f"{100 * mfu:.3g}%" in cells, (it, cells)
    rows = _report_rows(html, table_after)
    for it, (tps, mfu) in want.items():
        assert float(rows[it]["tokens/s/rank"]) == pytest.approx(tps, rel=1e-12)
        assert float(rows[it]["MFU actor_update"]) == pytest.approx(mfu, rel=1e-12)
    # the plots: one point per iteration, its value on hover
    for plot, text in (("plot-tok", lambda v: f"{v[0]:,.1f}"), ("plot-mfu", lambda v: f"{100 * v[1]:.3g}%")):
        svg = html[html.index(f'id="{plot}"'):]
        svg = svg[:svg.index("</svg>")]
        assert [t for t in re.findall(r"iteration (\d+): ([^<]+)</title>", svg)] == \
            [(str(it), text(v)) for it, v in sorted(want.items())]


def test_tokens_per_s_and_mfu_per_iteration_in_the_terminal_and_the_report(tmp_path, clean_state):
    _tracked_run(tmp_path, (0,), timeline=True)
    out, html = _analyse(tmp_path)
    _check_shown(out, html, _expected(tmp_path), "<h3>Iterations: overlap")


def test_without_a_timeline_the_trackers_iterations_are_tabled_mean_over_ranks(tmp_path, clean_state):
    _tracked_run(tmp_path, (0, 1), timeline=False)
    out, html = _analyse(tmp_path)
    want = _expected(tmp_path)
    _check_shown(out, html, want, "<h2>Tokens/s and MFU per iteration")
    # the duration: the slowest worker's timing_s/iteration
    walls = {}
    for f in (tmp_path / "metrics").glob("actor_rank*.jsonl"):
        for row in rows_of(f):
            walls[row["iteration"]] = max(walls.get(row["iteration"], 0.0), row["timing_s/iteration"])
    for it, s in walls.items():
        assert _console_cells(out, it)[1] == f"{s * 1e3:,.2f}"


def test_no_tracker_no_tokens_or_mfu_column(tmp_path, clean_state):
    _tracked_run(tmp_path, (0,), timeline=True, metrics=False)
    out, html = _analyse(tmp_path)
    assert "RL iterations" in out and "tokens/s" not in out and "MFU" not in out
    assert "<h3>Iterations: overlap" in html and "tokens/s" not in html and 'id="plot-' not in html


def test_one_tokens_column_per_role_and_the_training_stages_mfu():
    """Two roles: a tokens/s column each (their tokens differ: never summed into one); MFU of the
    training stage only (the generate stage's is not an update's); a value that is no finite number
    (a summary edited by hand) is left out, not a crash."""
    def cap(role, rank, rows):
        return {"path": f"metrics/{role}_rank{rank}.jsonl", "kind": "tracker", "status": "ok", "role": role,
                "rank": rank, "tracker": {"rows": [{"iteration": 1, "metric": k, "value": v} for k, v in rows.items()],
                                          "n_iterations": 1}}
    summary = {"captures": [
        cap("actor", 0, {"perf/throughput": 100.0, "perf/mfu/actor_update": 0.2, "perf/mfu/actor_generate": 0.1}),
        cap("actor", 1, {"perf/throughput": 300.0, "perf/mfu/actor_update": 0.4, "timing_s/iteration": "junk"}),
        cap("ref", 0, {"perf/throughput": 50.0, "perf/mfu/ref_compute": 0.3})]}
    cols = {m.header: m.values for m in display.tracker_iterations(summary).columns}
    assert cols == {"actor tokens/s/rank": {1: 200.0}, "ref tokens/s/rank": {1: 50.0},
                    "MFU actor_update": {1: pytest.approx(0.3)}}
