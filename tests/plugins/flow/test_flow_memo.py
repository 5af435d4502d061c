"""The router's memo, its book of tasks (``FlowBook``): stored in a real SQLite state store at every cycle
boundary and resumed from there to the same end; a book stored by the previous version loads as it was; and the
router's preview, which must agree with every cycle (a cycle of two stages too) and change nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import yaml

from aeon_kernel import Engine
from aeon_plugins.flow.engine import FlowEngine, TaskResult
from aeon_plugins.flow.tasks import FlowBook
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.support.previews import previewed, shown

OLD_LAYOUT = Path(__file__).parents[2] / "support" / "old_layout" / "flow_after_fork.json"
#: the flow the old layout was stored by (tests/support/old_layout/flow_after_fork.json, after its third cycle)
FAN = {
    "name": "fan",
    "parallelism": 2,
    "nodes": [
        {"id": "intake", "role": "start", "impl": "pick", "options": {"keys": ["text"]}},
        {"id": "fork", "role": "split"},
        {"id": "left", "role": "linear", "impl": "assign", "options": {"values": {"side": "left"}}},
        {"id": "right", "role": "linear", "impl": "assign", "options": {"values": {"side": "right"}}},
        {"id": "join", "role": "merge", "impl": "collect"},
        {"id": "done", "role": "exit"},
    ],
    "edges": [
        ["intake", "fork"],
        ["fork", "left"],
        ["fork", "right"],
        ["left", "join"],
        ["right", "join"],
        ["join", "done"],
    ],
}
INPUT = {"text": "hi", "noise": 1}


def fan(root: Path) -> FlowEngine:
    """The flow in ``root``, its runs kept in ``root/state.db``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "flow.yaml").write_text(yaml.safe_dump(FAN, sort_keys=False))
    (root / "aeon.toml").write_text(f'[state]\nuse = "sqlite"\npath = "{root / "state.db"}"\n')
    engine: FlowEngine = Engine.from_config_dir(root)
    return engine


def outline(result: TaskResult) -> dict[str, Any]:
    """How a flow run ended, times aside."""
    return {
        "status": result.status,
        "output": result.output,
        "tasks": result.tasks,
        "history": [
            (r["seq"], r["task"], r["node"], r["status"], r["output"], r.get("events"))
            for r in result.history
        ],
    }


def stopped_after(root: Path, cycles: int) -> tuple[str, dict[str, Any]]:
    """A run of the flow in ``root``, closed after ``cycles`` cycles: its id, and its book as the run kept it."""
    with fan(root) as engine:
        run = engine.start(INPUT)
        for _ in range(cycles):
            assert run.next() is not None
        book: dict[str, Any] = run.state.scheduler_state["book"]
        run.close()
    return run.run_id, book


def stored_book(root: Path, run_id: str) -> dict[str, Any]:
    store = SqliteStateStore(root / "state.db")
    try:
        book: dict[str, Any] = store.load(run_id).state.scheduler_state["book"]
        return book
    finally:
        store.close()


def test_a_flow_resumed_at_any_cycle_from_its_stored_book_ends_as_one_never_stopped(tmp_path: Path) -> None:
    with fan(tmp_path / "whole") as engine:
        whole = engine.run(INPUT)
    expected = outline(whole)
    assert whole.status == "success" and len({r["seq"] for r in whole.history}) == 6
    for stop in range(1, 5):  # 5 cycles: intake, fork, left and right at once, join, done
        root = tmp_path / f"stop-{stop}"
        run_id, live = stopped_after(root, stop)
        assert stored_book(root, run_id) == live
        assert FlowBook.model_validate(live).model_dump(mode="json") == live
        with fan(root) as engine:
            assert outline(engine.resume(run_id)) == expected, f"resumed after cycle {stop}"


def test_a_book_the_previous_version_stored_loads_as_it_was_and_resumes(tmp_path: Path) -> None:
    old = json.loads(OLD_LAYOUT.read_text())
    assert FlowBook.model_validate(old["book"]).model_dump(mode="json") == old["book"]
    with fan(tmp_path / "whole") as engine:
        expected = outline(engine.run(INPUT))
    root = tmp_path / "old"
    run_id, _ = stopped_after(root, 3)
    with sqlite3.connect(root / "state.db") as connection:
        connection.execute("UPDATE runs SET scheduler_state = ? WHERE run_id = ?", (json.dumps(old), run_id))
    with fan(root) as engine:
        assert outline(engine.resume(run_id)) == expected


def test_the_preview_agrees_with_every_cycle_and_changes_nothing(tmp_path: Path) -> None:
    with fan(tmp_path) as engine:
        cycles = previewed(engine.start(INPUT))
    assert shown(cycles) == [
        ("node", "t1/intake"),
        ("node", "t1/fork"),
        ("node", "t1.1/left, t1.2/right"),
        ("node", "t1/join"),
        ("node", "t1/done"),
    ]
    (intake, _), _, (both, entry), *_ = cycles
    assert both.units == ("t1.1/left", "t1.2/right") and entry.step_id == "t1.1/left t1.2/right"
    assert both.what.startswith("The router runs one stage of these 2 tasks, concurrently")
    assert intake.details["stages"] == [
        {
            "task": "t1",
            "node": "intake",
            "role": "start",
            "agent": False,
            "instruction": None,
            "input": INPUT,
            "context_choice": "none",
            "context": [],
            "context_problem": None,
        }
    ]
    assert [stage["input"] for stage in both.details["stages"]] == [{"text": "hi"}, {"text": "hi"}]


def test_a_resumed_flow_previews_its_next_stages_from_the_stored_book(tmp_path: Path) -> None:
    run_id, _ = stopped_after(tmp_path, 2)
    with fan(tmp_path) as engine:
        run, _ = engine.start_resume(run_id)
        with run:
            assert shown(previewed(run)) == [
                ("node", "t1.1/left, t1.2/right"),
                ("node", "t1/join"),
                ("node", "t1/done"),
            ]
