"""The ``sqlite`` state store: runs that survive ``kill -9`` (standard library ``sqlite3``, WAL).

Three tables hold a run as deltas: ``runs`` (one row of counters, rewritten per cycle), ``steps`` (one row per
plan step, rewritten only when that step changes) and ``cycles`` (one row per cycle, appended). A cycle is
committed in one transaction, so a crash leaves either the whole cycle or none of it. Everything is JSON text;
nothing is pickled.

Ownership is per claim: whoever runs a run (``create_run``, ``claim``) records a fresh random token with its pid
and host, and only that claim commits, finishes or releases it. A run held by a live claim — in another process,
or another thread or Engine of this one — cannot be claimed again, so nothing drives one run twice; a claim whose
process is gone is stale and can be taken.

Whatever the file holds is distrusted when read: a damaged database, a foreign table of the same name, a BLOB or
non-UTF-8 text where text belongs, or a number SQLite cannot hold is a ``RunStoreError`` naming the file and what
to do — never a traceback, and never "no run" for a run that is there but damaged.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from aeon_kernel import (
    LogEntry,
    OrchestrationState,
    Plan,
    PlanStep,
    Register,
    RunStoreError,
    StateStore,
    hookimpl,
)
from aeon_kernel.kit import (
    RunOwner,
    RunSummary,
    StoredRun,
    check_claim,
    failure_text,
    is_utf8,
    plan_snapshots,
    storable_json,
    storable_model_json,
    storable_result,
    storable_text,
    stored_state,
    use_wal,
    utc_now,
)

DEFAULT_PATH = "aeon-state.db"
#: SQLite integers are signed 64-bit.
INT64_MAX: Final = 2**63 - 1

#: The tokens of the claims live in this process (threads and Engines share it): a run whose recorded owner is
#: this process and whose token is here is being driven right now; any other token with this pid is stale.
_LIVE_CLAIMS: set[str] = set()

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    request TEXT NOT NULL,
    goal TEXT,
    status TEXT NOT NULL,
    ttl_remaining INTEGER NOT NULL,
    cycle INTEGER NOT NULL,
    current_step_id TEXT,
    manifest TEXT NOT NULL,
    result TEXT,
    started TEXT NOT NULL,
    updated TEXT NOT NULL,
    owner_pid INTEGER,
    owner_host TEXT,
    scheduler_state TEXT,
    owner_token TEXT
);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    step TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS cycles (
    run_id TEXT NOT NULL,
    step_number INTEGER NOT NULL,
    entry TEXT NOT NULL,
    llm_outputs TEXT NOT NULL,
    PRIMARY KEY (run_id, step_number)
);
"""
_INDEX = "CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started)"
#: The columns each table must have (columns added since are added when missing).
_COLUMNS: Final = {
    "runs": {
        "run_id",
        "request",
        "goal",
        "status",
        "ttl_remaining",
        "cycle",
        "current_step_id",
        "manifest",
        "result",
        "started",
        "updated",
        "owner_pid",
        "owner_host",
    },
    "steps": {"run_id", "idx", "step"},
    "cycles": {"run_id", "step_number", "entry", "llm_outputs"},
}
_ADDED: Final = ("scheduler_state", "owner_token")
_INSERT_RUN: Final = (
    "INSERT INTO runs (run_id, request, goal, status, ttl_remaining, cycle, current_step_id, manifest, started, "
    "updated, owner_pid, owner_host, scheduler_state, owner_token) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPDATE_COUNTERS: Final = (
    "UPDATE runs SET goal = ?, status = ?, ttl_remaining = ?, cycle = ?, current_step_id = ?, updated = ? "
    "WHERE run_id = ?"
)
_UPDATE_HELD_COUNTERS: Final = _UPDATE_COUNTERS + " AND owner_token = ?"
_DELETE: Final = tuple(f"DELETE FROM {table} WHERE run_id = ?" for table in ("runs", "steps", "cycles"))  # noqa: S608


