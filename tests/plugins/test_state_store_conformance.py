"""The state-store conformance suite (issue 27: owners and liveness for ``aeon runs``, results, ``delete_run`` for
``aeon runs prune``) on the built-in stores: SQLite, and Redis against a real ``redis-server``."""

from __future__ import annotations

from pathlib import Path

import pytest

from aeon_kernel.testing import state_store_conformance
from aeon_plugins.redis_state import RedisStateStore
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.support.redis_server import redis_url  # noqa: F401

_SERVER: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _server(redis_url: str) -> None:  # noqa: F811
    _SERVER["url"] = redis_url


def sqlite(directory: Path) -> SqliteStateStore:
    return SqliteStateStore(directory / "runs.db")


def redis(directory: Path) -> RedisStateStore:
    return RedisStateStore(_SERVER["url"], namespace=f"conformance:{directory}:")


TestSqliteStateStore = state_store_conformance(sqlite)
TestRedisStateStore = state_store_conformance(redis)
