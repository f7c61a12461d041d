"""A name -> entry registry filled by modules that register themselves when imported; the built-in
modules are imported on first use (so importing the registry stays cheap). Shared by the capture
backend registry, the system backends, the marker kinds and the analysis input registry. Each is one
instance, the module's documented `REGISTRY`; `scoped()` adds entries for a while (a test, a plugin
tried out) and puts the registry back as it was. Standard library only."""
from __future__ import annotations

import contextlib
import importlib
from typing import Generic, Iterator, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, builtin_modules: tuple[str, ...]):
        self.builtin_modules = builtin_modules
        self.entries: dict[str, T] = {}
        self._loaded = False

    def add(self, name: str, entry: T) -> T:
        self.entries[name] = entry
        return entry

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self.builtin_modules:
                importlib.import_module(module)

    def get(self, name: str) -> T | None:
        self._load()
        return self.entries.get(name)

    def __iter__(self) -> Iterator[T]:
        self._load()
        return iter(list(self.entries.values()))

    @contextlib.contextmanager
    def scoped(self) -> Iterator["Registry[T]"]:
        """The registry itself, with whatever is registered inside the block removed (and anything
        replaced put back) when the block ends."""
        self._load()   # the built-ins belong to the saved state
        saved = dict(self.entries)
        try:
            yield self
        finally:
            self.entries.clear()
            self.entries.update(saved)
