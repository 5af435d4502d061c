"""What a flow run's tasks did at each node, read from its stage records' routing events, for the graph's marks.

A node shows how many distinct tasks ran it (several: clones or subtasks came to it), what its forks spawned, and,
for a merge, what it merged — or, where the run ended (or is paused) before the merge, how many of its inputs had
arrived. The events are the router's (:meth:`aeon_plugins.flow.tasks.TaskBook.advance`): ``branch_created`` /
``split_created`` on the fork's stage, ``arrived_at_merge`` and ``merge`` on the stage whose routing caused them —
which is not always a stage of the merge node (the last sibling's exit can trigger a merge), so an event's own
``node`` is what counts. Task ids are lineages (``t1``, its children ``t1.1``, ``t1.2``, ...). Everything here is
record data, never trusted: it is only counted and shown as text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

#: task ids listed in a tooltip before "and N more" (a split may spawn hundreds)
LISTED: Final = 24
#: shadow boxes behind a node several tasks ran
STACK: Final = 2


@dataclass(frozen=True)
class Tally:
    """One node's tasks: who ran it, what it spawned, what it merged or waits for."""

    #: distinct tasks that ran a stage of the node, in the order they first did
    ran: tuple[str, ...] = ()
    #: the lineage of the tasks its forks created: ``clone`` (branch) or ``subtask`` (split)
    lineage: str | None = None
    spawned: tuple[str, ...] = ()
    #: merges done here, and their inputs (task ids, in the merge's order)
    merges: int = 0
    merged: tuple[str, ...] = ()
    #: the tasks that own (run on from) those merges
    owners: tuple[str, ...] = ()
    #: tasks parked here whose merge had not happened when the record ends
    parked: tuple[str, ...] = ()
    #: the inputs those pending merges would get: the parked tasks and their siblings that can still arrive
    expected: int = 0

    @property
    def stack(self) -> int:
        """Shadow boxes to draw behind the node: one per extra task, at most :data:`STACK`."""
        return min(len(self.ran) - 1, STACK) if self.ran else 0

    @property
    def marks(self) -> list[tuple[str, str]]:
        """(css class, text) of each mark on the node's third line, e.g. ``3 tasks``, ``→ 2 clones``."""
        marks = []
        if len(self.ran) > 1:
            marks.append(("tasks", f"{len(self.ran)} tasks"))
        if self.spawned:
            marks.append(("spawn", f"→ {_count(len(self.spawned), self.lineage or 'task')}"))
        if self.merges:
            merges = f"{self.merges} merges, " if self.merges > 1 else "merged "
            marks.append(("merged", merges + _count(len(self.merged), "input")))
        if self.parked:
            marks.append(("waiting", f"waiting {len(self.parked)}/{max(self.expected, len(self.parked))}"))
        return marks

    @property
    def details(self) -> list[str]:
        """The tooltip's lines: the task ids behind each mark."""
        lines = []
        if self.ran:
            lines.append(f"ran by {_listed(self.ran)}")
        if self.spawned:
            lines.append(
                f"spawned {_count(len(self.spawned), self.lineage or 'task')}: {_listed(self.spawned)}"
            )
        if self.merges:
            lines.append(f"merged {_listed(self.merged)} into {_listed(self.owners)}")
        if self.parked:
            lines.append(
                f"waiting: {_listed(self.parked)} arrived, {max(self.expected, len(self.parked))} expected"
            )
        return lines


