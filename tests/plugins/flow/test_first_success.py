"""A branch that completes on its first success (spec 004 §2.1, §3.3; docs/flows.md "Forks and merges"): the first
clone to succeed settles the branch, the others are cancelled at their next stage boundary and recorded as
cancelled, and which clone wins does not depend on timing or on ``parallelism``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from aeon_kernel import Engine
from aeon_plugins.flow.engine import TaskResult
from aeon_plugins.flow.loader import FlowError, load_flow
from tests.plugins.flow import crash_nodes


def effect(node_id: str) -> dict[str, Any]:
    return {"id": node_id, "role": "linear", "impl": "crash.effect", "options": {"label": node_id}}


def race(parallelism: int, merge: bool = False) -> dict[str, Any]:
    """Three clones: ``slow`` takes three stages, ``quick`` one, ``idle`` one; they end at ``done`` (or merge)."""
    end = "join" if merge else "done"
    nodes = [
        {"id": "in", "role": "start"},
        {"id": "try", "role": "branch", "first_success": True},
        effect("slow1"),
        effect("slow2"),
        effect("slow3"),
        effect("quick"),
        effect("idle"),
        {"id": "done", "role": "exit"},
    ]
    if merge:
        nodes.append({"id": "join", "role": "merge", "impl": "collect"})
    edges = [["in", "try"], ["try", "slow1"], ["try", "quick"], ["try", "idle"], ["slow1", "slow2"]]
    edges += [["slow2", "slow3"], ["slow3", end], ["quick", end], ["idle", end]]
    if merge:
        edges.append(["join", "done"])
    return {"name": "race", "parallelism": parallelism, "nodes": nodes, "edges": edges}


def run(root: Path, flow: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> TaskResult:
    (root / "flow").mkdir(parents=True)
    (root / "files").mkdir()
    (root / "flow" / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    monkeypatch.setenv(crash_nodes.DIR_ENV, str(root / "files"))
    monkeypatch.setenv(crash_nodes.BLOCK_ENV, "")
    plugins = [*crash_nodes.builtins(), crash_nodes]
    with Engine.from_config_dir(root / "flow", plugins=plugins, autoload=False) as engine:
        return engine.run({"ticket": "x"})


def statuses(result: TaskResult) -> dict[str, tuple[str, str | None]]:
    return {t["id"]: (t["status"], t["ended_at"]) for t in result.tasks}


def test_the_first_clone_to_succeed_wins_and_the_others_are_cancelled_where_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(tmp_path, race(parallelism=1), monkeypatch)
    assert result.status == "success" and result.output["trail"] == ["quick"], result.message
    assert statuses(result) == {
        "t1": ("success", "try"),
        "t1.1": ("cancelled", "slow3"),  # it had run slow1 and slow2
        "t1.2": ("success", "done"),
        "t1.3": ("cancelled", "done"),  # it had run idle, and was about to present it
    }
    assert next(t for t in result.tasks if t["id"] == "t1.1")["error"] == "cancelled: t1.2 won the branch"
    events = [e for r in result.history for e in r.get("events", [])]
    assert {"event": "branch_won", "task": "t1", "winner": "t1.2"} in events
    assert [e["task"] for e in events if e["event"] == "task_cancelled"] == ["t1.1", "t1.3"]
    # a cancelled clone's later nodes never run
    ledger = [line.split(":", 1)[1] for line in crash_nodes.lines("ledger.txt", tmp_path / "files")]
    assert ledger == ["t1.1/slow1", "t1.2/quick", "t1.3/idle", "t1.1/slow2"]


def test_the_winner_and_the_result_do_not_depend_on_parallelism(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = run(tmp_path / "one", race(parallelism=1), monkeypatch)
    four = run(tmp_path / "four", race(parallelism=4), monkeypatch)
    assert (four.status, four.output, four.tasks) == (one.status, one.output, one.tasks)
    # what ran beside the winning stage in its cycle is recorded as cancelled, without a place in the sequence
    cancelled = [r for r in four.history if r["status"] == "cancelled"]
    assert [(r["task"], r["node"], r["seq"]) for r in cancelled] == [("t1.3", "done", None)]

    def strip(r: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in r.items() if k not in ("started", "duration_ms", "profile")}

    assert [strip(r) for r in four.history if r["status"] != "cancelled"] == [strip(r) for r in one.history]


def test_a_winner_that_reaches_the_merge_goes_on_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(tmp_path, race(parallelism=1, merge=True), monkeypatch)
    assert result.status == "success"
    (merge,) = [r for r in result.history if r["node"] == "join"]
    assert [(e["task"], e["from"]) for e in merge["input"]] == [("t1.2", "quick")]
    assert statuses(result)["t1.2"] == ("success", "join")
    assert statuses(result)["t1.3"] == ("cancelled", "idle")  # it never ran


def test_with_no_success_the_branch_settles_by_its_usual_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = {
        "name": "all-fail",
        "nodes": [
            {"id": "in", "role": "start"},
            {"id": "try", "role": "branch", "first_success": True},
            effect("a"),
            {"id": "no", "role": "exit", "always_fail": True},
            {"id": "never", "role": "exit", "always_fail": True},
        ],
        "edges": [["in", "try"], ["try", "a"], ["try", "never"], ["a", "no"]],
    }
    result = run(tmp_path, flow, monkeypatch)
    assert result.status == "failure"
    assert {t["id"]: t["status"] for t in result.tasks} == {
        "t1": "failure",
        "t1.1": "failure",
        "t1.2": "failure",
    }


def test_first_success_is_for_branches(tmp_path: Path) -> None:
    flow = race(parallelism=1)
    flow["nodes"][1] = {"id": "try", "role": "split", "first_success": True}
    (tmp_path / "flow").mkdir()
    (tmp_path / "flow" / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    with pytest.raises(FlowError, match="only branch nodes take first_success"):
        load_flow(tmp_path / "flow")
