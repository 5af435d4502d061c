"""The router's book of tasks (spec 004 §2.1, §3.1, §3.3-3.5, §7): where each task is, and what a finished stage
changes. Pure bookkeeping, no I/O: :class:`~aeon_plugins.flow.router.FlowScheduler` runs the stages and hands
each outcome to :meth:`TaskBook.advance`.

The book is the router's memo, :class:`FlowBook` (kept in the run's state and stored as JSON in its
``scheduler_state``, so a crashed run resumes from it); each task in it a :class:`FlowTask`. Tasks are
named by lineage — the root is ``t1``, its clones or subtasks ``t1.1``, ``t1.2``, ... in edge declaration
order — and ready tasks wait in one FIFO queue, so a run takes the same stages in the same order whether they run
one at a time or several at once.

Routing, by the role of the node a task just finished (the DAG and its bounded loop edges are the only routing
structure):

- ``start``, ``linear``, ``merge``: on to the one successor.
- ``decision``: on to the successor the output names (``route_key``, default ``route``); any other value fails
  the node. A loop edge is counted per task; used up, its ``otherwise`` is taken (decision 0019).
- ``branch`` / ``split``: the task waits, and one clone / subtask per outbound edge starts at that edge's target
  with the node's output — a map (``over``) makes one per item of its list instead. A ``first_success`` branch
  settles at its first successful clone and cancels the others (decision 0020).
- ``exit``: the task ends with the status it already has, or ``failure`` when the exit says ``always_fail``.

A task routed to a merge node parks there. When every task of its fork (its parent's children) has parked or
ended, the parent resumes at the merge with the list of their outputs, in edge declaration order (the merge's
inbound edges, then the order the fork created them) — never completion order. A fork whose tasks all ended
without merging settles its parent by the fork's rule: a branch succeeds when one clone succeeded (the first, in
declaration order, gives the output), a split when all subtasks did (``partial`` when some failed and the split
node has ``continue_on_failure``). A task that arrives at a merge with no fork to wait for (the root after a
decision) runs the merge at once with its own output alone.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from aeon_kernel import SchedulerMemo
from aeon_kernel.errors import ValidationError
from aeon_plugins.flow.graph import Flow
from aeon_plugins.flow.templates import Template

#: ``cancelled``: a clone whose sibling won a ``first_success`` branch
TaskStatus = Literal["success", "failure", "partial", "cancelled"]
ROOT: Final = "t1"


class FlowTask(TypedDict):
    """One task of a flow run, as the book keeps it (JSON; the keys after ``error`` appear once they apply)."""

    id: str
    #: the task it was forked from (None: the root)
    parent: str | None
    lineage: Literal["root", "clone", "subtask"]
    #: the node it is at: ready to run, parked at (a merge), or where it ended
    node: str
    state: Literal["ready", "waiting", "parked", "done"]
    status: TaskStatus
    output: Any
    #: the tasks of its latest fork
    children: list[str]
    error: str | None
    #: how many children it has forked in all (the next fork numbers on from here)
    spawned: NotRequired[int]
    #: children of its latest fork not yet parked or ended
    pending: NotRequired[int]
    #: parked at a merge: the node it came from
    arrived_from: NotRequired[str]
    ended_at: NotRequired[str]
    #: the exit node it ended at (None: it ended elsewhere)
    exit: NotRequired[str | None]
    merged_into: NotRequired[str]
    #: how many times it took each loop edge (``"check -> revise"``: 2)
    loops: NotRequired[dict[str, int]]
    #: how many times it reached each node inside a loop (its stage there is that iteration)
    visits: NotRequired[dict[str, int]]


class FlowBook(SchedulerMemo):
    """The router's memo: every task of the run, the FIFO queue of ready ones, and the stage counter."""

    #: stored as ``scheduler_state["book"]``, as every version has stored it
    key: ClassVar[str] = "book"

    #: the flow's name
    flow: str
    tasks: dict[str, FlowTask] = Field(default_factory=dict)
    queue: list[str] = Field(default_factory=list)
    #: the last history record's number
    seq: int = 0


