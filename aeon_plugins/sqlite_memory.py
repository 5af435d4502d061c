"""The ``sqlite`` memory backend: durable key/value memory in one SQLite file (FR-014…018).

Standard library only. Several threads and several processes may share one file: WAL mode lets readers run
beside the single writer, ``busy_timeout`` makes a writer wait for the lock instead of failing, and a short,
bounded retry covers the few cases where SQLite reports "database is locked" without waiting. Every write is
one statement, so it is atomic; values are JSON text, never pickle. Prefix search is a range query on the
primary key, so ``%`` and ``_`` are ordinary characters (LIKE would treat them as wildcards).
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

from aeon_kernel import Memory, MemoryStoreError, Register, hookimpl
from aeon_kernel.kit import (
    INT64_MAX,
    INT64_MIN,
    check_amount,
    check_key,
    check_prefix,
    decode_value,
    encode_value,
    increment_error,
    is_utf8,
)

T = TypeVar("T")

_MAX_CODE_POINT: Final = 0x10FFFF
_SURROGATES: Final = range(0xD800, 0xE000)
#: ``INSERT ... RETURNING`` arrived in SQLite 3.35; older libraries use an explicit transaction instead.
_HAS_RETURNING: Final = sqlite3.sqlite_version_info >= (3, 35, 0)
_IN_PROCESS_PATHS: Final = {":memory:", ""}

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS aeon_memory (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID
"""
_WRITE: Final = "INSERT OR REPLACE INTO aeon_memory (namespace, key, value) VALUES (?, ?, ?)"
_READ: Final = "SELECT value FROM aeon_memory WHERE namespace = ? AND key = ?"
# CAST(value AS INTEGER) saturates and truncates, so the WHERE clause only accepts text that is exactly an int64,
# and typeof() refuses a sum that overflowed into a REAL.
_INCREMENT: Final = """
INSERT INTO aeon_memory (namespace, key, value) VALUES (?, ?, ?)
ON CONFLICT (namespace, key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + ? AS TEXT)
WHERE value = CAST(CAST(value AS INTEGER) AS TEXT) AND typeof(CAST(value AS INTEGER) + ?) = 'integer'
RETURNING value
"""


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix`` (None: no bound).

    Increment the last code point, skipping the surrogate block (it cannot be stored); a last code point that is
    already U+10FFFF is dropped and the one before it incremented instead.
    """
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < _MAX_CODE_POINT:
            following = last + 1
            if following in _SURROGATES:
                following = _SURROGATES.stop
            return "".join(chars) + chr(following)
    return None


# --- the backend ------------------------------------------------------------------------------------------------


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


class SqliteMemory(Memory):
    """Memory in a SQLite file; ``namespace`` keeps several logical stores apart in one file.

    Each thread gets its own connection (a connection must not be shared by threads that use it at once);
    ``":memory:"`` is private to one connection, so that case uses a single connection behind a lock.
    """

    def __init__(
        self, path: str | os.PathLike[str] = "aeon-memory.db", namespace: str = "", timeout: float = 30.0
    ) -> None:
        if not isinstance(namespace, str):
            raise MemoryStoreError(f"sqlite memory: namespace must be a string, got {namespace!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise MemoryStoreError(
                f"sqlite memory: timeout must be a number of seconds >= 0, got {timeout!r}"
            )
        self.path = os.fspath(path)
        self.namespace = namespace
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        self._local = threading.local()
        self._connections: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]] = []
        self._shared: sqlite3.Connection | None = None
        if self.path in _IN_PROCESS_PATHS:
            self._shared = self._retry("open", None, lambda: self._open(create=True))
        else:
            self._local.connection = self._retry("open", None, lambda: self._open(create=True))
            self._connections.append((weakref.ref(threading.current_thread()), self._local.connection))

    def __repr__(self) -> str:
        return f"SqliteMemory(path={self.path!r}, namespace={self.namespace!r})"

    # --- connections ------------------------------------------------------------------------------------------

    def _open(self, *, create: bool = False) -> sqlite3.Connection:
        # isolation_level=None: autocommit, so each statement is its own transaction and nothing is left open.
        connection = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            if create:
                connection.execute(_SCHEMA)
        except BaseException:
            connection.close()
            raise
        return connection

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise MemoryStoreError(f"{self!r} is closed")
        if self._shared is not None:
            with self._lock:
                yield self._shared
            return
        if self._pid != os.getpid():  # forked: the parent's connections must not be used here
            self._pid, self._local, self._connections = os.getpid(), threading.local(), []
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._open()
            with self._lock:
                self._close_connections_of_finished_threads()
                self._connections.append((weakref.ref(threading.current_thread()), connection))
            self._local.connection = connection
        yield connection

    def _close_connections_of_finished_threads(self) -> None:
        alive = []
        for thread, connection in self._connections:
            owner = thread()
            if owner is not None and owner.is_alive():
                alive.append((thread, connection))
            else:
                connection.close()
        self._connections = alive

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = [c for _, c in self._connections]
            if self._shared is not None:
                connections.append(self._shared)
            self._connections, self._shared = [], None
        for connection in connections:
            connection.close()

    # --- error handling -----------------------------------------------------------------------------------------

    def _retry(self, action: str, key: str | None, operation: Callable[[], T]) -> T:
        """Run ``operation``; retry "database is locked" with jittered backoff until ``timeout``, then fail clearly."""
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            try:
                return operation()
            except sqlite3.OperationalError as exc:
                if _is_busy(exc) and time.monotonic() < deadline:
                    time.sleep(delay * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not security
                    delay = min(delay * 2, 0.05)
                    continue
                raise self._error(action, key, exc) from None
            except sqlite3.Error as exc:
                raise self._error(action, key, exc) from None

    def _error(self, action: str, key: str | None, exc: sqlite3.Error) -> MemoryStoreError:
        what = f"{action} {key!r}" if key is not None else action
        hint = ""
        if action == "open":
            hint = (
                " Check that the path names a writable file (not a directory) in an existing, writable directory"
                " (SQLite keeps -wal and -shm files next to it)."
            )
        elif "readonly" in str(exc) or "read-only" in str(exc):
            hint = " The file or its directory is read-only."
        reason = str(exc).rstrip(". ")
        return MemoryStoreError(f"sqlite memory {self.path!r}: cannot {what}: {reason}.{hint}")

    def _run(self, action: str, key: str | None, operation: Callable[[sqlite3.Connection], T]) -> T:
        def attempt() -> T:
            with self._connection() as connection:
                return operation(connection)

        return self._retry(action, key, attempt)

    # --- the Memory contract -----------------------------------------------------------------------------------

    def write(self, key: str, value: Any) -> None:
        text = encode_value(check_key(key), value)
        self._run("write", key, lambda c: c.execute(_WRITE, (self.namespace, key, text)))

    def read(self, key: str) -> Any | None:
        if not isinstance(key, str):
            raise MemoryStoreError(f"memory keys must be non-empty strings, got {key!r}")
        if not key or not is_utf8(key):
            return None  # no such key can have been written
        rows = self._run("read", key, lambda c: c.execute(_READ, (self.namespace, key)).fetchall())
        return decode_value(key, rows[0][0]) if rows else None

    def search(self, prefix: str) -> list[tuple[str, Any]]:
        if not is_utf8(check_prefix(prefix)):
            return []  # keys never hold a lone surrogate
        upper = prefix_upper_bound(prefix)
        sql = "SELECT key, value FROM aeon_memory WHERE namespace = ? AND key >= ?"
        params: tuple[str, ...] = (self.namespace, prefix)
        if upper is not None:
            sql, params = sql + " AND key < ?", (*params, upper)
        # BINARY collation compares UTF-8 bytes, which orders exactly as Python compares code points.
        rows = self._run("search", prefix, lambda c: c.execute(sql + " ORDER BY key", params).fetchall())
        return [(key, decode_value(key, text)) for key, text in rows]

    def increment(self, key: str, amount: int = 1) -> int:
        check_amount(check_key(key), amount)
        operation = self._increment_returning if _HAS_RETURNING else self._increment_in_transaction
        result = self._run("increment", key, lambda c: operation(c, key, amount))
        if result is None:
            raise increment_error(key, amount, self.read(key))
        return result

    def _increment_returning(self, connection: sqlite3.Connection, key: str, amount: int) -> int | None:
        """One statement, so atomic: insert ``amount`` or add it to the stored integer."""
        # fetchall, not fetchone: the statement must run to completion so that it commits inside this call.
        rows = connection.execute(_INCREMENT, (self.namespace, key, str(amount), amount, amount)).fetchall()
        return int(rows[0][0]) if rows else None

    def _increment_in_transaction(self, connection: sqlite3.Connection, key: str, amount: int) -> int | None:
        """For SQLite < 3.35: read and write inside BEGIN IMMEDIATE, which holds the write lock throughout."""
        connection.execute("BEGIN IMMEDIATE")
        try:
            rows = connection.execute(_READ, (self.namespace, key)).fetchall()
            current = _as_int64(rows[0][0]) if rows else 0
            total = None if current is None else current + amount
            if total is None or not INT64_MIN <= total <= INT64_MAX:
                connection.execute("ROLLBACK")
                return None
            connection.execute(_WRITE, (self.namespace, key, str(total)))
            connection.execute("COMMIT")
            return total
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise


def _as_int64(text: str) -> int | None:
    try:
        number = json.loads(text)
    except ValueError:
        return None
    if isinstance(number, int) and not isinstance(number, bool) and INT64_MIN <= number <= INT64_MAX:
        return number
    return None


@hookimpl
def aeon_register_memory_backends(register: Register) -> None:
    register("sqlite", SqliteMemory)
