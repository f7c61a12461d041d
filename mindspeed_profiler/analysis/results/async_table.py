"""The table of an asynchronous run (docs/async.md), its rows and headers, for the terminal
(results/console.py) and report.html (results/report/sections.py): per trainer (tracker file with
`async/*` keys) the steady iterations' means of who waited for whom, the weight sync in its phases
and the staleness of the samples trained; read through ASYNC_ITERATIONS. No rich here: the process
that writes report.html never imports it (issue 34: 17 ms of the page's 35 ms of imports at the end
of a cold `analyse`)."""
from __future__ import annotations

from mindspeed_profiler.core.formats import WEIGHT_SYNC_PHASES
from mindspeed_profiler.analysis.analyzers.async_rl import ASYNC_ITERATIONS, steady

TITLE = "Asynchronous RL: who waits for whom, weight sync, staleness (steady iterations' means; docs/async.md)"


HEADERS = ("tracker", "steady iterations", "iteration s", "trainer waits", "rollout idles",
           "sync s gather/transfer/load", "sync exposed s", "staleness mean", "staleness max", "over the bound")


def _mean(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return sum(vals) / len(vals) if vals else None


def _cell(v: float | None, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def table_rows(summary: dict) -> list[list[str]]:
    """One row per trainer: its steady iterations' means (pure, for the table and its test)."""
    per: dict[str, list[dict]] = {}
    for r in ASYNC_ITERATIONS.rows(summary):
        per.setdefault(str(r.get("path")), []).append(r)
    out = []
    for path, rows in sorted(per.items()):
        st = steady(rows)
        maxima = [r["staleness_max"] for r in rows if isinstance(r.get("staleness_max"), (int, float))]
        out.append([path, f"{len(st)} of {len(rows)}", _cell(_mean(st, "iteration_s"), ".3f"),
                    _cell(_mean(st, "trainer_idle_ratio"), ".0%"), _cell(_mean(st, "rollout_idle_ratio"), ".0%"),
                    "/".join(_cell(_mean(st, f"weight_sync_{p}_s"), ".3f") for p in WEIGHT_SYNC_PHASES),
                    _cell(_mean(st, "weight_sync_exposed_s"), ".3f"), _cell(_mean(rows, "staleness_mean"), ".2f"),
                    _cell(max(maxima) if maxima else None, "g"),
                    str(sum(int(r.get("over_bound_samples") or 0) for r in rows))])
    return out
