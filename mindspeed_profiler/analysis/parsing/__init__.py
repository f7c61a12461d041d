"""Parsing: files in, tables out (no analysis here). jsonscan (fast / streaming Chrome-trace JSON),
events (columnar events), kineto_trace (one Kineto / trace_view file -> Events), ascend_files
(torch_npu's CSV / db outputs), ascend_raw (torch_npu's offline parser), segments (the tracer's
segment files), timeline_trace (a merged timeline's spans)."""
