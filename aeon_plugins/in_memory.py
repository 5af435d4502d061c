"""The ``in_memory`` memory backend: a dict, with prefix search (FR-014…018).

Values are stored as JSON text, so only JSON-compatible values are accepted (spec 002), a write is all or
nothing, and a caller that mutates an object after writing it (or after reading it) cannot change what is stored.
A run's keys are dropped when the run ends (:meth:`Memory.release`), so that an engine serving many runs stays
the same size; ``keep_runs=True`` keeps them until the process exits.
"""

from __future__ import annotations

import bisect
import threading
from typing import Any

from aeon_kernel import Memory, MemoryStoreError, Register, hookimpl
from aeon_kernel.kit import decode_own, encode_value


class InMemoryKVStore(Memory):
    def __init__(self, keep_runs: bool = False) -> None:
        if not isinstance(keep_runs, bool):
            raise MemoryStoreError(f"in_memory: keep_runs must be true or false, got {keep_runs!r}")
        self.keep_runs = keep_runs
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
        return None if text is None else decode_own(text)

    def search(self, prefix: str) -> list[tuple[str, Any]]:
        with self._lock:
            keys, matches = self._keys, []
            for index in range(bisect.bisect_left(keys, prefix), len(keys)):  # no copy of the tail
                if not keys[index].startswith(prefix):
                    break
                matches.append((keys[index], self._data[keys[index]]))
        return [(key, decode_own(text)) for key, text in matches]

    def release(self, prefix: str) -> None:
        """Drop every key under ``prefix`` (a run that ended), unless ``keep_runs``."""
        if self.keep_runs or not prefix:
            return
        with self._lock:
            keys = self._keys
            start = end = bisect.bisect_left(keys, prefix)
            while end < len(keys) and keys[end].startswith(prefix):
                del self._data[keys[end]]
                end += 1
            del keys[start:end]


@hookimpl
def aeon_register_memory_backends(register: Register) -> None:
    register("in_memory", InMemoryKVStore)
