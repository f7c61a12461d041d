"""On-demand capture of a running job (`profiler_config.integrated.dynamic: true`).

    mindspeed-profiler trigger RUN_DIR --steps 3 --stage actor_update   # the next 3 iterations
    mindspeed-profiler status RUN_DIR                                   # per worker: requested / running / done / rejected

requests.py: the request formats (ours and torch_npu's profiler_config.json) and the per-worker
decision, pure. transport.py: request files, worker state files and the Ray mailbox. listener.py:
the worker side, a background poller plus a child IntegratedProfiler per accepted request.
trigger.py: the client side (resolving "the next N iterations" to iterations every worker can
still reach, run.json's request list). docs/ondemand.md explains it for users.
"""
