"""Wrap sync and async callables in a context manager chosen per call (shared by trace_func and
mstx_timer_decorator).

Off path: with device markers (`STATE.mstx_enabled`), the tracer and marker metrics all off, the
wrapper reads one flag (`SWITCH.on`, core/state.py) and calls through, without re-packing an empty **kwargs (so it costs about
what a plain `functools.wraps` pass-through wrapper costs, docs/perf_tracing.md). Otherwise
`make_cm()` gives the range (or None), which is closed however the call ends (return, exception,
cancellation); the exception propagates unchanged. The ranges given never swallow an exception
(their __exit__ returns False), which lets the sync wrapper call __enter__ / __exit__ itself:
cheaper than a `with` statement.

Generator and async generator functions are wrapped as such: the range covers the whole
iteration (from the first `next` to exhaustion or close), not just the creation of the generator
object. `staticmethod` / `classmethod` objects (decorator placed above them) are unwrapped,
wrapped and re-wrapped.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Callable, ContextManager, Optional

from mindspeed_profiler.core.state import SWITCH

MakeCM = Callable[[], Optional[ContextManager[Any]]]
_NULL = contextlib.nullcontext()


def wrap_callable(func: Callable, make_cm: MakeCM) -> Callable:
    switch = SWITCH  # a closure cell: faster than a module global on the hot path

    if isinstance(func, (staticmethod, classmethod)):
        return type(func)(wrap_callable(func.__func__, make_cm))

    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def gen_wrapper(*args: Any, **kwargs: Any) -> Any:
            if switch.on:
                cm = make_cm()
                if cm is not None:
                    with cm:
                        return (yield from func(*args, **kwargs))
            return (yield from func(*args, **kwargs))

        return gen_wrapper

    if inspect.isasyncgenfunction(func):

        @functools.wraps(func)
        async def agen_wrapper(*args: Any, **kwargs: Any) -> Any:
            cm = make_cm() if switch.on else None
            with cm if cm is not None else _NULL:
                agen = func(*args, **kwargs)
                try:
                    value = await agen.__anext__()
                except StopAsyncIteration:
                    return
                while True:  # forward asend / athrow / aclose, as `yield from` does for generators
                    try:
                        sent = yield value
                    except GeneratorExit:
                        await agen.aclose()
                        raise
                    except BaseException as exc:
                        try:
                            value = await agen.athrow(exc)
                        except StopAsyncIteration:
                            return
                    else:
                        try:
                            value = await agen.asend(sent)
                        except StopAsyncIteration:
                            return

        return agen_wrapper

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            if switch.on:
                cm = make_cm()
                if cm is not None:
                    with cm:
                        return await func(*args, **kwargs)
            return await func(*args, **kwargs)

        return async_wrapper

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if switch.on:
            cm = make_cm()
            if cm is not None:
                cm.__enter__()
                try:
                    result = func(*args, **kwargs)
                except BaseException as exc:
                    cm.__exit__(type(exc), exc, exc.__traceback__)
                    raise
                cm.__exit__(None, None, None)
                return result
        if kwargs:
            return func(*args, **kwargs)
        return func(*args)  # an empty **kwargs costs a dict unpacking per call

    return wrapper
