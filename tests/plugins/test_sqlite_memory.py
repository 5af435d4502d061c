"""The ``sqlite`` memory backend: the Memory contract, plus durability, namespaces, locking and ``increment``."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeon_kernel import MemoryStoreError
from aeon_kernel.config import AeonConfig
from aeon_kernel.engine import Engine
from aeon_kernel.testing import memory_conformance
from aeon_plugins import sqlite_memory
from aeon_plugins.sqlite_memory import SqliteMemory, prefix_upper_bound
from tests.support.int64_counters import Int64CounterCases

ROOT = Path(__file__).resolve().parents[2]
_DIRECTORY: list[Path] = []


@pytest.fixture(autouse=True, scope="module")
def _sqlite_directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Where the conformance factory puts its files (the factory itself takes no arguments)."""
    _DIRECTORY.append(tmp_path_factory.mktemp("sqlite-memory"))
    yield
    _DIRECTORY.pop()


def sqlite_file() -> SqliteMemory:
    return SqliteMemory(path=_DIRECTORY[-1] / f"{uuid4().hex}.db")


def sqlite_in_process() -> SqliteMemory:
    return SqliteMemory(path=":memory:")


def sqlite_shared_file_namespace() -> SqliteMemory:
    """Every instance shares one file, each in its own namespace, next to another namespace's keys."""
    path = _DIRECTORY[-1] / "shared.db"
    neighbour = SqliteMemory(path, namespace="")
    neighbour.write("a", "from the default namespace")
    neighbour.close()
    return SqliteMemory(path, namespace=f"ns-{uuid4().hex}")


TestSqliteFile = memory_conformance(sqlite_file)
TestSqliteInProcess = memory_conformance(sqlite_in_process)
TestSqliteNamespace = memory_conformance(sqlite_shared_file_namespace)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[SqliteMemory]:
    backend = SqliteMemory(tmp_path / "memory.db")
    yield backend
    backend.close()


def run_python(code: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# --- durability and configuration -------------------------------------------------------------------------------


def test_values_survive_process_restarts(tmp_path: Path) -> None:
    run_python(
        "from aeon_plugins.sqlite_memory import SqliteMemory\n"
        "m = SqliteMemory()\n"  # the default path, in the working directory
        "m.write('run/1/state', {'step': 3, 'done': ['a', 'b']})\n"
        "m.increment('run/1/cycles', 7)\n"
        "m.close()\n",
        cwd=tmp_path,
    )
    assert (tmp_path / "aeon-memory.db").is_file()
    out = run_python(
        "import json\n"
        "from aeon_plugins.sqlite_memory import SqliteMemory\n"
        "m = SqliteMemory('aeon-memory.db')\n"
        "print(json.dumps(m.search('run/1/')))\n",
        cwd=tmp_path,
    )
    assert json.loads(out) == [["run/1/cycles", 7], ["run/1/state", {"step": 3, "done": ["a", "b"]}]]


def test_a_second_instance_sees_the_first_ones_writes(tmp_path: Path) -> None:
    first, second = SqliteMemory(tmp_path / "m.db"), SqliteMemory(tmp_path / "m.db")
    first.write("k", [1, 2])
    assert second.read("k") == [1, 2]
    first.close()
    second.close()


def test_namespaces_isolate_stores_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    stores = {ns: SqliteMemory(path, namespace=ns) for ns in ["", "a", "ab", "a%"]}
    for ns, store in stores.items():
        store.write("k", ns)
        store.write(f"only-{ns}", ns)
    for ns, store in stores.items():
        assert store.read("k") == ns
        assert store.search("") == sorted([("k", ns), (f"only-{ns}", ns)])
        store.close()


def test_wal_mode_and_pragmas(memory: SqliteMemory) -> None:
    memory.write("k", 1)
    with sqlite3.connect(memory.path) as probe:
        assert probe.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with memory._connection() as connection:
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000


def test_prefix_search_is_an_index_range_query_not_like(memory: SqliteMemory) -> None:
    for key in ["100%", "100_", "1000", "10%0", "100%x", "100"]:
        memory.write(key, key)
    assert [k for k, _ in memory.search("100%")] == ["100%", "100%x"]
    assert [k for k, _ in memory.search("100_")] == ["100_"]
    with memory._connection() as connection:
        plan = connection.execute(
            "EXPLAIN QUERY PLAN SELECT key, value FROM aeon_memory WHERE namespace = ? AND key >= ? AND key < ?",
            ("", "a", "b"),
        ).fetchall()
    assert "USING PRIMARY KEY" in str(plan)


@pytest.mark.parametrize(
    ("prefix", "bound"),
    [
        ("", None),
        ("a", "b"),
        ("a\U0010ffff", "b"),
        ("\U0010ffff\U0010ffff", None),
        ("\ud7ff", "\ue000"),  # U+D800… are surrogates and cannot be stored
        ("\uffff", "\U00010000"),
    ],
)
def test_prefix_upper_bound(prefix: str, bound: str | None) -> None:
    assert prefix_upper_bound(prefix) == bound


_STORABLE = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(_STORABLE, min_size=1, max_size=20, unique=True), data=st.data())
def test_order_and_prefixes_match_python_for_any_unicode_key(keys: list[str], data: st.DataObject) -> None:
    """SQLite's BINARY collation compares UTF-8 bytes; that is Python's code point order, non-BMP included."""
    memory = SqliteMemory(":memory:")
    for key in keys:
        memory.write(key, key)
    assert memory.search("") == sorted((k, k) for k in keys)
    key = data.draw(st.sampled_from(keys))
    for prefix in {key[:1], key[:2], key, key + "\U0010ffff"}:
        assert memory.search(prefix) == sorted((k, k) for k in keys if k.startswith(prefix))
    memory.close()


