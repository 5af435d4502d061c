"""A scheduler's typed memo (``SchedulerMemo``, ``RunState.memo``/``keep``), its units of work (``Work.of``) and
its preview (``Scheduler.preview``, ``Run.preview``), on a scheduler written here: nothing from the plan, pass or
flow packages, and a real SQLite state store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import Field

from aeon_kernel import (
    OrchestrationState,
    Orchestrator,
    Preview,
    Run,
    RunContext,
    RunStoreError,
    Scheduler,
    SchedulerMemo,
    ToolRegistry,
    Verdict,
    Work,
)
from aeon_kernel.kit import RunState
from aeon_kernel.testing.scripted import ScriptedLLM
from aeon_plugins.in_memory import InMemoryKVStore
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.sqlite_state import SqliteStateStore
from aeon_plugins.supervisor import DefaultSupervisor
from tests.support.previews import previewed


class Tally(SchedulerMemo):
    key: ClassVar[str] = "tally"

    counted: int = 0
    seen: list[str] = Field(default_factory=list)


class Counting(Scheduler[Tally, int]):
    """Counts to ``units``, one unit a cycle, remembering what it counted in its memo."""

    memo_type = Tally

    def __init__(self, units: int = 4) -> None:
        self.units = units
        self.started: list[bool] = []

    def start(self, run: RunContext, *, resumed: bool) -> None:
        self.started.append(resumed)
        if self.memo(run) is None:
            run.state.keep(Tally())

    def _tally(self, run: RunContext) -> Tally:
        tally = self.memo(run)
        assert tally is not None
        return tally

    def status(self, run: RunContext) -> Verdict | None:
        return Verdict("completed") if self._tally(run).counted >= self.units else None

    def next_work(self, run: RunContext) -> Work:
        return Work.of("step", [f"u{self._tally(run).counted + 1}"])

    def perform(self, work: Work, run: RunContext) -> int:
        return self._tally(run).counted + 1

    def apply(self, work: Work, outcome: int, run: RunContext) -> None:
        tally = self._tally(run)
        tally.counted = outcome
        tally.seen.extend(work.units)
        run.state.changed()

    def preview(self, run: RunContext) -> Preview | None:
        tally = run.state.memo(Tally)
        counted = tally.counted if tally is not None else 0
        if counted >= self.units:
            return None
        return Preview("step", (f"u{counted + 1}",), "step", f"unit {counted + 1}")


class Silent(Scheduler):
    """One unit of work, and no preview of its own: the base class's."""

    def status(self, run: RunContext) -> Verdict | None:
        return Verdict("completed") if run.state.cycle else None

    def next_work(self, run: RunContext) -> Work:
        return Work("step")

    def perform(self, work: Work, run: RunContext) -> Any:
        return None

    def apply(self, work: Work, outcome: Any, run: RunContext) -> None:
        run.state.scheduler_state["note"] = "done"
        run.state.changed()


def orchestrator(scheduler: Scheduler, store: SqliteStateStore | None = None, ttl: int = 10) -> Orchestrator:
    validator, tools = SchemaValidator(), ToolRegistry()
    return Orchestrator(
        ScriptedLLM([]),
        InMemoryKVStore(),
        tools,
        DefaultSupervisor(ScriptedLLM([]), validator, tools),
        validator,
        ttl=ttl,
        state_store=store,
        scheduler=lambda: scheduler,
    )


def stopped_after(cycles: int, db: Path) -> str:
    """A Counting run of a new SQLite store, closed after ``cycles`` cycles; its id."""
    store = SqliteStateStore(db)
    try:
        run = orchestrator(Counting(), store).start("count to four")
        for _ in range(cycles):
            assert run.next() is not None
        run.close()
        return run.run_id
    finally:
        store.close()


# --- the memo ----------------------------------------------------------------------------------------------------


