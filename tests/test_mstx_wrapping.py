"""The shared call wrapper on generators, async generators, staticmethod and classmethod objects."""
from __future__ import annotations

import asyncio
import inspect
import time

import pytest

from mindspeed_profiler import enable_marker_metrics, mstx_timer_decorator, pop_marker_metrics
from mindspeed_profiler.tracing import trace_func


def test_generator_range_covers_the_iteration(clean_state):
    enable_marker_metrics(True)

    @mstx_timer_decorator
    def gen(n):
        for i in range(n):
            time.sleep(0.01)
            got = yield i
            if got is not None:
                yield got * 10

    assert inspect.isgeneratorfunction(gen)
    assert list(gen(3)) == [0, 1, 2]
    g = gen(2)
    assert next(g) == 0 and g.send(4) == 40  # send is forwarded
    g.close()
    m = pop_marker_metrics()
    assert m["test_generator_range_covers_the_iteration.<locals>.gen"]["count"] == 2
    assert m["test_generator_range_covers_the_iteration.<locals>.gen"]["max_s"] >= 0.025  # not just the creation


def test_async_generator_range_covers_the_iteration(clean_state):
    enable_marker_metrics(True)

    @mstx_timer_decorator(name="agen")
    async def agen(n):
        for i in range(n):
            await asyncio.sleep(0.01)
            yield i

    @mstx_timer_decorator(name="abad")
    async def abad():
        yield 1
        raise KeyError("x")

    async def main():
        out = [x async for x in agen(3)]
        with pytest.raises(KeyError):
            async for _ in abad():
                pass
        return out

    assert inspect.isasyncgenfunction(agen)
    assert asyncio.run(main()) == [0, 1, 2]
    m = pop_marker_metrics()
    assert m["agen"]["count"] == 1 and m["agen"]["total_s"] >= 0.025
    assert m["abad"]["count"] == 1


@pytest.mark.parametrize("deco", [mstx_timer_decorator, trace_func])
def test_decorator_above_staticmethod_and_classmethod(clean_state, deco):
    enable_marker_metrics(True)

    class C:
        @deco
        @staticmethod
        def s(x):
            return x + 1

        @deco
        @classmethod
        def c(cls, x):
            return (cls.__name__, x)

    assert C.s(1) == 2 and C().s(1) == 2
    assert C.c(3) == ("C", 3) and C().c(3) == ("C", 3)
    if deco is mstx_timer_decorator:
        m = pop_marker_metrics()
        assert m["test_decorator_above_staticmethod_and_classmethod.<locals>.C.s"]["count"] == 2
        assert m["test_decorator_above_staticmethod_and_classmethod.<locals>.C.c"]["count"] == 2
