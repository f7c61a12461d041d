"""The client side of on-demand capture: build a request for a running job, deliver it, and read
back what every worker did with it (`mindspeed-profiler trigger` / `status`).

"The next N iterations" is resolved here to absolute iterations, the same for every worker: from the
workers' heartbeats (their iteration, when they wrote it, their iteration period) the trigger
predicts the highest iteration any worker may have reached by the time every listener has polled
(its poll cycle plus two seconds of slack, at the fastest recent iteration pace), and asks for the
N after that. Without heartbeats (the
job started a moment ago) each worker takes the next N from its own next boundary.
"""
from __future__ import annotations

import math
import secrets
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from mindspeed_profiler.core import formats
from mindspeed_profiler.core.fileio import update_json, utc_now_iso
from mindspeed_profiler.runtime.manifest import read_run_manifest
from mindspeed_profiler.ondemand import requests as rq
from mindspeed_profiler.ondemand import states as state_shape
from mindspeed_profiler.ondemand import transport as tp

SLACK_S = 2.0            # added to the listeners' poll cycle when predicting where the workers are
STALE_AFTER_S = 15.0     # a heartbeat older than this (and than 5 poll cycles) means the worker is gone


class TriggerError(ValueError):
    """A request that cannot be sent, with the reason (the CLI exits 2)."""


