"""Wrap sync and async callables in a context manager chosen per call (shared by trace_func and
mstx_timer_decorator).

When markers, tracer and marker metrics are all off, the wrapper does three attribute checks and
calls through (the "off means off" budget: about 1.3x a plain pass-through wrapper, see
docs/perf_tracing.md). Otherwise `make_cm()` gives the range (or None), which is closed however the
call ends (return, exception, cancellation); the exception propagates unchanged.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, ContextManager, Optional

from mindspeed_profiler._state import STATE
from mindspeed_profiler.tracing._metrics import METRICS

MakeCM = Callable[[], Optional[ContextManager[Any]]]


def wrap_callable(func: Callable, make_cm: MakeCM) -> Callable:
    state, metrics = STATE, METRICS  # closure cells: faster than module globals on the hot path

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            if state.mstx_enabled or state.tracer is not None or metrics.on:
                cm = make_cm()
                if cm is not None:
                    with cm:
                        return await func(*args, **kwargs)
            return await func(*args, **kwargs)

        return async_wrapper

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if state.mstx_enabled or state.tracer is not None or metrics.on:
            cm = make_cm()
            if cm is not None:
                with cm:
                    return func(*args, **kwargs)
        return func(*args, **kwargs)

    return wrapper
