"""Process-level capture of Ray worker groups (`profiler_config.system`, RLinf's cluster.profiling):
a system profiler wraps each chosen worker's Python process.

    backends/   the registry: nsight (nsys), rocprof_sys (rocprof-sys-python), msprof (CANN), py_spy
    render.py   the seed's rendering rules (pure)
    spec.py     WorkerSpec: one worker's settings, encoded for the launcher and the worker
    settings.py the per-actor Ray runtime_env (py_executable through the launcher, env vars)
    launch.py   the launcher: runs on the worker's node, execs into the tool (or the plain worker)
    regroup.py  the worker's first step: a process group of its own, so Ray's cleanup never kills the tool
    watch.py    marks the report complete once the tool exits
    worker.py   inside the worker: iteration boundaries, the CUDA profiler range around listed steps
    finish.py, record.py   the driver's bounded wait for reports; run.json's `system` entry

The Ray side (SystemCapture, system_runtime_env, shutdown_system_workers) is in
mindspeed_profiler.integrations.ray; the offline side in mindspeed_profiler.analysis (input kind
`system`, py-spy tracks on the timeline). docs/system-profiling.md.

Nothing here is imported unless a `system` section is used: the package import is empty on purpose
(the launcher runs before every wrapped worker and must stay light).
"""
