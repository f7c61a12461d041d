"""Offline analysis of profiler output (no device, no torch / torch_npu import).

Modules: discover (what is where), jsonscan (fast / streaming JSON), events (columnar events),
kineto (one trace's summary), ascend (Ascend text / db output, raw parsing), timeline (RL view),
crossrank (stage x rank, slow ranks), capture (one capture, worker side), driver (the batch),
report_html, sqlite_export, console, compare.
"""