def test_edge_keys_round_trip(memory: SqliteMemory) -> None:
    keys = ["\x00", "a\x00b", "\U0010ffff", "🙂", "key with 'quotes' and \"double\"", "x" * 10_000]
    for key in keys:
        memory.write(key, key)
    assert memory.search("") == sorted((k, k) for k in keys)


def test_lone_surrogates(memory: SqliteMemory) -> None:
    with pytest.raises(MemoryStoreError, match="surrogate"):
        memory.write("bad\ud800", 1)
    assert memory.read("bad\ud800") is None
    assert memory.search("\ud800") == []
    memory.write("text", "has a lone \udfff inside")  # stored escaped, as JSON allows
    assert memory.read("text") == "has a lone \udfff inside"


def test_non_json_values_name_the_key(memory: SqliteMemory) -> None:
    for value in [float("inf"), {1: "x"}, {"a": {2: "y"}}, [b"x"]]:
        with pytest.raises(MemoryStoreError, match="'the-key'"):
            memory.write("the-key", value)
    assert memory.read("the-key") is None


def test_bad_read_and_search_arguments(memory: SqliteMemory) -> None:
    assert memory.read("") is None
    with pytest.raises(MemoryStoreError):
        memory.read(None)  # type: ignore[arg-type]
    with pytest.raises(MemoryStoreError):
        memory.search(None)  # type: ignore[arg-type]


# --- failures ----------------------------------------------------------------------------------------------------


def test_a_directory_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match=r"cannot open.*not a directory"):
        SqliteMemory(tmp_path)


def test_a_missing_directory_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match=r"existing, writable directory"):
        SqliteMemory(tmp_path / "missing" / "memory.db")


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("not a database " * 500)
    with pytest.raises(MemoryStoreError, match="not a database"):
        SqliteMemory(junk)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes read-only files anyway")
def test_a_read_only_file_is_refused_clearly(tmp_path: Path) -> None:
    SqliteMemory(tmp_path / "m.db").close()
    for name in os.listdir(tmp_path):
        os.chmod(tmp_path / name, 0o444)
    os.chmod(tmp_path, 0o555)
    try:
        with pytest.raises(MemoryStoreError, match=r"writable|read-only"):
            SqliteMemory(tmp_path / "m.db").write("k", 1)
    finally:
        os.chmod(tmp_path, 0o755)


