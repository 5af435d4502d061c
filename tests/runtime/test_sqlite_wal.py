"""Stores on one SQLite file opened by several processes at the same moment (Ray workers building their Engines).

Switching a new file to WAL takes a lock SQLite's busy handler does not wait for: before ``use_wal``, about one
round in nine of six processes opening a fresh state store together failed with "database is locked".
"""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from aeon_kernel.kit import use_wal
from aeon_plugins.sqlite_artifacts import SQLiteArtifactStore
from aeon_plugins.sqlite_state import SqliteStateStore

PROCESSES = 6
ROUNDS = 25

_start: multiprocessing.synchronize.Barrier


def _open(opener: Callable[[Path], object], path: Path) -> str | None:
    _start.wait()  # every process opens the file at the same moment
    try:
        opener(path)
    except Exception as exc:  # the failure is what the test reports
        return f"{type(exc).__name__}: {exc}"
    return None


def _init(barrier: multiprocessing.synchronize.Barrier) -> None:
    global _start
    _start = barrier


@pytest.mark.parametrize("opener", [SqliteStateStore, SQLiteArtifactStore], ids=["state", "artifacts"])
def test_processes_opening_a_new_store_together_all_get_it(
    opener: Callable[[Path], object], tmp_path: Path
) -> None:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(PROCESSES)
    with context.Pool(PROCESSES, initializer=_init, initargs=(barrier,)) as pool:
        for round_ in range(ROUNDS):
            path = tmp_path / f"round{round_}.db"
            failures = [f for f in pool.starmap(_open, [(opener, path)] * PROCESSES) if f]
            assert failures == [], f"round {round_}: {failures}"
            assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_file_locked_for_longer_than_the_timeout_is_the_sqlite_error(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        use_wal(waiter, timeout=0.2)
    holder.execute("ROLLBACK")
