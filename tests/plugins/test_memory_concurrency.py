"""Many writers on one store: 8 processes x 4 threads x 1,000 writes, each followed by a shared ``increment``.

Afterwards every write must be there with its value, the counter must be exactly 32,000, and no exception (SQLite's
"database is locked" above all) may have reached a caller. Workers are spawned, not forked, and each process opens
its own backend, as separate programs sharing one file or one server would.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
import traceback
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from aeon_kernel import Memory
from aeon_plugins.redis_memory import RedisMemory
from aeon_plugins.sqlite_memory import SqliteMemory
from tests.support.redis_server import redis_url  # noqa: F401 - the session fixture

PROCESSES, THREADS, WRITES = 8, 4, 1000
PREFIX, COUNTER = "load/", "load-counter"
RESULT_TIMEOUT = 300.0


def open_backend(kind: str, target: str, namespace: str) -> Memory:
    if kind == "sqlite":
        return SqliteMemory(target, namespace=namespace)
    return RedisMemory(target, namespace=namespace)


def value_for(process: int, thread: int, i: int) -> dict[str, Any]:
    return {"process": process, "thread": thread, "i": i, "note": "100% _ok_ *?["}


def worker(kind: str, target: str, namespace: str, process: int, go: Any, results: Any) -> None:
    """One process: open the backend, wait for the start signal, run THREADS writers, report every exception."""
    errors: list[str] = []
    try:
        memory = open_backend(kind, target, namespace)

        def writer(thread: int) -> None:
            try:
                for i in range(WRITES):
                    memory.write(f"{PREFIX}{process}/{thread}/{i:04d}", value_for(process, thread, i))
                    memory.increment(COUNTER)
            except BaseException:
                errors.append(traceback.format_exc())

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(THREADS)]
        go.wait(60)
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        memory.close()
    except BaseException:
        errors.append(traceback.format_exc())
    results.put((process, errors))


def hammer(kind: str, target: str, namespace: str) -> float:
    """Run the workers and return the seconds from the start signal until the last one finished."""
    context = multiprocessing.get_context("spawn")
    go, results = context.Event(), context.Queue()
    processes = [
        context.Process(target=worker, args=(kind, target, namespace, p, go, results))
        for p in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    started = time.monotonic()
    go.set()
    reports: dict[int, list[str]] = {}
    try:
        for _ in processes:
            number, errors = results.get(timeout=RESULT_TIMEOUT)
            reports[number] = errors
    except queue.Empty:
        pytest.fail(f"only {sorted(reports)} of {PROCESSES} workers reported within {RESULT_TIMEOUT}s")
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    elapsed = time.monotonic() - started
    failures = [error for errors in reports.values() for error in errors]
    assert failures == [], f"{len(failures)} exception(s) reached callers; the first:\n{failures[0]}"
    assert [p.exitcode for p in processes] == [0] * PROCESSES
    return elapsed


def check_everything_is_there(memory: Memory) -> None:
    found = memory.search(PREFIX)
    assert len(found) == PROCESSES * THREADS * WRITES
    expected = {
        f"{PREFIX}{p}/{t}/{i:04d}": value_for(p, t, i)
        for p in range(PROCESSES)
        for t in range(THREADS)
        for i in range(WRITES)
    }
    assert dict(found) == expected
    assert [key for key, _ in found] == sorted(expected)
    assert memory.read(COUNTER) == PROCESSES * THREADS * WRITES


def test_sqlite_many_processes_and_threads_on_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    elapsed = hammer("sqlite", path, "load")
    memory = SqliteMemory(path, namespace="load")
    check_everything_is_there(memory)
    memory.close()
    print(f"sqlite: {PROCESSES * THREADS * WRITES} writes + as many increments in {elapsed:.1f}s")


def test_redis_many_processes_and_threads_on_one_server(redis_url: str) -> None:  # noqa: F811
    namespace = f"load:{uuid4().hex}:"
    elapsed = hammer("redis", redis_url, namespace)
    memory = RedisMemory(redis_url, namespace=namespace)
    check_everything_is_there(memory)
    memory.close()
    print(f"redis: {PROCESSES * THREADS * WRITES} writes + as many increments in {elapsed:.1f}s")
