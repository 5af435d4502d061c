"""Durable runs in one process (FR-013): commit per cycle, resume, ownership, corruption, log repair."""

from __future__ import annotations

import itertools
import json
import socket
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import Engine, RunStoreError
from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.kit import current_idempotency_key
from aeon_kernel.logs import expand_log, read_log
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.support import ledger
from tests.support.builders import plan, tool_step

TEN_STEPS = plan(*[tool_step(str(i), "ledger", {"n": i}) for i in range(1, 11)], goal="ten side effects")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path / "ledger.txt"))
    return tmp_path


def make_engine(workdir: Path, responses: list[Any] | None = None, ttl: int = 50) -> Engine:
    config = AeonConfig(
        ttl=ttl,
        state=Choice("sqlite", {"path": str(workdir / "state.db")}),
        telemetry=(Choice("jsonl", {"path": str(workdir / "run.jsonl")}),),
    ).with_choice("llm", "scripted", responses=responses if responses is not None else [TEN_STEPS])
    return Engine(config, plugins=[ledger])


def ledger_lines(workdir: Path) -> list[str]:
    return (workdir / "ledger.txt").read_text().splitlines()


def cycles_in_log(workdir: Path, run_id: str) -> list[int]:
    records = [json.loads(line) for line in (workdir / "run.jsonl").read_text().splitlines()]
    return [r["step_number"] for r in records if r.get("run_id") == run_id and "step_number" in r]


def test_a_finished_run_is_stored_and_listed(workdir: Path) -> None:
    with make_engine(workdir) as engine:
        result = engine.run("record ten things")
        stored = engine.state_store.load(result["run_id"])  # type: ignore[union-attr]
        (summary,) = engine.state_store.list_runs()  # type: ignore[union-attr]
    assert result["status"] == "completed"
    assert stored.state.model_dump(mode="json") == result["final_state"]
    assert (summary.run_id, summary.status, summary.cycles, summary.request) == (
        result["run_id"],
        "completed",
        11,
        "record ten things",
    )
    assert len(ledger_lines(workdir)) == 10


def test_each_cycle_writes_a_delta_not_the_history(workdir: Path) -> None:
    """A step cycle changes three rows — the run's counters, the one step, the new cycle — whatever the run's size."""
    store = SqliteStateStore(workdir / "s.db")
    with make_engine(workdir) as engine:
        orchestrator = engine.orchestrator()
        orchestrator.state_store = store
        changes = []
        for _ in orchestrator.iter("record ten things"):
            changes.append(store._db.total_changes)
    per_cycle = [b - a for a, b in itertools.pairwise(changes)]
    assert per_cycle == [3] * 10


def test_an_interrupted_run_resumes_without_repeating_finished_steps(workdir: Path) -> None:
    with make_engine(workdir, ttl=30) as engine:
        cycles = engine.orchestrator().iter("record ten things")
        for _ in range(5):  # the plan and four steps, then the process "stops"
            entry = next(cycles)
        cycles.close()
        run_id = entry.run_id
        (summary,) = engine.state_store.list_runs()  # type: ignore[union-attr]
        assert summary.status == "running" and summary.cycles == 5
    assert len(ledger_lines(workdir)) == 4

    with make_engine(workdir, responses=[]) as engine:  # a new process: no model responses left, fresh memory
        result = engine.resume(run_id)
    assert result["status"] == "completed" and result["run_id"] == run_id
    assert result["final_state"]["ttl_remaining"] == 30 - 11  # the TTL went on from where it was
    assert [c["result"]["n"] for c in result["final_state"]["tool_history"]] == list(range(1, 11))
    assert ledger_lines(workdir) == [f"{run_id}:{i}" for i in range(1, 11)]
    assert cycles_in_log(workdir, run_id) == list(range(1, 12))


def test_a_step_interrupted_mid_flight_runs_again_with_the_same_idempotency_key(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str | None] = []
    original = ledger.LedgerTool.invoke

    def interrupt_once(self: ledger.LedgerTool, **kwargs: Any) -> dict[str, Any]:
        seen.append(current_idempotency_key())
        result = original(self, **kwargs)
        if kwargs["n"] == 3 and len(seen) == 3:
            raise KeyboardInterrupt  # Ctrl-C after the side effect, before the step is recorded
        return result

    monkeypatch.setattr(ledger.LedgerTool, "invoke", interrupt_once)
    with make_engine(workdir) as engine, pytest.raises(KeyboardInterrupt):
        engine.run("record ten things")
    with make_engine(workdir, responses=[]) as engine:
        run_id = engine.state_store.list_runs()[0].run_id  # type: ignore[union-attr]
        # the interrupted cycle was not committed (as after kill -9): step 3 is pending in the store (issue 27)
        assert engine.state_store.load(run_id).state.plan.steps[2].status == "pending"  # type: ignore[union-attr]
        result = engine.resume(run_id)
    assert result["status"] == "completed"
    assert seen[2] == seen[3] == f"{run_id}:3"  # the same key both times
    assert ledger_lines(workdir) == [f"{run_id}:{i}" for i in range(1, 11)]  # the side effect happened once


