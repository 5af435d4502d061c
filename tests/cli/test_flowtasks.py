"""The flow graph's task marks read from stage records alone, whether their fork and merge events name tasks by id
(as they do now) or as ``{"task", ...}`` objects (records kept from before): a stored run stays readable."""

from __future__ import annotations

from typing import Any

from aeon_cli.inspect.flowtasks import tally

EDGES = [("in", "fan"), ("fan", "a"), ("fan", "b"), ("a", "join"), ("b", "join"), ("join", "out")]


def stages(*, old: bool) -> list[tuple[int, dict[str, Any]]]:
    """``fan`` splits t1 into t1.1 (at a) and t1.2 (at b); t1.1 parks at join, t1.2 arrives and they merge."""
    created: list[Any] = ["t1.1", "t1.2"]
    merged: list[Any] = ["t1.1", "t1.2"]
    if old:
        created = [
            {"task": "t1.1", "lineage": "subtask", "node": "a"},
            {"task": "t1.2", "lineage": "subtask", "node": "b"},
        ]
        merged = [{"task": t, "from": n, "status": "success"} for t, n in (("t1.1", "a"), ("t1.2", "b"))]
    records = [
        {"task": "t1", "node": "in", "route": ["fan"]},
        {"task": "t1", "node": "fan", "route": ["a", "b"], "events": [
            {"event": "split_created", "parent": "t1", "tasks": created}
        ]},
        {"task": "t1.1", "node": "a", "route": ["join"], "events": [
            {"event": "arrived_at_merge", "task": "t1.1", "node": "join", "from": "a"}
        ]},
        {"task": "t1.2", "node": "b", "route": ["join"], "events": [
            {"event": "arrived_at_merge", "task": "t1.2", "node": "join", "from": "b"},
            {"event": "merge", "node": "join", "task": "t1", "inputs": merged, "strategy": "collect"},
        ]},
    ]  # fmt: skip
    return list(enumerate(records))


def test_fork_and_merge_events_read_the_same_with_ids_or_objects() -> None:
    new, old = tally(stages(old=False), EDGES), tally(stages(old=True), EDGES)
    assert new == old
    assert new["fan"].spawned == ("t1.1", "t1.2") and new["fan"].marks == [("spawn", "→ 2 subtasks")]
    assert (new["join"].merged, new["join"].owners, new["join"].parked) == (("t1.1", "t1.2"), ("t1",), ())


def test_a_merge_not_reached_waits_for_the_tasks_whose_start_reaches_it() -> None:
    """Where each child started comes from the fork's route: both a and b lead to join, so 1 of 2 arrived."""
    for old in (False, True):
        records = stages(old=old)[:3]  # the run stopped before t1.2 ran
        waiting = tally(records, EDGES)["join"]
        assert (waiting.parked, waiting.expected, waiting.marks) == (
            ("t1.1",),
            2,
            [("waiting", "waiting 1/2")],
        )
