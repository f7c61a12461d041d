"""The vocabulary torch_npu writes for device tasks and host rows (trace_view.json `Task Type`,
the db's TASK / COMPUTE_TASK_INFO / PYTORCH_API enums), shared by the readers and the classifier."""
from __future__ import annotations

ASCEND_HARDWARE = "Ascend Hardware"   # trace_view process of the device tasks (thread "Stream N")
HCCL_PROCESS = "HCCL"                 # its "Group N Communication" threads hold the collective ops
LANE_PROCESS = "Overlap Analysis"     # torch_npu's own breakdown lanes
LANES = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")   # db OVERLAP_ANALYSIS.type 0-3

# Device tasks that are no device work: stream synchronisation and profiler bookkeeping
# (trace_view spells the SQE names, the db the runtime names)
SYNC_TASKS = frozenset({
    "EVENT_RECORD_SQE", "EVENT_WAIT_SQE", "EVENT_RECORD", "EVENT_WAIT", "EVENT_RESET", "PLACE_HOLDER_SQE",
    "PLACE_HOLDER", "NOTIFY_RECORD_SQE", "NOTIFY_WAIT_SQE", "NOTIFY_RECORD", "NOTIFY_WAIT", "Notify Wait",
    "Notify Record", "WRITE_VALUE_SQE", "Write Value", "PROFILING_ENABLE", "PROFILING_DISABLE",
    "CAPTURE_RECORD", "CAPTURE_WAIT", "STREAM_SWITCH", "STREAM_ACTIVE", "LABEL_SET", "LABEL_SWITCH",
    "LABEL_GOTO", "MODEL_END_GRAPH", "MODEL_EXECUTE", "FLIP",
})
# Memory copies (PCIe / SDMA copy engines)
COPY_TASKS = frozenset({"PCIE_DMA_SQE", "SDMA_SQE", "MEMCPY_ASYNC", "SDMA", "MEMCPY", "ASYNC_MEMCPY"})

# db PYTORCH_API.type (ENUM_API_TYPE) -> the category trace_view writes for the same rows
PYTORCH_API_CATS = {50001: "cpu_op", 50002: "queue", 50003: "python_function", 50004: "mstx"}
