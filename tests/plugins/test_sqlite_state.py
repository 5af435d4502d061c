"""The ``sqlite`` state store against a hostile file and hostile text (issue 13, items 6, 10 and 11).

Whatever the file holds — damaged pages, a damaged index, a foreign table of the same name, a BLOB or non-UTF-8
text where text belongs — and whatever the caller passes (a TTL past 2**63, a request or run id holding a lone
surrogate, which is what bytes that are not UTF-8 become in a Python argument), the store answers with a
``RunStoreError`` that names the file and what to do, never a traceback; a run that is there but damaged is
"corrupt", never "no run". Ownership is per claim: a second claim of one process never takes a held run, and
one claim never releases or overwrites another's.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aeon_cli.main import cli
from aeon_kernel import Engine, RunStoreError
from aeon_kernel.config import AeonConfig, Choice
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.support import ledger
from tests.support.builders import plan, tool_step

THREE = plan(*[tool_step(str(i), "ledger", {"n": i}) for i in range(1, 4)], goal="three side effects")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path / "ledger.txt"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AEON_CONFIG", raising=False)
    (tmp_path / "responses.json").write_text(json.dumps([THREE]))
    (tmp_path / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n[state]\nuse = "sqlite"\npath = "state.db"\n'
    )
    return tmp_path


def engine(home: Path, responses: list[Any] | None = None, ttl: int = 20) -> Engine:
    config = AeonConfig(ttl=ttl, state=Choice("sqlite", {"path": str(home / "state.db")})).with_choice(
        "llm", "scripted", responses=[THREE] if responses is None else responses
    )
    return Engine(config, plugins=[ledger])


def interrupted_run(home: Path) -> str:
    """A run stopped after its plan and one step; the WAL folded into the file, as after a clean close."""
    with engine(home) as e:
        cycles = e.orchestrator().iter("record three things")
        run_id = [next(cycles).run_id for _ in range(2)][-1]
        cycles.close()  # type: ignore[attr-defined]  # a generator
    with sqlite3.connect(home / "state.db") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return run_id


def damage(home: Path, sql: str) -> None:
    with sqlite3.connect(home / "state.db") as db:
        db.execute(sql)


def overwrite_pages(path: Path, pages: list[int], page_of: Any) -> None:
    data = bytearray(path.read_bytes())
    for page in pages:
        data[(page - 1) * 4096 : page * 4096] = page_of(page)
    path.write_bytes(bytes(data))


def every_use(home: Path, run_id: str) -> dict[str, BaseException | None]:
    """What each way in raises: listing, loading, resuming, and starting a new run on the same file."""
    outcomes: dict[str, BaseException | None] = {}
    uses: dict[str, Callable[[Engine], Any]] = {
        "list": lambda e: e.state_store.list_runs(),  # type: ignore[union-attr]
        "load": lambda e: e.state_store.load(run_id),  # type: ignore[union-attr]
        "resume": lambda e: e.resume(run_id),
        "run": lambda e: e.run("record three things"),
    }
    for name, use in uses.items():
        try:
            with engine(home, responses=[THREE]) as e:
                use(e)
            outcomes[name] = None
        except BaseException as exc:
            outcomes[name] = exc
    return outcomes


# --- item 10: a damaged or foreign file ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damaged",
    [
        lambda db: overwrite_pages(
            db, list(range(2, db.stat().st_size // 4096 + 1)), lambda page: os.urandom(4096)
        ),
        lambda db: overwrite_pages(db, [1], lambda page: b"not a database!!" * 256),  # the header
    ],
    ids=["pages", "header"],
)
def test_a_damaged_database_is_a_run_store_error_naming_the_file(home: Path, damaged: Any) -> None:
    run_id = interrupted_run(home)
    db = home / "state.db"
    damaged(db)
    for use, raised in every_use(home, run_id).items():
        assert isinstance(raised, RunStoreError), (use, raised)
        assert str(db) in str(raised) and "damaged or not a database" in str(raised), str(raised)
        assert ".recover" in str(raised), str(raised)


def test_a_run_behind_a_damaged_index_is_corrupt_not_missing(home: Path) -> None:
    run_id = interrupted_run(home)
    with sqlite3.connect(home / "state.db") as db:
        (root,) = db.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_runs_1'"
        ).fetchone()
    empty_leaf = bytearray(4096)
    empty_leaf[0], empty_leaf[5:7] = (
        0x0A,
        (4096).to_bytes(2, "big"),
    )  # a valid, empty index page: lookups miss
    overwrite_pages(home / "state.db", [root], lambda page: bytes(empty_leaf))
    with engine(home, responses=[]) as e:
        with pytest.raises(RunStoreError, match=r"is corrupt: the index of runs is damaged.*REINDEX"):
            e.resume(run_id)
        with pytest.raises(RunStoreError, match="is corrupt"):
            e.state_store.load(run_id)  # type: ignore[union-attr]
        with pytest.raises(RunStoreError, match="no run 'nope'"):
            e.resume("nope")  # a run that is not there is still "no run"


def test_a_run_id_stored_as_a_blob_is_corrupt_not_missing(home: Path) -> None:
    run_id = interrupted_run(home)
    damage(home, "UPDATE runs SET run_id = CAST(run_id AS BLOB)")
    with (
        engine(home, responses=[]) as e,
        pytest.raises(RunStoreError, match="is corrupt: its id is stored as a blob"),
    ):
        e.resume(run_id)


#: Rows that do not hold what the store writes.
WRONG_TYPES = [
    "UPDATE runs SET request = X'FF00FE'",  # a BLOB where text belongs
    "UPDATE runs SET request = CAST(X'FF00FE' AS TEXT)",  # text that is not UTF-8
    "UPDATE runs SET status = X'72756E6E696E67'",  # 'running', as a BLOB
    "UPDATE steps SET step = X'7B7D' WHERE idx = 0",  # '{}', as a BLOB
    "UPDATE runs SET ttl_remaining = 'many'",
    "UPDATE cycles SET entry = '" + "[" * 5000 + "]" * 5000 + "' WHERE step_number = 1",
]


def test_wrong_types_in_the_rows_are_corrupt_and_the_list_still_shows(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number, sql in enumerate(WRONG_TYPES):
        where = home / str(number)
        where.mkdir()
        monkeypatch.chdir(where)
        run_id = interrupted_run(where)
        damage(where, sql)
        with engine(where, responses=[]) as e:
            with pytest.raises(
                RunStoreError, match=f"run '{run_id}' in .* is corrupt|state store .* is corrupt"
            ):
                e.resume(run_id)
            (summary,) = e.state_store.list_runs()  # type: ignore[union-attr]
        assert summary.run_id == run_id, sql
        json.dumps(summary.to_dict(), ensure_ascii=False).encode("utf-8")  # what `aeon runs --json` prints


def test_a_foreign_table_of_the_same_name_is_refused_and_left_untouched(home: Path) -> None:
    db = home / "state.db"
    with sqlite3.connect(db) as foreign:
        foreign.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, started TEXT)")
        foreign.execute("INSERT INTO runs (started) VALUES ('yesterday')")
    before = db.read_bytes()
    with pytest.raises(RunStoreError, match=r"has a table 'runs' that is not Aeon's .*\[state\] path"):
        SqliteStateStore(db)
    with pytest.raises(RunStoreError, match="not Aeon's"), engine(home) as e:
        e.run("record three things")
    assert db.read_bytes() == before  # no table added, no column added, not switched to WAL
    with sqlite3.connect(db) as foreign:
        assert [r[0] for r in foreign.execute("SELECT name FROM sqlite_master")] == ["runs"]


def test_the_command_line_reports_a_damaged_store_without_a_traceback(home: Path) -> None:
    run_id = interrupted_run(home)
    db = home / "state.db"
    overwrite_pages(db, list(range(2, db.stat().st_size // 4096 + 1)), lambda page: bytes(4096))
    for args in (["runs"], ["runs", "--json"], ["resume", run_id], ["resume", run_id, "--json"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output, result.exception)
        assert "Traceback" not in result.output
        assert "damaged" in result.output and "'state.db'" in result.output and ".recover" in result.output


# --- numbers and text SQLite cannot take --------------------------------------------------------------------------


def test_a_ttl_beyond_sqlite_integers_is_a_clear_error(home: Path) -> None:
    with (
        engine(home, ttl=2**63) as e,
        pytest.raises(RunStoreError, match=r"TTL of 9223372036854775808.*2\*\*63"),
    ):
        e.run("record three things")
    with engine(home, ttl=2**63 - 1) as e:
        assert e.run("record three things")["status"] == "completed"


def test_a_request_that_is_not_utf8_is_stored_escaped(home: Path) -> None:
    """A request from bytes that are not UTF-8 (``caf\\xe9`` in Latin-1: a lone surrogate in Python)."""
    request = b"caf\xe9 \xff".decode("utf-8", "surrogateescape")
    with engine(home) as e:
        result = e.run(request)
        (summary,) = e.state_store.list_runs()  # type: ignore[union-attr]
    assert result["status"] == "completed"
    assert summary.status == "completed" and summary.request == "caf\\udce9 \\udcff"


def test_a_run_id_that_is_not_utf8_is_no_run(home: Path) -> None:
    bad = b"\xff\xfe".decode("utf-8", "surrogateescape")
    with engine(home) as e:
        store = e.state_store
        assert store is not None
        with pytest.raises(RunStoreError, match=r"no run '\\udcff\\udcfe'"):
            e.resume(bad)
        with pytest.raises(RunStoreError, match="no run"):
            store.load(bad)
        store.release(bad)  # nothing held: nothing to do


def test_a_result_that_cannot_be_stored_still_ends_the_run(home: Path) -> None:
    """finish_run never leaves a run ``running``: a result no encoder can write is stored as a summary."""
    run_id = interrupted_run(home)
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"a": deep}
    store = SqliteStateStore(home / "state.db")
    store.claim(run_id)
    state = store.load(run_id).state.model_copy(update={"status": "failed"})
    store.finish_run(state, {"status": "failed", "message": "gave up", "answer": deep})
    (summary,) = store.list_runs()
    assert summary.status == "failed"
    (stored,) = store._db.execute("SELECT result FROM runs").fetchone()
    assert json.loads(stored)["message"] == "gave up"
    store.close()


# --- item 11: ownership per claim ---------------------------------------------------------------------------------


def test_a_second_claim_in_one_process_is_refused(home: Path) -> None:
    run_id = interrupted_run(home)
    one, two = SqliteStateStore(home / "state.db"), SqliteStateStore(home / "state.db")
    one.claim(run_id)
    with pytest.raises(RunStoreError, match="another run of this process"):
        two.claim(run_id)
    with pytest.raises(RunStoreError, match="another run of this process"):
        one.claim(run_id)  # the same store (another thread of one Engine) too
    two.release(run_id)  # not two's claim: nothing changes
    with pytest.raises(RunStoreError, match="another run of this process"):
        two.claim(run_id)
    one.release(run_id)
    two.claim(run_id)  # released: free
    one.close()
    two.close()


def test_a_claim_left_by_an_earlier_process_with_this_pid_is_stale(home: Path) -> None:
    """Containers reuse pids: a claim recorded with this pid but no live token here is not this process's."""
    run_id = interrupted_run(home)
    damage(
        home,
        f"UPDATE runs SET owner_pid = {os.getpid()}, owner_host = '{socket.gethostname()}', "
        "owner_token = 'from-a-previous-life'",
    )
    with engine(home, responses=[]) as e:
        assert e.resume(run_id)["status"] == "completed"


