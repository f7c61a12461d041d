"""Wrap sync and async callables in a context manager that is chosen per call (None = run plain).

Shared by `trace_func` and `mstx_timer_decorator`: the range is entered before the call and
closed however the call ends (return, exception, cancellation); the exception propagates as is.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, ContextManager, Optional

MakeCM = Callable[[], Optional[ContextManager[Any]]]


def wrap_callable(func: Callable, make_cm: MakeCM) -> Callable:
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            cm = make_cm()
            if cm is None:
                return await func(*args, **kwargs)
            with cm:
                return await func(*args, **kwargs)

        return async_wrapper

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cm = make_cm()
        if cm is None:
            return func(*args, **kwargs)
        with cm:
            return func(*args, **kwargs)

    return wrapper
