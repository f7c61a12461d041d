"""What each event of a Chrome / Kineto trace is: host op, annotation, runtime call, device
activity (compute, communication or memory copy), or profiler bookkeeping to skip.

`ClassifiedTrace` is built once per trace and handed to every analyzer."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..parsing.events import Events
from .communication import COMM_PROCESSES, is_comm_name, is_host_comm_name

HOST_OP_CATS = {"cpu_op", "operator"}
ANNOTATION_CATS = {"user_annotation", "mstx", "MsTx", "mstx_range"}
# Kineto copies each user range onto the device timeline (same name): the device side of a range,
# never a range (or a step) of its own
DEVICE_ANNOTATION_CATS = {"gpu_user_annotation"}
# kernels recorded by the CUDA range profiler: placeholder durations, not real device time
PROFILER_RANGE_CATS = {"cuda_profiler_range"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime", "hip_runtime", "xpu_runtime", "privateuse1_runtime"}
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events"}
SKIP_CATS = {"Trace", "ac2g", "flow"}
DEVICE_PROCESSES = ("Ascend Hardware", "HCCL", "Communication")
DERIVED_PROCESSES = ("Overlap Analysis",)
MEMCPY_RE = re.compile(r"memcpy|memset|sdma", re.I)
# copy / fill kernels that run as kernels (ROCm's blit kernels), not as gpu_memcpy activities
COPY_KERNEL_PREFIXES = ("__amd_rocclr_copyBuffer", "__amd_rocclr_fillBuffer", "__amd_rocclr_copyImage")
STEP_RE = re.compile(r"^ProfilerStep#(\d{1,15})$")   # a longer number is no step of a real run (and no int64)


def is_memcpy_name(n) -> bool:
    low = str(n).lower()
    return "memcpy" in low or "memset" in low or str(n).startswith(COPY_KERNEL_PREFIXES)


def _is_mstx(name) -> bool:
    return isinstance(name, str) and name.startswith(("mstx", "MsTx"))


def classify(ev: Events) -> dict[str, np.ndarray]:
    """Boolean masks over events: host_op, annotation, device_annotation, runtime, device, comm,
    memcpy, compute, host_comm, profiler_range, skip."""
    pname = [str(ev.process_names.get(p, "")) for p in ev.pids]
    dev_proc = ev.lookup(pname, lambda n: n.startswith(DEVICE_PROCESSES))[ev.pid] if len(ev) else np.zeros(0, bool)
    comm_proc = ev.lookup(pname, lambda n: n.startswith(COMM_PROCESSES))[ev.pid] if len(ev) else np.zeros(0, bool)
    derived = ev.lookup(pname, lambda n: n.startswith(DERIVED_PROCESSES))[ev.pid] if len(ev) else np.zeros(0, bool)
    cat = lambda s: ev.lookup(ev.cats, lambda c: c in s)[ev.cat] if len(ev) else np.zeros(0, bool)
    skip = cat(SKIP_CATS) | derived
    device = (cat(DEVICE_CATS) | dev_proc) & ~skip
    memcpy_cat = cat({"gpu_memcpy", "gpu_memset"})
    memcpy_task = ev.lookup(ev.tasks, lambda t: isinstance(t, str) and "MEMCPY" in t.upper())[ev.task] if len(ev) else memcpy_cat
    memcpy_name = ev.lookup(ev.names, is_memcpy_name)[ev.name] if len(ev) else memcpy_cat
    memcpy = device & (memcpy_cat | memcpy_task | memcpy_name)
    comm_name = ev.lookup(ev.names, is_comm_name)[ev.name] if len(ev) else memcpy_cat
    comm = device & ~memcpy & (comm_proc | comm_name)
    device_annotation = cat(DEVICE_ANNOTATION_CATS) & ~skip
    annotation = (cat(ANNOTATION_CATS) | ev.lookup(ev.names, _is_mstx)[ev.name]) & ~device & ~skip & ~device_annotation \
        if len(ev) else memcpy_cat
    runtime = (cat(RUNTIME_CATS) | ev.lookup(ev.names, lambda n: str(n).startswith("AscendCL@"))[ev.name]) & ~device & ~skip if len(ev) else memcpy_cat
    host_op = cat(HOST_OP_CATS) & ~device & ~skip
    host_comm = (host_op | annotation) & ev.lookup(ev.names, is_host_comm_name)[ev.name] if len(ev) else memcpy_cat
    return {"host_op": host_op, "annotation": annotation, "device_annotation": device_annotation, "runtime": runtime,
            "device": device, "comm": comm, "memcpy": memcpy, "compute": device & ~comm & ~memcpy,
            "host_comm": host_comm, "profiler_range": cat(PROFILER_RANGE_CATS) & ~skip, "skip": skip}


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