def test_a_run_taken_over_by_another_claim_is_not_overwritten(home: Path) -> None:
    """Fencing: once another claim holds the run, this one's commits are refused and its run ends failed."""
    with engine(home) as e:
        run = e.start("record three things")
        run.next()  # the plan, committed under this run's claim
        damage(
            home, "UPDATE runs SET owner_token = 'someone-else'"
        )  # a take-over, as another process does it
        result = run.execute()
    assert result.status == "failed"
    assert any("no longer held by this run" in error["message"] for error in result.errors)
    with sqlite3.connect(home / "state.db") as db:
        assert db.execute("SELECT status, cycle, owner_token FROM runs").fetchone() == (
            "running",
            1,
            "someone-else",
        )


# --- a run whose owner was on another host (issue 13, item 12) ------------------------------------------------------


def test_a_run_held_on_another_host_is_taken_over_only_when_asked(home: Path) -> None:
    """A container recreated under a new name cannot check its old self: `resume` says how to take the run over,
    and `--take-over` does; a same-host owner that is alive is refused even then."""
    run_id = interrupted_run(home)
    damage(home, "UPDATE runs SET owner_pid = 4242, owner_host = 'old-container', owner_token = 'gone'")
    refused = CliRunner().invoke(cli, ["resume", run_id, "--json"])
    assert refused.exit_code == 2 and "old-container" in refused.output
    assert f"aeon resume {run_id} --take-over" in refused.output
    with engine(
        home, responses=[]
    ) as e:  # the CLI's --take-over calls this (the test's ledger tool is in-process)
        assert e.resume(run_id, take_over=True)["status"] == "completed"
    keys = (home / "ledger.txt").read_text().splitlines()
    assert len(keys) == len(set(keys)) == 3  # each step's side effect once

    alive = interrupted_run(home)
    here = socket.gethostname()
    damage(
        home, f"UPDATE runs SET owner_pid = {os.getppid()}, owner_host = '{here}' WHERE run_id = '{alive}'"
    )
    with engine(home, responses=[]) as e, pytest.raises(RunStoreError, match="being run by process"):
        e.resume(alive, take_over=True)
