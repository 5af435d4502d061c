"""The ``sqlite`` state store: runs that survive ``kill -9`` (standard library ``sqlite3``, WAL).

Three tables hold a run as deltas: ``runs`` (one row of counters, rewritten per cycle), ``steps`` (one row per
plan step, rewritten only when that step changes) and ``cycles`` (one row per cycle, appended). A cycle is
committed in one transaction, so a crash leaves either the whole cycle or none of it. Everything is JSON text;
nothing is pickled.

Ownership: the process running a run records its pid and host; another process may resume the run only once
that process is gone, so two processes never drive one run.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
from pathlib import Path
from typing import Any

from aeon_kernel import (
    LogEntry,
    OrchestrationState,
    Plan,
    PlanStep,
    Register,
    RunStoreError,
    RunSummary,
    StateStore,
    StepStatus,
    StoredRun,
    hookimpl,
    utc_now,
)

DEFAULT_PATH = "aeon-state.db"

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
    scheduler_state TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started);
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


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) process on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


class SqliteStateStore(StateStore):
    def __init__(
        self, path: str | Path = DEFAULT_PATH, timeout: float = 30.0, synchronous: str = "NORMAL"
    ) -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._db.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}
            if "scheduler_state" not in columns:  # a store written before schedulers kept state
                self._db.execute("ALTER TABLE runs ADD COLUMN scheduler_state TEXT")
        except sqlite3.Error as exc:
            raise RunStoreError(f"cannot open the state store {str(self.path)!r}: {exc}") from None
        self._host = socket.gethostname()

    # --- writing -----------------------------------------------------------------------------------------------

    def create_run(self, state: OrchestrationState, manifest: dict[str, Any]) -> None:
        now = utc_now()
        with self._transaction() as db:
            db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)",
                (
                    state.run_id,
                    state.request,
                    state.plan.goal if state.plan else None,
                    state.status,
                    state.ttl_remaining,
                    state.cycle,
                    state.current_step_id,
                    json.dumps(manifest, default=str),
                    now,
                    now,
                    os.getpid(),
                    self._host,
                    json.dumps(state.scheduler_state) if state.scheduler_state else None,
                ),
            )
            if state.plan is not None:
                self._write_steps(db, state.run_id, state.plan, range(len(state.plan.steps)))

    def commit_cycle(
        self, state: OrchestrationState, entry: LogEntry, llm_outputs: list[dict[str, Any]]
    ) -> None:
        with self._transaction() as db:
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
            record = entry.model_dump_json(exclude={"plan_state"})
            db.execute(
                "INSERT INTO cycles VALUES (?, ?, ?, ?)",
                (state.run_id, entry.step_number, record, json.dumps(llm_outputs, default=str)),
            )

    def finish_run(self, state: OrchestrationState, result: dict[str, Any]) -> None:
        with self._transaction() as db:
            self._write_counters(db, state)
            db.execute(
                "UPDATE runs SET result = ?, owner_pid = NULL, owner_host = NULL WHERE run_id = ?",
                (
                    json.dumps({k: v for k, v in result.items() if k != "final_state"}, default=str),
                    state.run_id,
                ),
            )

    def claim(self, run_id: str) -> None:
        with self._transaction() as db:
            row = db.execute(
                "SELECT status, owner_pid, owner_host FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise RunStoreError(f"no run {run_id!r} in {self.path}; `aeon runs` lists the stored runs")
            status, pid, host = row
            if status != "running":
                raise RunStoreError(f"run {run_id!r} already finished ({status}); nothing to resume")
            if pid is not None and pid != os.getpid():
                if host != self._host:
                    raise RunStoreError(f"run {run_id!r} is held by process {pid} on {host}")
                if _alive(pid):
                    raise RunStoreError(
                        f"run {run_id!r} is being run by process {pid}; wait for it or stop it"
                    )
            db.execute(
                "UPDATE runs SET owner_pid = ?, owner_host = ? WHERE run_id = ?",
                (os.getpid(), self._host, run_id),
            )

    def release(self, run_id: str) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET owner_pid = NULL, owner_host = NULL WHERE run_id = ? AND owner_pid = ?",
                (run_id, os.getpid()),
            )

    # --- reading -----------------------------------------------------------------------------------------------

    def load(self, run_id: str) -> StoredRun:
        with self._lock:
            row = self._db.execute(
                "SELECT request, goal, status, ttl_remaining, cycle, current_step_id, manifest, scheduler_state "
                "FROM runs "
                "WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise RunStoreError(f"no run {run_id!r} in {self.path}; `aeon runs` lists the stored runs")
            steps = self._db.execute(
                "SELECT step FROM steps WHERE run_id = ? ORDER BY idx", (run_id,)
            ).fetchall()
            cycles = self._db.execute(
                "SELECT entry, llm_outputs FROM cycles WHERE run_id = ? ORDER BY step_number", (run_id,)
            ).fetchall()
        request, goal, status, ttl, cycle, current, manifest, scheduler_state = row
        try:
            plan = (
                Plan(goal=goal, steps=tuple(PlanStep.model_validate_json(s) for (s,) in steps))
                if steps
                else None
            )
            entries = _with_plan_snapshots(
                tuple(LogEntry.model_validate({**json.loads(e), "plan_state": None}) for e, _ in cycles), plan
            )
            outputs = tuple(o for _, raw in cycles for o in json.loads(raw))
            state = OrchestrationState(
                run_id=run_id,
                request=request,
                plan=plan,
                current_step_id=current,
                tool_history=tuple(c for e in entries for c in e.tool_calls),
                llm_outputs=outputs,
                supervisor_actions=tuple(a for e in entries for a in e.supervisor_actions),
                errors=tuple(err for e in entries for err in e.errors),
                ttl_remaining=ttl,
                cycle=cycle,
                status=status,
                scheduler_state=json.loads(scheduler_state) if scheduler_state else {},
            )
            if len(entries) != cycle:
                raise ValueError(f"{len(entries)} cycle records for {cycle} cycles")
            return StoredRun(state=state, manifest=json.loads(manifest), entries=entries)
        except (ValueError, TypeError) as exc:
            raise RunStoreError(f"run {run_id!r} in {self.path} is corrupt: {exc}") from None

    def list_runs(self) -> list[RunSummary]:
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id, request, status, cycle, started, updated FROM runs ORDER BY started DESC, rowid DESC"
            ).fetchall()
        return [RunSummary(*row) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- helpers -----------------------------------------------------------------------------------------------

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    @staticmethod
    def _write_counters(db: sqlite3.Connection, state: OrchestrationState) -> None:
        db.execute(
            "UPDATE runs SET goal = ?, status = ?, ttl_remaining = ?, cycle = ?, current_step_id = ?, updated = ? "
            "WHERE run_id = ?",
            (
                state.plan.goal if state.plan else None,
                state.status,
                state.ttl_remaining,
                state.cycle,
                state.current_step_id,
                utc_now(),
                state.run_id,
            ),
        )
        if (
            state.scheduler_state
        ):  # what a scheduler must remember across a crash (the linear one needs nothing)
            db.execute(
                "UPDATE runs SET scheduler_state = ? WHERE run_id = ?",
                (json.dumps(state.scheduler_state, default=str), state.run_id),
            )

    @staticmethod
    def _write_steps(db: sqlite3.Connection, run_id: str, plan: Plan, indexes: Any) -> None:
        db.executemany(
            "INSERT OR REPLACE INTO steps VALUES (?, ?, ?)",
            [(run_id, i, plan.steps[i].model_dump_json()) for i in indexes],
        )


def _with_plan_snapshots(entries: tuple[LogEntry, ...], plan: Plan | None) -> tuple[LogEntry, ...]:
    """Rebuild each cycle's ``plan_state`` (the plan at cycle start) from the final plan.

    Steps run strictly in order and a step changes only in its own cycle, so the plan at the start of a cycle is
    the final plan with every step not yet finished put back to pending. (A step repaired in its cycle shows its
    repaired definition in earlier snapshots; nothing else differs.)
    """
    if plan is None:
        return entries
    finished: set[str] = set()
    rebuilt = []
    for entry in entries:
        snapshot = None
        if entry.phase == "step":
            steps = [
                s
                if s.step_id in finished
                else s.model_copy(
                    update={"status": StepStatus.PENDING, "result": None, "failure": None, "errors": ()}
                )
                for s in plan.steps
            ]
            snapshot = plan.model_copy(update={"steps": tuple(steps)})
        rebuilt.append(entry.model_copy(update={"plan_state": snapshot}))
        if entry.step_id is not None and entry.step_status in ("complete", "failed"):
            finished.add(entry.step_id)
    return tuple(rebuilt)


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
