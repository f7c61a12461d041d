"""What each event of a Chrome / Kineto trace is: host op, annotation, runtime call, device
activity (compute, communication or memory copy), or profiler bookkeeping to skip.

Kineto of every torch generation: today's categories (`cpu_op`, `kernel`, `cuda_runtime`, ...)
and torch 1.8-1.13's (`Operator`, `Kernel`, `Runtime`, `Memcpy`, `Memset`).

torch_npu's trace_view.json (and the db export, read into the same shape) by the lanes and task
types torch_npu writes, never by name patterns:
  - "Ascend Hardware" holds one row per device task, with its `Task Type`. Tasks that share the
    `connection_id` of an HCCL op are that collective's sub-tasks (Notify Wait, Write Value, SDMA
    on the communication stream): part of the op, never counted again. Synchronisation and
    bookkeeping tasks (EVENT_WAIT / EVENT_RECORD, PLACE_HOLDER, PROFILING_*) are no device work.
    Copy tasks (PCIE_DMA_SQE / SDMA_SQE / MEMCPY_ASYNC) are memory copies. Every other task is
    compute: AI_CORE, AI_VECTOR_CORE, MIX_AIC / MIX_AIV, AI_CPU, DSA_SQE, and older CANN's "Other".
    This is the set msprof's Computing lane covers (a test checks it on real captures).
  - "HCCL": the "Group N Communication" threads hold the collective ops (`hcom_*`), the
    communication; the "Plane N" threads repeat their sub-tasks (skipped).
  - "Overlap Analysis" is torch_npu's own breakdown (derived: read by the step breakdown, skipped here).

`ClassifiedTrace` is built once per trace and handed to every analyzer."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..parsing.ascend_tasks import ASCEND_HARDWARE, COPY_TASKS, HCCL_PROCESS, LANE_PROCESS, SYNC_TASKS
from ..parsing.events import Events
from .communication import COMM_PROCESSES, is_comm_name, is_host_comm_name
from .grouping import distinct, member

# torch 1.8-1.13 wrote "Operator", "Runtime", "Kernel", "Memcpy", "Memset" (and "Trace")
HOST_OP_CATS = {"cpu_op", "operator", "Operator"}
ANNOTATION_CATS = {"user_annotation", "mstx", "MsTx", "mstx_range"}
# Kineto copies each user range onto the device timeline (same name): the device side of a range,
# never a range (or a step) of its own
DEVICE_ANNOTATION_CATS = {"gpu_user_annotation"}
# kernels recorded by the CUDA range profiler: placeholder durations, not real device time
PROFILER_RANGE_CATS = {"cuda_profiler_range"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime", "hip_runtime", "xpu_runtime", "privateuse1_runtime", "Runtime"}
MEMCPY_CATS = {"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"}
DEVICE_CATS = {"kernel", "mtia_ccp_events", "Kernel"} | MEMCPY_CATS
SKIP_CATS = {"Trace", "ac2g", "flow"}
DEVICE_PROCESSES = (ASCEND_HARDWARE, HCCL_PROCESS, "Communication")
DERIVED_PROCESSES = (LANE_PROCESS,)
# copy / fill kernels that run as kernels (ROCm's blit kernels), not as gpu_memcpy activities
COPY_KERNEL_PREFIXES = ("__amd_rocclr_copyBuffer", "__amd_rocclr_fillBuffer", "__amd_rocclr_copyImage")
STEP_RE = re.compile(r"^ProfilerStep#(\d{1,15})$")   # a longer number is no step of a real run (and no int64)


def is_memcpy_name(n) -> bool:
    low = str(n).lower()
    return "memcpy" in low or "memset" in low or str(n).startswith(COPY_KERNEL_PREFIXES)


def _is_mstx(name) -> bool:
    return isinstance(name, str) and name.startswith(("mstx", "MsTx"))


def _ascend_lanes(ev: Events, hw: np.ndarray, comm_proc: np.ndarray) -> tuple[np.ndarray, ...]:
    """(hccl_op, repeated, sync, copy) over events: the collective ops on HCCL's "Group N
    Communication" threads; the rows that repeat a part of an op (HCCL's "Plane N" sub-tasks,
    hardware tasks with an op's connection id); Ascend sync / bookkeeping tasks; copy tasks."""
    n = len(ev)
    none = np.zeros(n, bool)
    if not (hw.any() or comm_proc.any()):
        return none, none, none, none
    if comm_proc.any():
        thread = ev.thread_name_of()
        named = thread != ""
        op_thread = np.array([str(t).endswith("Communication") for t in thread], dtype=bool)
        # no thread names (older exports): a row named like a collective (hcom_*, Hccl*) is the op
        op_name = ev.lookup(ev.names, is_comm_name)[ev.name]
        hccl_op = comm_proc & np.where(named, op_thread, op_name)
    else:
        hccl_op = none
    op_corr = distinct(ev.corr[hccl_op & (ev.corr >= 0)])
    repeated = (comm_proc & ~hccl_op) | (hw & member(ev.corr, op_corr) if len(op_corr) else none)
    sync = hw & ev.lookup(ev.tasks, lambda t: t in SYNC_TASKS)[ev.task] & ~repeated
    copy = hw & ev.lookup(ev.tasks, lambda t: t in COPY_TASKS)[ev.task] & ~repeated
    return hccl_op, repeated, sync, copy