class TaskBook:
    """The tasks of one flow run, kept in (and read back from) ``state``, the run's :class:`FlowBook`."""

    def __init__(self, flow: Flow, state: FlowBook) -> None:
        self.flow = flow
        self.state = state
        self.tasks = state.tasks
        self.queue = state.queue

    # --- reading ---------------------------------------------------------------------------------------------

    @property
    def root(self) -> FlowTask:
        return self.tasks[ROOT]

    @property
    def finished(self) -> bool:
        return bool(self.tasks) and self.root["state"] == "done"

    def next_seq(self) -> int:
        self.state.seq += 1
        return self.state.seq

    def lineage(self, task_id: str) -> list[str]:
        """The task and its ancestors, nearest first."""
        chain = [task_id]
        while (parent := self.tasks[chain[-1]]["parent"]) is not None:
            chain.append(parent)
        return chain

    # --- changes ---------------------------------------------------------------------------------------------

    def begin(self, start: str, value: Any) -> None:
        """The root task, ready at ``start`` with the run's input."""
        self.tasks[ROOT] = _task(ROOT, None, "root", start, value)
        self.queue.append(ROOT)

    def claim(self, limit: int) -> list[str]:
        """The first ``limit`` ready tasks, taken off the queue."""
        claimed = self.queue[:limit]
        del self.queue[:limit]
        return claimed

    def unclaim(self, task_ids: list[str]) -> None:
        """Put claimed tasks back at the head of the queue, in their order (a stage waiting for approval)."""
        self.queue[:0] = task_ids

    def advance(
        self,
        task_id: str,
        succeeded: bool,
        output: Any,
        route: list[str],
        error: str | None,
        *,
        partial: str | None = None,
    ) -> list[dict[str, Any]]:
        """A stage of ``task_id`` ended; move the task on and return the routing events, for the history.

        ``route`` is where the node's role sends the task (:func:`route_of`); ``output`` is the node's validated
        output (ignored when it failed).
        """
        task = self.tasks[task_id]
        node = self.flow.nodes[task["node"]]
        events: list[dict[str, Any]] = []
        if succeeded:
            task["output"] = output
            if partial is not None:  # the node said its output is incomplete (e.g. its tool's was)
                task["status"] = "partial"
                events.append({"event": "partial", "task": task_id, "node": node.id, "reason": partial})
        else:
            task["error"] = error
            if not node.continue_on_failure or node.role in ("decision", "exit") or node.over:
                self._end(task, "failure", events)
                return events
            task["status"] = "partial"  # spec 004 §3.5: it goes on with the output it had
            events.append({"event": "continued_after_failure", "task": task_id, "node": node.id})
        if node.role == "exit":
            status: TaskStatus = "failure" if node.always_fail else task["status"]
            self._end(task, status, events, exit_node=node.id)
        elif node.role in ("branch", "split"):
            task["state"] = "waiting"
            lineage: Literal["clone", "subtask"] = "clone" if node.role == "branch" else "subtask"
            spawned = task.get("spawned", 0)  # a task that forks again numbers its new children on
            task["children"] = []
            values = map_items(node.over, task["output"]) if node.over else [task["output"]] * len(route)
            for i, (target, value) in enumerate(zip(route, values, strict=True), start=spawned + 1):
                child = _task(f"{task_id}.{i}", task_id, lineage, target, value)
                self.tasks[child["id"]] = child
                task["children"].append(child["id"])
            task["spawned"] = spawned + len(route)
            task["pending"] = len(route)  # children not yet parked or ended: the fork settles at 0
            # the i-th child starts at the stage's route[i]: the event names only the ids (a map's are thousands)
            events.append(
                {"event": f"{node.role}_created", "parent": task_id, "tasks": list(task["children"])}
            )
            for child_id in task["children"]:
                child = self.tasks[child_id]
                if child["state"] != "done":  # not cancelled by a sibling that won as it arrived
                    self._arrive(child, child["node"], node.id, events)
            if not route:  # a map over no items: on to where its subtasks would meet, with none
                meet = self.flow.maps.get(node.id)
                if meet is not None:
                    self._merge(task, meet, [], [], events)
                else:
                    task["output"] = []
                    self._end(task, task["status"], events)
        else:
            if node.role == "decision":
                self._count_loop(task, node.id, output.get(node.decides_by), route[0], events)
            self._arrive(task, route[0], node.id, events)
        return events

    def abandon(self, task_id: str, error: str) -> list[dict[str, Any]]:
        """A stage that could not finish (the cycle raised): its task fails."""
        task = self.tasks[task_id]
        task["error"] = error
        events: list[dict[str, Any]] = []
        self._end(task, "failure", events)
        return events

    # --- internals -------------------------------------------------------------------------------------------

    def _count_loop(
        self, task: FlowTask, decision: str, chosen: Any, taken: str, events: list[dict[str, Any]]
    ) -> None:
        """A decision routed ``task`` along ``taken``: count a loop edge, and say when a used-up one was replaced."""
        if taken != chosen:  # the chosen loop edge was used up: its otherwise was taken
            edge = loop_key(decision, str(chosen))
            events.append({"event": "loop_exhausted", "task": task["id"], "edge": edge, "instead": taken})
        loop = self.flow.loops.get((decision, taken))
        if loop is not None:
            counts, edge = task.setdefault("loops", {}), loop_key(decision, taken)
            n = counts[edge] = counts.get(edge, 0) + 1
            events.append(
                {"event": "loop", "task": task["id"], "edge": edge, "iteration": n, "of": loop.max_iterations}
            )

    def _arrive(self, task: FlowTask, target: str, source: str, events: list[dict[str, Any]]) -> None:
        """``task`` reaches ``target`` by the edge from ``source``: ready to run it, or parked at a merge."""
        task["node"] = target
        if target in self.flow.in_loop:
            visits = task.setdefault("visits", {})
            visits[target] = visits.get(target, 0) + 1
        if self.flow.nodes[target].role != "merge":
            task["state"] = "ready"
            self.queue.append(task["id"])
            return
        task["state"] = "parked"
        task["arrived_from"] = source
        events.append({"event": "arrived_at_merge", "task": task["id"], "node": target, "from": source})
        parent = self.tasks[task["parent"]] if task["parent"] is not None else None
        if parent is not None and self.flow.joins(parent["node"], target):
            self._settle(parent, events, task)
        else:  # the merge joins the paths of a decision: nothing to wait for
            self._merge(task, target, [task], [], events)

    def _end(
        self,
        task: FlowTask,
        status: TaskStatus,
        events: list[dict[str, Any]],
        exit_node: str | None = None,
    ) -> None:
        task["state"], task["status"] = "done", status
        task["ended_at"], task["exit"] = task["node"], exit_node
        events.append({"event": "task_ended", "task": task["id"], "status": status, "node": task["node"]})
        if task["parent"] is not None:
            self._settle(self.tasks[task["parent"]], events, task)

    def _settle(self, parent: FlowTask, events: list[dict[str, Any]], child: FlowTask) -> None:
        """``child`` of ``parent`` parked or ended: merge or settle the fork once all have (or a first success)."""
        if child["status"] == "success" and self.flow.nodes[parent["node"]].first_success:
            self._win(parent, child, events)
            return
        parent["pending"] -= 1
        if parent["pending"] > 0:
            return
        children = [self.tasks[child_id] for child_id in parent["children"]]
        parked = [c for c in children if c["state"] == "parked"]
        if parked:
            merge = parked[0]["node"]
            strays = [c for c in parked if c["node"] != merge]
            for stray in strays:  # one fork, one merge: a task parked elsewhere cannot be merged
                stray["error"] = f"parked at merge {stray['node']!r} while its siblings merge at {merge!r}"
                stray["state"], stray["status"], stray["ended_at"] = "done", "failure", stray["node"]
                events.append(
                    {"event": "task_ended", "task": stray["id"], "status": "failure", "node": stray["node"]}
                )
            parked = [c for c in parked if c["node"] == merge]
            failed = [
                c for c in children if c["state"] == "done" and c["status"] == "failure" and c not in strays
            ]
            self._merge(parent, merge, parked, failed, events)
            return
        fork = self.flow.nodes[parent["node"]]
        statuses = [c["status"] for c in children]
        if fork.role == "branch":
            winner = next((c for c in children if c["status"] == "success"), None) or next(
                (c for c in children if c["status"] == "partial"), None
            )
            parent["output"] = winner["output"] if winner else None
            status: TaskStatus = winner["status"] if winner else "failure"
        else:
            parent["output"] = [_entry(c) for c in children]
            if all(s == "success" for s in statuses):
                status = "success"
            elif all(s == "failure" for s in statuses):
                status = "failure"
            elif all(s != "failure" for s in statuses) or fork.continue_on_failure:
                status = "partial"
            else:
                status = "failure"
        if status == "success" and parent["status"] == "partial":
            status = "partial"
        parent["node"] = fork.id
        self._end(parent, status, events)

    def _win(self, parent: FlowTask, winner: FlowTask, events: list[dict[str, Any]]) -> None:
        """``winner`` settles its ``first_success`` branch: its siblings are cancelled, the parent goes on with it."""
        for sibling in parent["children"]:
            if sibling != winner["id"]:
                self._cancel(self.tasks[sibling], winner["id"], events)
        events.append({"event": "branch_won", "task": parent["id"], "winner": winner["id"]})
        parent["pending"] = 0
        if winner["state"] == "parked":
            self._merge(parent, winner["node"], [winner], [], events)
            return
        parent["output"] = winner["output"]
        self._end(parent, "partial" if parent["status"] == "partial" else "success", events)

    def _cancel(self, task: FlowTask, winner: str, events: list[dict[str, Any]]) -> None:
        """A task that lost a branch ends where it is, and so do the tasks it is waiting for."""
        if task["state"] == "done":
            return
        for child in task["children"]:
            self._cancel(self.tasks[child], winner, events)
        if task["id"] in self.queue:  # a claimed one is running: the router records its stage as cancelled
            self.queue.remove(task["id"])
        task["state"], task["status"], task["ended_at"] = "done", "cancelled", task["node"]
        task["error"] = f"cancelled: {winner} won the branch"
        events.append({"event": "task_cancelled", "task": task["id"], "node": task["node"], "winner": winner})

    def _merge(
        self,
        owner: FlowTask,
        merge: str,
        parked: list[FlowTask],
        failed: list[FlowTask],
        events: list[dict[str, Any]],
    ) -> None:
        """``owner`` resumes at ``merge`` with its inputs in declaration order (inbound edge, then fork order)."""
        node = self.flow.nodes[merge]
        inbound = self.flow.inbound_order(merge)
        if owner["node"] in self.flow.maps:  # a map's subtasks in item order, whatever path they took
            ordered = parked
        else:
            ordered = sorted(parked, key=lambda c: inbound[c["arrived_from"]])  # stable: fork order within
        strategy = node.strategy or "collect"
        entries = [_entry(c) for c in ordered]
        if strategy == "collect":
            entries += [_entry(c) for c in failed]
        for child in parked:
            if child is not owner:
                child["state"], child["merged_into"] = "done", merge
                child["ended_at"] = merge
        status = owner["status"]
        if strategy == "collect" and any(c["status"] != "success" for c in [*parked, *failed]):
            status = "partial"
        owner["state"], owner["node"], owner["output"], owner["status"] = "ready", merge, entries, status
        owner.pop("arrived_from", None)  # it goes on: where it ends is what counts from now
        self.queue.append(owner["id"])
        events.append(
            {
                "event": "merge",
                "node": merge,
                "task": owner["id"],
                "inputs": [e["task"] for e in entries],  # where each came from, and how: the merge's input
                "strategy": strategy,
            }
        )


