"""A name -> entry registry filled by modules that register themselves when imported; the built-in
modules are imported on first use (so importing the registry stays cheap). Shared by the capture
backend registry and the analysis input registry. Standard library only."""
from __future__ import annotations

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
