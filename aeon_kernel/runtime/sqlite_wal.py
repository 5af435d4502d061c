"""Putting a SQLite file in WAL mode when other processes may be opening it at the same moment.

Switching a file to WAL takes a lock SQLite's busy handler does not wait for, so two processes that open a new
file together (Ray workers building their Engines, two ``aeon run`` started at once) saw "database is locked"
although each had a busy timeout. The switch is needed once per file: skip it when another process already made
it, and otherwise wait for that process as the busy timeout would.
"""

from __future__ import annotations

import sqlite3


def _locked(exc: BaseException) -> bool:
    message = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in message or "busy" in message)


def use_wal(db: sqlite3.Connection, timeout: float) -> None:
    """Put ``db``'s file in WAL mode, waiting up to ``timeout`` seconds for a process that holds the lock.

    Raises the last :class:`sqlite3.OperationalError` when the file is still locked after ``timeout``.
    """
    from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

    for attempt in Retrying(
        retry=retry_if_exception(_locked),
        stop=stop_after_delay(timeout),
        wait=wait_random_exponential(multiplier=0.001, max=0.05),
        reraise=True,
    ):
        with attempt:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