def test_a_memo_is_stored_as_json_under_its_key_and_resumed_typed(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    run_id = stopped_after(2, db)
    store = SqliteStateStore(db)
    try:
        stored = store.load(run_id).state
        assert stored.scheduler_state == {"tally": {"counted": 2, "seen": ["u1", "u2"]}}
        assert Tally.stored(stored) == Tally(counted=2, seen=["u1", "u2"])
        scheduler = Counting()
        run = orchestrator(scheduler, store).start_resume(run_id)
        entries = list(run)
    finally:
        store.close()
    assert scheduler.started == [True]
    assert [e.step_id for e in entries] == ["u3", "u4"]
    assert run.result is not None and run.result.status == "completed"
    assert run.state.scheduler_state == {"tally": {"counted": 4, "seen": ["u1", "u2", "u3", "u4"]}}


def test_a_memo_that_cannot_be_read_fails_the_resume_saying_why(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    run_id = stopped_after(1, db)
    with sqlite3.connect(db) as connection:  # as a version whose memo had another shape would have left it
        connection.execute(
            "UPDATE runs SET scheduler_state = ? WHERE run_id = ?",
            (json.dumps({"tally": {"counted": "three of them"}}), run_id),
        )
    store = SqliteStateStore(db)
    try:
        result = orchestrator(Counting(), store).start_resume(run_id).execute()
    finally:
        store.close()
    assert result.status == "failed"
    (error,) = [e for e in result.errors if e.get("phase") == "scheduler.start"]
    assert error["type"] == "RunStoreError"
    assert "another (older or newer) version of its scheduler" in error["message"]
    assert "counted" in error["message"] and run_id in error["message"]


def test_run_state_loads_a_memo_once_keeps_it_in_place_and_dumps_it_into_snapshots() -> None:
    state = OrchestrationState(
        run_id="r1",
        request="count",
        ttl_remaining=3,
        scheduler_state={"tally": {"counted": 1}, "other": {"a": 1}},
    )
    working = RunState(state)
    tally = working.memo(Tally)
    assert tally == Tally(counted=1) and working.memo(Tally) is tally
    tally.seen.append("u2")
    working.changed()
    assert working.snapshot().scheduler_state == {"other": {"a": 1}, "tally": {"counted": 1, "seen": ["u2"]}}
    assert state.scheduler_state["tally"] == {"counted": 1}  # the snapshot it came from is untouched
    working.keep(Tally(counted=9))
    assert working.snapshot().scheduler_state["tally"] == {"counted": 9, "seen": []}
    assert RunState(OrchestrationState(run_id="r2", request="x", ttl_remaining=1)).memo(Tally) is None

    class Impostor(SchedulerMemo):
        key: ClassVar[str] = "tally"

    with pytest.raises(TypeError, match="not a Impostor"):
        working.memo(Impostor)
    with pytest.raises(RunStoreError, match="run r3 cannot be resumed"):
        RunState(
            OrchestrationState(run_id="r3", request="x", ttl_remaining=1, scheduler_state={"tally": 5})
        ).memo(Tally)


# --- units and previews ------------------------------------------------------------------------------------------


def test_work_of_names_each_unit_and_the_log_record_their_names_joined() -> None:
    work = Work.of("node", ["t1.1/left", "t1.2/right"])
    assert (work.phase, work.step_id, work.units) == (
        "node",
        "t1.1/left t1.2/right",
        ("t1.1/left", "t1.2/right"),
    )
    assert Work.of("plan", []) == Work("plan")
    assert Work("step", "1").units == ()  # a scheduler may still name one unit the old way
    assert Preview("node", ("t1/a", "t2/b")).step_id == "t1/a t2/b" and Preview("plan").step_id is None


def test_previews_agree_with_the_cycles_and_change_nothing(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "state.db")
    try:
        cycles = previewed(orchestrator(Counting(), store).start("count to four"))
    finally:
        store.close()
    assert [preview.title for preview, _ in cycles] == ["unit 1", "unit 2", "unit 3", "unit 4"]


def test_the_default_preview_says_what_any_scheduler_can_and_changes_nothing() -> None:
    run = orchestrator(Silent()).start("once")
    preview = run.preview()
    assert preview is not None and preview.phase is None and preview.kind == "other"
    assert preview.title == "the Silent's next unit of work" and preview.details == {"state": {}}
    assert run.state.cycle == 0 and run.next() is not None
    after = run.preview()
    assert after is not None and after.details == {"state": {"note": "done"}}
    assert run.next() is None and run.preview() is None  # ended


def test_a_run_whose_ttl_is_spent_or_that_was_closed_previews_nothing() -> None:
    spent = orchestrator(Counting(units=5), ttl=2).start("count")
    assert spent.preview() is not None
    spent.next(), spent.next()
    assert spent.preview() is None and spent.next() is None
    assert spent.result is not None and spent.result.status == "ttl_expired"
    closed: Run = orchestrator(Counting()).start("count")
    closed.close()
    assert closed.preview() is None