def new_request_id() -> str:
    """`rYYYYmmdd-HHMMSS.mmm-<hex>`: sorts in the order the requests were made (listeners take
    new request files in name order)."""
    now = time.time()
    return time.strftime("r%Y%m%d-%H%M%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}-" + secrets.token_hex(2)


def pending_until(manifest: Mapping[str, Any] | None, live: Mapping[str, Mapping[str, Any]]) -> int:
    """The last iteration of the earlier requests some live worker still waits for or runs (0 if
    none): a new "next N" request starts after it instead of being rejected as overlapping."""
    last = 0
    for req in (manifest or {}).get(formats.RUN_REQUESTS_KEY) or ():
        its = req.get("iterations") if isinstance(req, dict) else None
        if not (isinstance(its, list) and len(its) == 2 and isinstance(its[1], int)):
            continue
        states = [((st.get("requests") or {}).get(req.get("id")) or {}).get("state") for st in live.values()]
        if any(state in (None, "requested", "running") for state in states):
            last = max(last, its[1])
    return last


def heartbeat_age(state: Mapping[str, Any], now: float) -> float | None:
    hb = state.get("heartbeat") or {}
    t = hb.get("time")
    return now - t if isinstance(t, (int, float)) else None


def stale_after(state: Mapping[str, Any]) -> float:
    hb = state.get("heartbeat") or {}
    every = float(hb.get("poll_interval_s") or 1.0) * float(hb.get("state_every") or 2)
    return max(STALE_AFTER_S, 5 * every)


def live_workers(states: Mapping[str, Mapping[str, Any]], now: float) -> dict[str, Mapping[str, Any]]:
    """The workers whose listener is running and whose heartbeat is fresh."""
    out = {}
    for key, st in states.items():
        age = heartbeat_age(st, now)
        if age is not None and age <= stale_after(st) and (st.get("heartbeat") or {}).get("listening", True):
            out[key] = st
    return out


def run_is_live(run_dir: str | Path, run_id: Any, now: float | None = None) -> bool:
    """Whether the run `run_id` written in RUN_DIR still goes on: its run.json changed less than
    STALE_AFTER_S ago (its workers may not have reported yet), or a worker of it has a fresh
    heartbeat (the state files are read until one is found)."""
    now = time.time() if now is None else now
    run_dir = Path(run_dir)
    try:
        if now - (run_dir / formats.RUN_FILE).stat().st_mtime < STALE_AFTER_S:
            return True
    except OSError:
        pass
    for path in sorted((tp.requests_dir(run_dir) / tp.WORKERS_DIR).glob("*.json")):
        try:
            state = tp.read_json_bounded(path)
        except (OSError, ValueError):
            continue
        if state_shape.problem(state) is None and state.get("run_id") == run_id and live_workers({path.stem: state}, now):
            return True
    return False


def resolve_next(steps: int, live: Mapping[str, Mapping[str, Any]], now: float, warmup: int = 0) -> tuple[int, int] | None:
    """Absolute (first, last) for "the next `steps` iterations" that every live worker can still
    reach, or None when the heartbeats cannot tell (no worker has reported its period yet)."""
    predicted: list[float] = []
    for st in live.values():
        hb = st.get("heartbeat") or {}
        it, t = hb.get("iteration"), hb.get("time")
        period = hb.get("fastest_period_s") or hb.get("iteration_period_s")
        if not isinstance(it, int) or not isinstance(period, (int, float)) or period <= 0 or not isinstance(t, (int, float)):
            return None
        cycle = float(hb.get("poll_interval_s") or 1.0)
        predicted.append(it + (now - t + cycle + SLACK_S) / period)
    if not predicted:
        return None
    first = math.floor(max(predicted)) + 1 + warmup
    return first, first + steps - 1


def parse_iterations(text: str) -> tuple[int, int]:
    """"A-B" or "A" -> (A, B)."""
    try:
        a, _, b = text.partition("-")
        first, last = int(a), int(b or a)
    except ValueError:
        raise TriggerError(f"--iterations: got {text!r}; expected FIRST-LAST such as 10-12, or one iteration such as 10") from None
    if first < 1:
        raise TriggerError(f"--iterations: got {text!r}; iterations are 1-based")
    try:
        rq.check_span(first, last)
    except rq.RequestError as exc:
        raise TriggerError(f"--iterations: {exc}") from None
    return first, last


def check_fields(run_cfg: Mapping[str, Any] | None, fields: Mapping[str, Any], states: Mapping[str, Mapping[str, Any]]) -> None:
    """Validate the request's integrated fields on top of the job's, as a worker will (the
    workers' stage names, from their heartbeats, count as registered)."""
    from mindspeed_profiler.capture import stages
    from mindspeed_profiler.config import ROOT_KEY, ProfilerConfigError, validate

    for st in states.values():
        for name in st.get("stages") or ():
            if isinstance(name, str) and not stages.is_stage(name):
                try:
                    stages.register_stage(name)
                except Exception:
                    pass
    base = dict(((run_cfg or {}).get(ROOT_KEY) or {}).get("integrated") or {})
    base.update(fields)
    base.update(profile=True, dynamic=False, profile_steps=None, profile_step_start=1, profile_step_end=2)
    try:
        validate({"integrated": base}, check_paths=False)
    except ProfilerConfigError as exc:
        raise TriggerError("; ".join(f"{p.split('integrated.', 1)[-1]}: {m}" for p, m in exc.problems)) from None
    fixed = sorted(set(fields) & set(rq.FIXED_FIELDS))
    if fixed:
        raise TriggerError(f"{fixed[0]}: a request may not set {', '.join(rq.FIXED_FIELDS)}")


def gather_states(run_dir: str | Path, mailbox: Any = None, problems: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Worker states from RUN_DIR's state files and, when given, the Ray mailbox. One of the wrong
    shape is skipped, and `problems` gets a line naming it and why (state_shape.problem)."""
    states = tp.read_worker_states(run_dir, problems) if Path(run_dir).is_dir() else {}
    if mailbox is not None:
        import ray

        remote = ray.get(mailbox.worker_states.remote(), timeout=30)
        good = []
        for key, state in (remote.items() if isinstance(remote, dict) else ()):
            bad = state_shape.problem(state)
            if bad is None:
                good.append((key, state))
            elif problems is not None:
                problems.append(f"worker {str(key)[:80]!r} in the Ray mailbox: {bad}: skipped")
        states = tp.merge_states(states.items(), good)
    return states


def trigger(run_dir: str | Path, *, steps: int | None = None, iterations: tuple[int, int] | None = None,
            fields: Mapping[str, Any] | None = None, roles: Sequence[str] | None = None, mailbox: Any = None,
            run_id: str | None = None, now: float | None = None) -> dict[str, Any]:
    """Build, check and deliver one request; returns it (with "resolved" saying how the
    iterations were chosen). Raises TriggerError with the reason when it cannot be sent."""
    run_dir = Path(run_dir)
    fields = dict(fields or {})
    now = time.time() if now is None else now
    if (steps is None) == (iterations is None):
        raise TriggerError("give one of --steps N (the next N iterations) or --iterations FIRST-LAST")
    manifest = read_run_manifest(run_dir) if run_dir.is_dir() else None
    if manifest is None and mailbox is None:
        raise TriggerError(f"{run_dir}: no run.json here; give the running job's profile_save_path "
                           f"(or --ray-address and --run-id for a job whose directory is on other nodes)")
    run_cfg = (manifest or {}).get("config")
    integ = ((run_cfg or {}).get("profiler_config") or {}).get("integrated") or {}
    if manifest is not None and not integ.get("dynamic", False):
        raise TriggerError(f"the job writing {run_dir} does not listen for requests: its profiler_config.integrated.dynamic "
                           f"is false (set dynamic: true; it costs nothing until a request arrives)")
    run_id = run_id or (manifest or {}).get("run_id")
    problems: list[str] = []
    states = gather_states(run_dir, mailbox, problems)
    check_fields(run_cfg, fields, states)
    live = live_workers({k: v for k, v in states.items() if not run_id or v.get("run_id") in (None, run_id)}, now)
    request: dict[str, Any] = {"schema": rq.SCHEMA, "id": new_request_id(), "run_id": run_id, "created": utc_now_iso(),
                               "source": "trigger", "iterations": None, "steps": None,
                               "roles": list(roles) if roles else None, "integrated": fields}
    if iterations is not None:
        request["iterations"] = list(iterations)
        resolved = "as asked"
        behind = [k for k, st in live.items() if ((st.get("heartbeat") or {}).get("iteration") or 0) > iterations[0]]
        if behind:
            raise TriggerError(f"iteration {iterations[0]} already began on {', '.join(sorted(behind)[:4])}"
                               f"{' ...' if len(behind) > 4 else ''}: ask for later iterations (or --steps N)")
    else:
        warmup = int(fields.get("warmup_steps", integ.get("warmup_steps", 0)) or 0)
        window = resolve_next(steps, live, now, warmup=warmup)
        after = pending_until(manifest, live)
        if window is not None and window[0] - warmup <= after:
            window = (after + 1 + warmup, after + warmup + steps)
        if window is not None:
            request["iterations"] = list(window)
            resolved = f"the next {steps} iteration(s) every listening worker can still reach: {window[0]}-{window[1]}"
        else:
            request["steps"] = steps
            resolved = (f"the next {steps} iteration(s) from each worker's next boundary (no heartbeat with an iteration "
                        f"period yet, so workers may pick different iterations)")
    rq.parse_request(request)  # our own format, checked as a worker will check it
    if run_dir.is_dir():
        tp.submit_file(run_dir, request)
    if mailbox is not None:
        import ray

        ray.get(mailbox.submit.remote(request), timeout=30)
    if manifest is not None:
        _record_in_run(run_dir, request)
    return {**request, "resolved": resolved, "workers_listening": len(live), "skipped_states": problems}


def _record_in_run(run_dir: Path, request: Mapping[str, Any]) -> None:
    """Append the request to run.json's list, under run.json's lock (concurrent triggers each
    re-read and append: none is lost)."""
    entry = {k: request[k] for k in ("id", "created", "iterations", "steps", "roles", "integrated", "source")}

    def change(manifest):
        manifest = dict(manifest or {})
        manifest[formats.RUN_REQUESTS_KEY] = list(manifest.get(formats.RUN_REQUESTS_KEY) or []) + [entry]
        return manifest
    update_json(run_dir / formats.RUN_FILE, change)


def summarize(states: Mapping[str, Mapping[str, Any]], request_ids: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One row per (request, worker): the state, the iterations, the reason, the captures."""
    rows = []
    for key in sorted(states):
        st = states[key]
        for rid, entry in sorted((st.get("requests") or {}).items()):
            if request_ids and rid not in request_ids:
                continue
            rows.append({"request": rid, "worker": key, "state": entry.get("state"), "iterations": entry.get("iterations"),
                         "reason": entry.get("reason"), "captures": len(entry.get("captures") or []),
                         "directories": [c.get("directory") for c in entry.get("captures") or []]})
    return rows


def request_finished(states: Mapping[str, Mapping[str, Any]], request_id: str, workers: Sequence[str]) -> bool:
    """Every listed worker has a final state for the request."""
    for key in workers:
        entry = ((states.get(key) or {}).get("requests") or {}).get(request_id)
        if entry is None or entry.get("state") not in rq.FINAL_STATES:
            return False
    return True


def connect_mailbox(address: str | None, run_id: str | None, run_dir: str):
    """The run's Ray mailbox (connecting to ADDR), or None without --ray-address."""
    if not address:
        return None
    import ray

    run_id = run_id or (read_run_manifest(run_dir) or {}).get("run_id")
    if not run_id:
        raise TriggerError("--ray-address needs the run's id: give --run-id (no run.json in RUN_DIR says it)")
    if not ray.is_initialized():
        ray.init(address=address, namespace=tp.MAILBOX_NAMESPACE, logging_level="ERROR", log_to_driver=False)
    box = tp.get_mailbox(run_id)
    if box is None:
        raise TriggerError(f"no request mailbox for run {run_id} on the Ray cluster at {address}: the job's workers make it "
                           f"when they start with dynamic: true")
    return box
