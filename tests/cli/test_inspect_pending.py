"""The step-through page's "next" (aeon_cli/inspect/pending.py): the run's preview made into the dict the template
reads — the same keys the page always had — without the face knowing any scheduler."""

from __future__ import annotations

import ast
import json
import sqlite3
from pathlib import Path
from typing import Any

from aeon_cli.inspect import pending
from aeon_cli.inspect.views import pretty
from aeon_kernel import RunContext, Scheduler, Verdict, Work
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.conftest import MakeHarness
from tests.plugins.flow.test_flow_memo import INPUT, fan
from tests.runtime.test_scheduler_memo import Counting, orchestrator, stopped_after
from tests.support.builders import plan, tool_step


def test_the_page_module_knows_no_scheduler() -> None:
    tree = ast.parse(Path(pending.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    assert not {name for name in imported if name and name.startswith("aeon_plugins")}, imported


def test_a_plan_step_shows_its_arguments_as_indented_json(make_harness: MakeHarness) -> None:
    harness = make_harness([plan(tool_step("1", "calculator", {"expression": "5 + 10"}))])
    run = harness.orchestrator.start("add 5 and 10")
    first = pending.upcoming(run)
    assert first is not None and (first["kind"], first["cycle"], first["title"]) == (
        "plan",
        1,
        "plan generation",
    )
    assert set(first) == {"kind", "cycle", "title", "what", "request", "prompt"}
    run.next()
    step = pending.upcoming(run)
    assert step is not None and (step["kind"], step["cycle"], step["title"]) == ("step", 2, "step 1")
    assert step["step"]["arguments"] == pretty({"expression": "5 + 10"})
    assert set(step) == {"kind", "cycle", "title", "what", "step", "context", "prompt"}
    run.next()
    assert pending.upcoming(run) is None  # every step has ended: the run concludes


def test_a_flow_stage_shows_its_input_and_context_values_as_indented_json(tmp_path: Path) -> None:
    with fan(tmp_path) as engine:
        run = engine.start(INPUT)
        with run:
            assert pending.upcoming(run) == {
                "kind": "node",
                "cycle": 1,
                "title": "t1/intake",
                "what": "The router runs one stage of this task: it assembles the context, runs the node, "
                "validates its output and routes the task.",
                "stages": [
                    {
                        "task": "t1",
                        "node": "intake",
                        "role": "start",
                        "agent": False,
                        "instruction": None,
                        "input": json.dumps(INPUT, indent=2, sort_keys=True),  # the run's input
                        "context_choice": "none",
                        "context": [],
                        "context_problem": None,
                    }
                ],
            }


class Once(Scheduler):
    def status(self, run: RunContext) -> Verdict | None:
        return Verdict("completed") if run.state.cycle else None

    def next_work(self, run: RunContext) -> Work:
        return Work("step")

    def perform(self, work: Work, run: RunContext) -> Any:
        return None

    def apply(self, work: Work, outcome: Any, run: RunContext) -> None:
        run.state.scheduler_state["seen"] = [1, 2]
        run.state.changed()


def test_another_scheduler_shows_its_durable_state(make_harness: MakeHarness) -> None:
    harness = make_harness([])
    harness.orchestrator.scheduler = Once
    run = harness.orchestrator.start("once")
    assert pending.upcoming(run) == {
        "kind": "other",
        "cycle": 1,
        "title": "the Once's next unit of work",
        "what": "This scheduler decides its work when the cycle starts; its durable state is below.",
        "detail": "{}",
    }
    run.next()  # the base class cannot tell that the run ends now: it shows the state
    after = pending.upcoming(run)
    assert after is not None and after["detail"] == pretty({"seen": [1, 2]}) and after["cycle"] == 2
    assert run.next() is None and pending.upcoming(run) is None


def test_a_scheduler_that_cannot_tell_is_shown_saying_why_and_the_cycle_ends_the_run(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    run_id = stopped_after(1, db)
    with sqlite3.connect(db) as connection:
        connection.execute(
            "UPDATE runs SET scheduler_state = ? WHERE run_id = ?", ('{"tally": {"counted": []}}', run_id)
        )
    store = SqliteStateStore(db)
    try:
        run = orchestrator(Counting(), store).start_resume(run_id)
        shown = pending.upcoming(run)
        assert shown is not None and (shown["kind"], shown["cycle"]) == ("other", 2)
        assert shown["what"].startswith(
            "The scheduler could not tell what its next cycle does: RunStoreError: "
        )
        assert run.next() is None and run.result is not None and run.result.status == "failed"
        assert pending.upcoming(run) is None
    finally:
        store.close()
