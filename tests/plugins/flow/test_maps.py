"""Dynamic fan-out (docs/flows.md "Maps"): a split with ``over`` makes one subtask per item of a list in its
output, each item checked against the next node's input schema, merged in item order under the parallelism limit
and the split's failure rules; ``kill -9`` inside a map resumes with each item's side effect once."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
from aeon_plugins.flow.engine import TaskResult
from aeon_plugins.flow.graph import mermaid
from aeon_plugins.flow.loader import FlowError, load_flow
from tests.plugins.flow import crash_nodes
from tests.plugins.flow.test_durable import child

CONFIG = AeonConfig().with_choice("memory", "in_memory")
NUMBER = {"type": "object", "required": ["n"], "properties": {"n": {"type": "number"}}}


def squares(parallelism: int = 4, strategy: str | None = None, merge: bool = True) -> dict[str, Any]:
    join: dict[str, Any] = {"id": "join", "role": "merge", "impl": "collect"}
    if strategy:
        join["strategy"] = strategy
    square = {
        "id": "square",
        "role": "linear",
        "impl": "call_tool",
        "tools": ["calculator"],
        "input_schema": "number",
        "options": {
            "tool": "calculator",
            "arguments": {"expression": "{/n} * {/n}"},
            "output": {"n": "{/input/n}", "square": "{/result/value}"},
        },
    }
    nodes = [{"id": "in", "role": "start"}, {"id": "each", "role": "split", "over": "/numbers"}, square]
    edges = [["in", "each"], ["each", "square"]]
    if merge:
        nodes += [join, {"id": "out", "role": "exit"}]
        edges += [["square", "join"], ["join", "out"]]
    else:
        nodes.append({"id": "out", "role": "exit"})
        edges.append(["square", "out"])
    return {"name": "squares", "parallelism": parallelism, "nodes": nodes, "edges": edges}


def write(root: Path, flow: dict[str, Any]) -> Path:
    directory = root / "flow"
    (directory / "schemas").mkdir(parents=True, exist_ok=True)
    (directory / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    (directory / "schemas" / "number.json").write_text(json.dumps(NUMBER))
    return directory


def run(tmp_path: Path, flow: dict[str, Any], value: Any) -> TaskResult:
    with Engine.from_config_dir(write(tmp_path, flow), CONFIG) as engine:
        return engine.run(value)


def test_a_map_makes_one_subtask_per_item_and_merges_them_in_item_order(tmp_path: Path) -> None:
    numbers = [{"n": n} for n in (5, 1, 4, 2, 3)]
    result = run(tmp_path, squares(parallelism=4), {"numbers": numbers})
    assert result.status == "success", result.message
    assert result.output == {"items": [{"n": n, "square": n * n} for n in (5, 1, 4, 2, 3)]}
    subtasks = [t for t in result.tasks if t["parent"] == "t1"]
    assert [t["id"] for t in subtasks] == ["t1.1", "t1.2", "t1.3", "t1.4", "t1.5"]
    assert {t["lineage"] for t in subtasks} == {"subtask"}
    # the events name the tasks by id (a map's can be thousands): where each starts is the split's route, where
    # each came from and how it ended is the merge's input
    (split,) = [r for r in result.history if r["node"] == "each"]
    (created,) = [e for e in split["events"] if e["event"] == "split_created"]
    assert created["tasks"] == ["t1.1", "t1.2", "t1.3", "t1.4", "t1.5"] and split["route"] == ["square"] * 5
    (merged,) = [e for r in result.history for e in r.get("events", []) if e["event"] == "merge"]
    (merge,) = [r for r in result.history if r["node"] == merged["node"]]
    assert merged["inputs"] == [entry["task"] for entry in merge["input"]] == created["tasks"]
    # the same run one stage at a time
    one = run(tmp_path / "one", squares(parallelism=1), {"numbers": numbers})
    strip = [
        {k: v for k, v in r.items() if k not in ("started", "duration_ms", "profile")} for r in one.history
    ]
    assert strip == [
        {k: v for k, v in r.items() if k not in ("started", "duration_ms", "profile")} for r in result.history
    ]


def test_each_item_is_checked_against_the_next_nodes_input_schema(tmp_path: Path) -> None:
    value = {"numbers": [{"n": 2}, {"name": "two"}, {"n": 3}]}
    collected = run(tmp_path / "collect", squares(), value)
    assert collected.status == "partial"
    statuses = [(e["task"], e["status"]) for e in collected.history[-2]["input"]]
    assert statuses == [("t1.1", "success"), ("t1.3", "success"), ("t1.2", "failure")]
    (failed,) = [r for r in collected.history if r["status"] == "failure"]
    assert failed["task"] == "t1.2" and "input does not match schema 'number'" in failed["error"]
    successes = run(tmp_path / "successes", squares(strategy="successes"), value)
    assert successes.status == "success"
    assert successes.output == {"items": [{"n": 2, "square": 4}, {"n": 3, "square": 9}]}


def test_an_empty_list_goes_on_to_the_merge_with_no_input(tmp_path: Path) -> None:
    result = run(tmp_path, squares(), {"numbers": []})
    assert result.status == "success" and result.output == {"items": []}
    assert [r["node"] for r in result.history] == ["in", "each", "join", "out"]
    assert [t["id"] for t in result.tasks] == ["t1"]


def test_subtasks_that_end_at_exits_settle_the_map_by_the_split_rule(tmp_path: Path) -> None:
    result = run(tmp_path, squares(merge=False), {"numbers": [{"n": 2}, {"n": 3}]})
    assert result.status == "success"
    assert [(e["task"], e["output"]) for e in result.output] == [
        ("t1.1", {"n": 2, "square": 4}),
        ("t1.2", {"n": 3, "square": 9}),
    ]
    empty = run(tmp_path / "empty", squares(merge=False), {"numbers": []})
    assert empty.status == "success" and empty.output == []


def test_a_pointer_to_no_list_fails_the_map_even_with_continue_on_failure(tmp_path: Path) -> None:
    flow = squares()
    flow["nodes"][1]["continue_on_failure"] = True
    for value, words in (
        ({"numbers": 3}, "names a int, not a list"),
        ({"n": 1}, "is not in the node's output"),
    ):
        result = run(tmp_path, flow, value)
        assert result.status == "failure"
        assert result.history[-1]["node"] == "each" and words in result.history[-1]["error"]


def test_a_map_is_drawn_with_its_edge_labelled(tmp_path: Path) -> None:
    assert '-->|"each item of /numbers"|' in mermaid(load_flow(write(tmp_path, squares())))


def edited(change: Any) -> dict[str, Any]:
    flow = squares()
    change(flow)
    return flow


BAD = {
    "over on a branch": (
        lambda f: f["nodes"][1].update(role="branch"),
        "only split nodes take over",
    ),
    "a malformed pointer": (lambda f: f["nodes"][1].update(over="numbers"), "is not a JSON pointer"),
    "two outbound edges": (
        lambda f: f["edges"].append(["each", "out"]),
        "a map (a split with over) has one outbound edge",
    ),
    "a fork before the merge": (
        lambda f: (
            f["nodes"].__setitem__(2, {"id": "square", "role": "split"}),
            f["edges"].append(["square", "out"]),
        ),
        "its subtasks reach split node 'square' before a merge",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_map_that_breaks_a_rule_is_refused(tmp_path: Path, case: str) -> None:
    change, expected = BAD[case]
    with pytest.raises(FlowError) as caught:
        load_flow(write(tmp_path, edited(change)))
    messages = [p.message for p in caught.value.problems]
    assert any(expected in m for m in messages), messages


def test_a_merge_a_map_meets_at_needs_only_its_one_edge(tmp_path: Path) -> None:
    flow = load_flow(write(tmp_path, squares()))
    assert flow.maps == {"each": "join"} and flow.predecessors["join"] == ("square",)


# --- kill -9 inside a map ---------------------------------------------------------------------------------------

CRASH_MAP = {
    "name": "crash-map",
    "parallelism": 2,
    "nodes": [
        {"id": "in", "role": "start"},
        {"id": "each", "role": "split", "over": "/tickets"},
        {"id": "work", "role": "linear", "impl": "crash.effect", "options": {"label": "work"}},
        {"id": "join", "role": "merge", "impl": "collect"},
        {"id": "out", "role": "exit"},
    ],
    "edges": [["in", "each"], ["each", "work"], ["work", "join"], ["join", "out"]],
}
TICKETS = {"tickets": [{"t": i} for i in range(5)]}
EFFECTS = [f"t1.{i}/work" for i in range(1, 6)]


def crash_root(root: Path) -> Path:
    directory = root / "flow"
    directory.mkdir(parents=True)
    (root / "files").mkdir()
    (directory / "flow.yaml").write_text(yaml.safe_dump(CRASH_MAP, sort_keys=False))
    (directory / "aeon.toml").write_text(f'[state]\nuse = "sqlite"\npath = "{root / "state.db"}"\n')
    return directory


def resumed(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, TaskResult]:
    with sqlite3.connect(root / "state.db") as db:
        (row,) = db.execute("SELECT run_id FROM runs").fetchall()
    monkeypatch.setenv(crash_nodes.DIR_ENV, str(root / "files"))
    monkeypatch.setenv(crash_nodes.BLOCK_ENV, "")
    with Engine.from_config_dir(
        root / "flow", plugins=[*crash_nodes.builtins(), crash_nodes], autoload=False
    ) as engine:
        return str(row[0]), engine.resume(str(row[0]))


def without_times(result: TaskResult) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in r.items() if k not in ("started", "duration_ms", "profile")} for r in result.history
    ]


def test_kill_at_every_stage_of_a_map_then_resume_gives_each_item_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference_root = tmp_path / "reference"
    crash_root(reference_root)
    monkeypatch.setenv(crash_nodes.DIR_ENV, str(reference_root / "files"))
    monkeypatch.setenv(crash_nodes.BLOCK_ENV, "")
    with Engine.from_config_dir(
        reference_root / "flow", plugins=[*crash_nodes.builtins(), crash_nodes], autoload=False
    ) as engine:
        reference = engine.run(TICKETS)
    assert reference.status == "success" and len(reference.output["items"]) == 5
    stages = len(reference.history)  # in, each, 5 x work, join, out
    roots = [tmp_path / f"after-{n}" for n in range(1, stages)]
    for root in roots:
        crash_root(root)
    procs = [child(root, "run", json.dumps(TICKETS), str(n)) for n, root in enumerate(roots, 1)]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, (out, err)
    for root in roots:
        run_id, result = resumed(root, monkeypatch)
        assert without_times(result) == without_times(reference), root.name
        ledger = crash_nodes.lines("ledger.txt", root / "files")
        assert sorted(ledger) == sorted(f"{run_id}:{stage}" for stage in EFFECTS), root.name


def test_kill_inside_one_items_node_runs_that_item_again_with_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash_root(tmp_path)
    proc = child(tmp_path, "run", json.dumps(TICKETS), block="t1.3/work")
    marker = tmp_path / "files" / "entered-t1.3-work"
    deadline = time.monotonic() + 30
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert marker.exists(), proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    run_id, result = resumed(tmp_path, monkeypatch)
    assert result.status == "success"
    assert result.output["items"] == [{"t": i, "trail": ["work"]} for i in range(5)]
    ledger = crash_nodes.lines("ledger.txt", tmp_path / "files")
    assert sorted(ledger) == sorted(f"{run_id}:{stage}" for stage in EFFECTS)
    executions = crash_nodes.lines("executions.txt", tmp_path / "files")
    assert executions.count(f"{run_id}:t1.3/work") == 2
