"""What the fake inference engines (fake_vllm.py, fake_sglang.py) share: methods whose signatures
are rebuilt from the engine's signature snapshot (mindspeed_profiler/data/<engine>-<version>.json,
read from the released wheel's sources) and every call bound against it first, a real torch.profiler
session on the CPU that writes a real Kineto trace, and a small HTTP server for the engines' POST
routes. vLLM and SGLang need a GPU and cannot run here: these fakes stand in for them in tests.
"""
from __future__ import annotations

import gzip
import inspect
import json
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import torch

import mindspeed_profiler
from fake_torch_npu import signature_of

DATA_DIR = Path(mindspeed_profiler.__file__).parent / "data"


def load_snapshot(name: str) -> dict[str, Any]:
    return json.loads((DATA_DIR / name).read_text(encoding="utf-8"))


def class_fields(snap: dict[str, Any], cls: str) -> list[str]:
    return [f["name"] for f in snap["classes"][cls]["fields"]]


class Bound:
    """Wraps an implementation in the snapshot's signature of `qualname`: a call the real method
    would refuse raises TypeError here too; calls are recorded; `fail[qualname]` injects a fault."""

    def __init__(self, snap: dict[str, Any], engine: str):
        self.snap, self.engine = snap, engine
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: dict[str, BaseException] = {}

    def method(self, qualname: str, impl: Callable[..., Any]) -> Callable[..., Any]:
        entry = self.snap["functions"][qualname]
        sig = signature_of(entry)
        fake = self

        def check(args: tuple, kwargs: dict) -> None:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{qualname}{sig} ({fake.engine} {fake.snap['version']}): {exc}") from None
            fake.calls.append((qualname, {k: v for k, v in bound.arguments.items() if k != "self"}))
            if qualname in fake.fail:
                raise fake.fail[qualname]

        if entry.get("async"):
            async def fn(*args: Any, **kwargs: Any) -> Any:
                check(args, kwargs)
                return impl(*args, **kwargs)
        else:
            def fn(*args: Any, **kwargs: Any) -> Any:
                check(args, kwargs)
                return impl(*args, **kwargs)
        fn.__signature__ = sig  # type: ignore[attr-defined]
        fn.__name__ = qualname.rsplit(".", 1)[-1]
        fn.__qualname__ = qualname
        return fn

    def calls_to(self, qualname: str) -> list[dict[str, Any]]:
        return [a for n, a in self.calls if n == qualname]


def some_work(n: int = 3) -> None:
    """A few real ops for the profiler to record (the engine's 'forward steps'), on the GPU when
    there is one (a real engine's kernels), else on the CPU."""
    x = torch.randn(32, 32, device="cuda" if torch.cuda.is_available() else "cpu")
    for _ in range(n):
        x = torch.relu(x @ x) / 32
    if x.is_cuda:
        torch.cuda.synchronize()


class CpuTrace:
    """A real torch.profiler session, CPU activity (and CUDA where there is a GPU, as a real vLLM
    worker records); `stop(paths)` writes its Kineto JSON to every path given (one per fake worker:
    the same recording under each name)."""

    def __init__(self, **profile_kwargs: Any):
        kwargs = {k: v for k, v in profile_kwargs.items() if k in ("record_shapes", "profile_memory", "with_stack",
                                                                     "with_flops", "with_modules")}
        self.kwargs = kwargs
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.prof = torch.profiler.profile(activities=activities, **kwargs)
        self.prof.__enter__()

    def stop(self, paths: list[Path]) -> None:
        self.prof.__exit__(None, None, None)
        first = paths[0]
        first.parent.mkdir(parents=True, exist_ok=True)
        plain = first.with_name(first.name.removesuffix(".gz"))
        self.prof.export_chrome_trace(str(plain))
        if first.name.endswith(".gz"):
            with open(plain, "rb") as src, gzip.open(first, "wb") as dst:
                shutil.copyfileobj(src, dst)
            plain.unlink()
        for other in paths[1:]:
            other.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(first, other)


class FakeServer:
    """An HTTP server on 127.0.0.1 answering POST <path> with `routes[path](body or None)`, run one
    at a time on one engine thread (a torch profiler is started and stopped on the same thread, as
    in an engine's worker); a handler's exception is an HTTP 400 with its text (as the engines
    answer a bad request); `status` forces a status for every request (e.g. 500), `delay_s` delays
    every answer, `delays[path]` the answers to one path."""

    def __init__(self, routes: dict[str, Callable[[Any], Any]]):
        self.routes = routes
        self.status: int | None = None
        self.delay_s = 0.0
        self.delays: dict[str, float] = {}
        self.requests: list[tuple[str, Any]] = []
        self.engine_thread = ThreadPoolExecutor(max_workers=1)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw.strip() else None
                server.requests.append((self.path, body))
                delay = server.delays.get(self.path, server.delay_s)
                if delay:
                    threading.Event().wait(delay)
                code, reply = server.status or 200, {"ok": True}
                if server.status is None:
                    try:
                        route = server.routes[self.path]
                    except KeyError:
                        code, reply = 404, {"detail": "Not Found"}
                    else:
                        try:
                            reply = server.engine_thread.submit(route, body).result()
                        except Exception as exc:  # noqa: BLE001 - the server's answer to a bad request
                            code, reply = 400, {"detail": f"{type(exc).__name__}: {exc}"}
                data = json.dumps(reply).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass   # the client gave up (its timeout): nobody to answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "FakeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.engine_thread.shutdown()


def same_signature(fn: Callable[..., Any], entry: dict[str, Any]) -> bool:
    """Whether a fake's method has exactly the snapshot's parameters (names, kinds, defaults)."""
    def shape(sig: inspect.Signature) -> list[tuple[str, Any, str]]:
        return [(p.name, p.kind, repr(p.default)) for p in sig.parameters.values()]
    return shape(inspect.signature(fn)) == shape(signature_of(entry))