def route_of(flow: Flow, task: FlowTask, node_id: str, output: Any) -> tuple[list[str], str | None]:
    """Where the role of ``node_id`` sends ``task`` whose output is ``output``; an error for an invalid decision."""
    node = flow.nodes[node_id]
    targets = list(flow.successors[node_id])
    if node.role == "decision":
        key = node.decides_by
        chosen = output.get(key) if isinstance(output, dict) else None
        if chosen not in targets:
            return [], (
                f"decision {node_id!r} chose {chosen!r} (output key {key!r}); it must be one of its edges: {targets}"
            )
        if chosen in exhausted(flow, task, node_id):
            loop = flow.loops[node_id, chosen]
            if loop.otherwise is None:
                return [], (
                    f"decision {node_id!r} chose {chosen!r} again, but the loop edge {loop_key(node_id, chosen)} "
                    f"allows {loop.max_iterations} iterations; give the edge `otherwise: <node>` to go on there"
                )
            return [loop.otherwise], None
        return [chosen], None
    if node.over is not None:
        try:
            return targets * len(map_items(node.over, output)), None
        except ValidationError as exc:
            return [], f"map {node_id!r}: {exc}"
    return targets, None


#: the most subtasks one map may create
MAX_ITEMS: Final = 100_000


def map_items(pointer: str, output: Any) -> list[Any]:
    """The list a map's ``over`` points to in its node's output; ``ValidationError`` saying why there is none."""
    items = Template(f"{{{pointer}}}", "over", of="the node's output").fill(output)
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        got = f"{len(items):,} items" if isinstance(items, list) else f"a {type(items).__name__}, not a list"
        raise ValidationError(f"over {pointer!r} names {got}; a map takes a list of at most {MAX_ITEMS:,}")
    return items


def exhausted(flow: Flow, task: FlowTask, decision: str) -> set[str]:
    """The targets of ``decision``'s loop edges that ``task`` has taken as often as they allow."""
    counts = task.get("loops")
    if not counts:
        return set()
    return {
        target
        for target in flow.successors[decision]
        if (loop := flow.loops.get((decision, target))) is not None
        and counts.get(loop_key(decision, target), 0) >= (loop.max_iterations or 0)
    }


def loop_key(source: str, target: str) -> str:
    """How the book names a loop edge."""
    return f"{source} -> {target}"


def _task(
    task_id: str, parent: str | None, lineage: Literal["root", "clone", "subtask"], node: str, output: Any
) -> FlowTask:
    return {
        "id": task_id,
        "parent": parent,
        "lineage": lineage,
        "node": node,
        "state": "ready",
        "status": "success",
        "output": output,
        "children": [],
        "error": None,
    }


def _entry(task: FlowTask) -> dict[str, Any]:
    """One input of a merge (or of a split's result): which task, from where, how it ended, its output."""
    return {
        "task": task["id"],
        "from": task.get("arrived_from") or task.get("ended_at"),
        "status": task["status"],
        "output": task["output"],
    }
