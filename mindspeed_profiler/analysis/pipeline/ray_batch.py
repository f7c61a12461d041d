"""The offline analysis over a Ray cluster, where the data lives (`analyse DIR --ray`, docs/analysis.md).

What runs where:

  driver   connects; sends one discovery task to every alive node; routes each capture to one node
           that holds it; gathers the timeline segments and analyses the merged timeline; then the
           cross-capture tables and the outputs, in batch.py (the same code as a local analysis).
  node     discovery of DIR as that node sees it; the input kinds' prepare step (raw Ascend captures
           are parsed there with torch_npu + CANN, when they work there); one task per capture
           (analyse_capture under the per-capture limits), its result pickled and compressed there.

Every node task is pinned (NodeAffinitySchedulingStrategy(soft=False)). What travels to the driver:
the capture listings (path, kind, metadata, a fingerprint, sizes), each capture's summary (the
`analyse_capture` dict; its event columns only for analysis.db) and the timeline segments. Never a
trace. A task that dies, times out or loses its node fails only its capture.

Ray is imported only in here, and this module only with --ray: Ray stays optional.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mindspeed_profiler.core import formats, ray_local

from mindspeed_profiler.analysis.pipeline.collect import (
    UNPARSED,
    Collected,
    CollectOptions,
    ProgressBar,
    run_in_process,
    select_run,
)
from mindspeed_profiler.analysis.pipeline.discover import Capture
from mindspeed_profiler.analysis.inputs import input_kinds
from mindspeed_profiler.analysis.pipeline.pool import failed_result
from mindspeed_profiler.analysis.pipeline.ray_node import (  # noqa: F401  (resolve_dir, fingerprint: importable from here as before)
    unpack,
    analyse_on_node,
    discover_on_node,
    fingerprint,
    prepare_on_node,
    read_segments_on_node,
    resolve_dir,
)

DISCOVERY_TIMEOUT_S = 600.0      # one node's walk of DIR (also the timeline segments' read)
GET_TIMEOUT_S = 300.0            # fetching a finished task's (small) result
GRACE_S = 120.0                  # added to the per-capture time limit for the driver's own deadline
LIVENESS_EVERY_S = 5.0           # how often the driver checks which nodes are still in the cluster
DEAD_NODE_GRACE_S = 30.0         # then how long it waits for Ray's own error before failing a task itself
PER_CAPTURE_LOAD = 1 << 20       # routing balances bytes plus this much per capture


class RaySetupError(RuntimeError):
    """--ray cannot start: Ray is not installed here, or the cluster cannot be reached or has no node."""


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None   # None: RAY_ADDRESS, else a cluster of this machine, else a new local one
    task_cpus: float = 0.5       # CPUs each capture task reserves
    grace_s: float = GRACE_S


# ------------------------------------------------------------------------------ on the driver


@dataclass(eq=False)
class Node:
    node_id: str
    ip: str
    cpus: float
    alive: bool = True
    host: str | None = None
    dir: str | None = None          # DIR resolved there
    base: str | None = None         # None: DIR is not there
    error: str | None = None        # its discovery failed
    found: int = 0
    analysed: int = 0
    failed: int = 0
    unparsed: int = 0
    trace_bytes: int = 0
    returned_bytes: int = 0
    dead_since: float | None = None
    listing: list = field(default_factory=list, repr=False)

    @property
    def short(self) -> str:
        return f"{self.host or self.ip} (Ray node {self.node_id[:8]})"

    def row(self) -> dict:
        return {"node_id": self.node_id, "host": self.host, "ip": self.ip, "cpus": self.cpus, "alive": self.alive,
                "dir": self.dir, "dir_found": self.base is not None, "error": self.error, "found": self.found,
                "analysed": self.analysed, "failed": self.failed, "unparsed": self.unparsed,
                "trace_bytes": self.trace_bytes, "returned_bytes": self.returned_bytes}


@dataclass(eq=False)
class Item:
    """A capture routed to the one node that analyses it."""
    cap: Capture
    node: Node
    nbytes: int
    seen_on: int = 1                 # how many nodes see it (shared storage: more than one)
    not_where_written: bool = False


@dataclass
class Traffic:
    """Bytes that came back to the driver (as sent: pickled and compressed on the node)."""
    listings: int = 0
    summaries: int = 0
    segments: int = 0

    @property
    def total(self) -> int:
        return self.listings + self.summaries + self.segments


class _Expired(Exception):
    pass


def driver_dir(dir_arg: str | os.PathLike) -> Path:
    """DIR as the driver sees it (DIR/analysis is written there unless -o says otherwise)."""
    return resolve_dir(str(dir_arg), os.getcwd())


def _ray():
    try:
        import ray
    except ImportError as exc:
        raise RaySetupError(f"--ray needs Ray here and on every node (pip install 'ray[default]'): {exc}") from exc
    return ray


def connect(address: str | None, log: Callable[[str], None]) -> bool:
    """Connect to the cluster; True when this call made the connection (and so must end it). A Ray
    session already open in this process (a notebook, a test) is used as it is and left open."""
    ray = _ray()
    if ray.is_initialized():
        return False
    kw: dict = {"log_to_driver": False, "logging_level": "WARNING"}
    target = address or os.environ.get("RAY_ADDRESS")
    try:
        try:
            ray.init(address=target or "auto", **kw)
        except ConnectionError:
            if target:
                raise
            log("analyse --ray: no Ray cluster found (no --address, RAY_ADDRESS unset, none started on this "
                "machine): starting a local one, which sees this machine's disk only")
            ray_local.prepare_local_cluster_env()
            ray_local.init_local_ray(ray, kw, log=log)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        raise RaySetupError(f"cannot connect to the Ray cluster {target or ''}: {type(exc).__name__}: {exc}") from exc
    return True


def _alive_ids(ray) -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n.get("Alive")}


def _pinned(remote, node: Node, num_cpus: float):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return remote.options(num_cpus=num_cpus, max_retries=0,
                          scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False))


def _cancel(ray, ref) -> None:
    try:
        ray.cancel(ref, force=True)
    except Exception:  # noqa: BLE001 - already finished, or its node is gone
        pass


def why_failed(exc: BaseException, node: Node) -> str:
    """One line for a task that did not come back."""
    from ray import exceptions as rx

    if isinstance(exc, rx.NodeDiedError):
        return f"node {node.short} left the cluster (died or was removed) while working on this capture"
    if isinstance(exc, rx.TaskUnschedulableError):
        return f"could not run on node {node.short}: it left the cluster"
    if isinstance(exc, rx.OutOfMemoryError):
        return f"Ray's memory monitor on {node.short} killed the task (the node ran low on memory)"
    if isinstance(exc, (rx.WorkerCrashedError, rx.LocalRayletDiedError)):
        return (f"the Ray worker process on {node.short} died while working on this capture "
                "(out of memory? a crash in native code?)")
    if isinstance(exc, rx.RayTaskError):
        cause = getattr(exc, "cause", None)
        what = f"{type(cause).__name__}: {cause}" if cause is not None else (str(exc).strip().splitlines() or [""])[-1]
        return f"the task raised on {node.short}: {what}"
    if isinstance(exc, rx.ObjectLostError):
        return f"the result was lost with node {node.short}"
    if isinstance(exc, (TimeoutError, _Expired)):
        return f"no answer from {node.short}: {exc}"
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"Ray: {type(exc).__name__} on {node.short}: {first}"


def _gather(ray, refs: dict, timeout_s: float):
    """(ref, node, data, exception) for each task, as they finish; those still running after
    timeout_s are cancelled and reported as such."""
    pending = dict(refs)
    deadline = time.monotonic() + timeout_s
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            for ref, node in pending.items():
                _cancel(ray, ref)
                yield ref, node, None, _Expired(f"still running after {timeout_s:g} s: stopped")
            return
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=min(left, LIVENESS_EVERY_S))
        if ready:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
        for ref in ready:
            node = pending.pop(ref)
            try:
                yield ref, node, ray.get(ref, timeout=GET_TIMEOUT_S), None
            except Exception as exc:  # noqa: BLE001 - any Ray error fails this task only
                yield ref, node, None, exc


def _meta_node(cap: Capture) -> tuple[str | None, str | None]:
    """(Ray node id, host) a capture's metadata says it was written on (`node`, else `host`)."""
    meta = cap.meta if isinstance(cap.meta, dict) else {}
    node = meta.get("node") if isinstance(meta.get("node"), dict) else {}
    rid = node.get("ray_node_id")
    host = node.get("host") if isinstance(node.get("host"), str) else meta.get("host")
    return (rid if isinstance(rid, str) else None), (host if isinstance(host, str) else None)