class SqliteStateStore(StateStore):
    def __init__(
        self, path: str | Path = DEFAULT_PATH, timeout: float = 30.0, synchronous: str = "NORMAL"
    ) -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = Path(path)
        #: the path as messages show it (one from bytes that are not UTF-8 is escaped)
        self._shown_path = storable_text(str(self.path))
        self._lock = threading.Lock()
        #: the runs this store's claims hold, and their tokens
        self._claims: dict[str, str] = {}
        try:
            self._db = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise RunStoreError(f"cannot open the state store {str(self.path)!r}: {exc}") from None
        try:
            self._db.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            existing = self._check_tables()  # before anything is written to the file
            use_wal(self._db, timeout)
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._db.executescript(_SCHEMA)
            for column in _ADDED:
                if existing and column not in existing:  # a store written by an earlier version
                    self._db.execute(f"ALTER TABLE runs ADD COLUMN {column} TEXT")
            self._db.execute(_INDEX)
        except sqlite3.Error as exc:
            self._db.close()
            raise self._damaged(exc) from None
        except RunStoreError:
            self._db.close()
            raise
        self._host = socket.gethostname()

    def _check_tables(self) -> set[str]:
        """Refuse a file whose tables of the same names are not this store's; the columns ``runs`` has now."""
        existing: dict[str, set[str]] = {}
        for table, needed in _COLUMNS.items():
            columns = existing[table] = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if columns and not needed <= columns:
                raise RunStoreError(
                    f"the state store {str(self.path)!r} has a table {table!r} that is not Aeon's (it lacks "
                    f"{', '.join(sorted(needed - columns))}): point [state] path in aeon.toml at another file"
                )
        return existing["runs"]

    # --- writing -----------------------------------------------------------------------------------------------

    def create_run(self, state: OrchestrationState, manifest: dict[str, Any]) -> None:
        if not 0 <= state.ttl_remaining <= INT64_MAX:
            raise RunStoreError(
                f"the state store {str(self.path)!r} cannot hold a TTL of {state.ttl_remaining}: SQLite integers "
                f"stop at 2**63 - 1; use a smaller ttl ([run] ttl in aeon.toml, or --ttl)"
            )
        now, token = utc_now(), os.urandom(16).hex()
        with self._holding(state.run_id, token), self._writing(f"cannot record run {state.run_id!r}") as db:
            db.execute(
                _INSERT_RUN,
                (
                    state.run_id,
                    storable_text(state.request),
                    storable_text(state.plan.goal) if state.plan else None,
                    state.status,
                    state.ttl_remaining,
                    state.cycle,
                    _opt_text(state.current_step_id),
                    storable_json(manifest),
                    now,
                    now,
                    os.getpid(),
                    self._host,
                    storable_json(state.scheduler_state) if state.scheduler_state else None,
                    token,
                ),
            )
            if state.plan is not None:
                self._write_steps(db, state.run_id, state.plan, range(len(state.plan.steps)))

    def commit_cycle(
        self, state: OrchestrationState, entry: LogEntry, llm_outputs: list[dict[str, Any]]
    ) -> None:
        with self._writing(f"cannot store cycle {entry.step_number} of run {state.run_id!r}") as db:
            self._write_counters(db, state)
            if state.plan is not None:
                if entry.phase == "step":  # a step cycle changes its own step only
                    changed = [i for i, s in enumerate(state.plan.steps) if s.step_id == entry.step_id]
                    self._write_steps(db, state.run_id, state.plan, changed)
                else:  # a new or refined plan: steps may have come, gone or moved
                    db.execute("DELETE FROM steps WHERE run_id = ?", (state.run_id,))
                    self._write_steps(db, state.run_id, state.plan, range(len(state.plan.steps)))
            # The plan snapshot is left out: the steps table holds the plan, and load() rebuilds each snapshot.
            # Keeping it would make every cycle row as large as the plan (quadratic growth over a long run).
            db.execute(
                "INSERT INTO cycles VALUES (?, ?, ?, ?)",
                (
                    state.run_id,
                    entry.step_number,
                    storable_model_json(entry, {"plan_state"}),
                    storable_json(llm_outputs),
                ),
            )

    def finish_run(self, state: OrchestrationState, result: dict[str, Any]) -> None:
        """Record the end of the run; when its result cannot be stored whole, a summary of it (never left running)."""
        text = storable_result(state, result)
        try:
            with self._writing(f"cannot record the end of run {state.run_id!r}") as db:
                self._write_counters(db, state)
                db.execute(
                    "UPDATE runs SET result = ?, owner_pid = NULL, owner_host = NULL, owner_token = NULL "
                    "WHERE run_id = ?",
                    (text, state.run_id),
                )
        finally:  # this claim is over either way (a claim left in the file is stale once its token is not live)
            self._let_go(state.run_id)

    def claim(self, run_id: str, *, take_over: bool = False) -> None:
        """Take the run for a new claim; refused while another live claim (any process, thread or Engine) holds it.

        A claim recorded by another host cannot be checked from here: it is refused unless ``take_over`` (the
        user says that host, or its process, is gone: ``aeon resume --take-over``)."""
        token = os.urandom(16).hex()
        with self._holding(run_id, token), self._writing(f"cannot claim run {run_id!r}") as db:
            row = db.execute(
                "SELECT status, owner_pid, owner_host, owner_token FROM runs WHERE run_id = ?",
                (_key(run_id),),
            ).fetchone()
            if row is None:
                raise self._missing(db, run_id)
            status, pid, host, held = row
            if not (
                isinstance(status, str)
                and isinstance(pid, int | None)
                and isinstance(host, str | None)
                and isinstance(held, str | None)
            ):
                raise RunStoreError(
                    f"run {run_id!r} in {self._shown_path} is corrupt: its status and owner are not what Aeon writes "
                    f"({storable_text(repr(row))[:200]}); it cannot be resumed (start it again)"
                )
            check_claim(
                run_id, status, pid, host, held, here=self._host, live=_LIVE_CLAIMS, take_over=take_over
            )
            db.execute(
                "UPDATE runs SET owner_pid = ?, owner_host = ?, owner_token = ? WHERE run_id = ?",
                (os.getpid(), self._host, token, run_id),
            )

    def release(self, run_id: str) -> None:
        """Let go of this store's claim on the run (another claim's hold is left alone)."""
        token = self._claims.get(run_id)
        if token is None:
            return
        try:
            with self._writing(f"cannot release run {run_id!r}") as db:
                db.execute(
                    "UPDATE runs SET owner_pid = NULL, owner_host = NULL, owner_token = NULL "
                    "WHERE run_id = ? AND owner_token = ?",
                    (run_id, token),
                )
        finally:
            self._let_go(run_id)

    def delete_run(self, run_id: str) -> bool:
        """Delete the run's rows, in one transaction; refused while a live claim holds it (as ``claim`` refuses)."""
        with self._writing(f"cannot delete run {run_id!r}") as db:
            row = db.execute(
                "SELECT status, owner_pid, owner_host, owner_token FROM runs WHERE run_id = ?",
                (_key(run_id),),
            ).fetchone()
            if row is not None and row[0] == "running" and isinstance(row[1], int):
                check_claim(run_id, *row, here=self._host, live=_LIVE_CLAIMS)
            gone = sum(db.execute(delete, (_key(run_id),)).rowcount for delete in _DELETE)
        return gone > 0

    # --- reading -----------------------------------------------------------------------------------------------

    def load(self, run_id: str) -> StoredRun:
        with self._reading(f"cannot read run {run_id!r}"):
            row = self._db.execute(
                "SELECT request, goal, status, ttl_remaining, cycle, current_step_id, manifest, scheduler_state, "
                "result FROM runs "
                "WHERE run_id = ?",
                (_key(run_id),),
            ).fetchone()
            if row is None:
                raise self._missing(self._db, run_id)
            steps = self._db.execute(
                "SELECT step FROM steps WHERE run_id = ? ORDER BY idx", (run_id,)
            ).fetchall()
            cycles = self._db.execute(
                "SELECT entry, llm_outputs FROM cycles WHERE run_id = ? ORDER BY step_number", (run_id,)
            ).fetchall()
        request, goal, status, ttl, cycle, current, manifest, scheduler_state, result = row
        try:
            _expect(str, request=request, status=status, manifest=manifest)
            _expect(
                (str, type(None)),
                goal=goal,
                current_step_id=current,
                scheduler_state=scheduler_state,
                result=result,
            )
            _expect(int, ttl_remaining=ttl, cycle=cycle)
            _expect(
                str,
                step=[s for (s,) in steps],
                entry=[e for e, _ in cycles],
                llm_outputs=[o for _, o in cycles],
            )
            plan = (
                Plan(goal=goal, steps=tuple(PlanStep.model_validate_json(s) for (s,) in steps))
                if steps
                else None
            )
            entries = plan_snapshots(
                tuple(LogEntry.model_validate({**json.loads(e), "plan_state": None}) for e, _ in cycles), plan
            )
            ended = json.loads(result) if result is not None else None
            state = stored_state(
                run_id,
                request,
                plan,
                entries,
                (o for _, raw in cycles for o in json.loads(raw)),
                current_step_id=current,
                ttl_remaining=ttl,
                cycle=cycle,
                status=status,
                scheduler_state=scheduler_state,
                result=ended,
            )
            return StoredRun(state=state, manifest=json.loads(manifest), entries=entries, result=ended)
        except Exception as exc:  # whatever the rows hold, they do not make a run: corrupt
            reason = failure_text(exc)
            raise RunStoreError(
                f"run {run_id!r} in {self._shown_path} is corrupt: {reason[:500]}; "
                "it cannot be resumed (start it again)"
            ) from None

    def list_runs(self) -> list[RunSummary]:
        """Every run, newest first; text that is not (a BLOB, bytes that are not UTF-8) is shown with U+FFFD."""
        with self._reading("cannot list the runs"):
            self._db.text_factory = bytes
            try:
                rows = self._db.execute(
                    "SELECT run_id, request, status, cycle, started, updated, owner_pid, owner_host, "
                    "json_extract(manifest, '$.session') FROM runs ORDER BY started DESC, rowid DESC"
                ).fetchall()
            finally:
                self._db.text_factory = str
        return [
            RunSummary(
                _shown(run_id),
                _shown(request),
                _shown(status),
                cycle if isinstance(cycle, int) else -1,
                _shown(started),
                _shown(updated),
                RunOwner(pid, _shown(host)) if isinstance(pid, int) else RunOwner(None, None),
                _shown(session) if isinstance(session, (str, bytes)) else None,
            )
            for run_id, request, status, cycle, started, updated, pid, host, session in rows
        ]

    def close(self) -> None:
        with self._lock:
            for token in self._claims.values():
                _LIVE_CLAIMS.discard(token)
            self._claims.clear()
            self._db.close()

    # --- helpers -----------------------------------------------------------------------------------------------

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    @contextmanager
    def _writing(self, what: str) -> Iterator[sqlite3.Connection]:
        """A transaction whose failures (a damaged file, text or numbers SQLite cannot take) are RunStoreErrors."""
        try:
            with self._transaction() as db:
                yield db
        except RunStoreError:
            raise
        except sqlite3.IntegrityError as exc:
            if "UNIQUE" not in str(exc):
                raise self._damaged(exc, what) from None
            raise RunStoreError(  # a run, or one of its cycles, that another process wrote first
                f"{what} in {self._shown_path}: it is there already ({failure_text(exc)})"
            ) from None
        except sqlite3.Error as exc:
            raise self._damaged(exc, what) from None
        except Exception as exc:  # text or numbers SQLite cannot take, a value no encoder can write
            raise RunStoreError(
                f"{what} in {self._shown_path}: {type(exc).__name__}: {failure_text(exc)[:500]}"
            ) from None

    @contextmanager
    def _reading(self, what: str) -> Iterator[None]:
        try:
            with self._lock:
                yield
        except RunStoreError:
            raise
        except sqlite3.Error as exc:
            raise self._damaged(exc, what) from None

    def _damaged(self, exc: sqlite3.Error, what: str = "cannot use it") -> RunStoreError:
        reason = failure_text(exc)
        where = f"the state store {str(self.path)!r}"
        if "decode" in reason:  # sqlite3 reading text that is not UTF-8
            return RunStoreError(
                f"{where} is corrupt ({what}: {reason[:300]}): it holds text that is not UTF-8, which Aeon never "
                "writes; point [state] path in aeon.toml at another file"
            )
        if (
            not isinstance(exc, sqlite3.OperationalError)
            or "malformed" in reason
            or "not a database" in reason
        ):
            return RunStoreError(
                f"{where} is damaged or not a database ({what}: {reason}): restore it from a backup, recover "
                f"what it holds with `sqlite3 {self._shown_path} .recover`, or point [state] path in aeon.toml at a "
                "new file"
            )
        return RunStoreError(f"{where} failed ({what}): {reason}")

    def _missing(self, db: sqlite3.Connection, run_id: str) -> RunStoreError:
        """ "No run" — unless a scan that trusts no index finds it there (a damaged index, an id stored as a BLOB)."""
        if is_utf8(run_id):
            try:
                found = db.execute(
                    "SELECT typeof(run_id) FROM runs NOT INDEXED WHERE CAST(run_id AS TEXT) = ? LIMIT 1",
                    (run_id,),
                ).fetchone()
            except sqlite3.Error as exc:
                return self._damaged(exc, f"cannot look for run {run_id!r}")
            if found is not None:
                if found[0] != "text":
                    why = f"its id is stored as a {found[0]}, where Aeon writes text; start the run again"
                else:
                    why = f"the index of runs is damaged; repair it with `sqlite3 {self._shown_path} REINDEX`"
                return RunStoreError(f"run {run_id!r} in {self._shown_path} is corrupt: {why}")
        return RunStoreError(f"no run {run_id!r} in {self._shown_path}; `aeon runs` lists the stored runs")

    @contextmanager
    def _holding(self, run_id: str, token: str) -> Iterator[None]:
        """The claim ``token`` is live from before its transaction commits (so a claim racing it in this process
        sees it live, never stale); taken back when the transaction fails."""
        previous = self._claims.get(run_id)
        _LIVE_CLAIMS.add(token)
        try:
            yield
        except BaseException:
            _LIVE_CLAIMS.discard(token)
            raise
        if previous is not None:
            _LIVE_CLAIMS.discard(previous)
        self._claims[run_id] = token

    def _let_go(self, run_id: str) -> None:
        token = self._claims.pop(run_id, None)
        if token is not None:
            _LIVE_CLAIMS.discard(token)

    def _write_counters(self, db: sqlite3.Connection, state: OrchestrationState) -> None:
        """The run's counters, written only while this store's claim holds the run (a run taken over by another
        claim is not overwritten)."""
        token = self._claims.get(state.run_id)
        changed = db.execute(
            _UPDATE_COUNTERS if token is None else _UPDATE_HELD_COUNTERS,
            (
                storable_text(state.plan.goal) if state.plan else None,
                state.status,
                state.ttl_remaining,
                state.cycle,
                _opt_text(state.current_step_id),
                utc_now(),
                state.run_id,
                *(() if token is None else (token,)),
            ),
        ).rowcount
        if token is not None and changed == 0:
            raise RunStoreError(
                f"run {state.run_id!r} in {self._shown_path} is no longer held by this run: another claim took it over"
            )
        if (
            state.scheduler_state
        ):  # what a scheduler must remember across a crash (the linear one needs nothing)
            db.execute(
                "UPDATE runs SET scheduler_state = ? WHERE run_id = ?",
                (storable_json(state.scheduler_state), state.run_id),
            )

    @staticmethod
    def _write_steps(db: sqlite3.Connection, run_id: str, plan: Plan, indexes: Any) -> None:
        db.executemany(
            "INSERT OR REPLACE INTO steps VALUES (?, ?, ?)",
            [(run_id, i, storable_model_json(plan.steps[i])) for i in indexes],
        )


def _opt_text(text: str | None) -> str | None:
    return None if text is None else storable_text(text)


def _key(run_id: Any) -> Any:
    """A run id to look up: one with no UTF-8 form cannot be stored, so it matches nothing (it is not an error)."""
    return run_id if not isinstance(run_id, str) or is_utf8(run_id) else ""


def _expect(kind: type | tuple[type, ...], **columns: Any) -> None:
    """Rows hold what this store writes; a BLOB (or a number) where text belongs is corruption."""
    for name, value in columns.items():
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, kind):
                raise ValueError(f"column {name} holds {type(item).__name__} {item!r:.60}")


def _shown(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (or ``ROLLBACK``), serialised within the process."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self.db, self.lock = db, lock

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise
        return self.db

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.lock.release()


@hookimpl
def aeon_register_state_stores(register: Register) -> None:
    register("sqlite", SqliteStateStore)
