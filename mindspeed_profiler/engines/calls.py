"""How the engine adapters reach an inference engine from synchronous training code: a call that
may return a coroutine (vLLM's AsyncLLM), and a JSON POST to a server (vLLM / SGLang
`/start_profile`, `/stop_profile`). Standard library only.

Coroutines (`settle`), chosen so that the engine's own loop runs them whenever we know it:
- `loop` given and running in another thread (the engine's loop, e.g. an AsyncLLM served from a
  background thread or a Ray actor's loop): `run_coroutine_threadsafe` on it, waited for up to
  `timeout_s`. AsyncLLM's sockets belong to the loop it was built on, so this is the right choice
  for a live AsyncLLM: pass its loop.
- a loop already runs in this thread (a sync stage scope inside a coroutine): blocking would
  deadlock it, so the coroutine becomes a task on that loop and `settle` returns the task; the
  caller finishes its work in the task's done-callback (the engine starts when the caller next
  awaits).
- no loop anywhere: `asyncio.run` in a fresh loop, bounded by `timeout_s`.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import urllib.error
import urllib.request
from typing import Any


def settle(value: Any, loop: asyncio.AbstractEventLoop | None = None, timeout_s: float = 60.0) -> Any:
    """`value` itself, or, when it is awaitable, its result (or a pending asyncio.Task, see the
    module docstring). Raises what the coroutine raised, TimeoutError past `timeout_s`."""
    if not inspect.isawaitable(value):
        return value
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    if loop is not None and loop is not here and loop.is_running():
        return asyncio.run_coroutine_threadsafe(_as_coroutine(value), loop).result(timeout_s)
    if here is not None:
        return here.create_task(_as_coroutine(value))
    return asyncio.run(asyncio.wait_for(_as_coroutine(value), timeout_s))


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


# what a call past its timeout_s raises: settle's waits (concurrent.futures' is TimeoutError's alias
# only from Python 3.11), urlopen's read (socket.timeout is TimeoutError)
TIMEOUTS = (TimeoutError, concurrent.futures.TimeoutError, asyncio.TimeoutError)


def is_timeout(exc: BaseException) -> bool:
    """Whether `exc` says a call did not answer in time (urlopen's connect timeout comes wrapped in
    a URLError whose reason is one): the engine may still act on it later."""
    return isinstance(exc, TIMEOUTS) or isinstance(getattr(exc, "reason", None), TIMEOUTS)


def is_pending(value: Any) -> bool:
    """Whether `settle` handed back a task still to finish (a loop runs in this thread)."""
    return isinstance(value, asyncio.Future)


def post_json(url: str, path: str, body: dict[str, Any] | None, timeout_s: float) -> Any:
    """POST `body` as JSON to `<url><path>`; the decoded JSON reply (or its text, or None when
    empty). An HTTP error raises RuntimeError naming the URL, the status and the server's words."""
    target = url.rstrip("/") + path
    data = json.dumps(body).encode() if body is not None else b""
    req = urllib.request.Request(target, data=data, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            text = resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:500] if exc.fp is not None else ""
        raise RuntimeError(f"POST {target}: HTTP {exc.code} {exc.reason}: {detail}") from None
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