def choose_node(cap: Capture, seen_on: list[Node], load: dict[str, int]) -> Node:
    """Where to analyse a capture that several nodes see: the node that wrote it (its Ray node id,
    else its host) when that node sees it, else the least loaded one."""
    rid, host = _meta_node(cap)
    for pick in ([n for n in seen_on if rid and n.node_id == rid], [n for n in seen_on if host and n.host == host],
                 seen_on):
        if pick:
            return min(pick, key=lambda n: (load.get(n.node_id, 0), n.node_id))
    raise ValueError(f"{cap.path}: seen on no node")


def where_written_warning(cap: Capture, node: Node, cluster_ids: set[str]) -> str | None:
    """None when the capture is analysed on the node that wrote it (as far as its metadata says)."""
    rid, host = _meta_node(cap)
    if rid and rid in cluster_ids:
        if rid == node.node_id:
            return None
        return (f"written on Ray node {rid[:8]} ({host}) but analysed on {node.short}: the node that wrote it "
                "does not see it under DIR (copied or moved?)")
    if host and node.host and host != node.host:
        return (f"written on host {host} but analysed on {node.short}: no node of this cluster that sees it is "
                "that host (copied or moved, or the cluster was rebuilt?)")
    return None


def analyse_on_ray(dir_arg: str | os.PathLike, ray_opts: RayOptions, opts: CollectOptions) -> Collected:
    """Discover, prepare and analyse DIR on every node of the cluster; returns the Collected
    (the per-capture results, the unparsed captures, where the outputs go, the `ray` block)."""
    ray = _ray()
    started = connect(ray_opts.address, opts.log)
    tmp = Path(tempfile.mkdtemp(prefix="msp-ray-timeline-"))
    try:
        return _Driver(ray, str(dir_arg), ray_opts, opts).run(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if started:
            ray.shutdown()   # stops a local cluster started here; from a running cluster, disconnects


class RayCollector:
    """Collection on every node of a Ray cluster, each capture where it lies (`root` as the nodes see it)."""

    def __init__(self, options: RayOptions | None = None):
        self.options = options or RayOptions()

    def collect(self, root: Path, opts: CollectOptions) -> Collected:
        return analyse_on_ray(root, self.options, opts)


class _Driver:
    def __init__(self, ray, dir_arg: str, ray_opts: RayOptions, opts: CollectOptions):
        self.ray, self.dir_arg, self.opts, self.jobs, self.top_n = ray, dir_arg, ray_opts, opts.jobs, opts.top_n
        self.export_type, self.want_events, self.progress, self.run_id = opts.export_type, opts.want_events, opts.progress, opts.run
        self.fn, self.limits, self.log = opts.fn, opts.limits, opts.log
        self.keep = opts.keep or (lambda res: res)   # what the driver holds of each result (the batch's spool)
        # each node's own interpreter runs its prepare step unless another was asked for
        self.python = None if opts.python == sys.executable else opts.python
        self.traffic = Traffic()
        self.warnings: list[str] = []
        self.results: list[dict] = []
        self.unparsed: list[dict] = []
        self.nodes: dict[str, Node] = {}

    def _add(self, res: dict) -> None:
        self.results.append(self.keep(res))

    # -- the steps

    def run(self, tmp: Path) -> Collected:
        progress, run = self.progress, self.run_id
        self.discover()
        holders = [n for n in self.nodes.values() if n.base is not None]
        self.log(f"analyse --ray: {len(self.nodes)} node(s), {self.dir_arg} found on {len(holders)}"
                 + "".join(f"; {n.short}: {n.found}" for n in holders))
        items, segment_groups, collisions = self.route(holders)
        timelines = self.gather_timelines(segment_groups, tmp)
        if run is not None:
            keep = {id(c) for c in select_run(tmp, [it.cap for it in items] + [c for c, _ in timelines], run)}
            items = [it for it in items if id(it.cap) in keep]
            timelines = [(c, b) for c, b in timelines if id(c) in keep]
        for it in items:
            it.node.trace_bytes += it.nbytes
        items = self.prepare(items)
        bar = ProgressBar(len(items) + len(timelines), progress, "analysing on the Ray cluster")

        def here() -> None:   # the timeline, merged from every node's segments: analysed here meanwhile
            for cap, base in timelines:
                self._add(run_in_process(self.fn, base, cap, self.top_n, self.want_events,
                                                   self.limits.timeout_s))
                bar.advance()
        try:
            self.analyse(items, bar, here)
        finally:
            bar.stop()
        trace_bytes = sum(n.trace_bytes for n in self.nodes.values())
        block = {
            "address": self._address(),
            "dir": self.dir_arg,
            "task_cpus": self.opts.task_cpus,
            "nodes": [n.row() for n in self.nodes.values()],
            "shared_captures": sum(it.seen_on > 1 for it in items),
            "path_collisions": collisions,
            "not_where_written": sum(it.not_where_written for it in items),
            "trace_bytes": trace_bytes,
            "returned_bytes": {"listings": self.traffic.listings, "summaries": self.traffic.summaries,
                               "segments": self.traffic.segments, "total": self.traffic.total},
            "returned_share": round(self.traffic.total / trace_bytes, 6) if trace_bytes else None,
        }
        base = driver_dir(self.dir_arg)
        if not base.is_dir() and holders and all(Path(n.base) != Path(n.dir) for n in holders):
            base = base.parent   # DIR names a file on the nodes
        return Collected(results=self.results, unparsed=self.unparsed, base=base, warnings=self.warnings,
                         extra={"ray": block}, root=driver_dir(self.dir_arg))

    def discover(self) -> None:
        """One task per alive node: DIR as that node sees it."""
        ray = self.ray
        for n in sorted(ray.nodes(), key=lambda n: n["NodeID"]):
            if n.get("Alive"):
                self.nodes[n["NodeID"]] = Node(n["NodeID"], n.get("NodeManagerAddress", ""),
                                               float((n.get("Resources") or {}).get("CPU", 0.0)))
        if not self.nodes:
            raise RaySetupError("the Ray cluster has no alive node")
        remote = ray.remote(discover_on_node)
        refs = {_pinned(remote, n, 0).remote(self.dir_arg, os.getcwd()): n for n in self.nodes.values()}
        for _ref, node, data, exc in _gather(ray, refs, DISCOVERY_TIMEOUT_S):
            if exc is not None:
                node.error = f"discovery failed: {why_failed(exc, node)}"
                self.warnings.append(f"node {node.short}: {node.error}; the captures on its disk are not in this analysis")
                continue
            self.traffic.listings += len(data)
            node.returned_bytes += len(data)
            got = unpack(data)
            node.host, node.dir, node.base, node.listing = got["host"], got["dir"], got["base"], got["caps"]
            node.found = len(node.listing)

    def route(self, holders: list[Node]) -> tuple[list[Item], dict, int]:
        """Each capture to one node that holds it. The same (path, fingerprint) on several nodes is
        one capture on shared storage: analysed once, preferably where it was written."""
        groups: dict[tuple[str, str], list[tuple[Node, dict]]] = {}
        for n in holders:
            for e in n.listing:
                groups.setdefault((e["cap"]["path"], e["fp"]), []).append((n, e))
            n.listing = []
        load: dict[str, int] = {}
        items: list[Item] = []
        segment_groups: dict[str, list[tuple[Node, dict]]] = {}
        for (path, _fp), seen in sorted(groups.items(), key=lambda kv: kv[0]):
            cap0 = Capture(**seen[0][1]["cap"])
            node = choose_node(cap0, [n for n, _ in seen], load)
            entry = next(e for n, e in seen if n is node)
            load[node.node_id] = load.get(node.node_id, 0) + entry["bytes"] + PER_CAPTURE_LOAD
            if cap0.kind == "timeline" and not cap0.files:   # segments: one timeline per path, from every node
                segment_groups.setdefault(path, []).append((node, entry))
            else:
                items.append(Item(Capture(**entry["cap"]), node, entry["bytes"], len(seen)))
        cluster_ids = set(self.nodes)
        by_path: dict[str, list[Item]] = {}
        for it in items:
            by_path.setdefault(it.cap.path, []).append(it)
            w = where_written_warning(it.cap, it.node, cluster_ids)
            if w:
                it.cap.warnings.append(w)
                it.not_where_written = True
        collisions = 0
        for same in by_path.values():
            if len(same) > 1:
                collisions += len(same)
                for it in same:
                    others = ", ".join(o.node.short for o in same if o is not it)
                    it.cap.warnings.append(f"a different capture has this same path on {others}: each is analysed on "
                                           "its own node (copy them apart to tell them apart in the report)")
        return items, segment_groups, collisions

    def gather_timelines(self, segment_groups: dict, tmp: Path) -> list[tuple[Capture, Path]]:
        """Every node's segments of each timeline directory, copied into one directory here (one
        timeline for the run); [(capture, its root here)]."""
        ray = self.ray
        remote = ray.remote(read_segments_on_node)
        refs = {}
        for path, seen in segment_groups.items():
            for node, _e in seen:
                refs[_pinned(remote, node, 0).remote(node.base, path)] = (node, path)
        got: dict[str, list[tuple[Node, dict]]] = {}
        for _ref, (node, path), data, exc in _gather(ray, refs, DISCOVERY_TIMEOUT_S):
            if exc is not None:
                self.warnings.append(f"{path}: the timeline segments of {node.short} could not be read "
                                     f"({why_failed(exc, node)}): the timeline lacks its processes")
                continue
            self.traffic.segments += len(data)
            node.returned_bytes += len(data)
            files = unpack(data)
            node.trace_bytes += sum(map(len, files.values()))
            got.setdefault(path, []).append((node, files))
        out = []
        for path, parts in sorted(got.items()):
            d = tmp / path
            d.mkdir(parents=True, exist_ok=True)
            for node, files in sorted(parts, key=lambda p: p[0].node_id):
                for name, data in files.items():
                    target = d / name
                    if target.exists():
                        if target.read_bytes() == data:
                            continue   # the same file seen twice (shared storage)
                        target = d / (name[: -len(formats.SEGMENT_SUFFIX)] + f".{node.node_id[:8]}" + formats.SEGMENT_SUFFIX)
                        self.warnings.append(f"{path}/{name}: different segment files of this name on several nodes; "
                                             f"{node.short}'s is merged as {target.name}")
                    target.write_bytes(data)
            first = segment_groups[path][0][1]["cap"]
            out.append((Capture(**first), tmp))
        for path in segment_groups.keys() - got.keys():   # no node answered for it
            node, entry = segment_groups[path][0]
            self._add(failed_result(Capture(**entry["cap"]), f"the timeline segments could not be read "
                                              f"from any node that holds them (first: {node.short})"))
        return out

    def prepare(self, items: list[Item]) -> list[Item]:
        """The input kinds' prepare step, on each node for its captures (raw Ascend parsing where
        torch_npu + CANN work); returns the captures left to analyse."""
        kinds = {k.name for k in input_kinds() if k.prepare is not None}
        todo: dict[str, list[Item]] = {}
        for it in items:
            if it.cap.kind in kinds:
                todo.setdefault(it.node.node_id, []).append(it)
        if not todo:
            return items
        remote = self.ray.remote(prepare_on_node)
        per = self.limits.timeout_s or 1800.0
        refs = {}
        for nid, its in todo.items():
            node = self.nodes[nid]
            ref = _pinned(remote, node, 0).remote(node.base, [it.cap.to_dict() for it in its], self.jobs,
                                                   self.export_type, self.python)
            refs[ref] = node
        timeout = 300.0 + per * max(len(v) for v in todo.values())
        drop: set[int] = set()
        for _ref, node, data, exc in _gather(self.ray, refs, timeout):
            its = todo[node.node_id]
            if exc is not None:
                why = f"preparing it on {node.short} failed: {why_failed(exc, node)}"
                for it in its:
                    self._add(failed_result(it.cap, why))
                    node.failed += 1
                    drop.add(id(it))
                continue
            node.returned_bytes += len(data)
            self.traffic.listings += len(data)
            got = unpack(data)
            for line in got["log"]:
                self.log(f"[{node.short}] {line}")
            for it, d in zip(its, got["caps"]):
                it.cap = Capture(**d)
                why = got["reasons"].get(it.cap.path)
                if why is not None:
                    d = it.cap.to_dict()
                    d.update(status=UNPARSED, error=f"{why} [on {node.short}]")
                    self.unparsed.append(d)
                    node.unparsed += 1
                    drop.add(id(it))
        return [it for it in items if id(it) not in drop]

    def analyse(self, items: list[Item], bar: ProgressBar, here: Callable[[], None]) -> None:
        """One task per capture on its node, at most as many at a time per node as its CPUs hold
        (so a task starts when it is sent, and its deadline means something); `here` runs on the
        driver once the first tasks are sent."""
        from ray import exceptions as rx

        ray = self.ray
        remote = ray.remote(analyse_on_node)
        task_cpus = self.opts.task_cpus
        queues: dict[str, deque] = {}
        for it in items:
            queues.setdefault(it.node.node_id, deque()).append(it)
        slots = {nid: max(1, int(self.nodes[nid].cpus / task_cpus + 1e-9)) for nid in queues}
        # a node with no CPU for Ray tasks still holds its captures: they run there without a reservation
        options = {nid: _pinned(remote, self.nodes[nid], task_cpus if self.nodes[nid].cpus >= task_cpus else 0)
                   for nid in queues}
        timeout = self.limits.timeout_s + self.opts.grace_s if self.limits.timeout_s else None
        pending: dict = {}
        inflight = dict.fromkeys(queues, 0)

        def finish(it: Item, res: dict, nbytes: int = 0) -> None:
            node = it.node
            node.analysed += 1
            node.returned_bytes += nbytes
            self.traffic.summaries += nbytes
            c = res["capture"]
            if c.get("status") == "failed":
                node.failed += 1
                if nbytes:   # the node's own verdict: say where
                    c["error"] = f"{c.get('error')} [on {node.short}]"
            self._add(res)
            bar.advance()

        def submit() -> None:
            for nid, q in queues.items():
                node = self.nodes[nid]
                while q and inflight[nid] < slots[nid]:
                    it = q.popleft()
                    if not node.alive:
                        finish(it, failed_result(it.cap, f"node {node.short} left the cluster before this capture "
                                                         "was analysed"))
                        continue
                    ref = options[nid].remote(node.base, it.cap.to_dict(), self.top_n, self.want_events, self.fn,
                                              self.limits)
                    pending[ref] = (it, time.monotonic() + timeout if timeout else None)
                    inflight[nid] += 1

        def drop(ref) -> Item:
            it, _ = pending.pop(ref)
            inflight[it.node.node_id] -= 1
            return it

        submit()
        here()
        checked = time.monotonic()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=LIVENESS_EVERY_S)
            if ready:
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
            for ref in ready:
                it = drop(ref)
                try:
                    data = ray.get(ref, timeout=GET_TIMEOUT_S)
                    finish(it, unpack(data), len(data))
                except Exception as exc:  # noqa: BLE001 - a Ray error fails this capture only
                    finish(it, failed_result(it.cap, why_failed(exc, it.node)))
                    if isinstance(exc, (rx.NodeDiedError, rx.TaskUnschedulableError)) and it.node.alive:
                        self._left(it.node, time.monotonic())   # its queued captures are not sent
            now = time.monotonic()
            if now - checked >= LIVENESS_EVERY_S:
                checked = now
                alive = _alive_ids(ray)
                for node in self.nodes.values():
                    if node.alive and node.node_id not in alive:
                        self._left(node, now)
            for ref, (it, deadline) in list(pending.items()):
                node = it.node
                if deadline is not None and now > deadline:
                    why = (f"analysis took longer than {self.limits.timeout_s:g} s (the per-capture time limit) "
                           f"on {node.short}, and the task did not stop itself: cancelled")
                elif not node.alive and now - node.dead_since > DEAD_NODE_GRACE_S:
                    why = f"node {node.short} left the cluster while analysing this capture"
                else:
                    continue
                _cancel(ray, ref)
                finish(drop(ref), failed_result(it.cap, why))
            submit()

    def _left(self, node: Node, now: float) -> None:
        node.alive, node.dead_since = False, now
        self.log(f"analyse --ray: node {node.short} left the cluster; its captures not analysed yet fail")

    def _address(self) -> str | None:
        try:
            return self.ray.get_runtime_context().gcs_address
        except Exception:  # noqa: BLE001
            return None