def tally(
    stages: Iterable[tuple[int, Mapping[str, Any]]], edges: Sequence[tuple[str, str]]
) -> dict[str, Tally]:
    """Each node's :class:`Tally` from the run's stages (cycle index, stage record); ``edges`` (the flow's, else
    those the run took) tell which of a fork's tasks can still reach a merge they have not arrived at."""
    ran: dict[str, list[str]] = {}
    spawned: dict[str, list[str]] = {}
    lineage: dict[str, str] = {}
    #: the latest fork of each parent task: the nodes its children started at
    forks: dict[str, dict[str, str]] = {}
    merges: dict[str, int] = {}
    merged: dict[str, list[str]] = {}
    owners: dict[str, list[str]] = {}
    parked: dict[str, list[str]] = {}
    for _, stage in stages:
        node, task = str(stage.get("node")), str(stage.get("task"))
        if task not in ran.setdefault(node, []):
            ran[node].append(task)
        for event in stage.get("events") or ():
            if not isinstance(event, Mapping):
                continue
            kind = event.get("event")
            if kind in ("branch_created", "split_created"):
                pairs = zip(event.get("tasks") or (), stage.get("route") or (), strict=False)  # i at route[i]
                children = {_task_id(task): str(start) for task, start in pairs}
                spawned.setdefault(node, []).extend(children)
                lineage[node] = "clone" if kind == "branch_created" else "subtask"
                forks[str(event.get("parent"))] = children
            elif kind == "arrived_at_merge":
                parked.setdefault(str(event.get("node")), []).append(str(event.get("task")))
            elif kind == "merge":
                where = str(event.get("node"))
                inputs = [_task_id(i) for i in event.get("inputs") or ()]
                merges[where] = merges.get(where, 0) + 1
                merged.setdefault(where, []).extend(inputs)
                owners.setdefault(where, []).append(str(event.get("task")))
                parked[where] = [t for t in parked.get(where, []) if t not in inputs]
            elif kind == "task_ended":  # a task parked at another merge than its siblings': failed there
                stray, where = str(event.get("task")), str(event.get("node"))
                if stray in parked.get(where, ()):
                    parked[where].remove(stray)
    reach = _reachable(edges)
    tallies = {}
    for node in {*ran, *spawned, *merges, *parked}:
        waiting = parked.get(node, [])
        tallies[node] = Tally(
            ran=tuple(ran.get(node, ())),
            lineage=lineage.get(node),
            spawned=tuple(spawned.get(node, ())),
            merges=merges.get(node, 0),
            merged=tuple(merged.get(node, ())),
            owners=tuple(dict.fromkeys(owners.get(node, ()))),
            parked=tuple(waiting),
            expected=_expected(node, waiting, forks, reach),
        )
    return tallies


def _expected(
    merge: str, parked: Sequence[str], forks: Mapping[str, Mapping[str, str]], reach: Mapping[str, set[str]]
) -> int:
    """How many inputs the pending merges at ``merge`` would get: per fork, its tasks that started where the merge
    can be reached (at least those that already arrived)."""
    expected = 0
    by_parent: dict[str, int] = {}
    for task in parked:
        parent = task.rpartition(".")[0]
        by_parent[parent] = by_parent.get(parent, 0) + 1
    for parent, arrived in by_parent.items():
        children = forks.get(parent, {})
        can = sum(1 for start in children.values() if start == merge or merge in reach.get(start, ()))
        expected += max(arrived, can)
    return expected


def _task_id(item: Any) -> str:
    """A task id as events name it (records written before stop 41 named ``{"task": id, ...}``)."""
    return str(item.get("task")) if isinstance(item, Mapping) else str(item)


def _reachable(edges: Sequence[tuple[str, str]]) -> dict[str, set[str]]:
    """Every node reachable from each node (the small DAGs of flows: a walk from each is cheap enough)."""
    successors: dict[str, list[str]] = {}
    for source, target in edges:
        successors.setdefault(source, []).append(target)
    reach: dict[str, set[str]] = {}
    for start in successors:
        seen: set[str] = set()
        todo = list(successors[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(successors.get(node, ()))
        reach[start] = seen
    return reach


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _listed(tasks: Sequence[str]) -> str:
    shown = ", ".join(tasks[:LISTED])
    return shown if len(tasks) <= LISTED else f"{shown} and {len(tasks) - LISTED} more"