def test_resuming_a_finished_run_is_an_error(workdir: Path) -> None:
    with make_engine(workdir) as engine:
        run_id = engine.run("record ten things")["run_id"]
        with pytest.raises(RunStoreError, match="already finished"):
            engine.resume(run_id)
        with pytest.raises(RunStoreError, match="no run 'nope'"):
            engine.resume("nope")


def test_a_run_held_by_a_live_process_cannot_be_resumed(workdir: Path) -> None:
    with make_engine(workdir) as engine:
        cycles = engine.orchestrator().iter("record ten things")
        run_id = next(cycles).run_id
        cycles.close()
    holder = subprocess.Popen(["sleep", "30"])
    try:
        with sqlite3.connect(workdir / "state.db") as db:
            db.execute(
                "UPDATE runs SET owner_pid = ?, owner_host = ? WHERE run_id = ?",
                (holder.pid, socket.gethostname(), run_id),
            )
        with make_engine(workdir) as engine, pytest.raises(RunStoreError, match=f"process {holder.pid}"):
            engine.resume(run_id)
    finally:
        holder.kill()
        holder.wait()
    with make_engine(workdir, responses=[]) as engine:  # once the holder is gone, the run is free
        assert engine.resume(run_id)["status"] == "completed"


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE steps SET step = '{not json' WHERE idx = 0",
        "DELETE FROM cycles WHERE step_number = 1",
        "UPDATE cycles SET entry = '[]' WHERE step_number = 1",
    ],
)
def test_a_corrupt_run_is_reported_not_restarted(workdir: Path, damage: str) -> None:
    with make_engine(workdir) as engine:
        cycles = engine.orchestrator().iter("record ten things")
        next(cycles)
        run_id = next(cycles).run_id
        cycles.close()
    with sqlite3.connect(workdir / "state.db") as db:
        db.execute(damage)
    with make_engine(workdir) as engine, pytest.raises(RunStoreError, match="corrupt"):
        engine.resume(run_id)


def test_resume_repairs_a_torn_log(workdir: Path) -> None:
    with make_engine(workdir) as engine:
        cycles = engine.orchestrator().iter("record ten things")
        for _ in range(4):
            run_id = next(cycles).run_id
        cycles.close()
    log = workdir / "run.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2])  # cycle 4 lost, cycle 3 torn
    with make_engine(workdir, responses=[]) as engine:
        engine.resume(run_id)
    records = list(read_log(log))  # every line parses, and each cycle's plan is there whole
    assert cycles_in_log(workdir, run_id) == list(range(1, 12))
    # the re-logged cycles are the records that were lost, plan snapshot included (rebuilt from the store)
    originals = {r["step_number"]: r for r in expand_log(map(json.loads, lines)) if "step_number" in r}
    relogged = {r["step_number"]: r for r in records if r.get("step_number") in (3, 4)}
    for number in (3, 4):
        assert {k: v for k, v in relogged[number].items() if k != "duration_ms"} == {
            k: v for k, v in originals[number].items() if k != "duration_ms"
        }
    assert [r["manifest"].get("resumed_at_cycle") for r in records if "manifest" in r] == [None, 4]


def test_resume_needs_a_state_store(workdir: Path) -> None:
    engine = Engine(AeonConfig().with_choice("llm", "scripted", responses=[]), plugins=[ledger])
    with pytest.raises(Exception, match=r"\[state\] use"):
        engine.resume("anything")


def test_sinks_hear_about_a_resume_with_the_committed_cycles(workdir: Path) -> None:
    from aeon_kernel.testing import RecordingSink

    with make_engine(workdir) as engine:
        cycles = engine.orchestrator().iter("record ten things")
        run_id = [next(cycles).run_id for _ in range(3)][-1]
        cycles.close()
    sink = RecordingSink()
    with make_engine(workdir, responses=[]) as engine:
        engine.pm.register(sink)
        engine.resume(run_id)
    (entries,) = sink.of("aeon_run_resumed")
    assert [e.step_number for e in entries] == [1, 2, 3]
    assert [e.step_number for e in sink.entries] == list(range(4, 12))
    assert sink.manifest is not None and sink.manifest["resumed_at_cycle"] == 3


def test_a_state_store_comes_from_the_register_hook(workdir: Path) -> None:
    from aeon_kernel import hookimpl

    built: list[str] = []

    class Custom:
        @hookimpl
        def aeon_register_state_stores(self, register: Any) -> None:
            register("custom", lambda path: built.append(path) or SqliteStateStore(path))

    config = AeonConfig(state=Choice("custom", {"path": str(workdir / "c.db")})).with_choice(
        "llm", "scripted", responses=[TEN_STEPS]
    )
    with Engine(config, plugins=[ledger, Custom()]) as engine:
        engine.check_choices()
        assert engine.run("record ten things")["status"] == "completed"
    assert built == [str(workdir / "c.db")]
