"""The ``in_memory`` memory backend: a dict, with prefix search (FR-014…018).

Values are stored as JSON text, so only JSON-compatible values are accepted (spec 002), a write is all or
nothing, and a caller that mutates an object after writing it (or after reading it) cannot change what is stored.
"""

from __future__ import annotations

import bisect
import json
import threading
from typing import Any

from aeon_kernel import Memory, MemoryStoreError, Register, hookimpl
from aeon_kernel.kit import encode_value


class InMemoryKVStore(Memory):
    def __init__(self) -> None:
        self._data: dict[str, str] = {}
        self._keys: list[str] = []  # sorted, for prefix search without scanning every key
        self._lock = threading.Lock()

    def write(self, key: str, value: Any) -> None:
        if not isinstance(key, str) or not key:
            raise MemoryStoreError(f"memory keys must be non-empty strings, got {key!r}")
        text = encode_value(key, value)
        with self._lock:
            if key not in self._data:
                bisect.insort(self._keys, key)
            self._data[key] = text

    def read(self, key: str) -> Any | None:
        text = self._data.get(key)
        return None if text is None else json.loads(text)

    def search(self, prefix: str) -> list[tuple[str, Any]]:
        with self._lock:
            keys, matches = self._keys, []
            for index in range(bisect.bisect_left(keys, prefix), len(keys)):  # no copy of the tail
                if not keys[index].startswith(prefix):
                    break
                matches.append((keys[index], self._data[keys[index]]))
        return [(key, json.loads(text)) for key, text in matches]


@hookimpl
def aeon_register_memory_backends(register: Register) -> None:
    register("in_memory", InMemoryKVStore)