def classify(ev: Events) -> dict[str, np.ndarray]:
    """Boolean masks over events: host_op, annotation, device_annotation, runtime, device, comm,
    memcpy, compute, host_comm, profiler_range, skip, and for Ascend hccl_op (the collective ops)
    and device_sync (synchronisation / bookkeeping tasks, skipped)."""
    if not len(ev):
        z = np.zeros(0, bool)
        return {k: z for k in ("host_op", "annotation", "device_annotation", "runtime", "device", "comm", "memcpy",
                               "compute", "host_comm", "profiler_range", "skip", "hccl_op", "device_sync")}
    pname = [str(ev.process_names.get(p, "")) for p in ev.pids]
    dev_proc = ev.lookup(pname, lambda n: n.startswith(DEVICE_PROCESSES))[ev.pid]
    comm_proc = ev.lookup(pname, lambda n: n.startswith(COMM_PROCESSES))[ev.pid]
    hw = ev.lookup(pname, lambda n: n.startswith(ASCEND_HARDWARE))[ev.pid]
    derived = ev.lookup(pname, lambda n: n.startswith(DERIVED_PROCESSES))[ev.pid]
    hccl_op, repeated, sync, copy = _ascend_lanes(ev, hw, comm_proc)
    cat = lambda s: ev.lookup(ev.cats, lambda c: c in s)[ev.cat]
    skip = cat(SKIP_CATS) | derived | repeated | sync
    device = (cat(DEVICE_CATS) | dev_proc) & ~skip
    memcpy_task = ev.lookup(ev.tasks, lambda t: isinstance(t, str) and "MEMCPY" in t.upper())[ev.task]
    # Ascend tasks by their task type only: a MemSet *kernel* is compute there, as msprof counts it
    memcpy_name = ev.lookup(ev.names, is_memcpy_name)[ev.name] & ~hw
    memcpy = device & (cat(MEMCPY_CATS) | memcpy_task | memcpy_name | copy)
    comm_name = ev.lookup(ev.names, is_comm_name)[ev.name]
    comm = device & ~memcpy & (comm_proc | comm_name)
    device_annotation = cat(DEVICE_ANNOTATION_CATS) & ~skip
    annotation = (cat(ANNOTATION_CATS) | ev.lookup(ev.names, _is_mstx)[ev.name]) & ~device & ~skip & ~device_annotation
    runtime = (cat(RUNTIME_CATS) | ev.lookup(ev.names, lambda n: str(n).startswith("AscendCL@"))[ev.name]) & ~device & ~skip
    host_op = cat(HOST_OP_CATS) & ~device & ~skip
    host_comm = (host_op | annotation) & ev.lookup(ev.names, is_host_comm_name)[ev.name]
    return {"host_op": host_op, "annotation": annotation, "device_annotation": device_annotation, "runtime": runtime,
            "device": device, "comm": comm, "memcpy": memcpy, "compute": device & ~comm & ~memcpy,
            "host_comm": host_comm, "profiler_range": cat(PROFILER_RANGE_CATS) & ~skip, "skip": skip,
            "hccl_op": hccl_op & device, "device_sync": sync}


@dataclass
class ClassifiedTrace:
    """A trace's events, what each one is, and which are ProfilerStep#N ranges."""

    ev: Events
    m: dict[str, np.ndarray]      # classify()'s masks
    step_num: np.ndarray           # per interned name: N of ProfilerStep#N, else -1
    is_step: np.ndarray            # per event: a ProfilerStep#N range

    @property
    def ts(self) -> np.ndarray:
        return self.ev.ts

    @property
    def dur(self) -> np.ndarray:
        return self.ev.dur

    @property
    def end(self) -> np.ndarray:
        return self.ev.ts + self.ev.dur


def classified(ev: Events) -> ClassifiedTrace:
    m = classify(ev)
    step_of = [STEP_RE.match(n) if isinstance(n, str) else None for n in ev.names]
    step_num = np.array([int(x.group(1)) if x else -1 for x in step_of], dtype=np.int64)
    # torch marks steps as user_annotation, torch_npu's trace_view as cpu_op
    is_step = (step_num[ev.name] >= 0) & (m["annotation"] | m["host_op"])
    return ClassifiedTrace(ev, m, step_num, is_step)