def test_closed_memory_refuses_work_and_closes_every_thread_connection(tmp_path: Path) -> None:
    memory = SqliteMemory(tmp_path / "m.db")
    threads = [threading.Thread(target=memory.write, args=(f"t{i}", i)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    connections = [c for _, c in memory._connections]
    memory.close()
    memory.close()  # twice is fine
    for connection in connections:
        with pytest.raises(sqlite3.ProgrammingError):
            connection.execute("SELECT 1")
    with pytest.raises(MemoryStoreError, match="closed"):
        memory.read("t0")


def test_connections_of_finished_threads_are_released(tmp_path: Path) -> None:
    memory = SqliteMemory(tmp_path / "m.db")
    for i in range(20):
        thread = threading.Thread(target=memory.write, args=(f"t{i}", i))
        thread.start()
        thread.join()
    assert len(memory._connections) <= 2  # this thread's, and the last finished one's until the next opens
    assert len(memory.search("t")) == 20
    memory.close()


def test_a_lock_held_briefly_is_waited_for(tmp_path: Path) -> None:
    memory = SqliteMemory(tmp_path / "m.db", timeout=5)
    blocker = sqlite3.connect(tmp_path / "m.db", isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    blocker.execute("INSERT INTO aeon_memory VALUES ('', 'held', '1')")
    threading.Timer(0.3, lambda: blocker.execute("COMMIT")).start()
    started = time.monotonic()
    memory.write("k", 1)
    assert 0.2 < time.monotonic() - started < 4
    assert memory.read("held") == 1 and memory.read("k") == 1
    blocker.close()
    memory.close()


def test_a_lock_held_past_the_timeout_is_a_clear_error(tmp_path: Path) -> None:
    memory = SqliteMemory(tmp_path / "m.db", timeout=0.3)
    blocker = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(MemoryStoreError, match=r"cannot write 'k'.*locked"):
        memory.write("k", 1)
    assert time.monotonic() - started < 3
    blocker.execute("ROLLBACK")
    blocker.close()
    memory.close()


def test_bad_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="namespace"):
        SqliteMemory(tmp_path / "m.db", namespace=3)  # type: ignore[arg-type]
    with pytest.raises(MemoryStoreError, match="timeout"):
        SqliteMemory(tmp_path / "m.db", timeout=-1)


# --- increment ---------------------------------------------------------------------------------------------------


@pytest.fixture(params=["returning", "transaction"])
def counter_memory(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SqliteMemory]:
    """Both increment paths: one RETURNING statement (SQLite >= 3.35) and BEGIN IMMEDIATE (older libraries)."""
    if request.param == "transaction":
        monkeypatch.setattr(sqlite_memory, "_HAS_RETURNING", False)
    elif not sqlite_memory._HAS_RETURNING:
        pytest.skip(f"SQLite {sqlite3.sqlite_version} has no RETURNING")
    backend = SqliteMemory(tmp_path / "m.db")
    yield backend
    backend.close()


class TestInt64Counter(Int64CounterCases):
    @pytest.fixture
    def counter(self, counter_memory: SqliteMemory) -> SqliteMemory:
        return counter_memory


@pytest.mark.parametrize("key", ["", None, 5, "\ud800"])
def test_increment_refuses_bad_keys(counter_memory: SqliteMemory, key: Any) -> None:
    with pytest.raises(MemoryStoreError):
        counter_memory.increment(key)


# --- as a plugin -------------------------------------------------------------------------------------------------


def test_selected_by_name_from_config(tmp_path: Path) -> None:
    config = AeonConfig().with_choice("memory", "sqlite", path=str(tmp_path / "m.db"), namespace="run-1")
    with Engine(config) as engine:
        memory = engine.memory
        assert isinstance(memory, SqliteMemory) and memory.namespace == "run-1"
        memory.write("k", "v")
        assert memory.increment("n") == 1
    assert SqliteMemory(tmp_path / "m.db", namespace="run-1").read("k") == "v"


def test_is_registered_through_the_aeon_entry_point_group() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'sqlite_memory = "aeon_plugins.sqlite_memory"' in pyproject
