"""A reference interpreter of flows, written from ``docs/flows.md`` ("Roles", "Stages and statuses", "Forks and
merges") and nothing else: the oracle of ``test_properties.py``.

It is deliberately plain — one FIFO queue of ready tasks, one stage at a time (the doc promises the history is
the same whatever ``parallelism`` is), forks and merges resolved by the doc's sentences, each rule in one place —
so that reading it against the doc is easy. It knows only the deterministic test node ``t.step`` (see
:func:`step_output`), the kernel's ``identity`` (a node without ``impl``) and exits.

A flow is given as the plain dict written to ``flow.yaml`` (nodes, edges as ``[from, to]`` pairs or loop edges
``{from, to, max_iterations, otherwise}``, optional ``start``); :func:`interpret` returns a :class:`Outcome`.

Where the doc is silent, the reference does what the engine does, and says so (``# doc silent:``).
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import jsonpointer

#: (fewest, most) inbound and outbound edges by role: the table of docs/flows.md "Roles" (None: no limit)
ROLE_DEGREES: dict[str, tuple[tuple[int, int | None], tuple[int, int | None]]] = {
    "start": ((0, 0), (1, 1)),
    "linear": ((1, 1), (1, 1)),
    "decision": ((1, 1), (2, None)),
    "branch": ((1, 1), (2, None)),
    "split": ((1, 1), (1, None)),
    "merge": ((2, None), (1, 1)),
    "exit": ((1, None), (0, 0)),
}


class NodeFailed(Exception):
    """A stage failed (the node raised, or a decision named no edge of its own)."""


def step_output(node_id: str, value: Any, options: dict[str, Any]) -> Any:
    """What the test implementation ``t.step`` returns (the plugin in ``test_properties.py`` calls this too).

    Options: ``fail`` (raise), ``route`` and ``key`` (set ``output[key] = route``: decisions), ``routes`` (a
    list: the route of the node's n-th run on this trail is ``routes[n]``, the last one from then on: a loop's
    decision). The output is the input object with the node's id appended to ``trail``; a list (what a merge
    receives) is wrapped as ``{"trail": [id], "merged": list}``.
    """
    if options.get("fail"):
        raise NodeFailed(f"node {node_id} fails by design")
    if "routes" in options:
        trail = value.get("trail") if isinstance(value, dict) else None
        runs = trail.count(node_id) if isinstance(trail, list) else 0
        options = {**options, "route": options["routes"][min(runs, len(options["routes"]) - 1)]}
    if isinstance(value, dict):
        trail = value.get("trail")
        output = {**copy.deepcopy(value), "trail": [*(trail if isinstance(trail, list) else []), node_id]}
    else:
        output = {"trail": [node_id], "merged": copy.deepcopy(value)}
    if "route" in options:
        output[options.get("key", "route")] = options["route"]
    if "items" in options:  # what a map splits over
        output["items"] = [{"item": i, "trail": []} for i in range(options["items"])]
    return output


@dataclass
class Task:
    id: str
    parent: str | None
    lineage: str  # root | clone | subtask
    status: str = "success"
    output: Any = None
    node: str | None = None  # where it is (or ended)
    ended: bool = False
    ended_at: str | None = None
    exit: str | None = None
    merged_into: str | None = None
    forks: int = 0  # children created so far (names t1.1, t1.2, ...)
    fork: Fork | None = None  # the fork this task is waiting on
    loops: dict[tuple[str, str], int] = field(default_factory=dict)  # loop edge -> times taken
    visits: dict[str, int] = field(default_factory=dict)  # node in a loop -> times reached


@dataclass
class Fork:
    parent: str
    node: str  # the branch or split node
    kind: str  # branch | split
    children: list[str]
    #: child -> (merge node, the node it came from)
    parked: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class Outcome:
    status: str
    output: Any
    tasks: dict[str, Task]
    #: one record per stage: task, node, role, status, input, output, task_status
    history: list[dict[str, Any]]


class Reference:
    def __init__(self, flow: dict[str, Any]) -> None:
        self.nodes: dict[str, dict[str, Any]] = {node["id"]: node for node in flow["nodes"]}
        self.edges: list[tuple[str, str]] = []
        #: "a loop edge: an edge from a decision back to a node before it, with max_iterations"
        self.loops: dict[tuple[str, str], dict[str, Any]] = {}
        for edge in flow["edges"]:
            pair = (edge["from"], edge["to"]) if isinstance(edge, dict) else (edge[0], edge[1])
            self.edges.append(pair)
            if isinstance(edge, dict) and edge.get("max_iterations"):
                self.loops[pair] = edge
        #: "the nodes inside a loop: on a path from a loop edge's target back to its source that takes no loop edge"
        self.in_loop = {n for a, b in self.loops for n in self.reach(b, True) if a in self.reach(n, True)}
        starts = [node["id"] for node in flow["nodes"] if node["role"] == "start"]
        self.default_start: str = flow.get("start") or starts[0]
        self.tasks: dict[str, Task] = {}
        self.queue: deque[str] = deque()
        self.history: list[dict[str, Any]] = []

    # --- the graph -------------------------------------------------------------------------------------------

    def successors(self, node: str) -> list[str]:
        """Targets of the node's outbound edges, in declaration order."""
        return [b for a, b in self.edges if a == node]

    def inbound_index(self, merge: str, source: str) -> int:
        return [a for a, b in self.edges if b == merge].index(source)

    def role(self, node: str) -> str:
        return str(self.nodes[node]["role"])

    # --- running -----------------------------------------------------------------------------------------------

    def run(self, value: Any, start: str | None = None) -> Outcome:
        root = Task("t1", None, "root", output=copy.deepcopy(value), node=start or self.default_start)
        self.tasks[root.id] = root
        self.queue.append(root.id)
        while not root.ended:
            assert self.queue, "no task is ready but the root task has not ended"
            self.stage(self.tasks[self.queue.popleft()])
        return Outcome(root.status, root.output, self.tasks, self.history)

    def execute(self, node_id: str, value: Any, task: Task) -> Any:
        """Stage step 2-3: the node's code, and (decisions) the routing decision checked."""
        node = self.nodes[node_id]
        if node["role"] == "exit" or "impl" not in node:
            output = copy.deepcopy(value)  # an exit presents the output as it is; no impl: identity
        else:
            assert node["impl"] == "t.step", node["impl"]
            output = step_output(node_id, value, node.get("options", {}))
        if node.get("over") is not None:
            self.items(node_id, output)  # "a pointer that names no list fails the split node"
        if node["role"] == "decision":
            key = node.get("route_key", "route")
            if not isinstance(output, dict) or output.get(key) not in self.successors(node_id):
                raise NodeFailed(f"decision {node_id} names no edge of its own")
            loop = self.loops.get((node_id, output[key]))
            # "a task takes a loop edge at most max_iterations times; chosen once more, the decision goes to the
            # edge's otherwise, or fails when it names none"
            used_up = loop is not None and task.loops.get((node_id, output[key]), 0) >= loop["max_iterations"]
            if used_up and loop.get("otherwise") is None:  # type: ignore[union-attr]
                raise NodeFailed(f"decision {node_id} chose a used-up loop edge")
        return output

    def stage(self, task: Task) -> None:
        node = str(task.node)
        role = self.role(node)
        given = copy.deepcopy(task.output)
        record = {"task": task.id, "node": node, "role": role, "input": given}
        if node in self.in_loop:
            record["iteration"] = task.visits[node]
        try:
            output = self.execute(node, given, task)
        except NodeFailed:
            self.history.append({**record, "status": "failure", "output": None})
            # "with continue_on_failure: true the task goes on with the output it had before the node, and its
            # status becomes partial — except on decision nodes (there is no route to take) and exits"
            # ... "and maps (there is no list to map over)"
            continuing = role not in ("decision", "exit") and self.nodes[node].get("over") is None
            if self.nodes[node].get("continue_on_failure") and continuing:
                task.status = "partial"
                record_at = len(self.history) - 1
                self.route(task, node, role, self.successors(node))
                self.history[record_at]["task_status"] = task.status
            else:
                task.status = "failure"
                self.history[-1]["task_status"] = task.status
                self.end(task, node)
            return
        task.output = output
        self.history.append({**record, "status": "success", "output": copy.deepcopy(output)})
        record_at = len(self.history) - 1
        if role == "exit":
            # "an exit presents it as it is, or failure with always_fail"
            if self.nodes[node].get("always_fail"):
                task.status = "failure"
            task.exit = node
            self.history[record_at]["task_status"] = task.status
            self.end(task, node)
            return
        decided = [self.decide(task, node, output)] if role == "decision" else None
        self.route(task, node, role, decided or self.successors(node))
        self.history[record_at]["task_status"] = task.status

    def decide(self, task: Task, node: str, output: dict[str, Any]) -> str:
        """The edge a decision's output takes: its choice, or a used-up loop edge's otherwise; a loop edge taken
        is counted."""
        chosen = str(output[self.nodes[node].get("route_key", "route")])
        loop = self.loops.get((node, chosen))
        if loop is not None and task.loops.get((node, chosen), 0) >= loop["max_iterations"]:
            return str(loop["otherwise"])
        if loop is not None:
            task.loops[node, chosen] = task.loops.get((node, chosen), 0) + 1
        return chosen

    def items(self, node: str, output: Any) -> list[Any]:
        """ "``over`` names a list in the split node's output"."""
        try:
            items = jsonpointer.resolve_pointer(output, self.nodes[node]["over"])
        except jsonpointer.JsonPointerException:
            raise NodeFailed(f"map {node}: no list at over") from None
        if not isinstance(items, list):
            raise NodeFailed(f"map {node}: over names no list")
        return items

    def meet(self, split: str) -> str | None:
        """ "The subtasks of a map meet at the merge their path leads to" (the first merge after the split)."""
        merges, todo, seen = set(), list(self.successors(split)), set()
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                if self.role(node) == "merge":
                    merges.add(node)
                else:
                    todo.extend(self.successors(node))
        assert len(merges) <= 1, merges
        return merges.pop() if merges else None

    def route(self, task: Task, node: str, role: str, targets: list[str]) -> None:
        """Stage step 6: by the node's role."""
        if role in ("branch", "split"):
            # "the task waits; one clone (subtask) per outbound edge carries on with the node's output"; "a map:
            # one subtask per item starts at the split's one edge with the item as its value"
            kind = "clone" if role == "branch" else "subtask"
            over = self.nodes[node].get("over") is not None
            values = self.items(node, task.output) if over else [task.output] * len(targets)
            targets = targets * len(values) if over else targets
            if over and not values:
                # "An empty list creates no subtask: the task goes on to that merge with an empty list, or ends
                # with [] when there is none"
                meet = self.meet(node)
                task.output = []
                if meet is None:
                    self.end(task, node)
                else:
                    task.node = meet
                    self.queue.append(task.id)
                return
            children = []
            for target, value in zip(targets, values, strict=True):
                task.forks += 1
                child = Task(
                    f"{task.id}.{task.forks}",
                    task.id,
                    kind,
                    output=copy.deepcopy(value),
                    node=target,
                )
                self.tasks[child.id] = child
                children.append(child.id)
            task.fork = Fork(task.id, node, role, children)
            for child_id, target in zip(children, targets, strict=True):
                if not self.tasks[child_id].ended:  # a sibling that won as it arrived cancelled it
                    self.arrive(self.tasks[child_id], node, target)
            return
        (target,) = targets
        self.arrive(task, node, target)

    def arrive(self, task: Task, source: str, target: str) -> None:
        if target in self.in_loop:
            task.visits[target] = task.visits.get(target, 0) + 1
        if self.role(target) != "merge":
            task.node = target
            self.queue.append(task.id)
            return
        fork = self.fork_of(task)
        # "A task parks at a merge when the merge is where its fork meets: two or more of the fork node's edges
        # lead to it"
        if fork is not None and self.nodes[fork.node].get("over") is not None:
            fork = fork if target == self.meet(fork.node) else None
        elif fork is not None and sum(target in self.reach(t) for t in self.successors(fork.node)) < 2:
            fork = None
        if fork is None:
            # "A task that reaches a merge with no fork to wait for - the root, or a merge that joins the paths of
            # a decision inside one clone - runs the merge at once, its input a list of one"
            task.node = target
            task.output = [self.entry(task, source)]
            self.queue.append(task.id)
            return
        # "A task routed to a merge node parks there."
        task.node = target
        fork.parked[task.id] = (target, source)
        self.settle(fork, task)

    def reach(self, node: str, forward: bool = False) -> set[str]:
        """``node`` and every node a path leads to from it (``forward``: taking no loop edge)."""
        seen, todo = set(), [node]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(
                    t for t in self.successors(current) if not forward or (current, t) not in self.loops
                )
        return seen

    def fork_of(self, task: Task) -> Fork | None:
        return None if task.parent is None else self.tasks[task.parent].fork

    def entry(self, task: Task, source: str) -> dict[str, Any]:
        return {"task": task.id, "from": source, "status": task.status, "output": copy.deepcopy(task.output)}

    def end(self, task: Task, node: str) -> None:
        task.ended, task.ended_at = True, node
        fork = self.fork_of(task)
        if fork is not None:
            self.settle(fork, task)

    def settle(self, fork: Fork, child: Task) -> None:
        """When every task of the fork has parked or ended: resume the parent at the merge, or settle it."""
        if self.nodes[fork.node].get("first_success") and child.status == "success":
            self.win(fork, child)
            return
        children = [self.tasks[c] for c in fork.children]
        if not all(c.ended or c.id in fork.parked for c in children):
            return
        parent = self.tasks[fork.parent]
        parent.fork = None
        if not fork.parked:
            self.settle_by_rule(fork, parent, children)
            return
        # "When all tasks of a fork park at one merge, that merge is where they meet; a task of the same fork
        # parked at a different merge ends with failure (one fork, one merge)." doc silent: which merge is the
        # meeting point when they differ; as the engine: the merge of the first parked task in fork order.
        merge = next(fork.parked[c.id][0] for c in children if c.id in fork.parked)
        parked = [c for c in children if c.id in fork.parked and fork.parked[c.id][0] == merge]
        for child in children:
            if child.id in fork.parked and fork.parked[child.id][0] != merge:
                child.status, child.ended, child.ended_at = "failure", True, fork.parked[child.id][0]
        # "first the parked ones by the merge's inbound edge declaration order (then fork order), then — with
        # strategy: collect, the default — the ones that ended with failure (from is then the node where they
        # failed)"
        order = {c.id: i for i, c in enumerate(children)}
        if self.nodes[fork.node].get("over") is None:  # "a map's merge receives its subtasks in item order"
            parked.sort(key=lambda c: (self.inbound_index(merge, fork.parked[c.id][1]), order[c.id]))
        entries = [self.entry(c, fork.parked[c.id][1]) for c in parked]
        for child in parked:
            child.ended, child.ended_at, child.merged_into = True, merge, merge
        strategy = self.nodes[merge].get("strategy", "collect")
        if strategy == "collect":
            failed = [c for c in children if c not in parked and c.status == "failure"]
            # doc silent: the 'from' of a task failed for parking at another merge; as the engine: the node it
            # came to that merge from
            entries += [self.entry(c, fork.parked.get(c.id, ("", str(c.ended_at)))[1]) for c in failed]
            # "With collect the parent becomes partial when any of them did not succeed"
            if any(e["status"] != "success" for e in entries):
                parent.status = "partial"
        # "with successes failed tasks are left out and do not change its status"
        parent.node, parent.output = merge, entries
        self.queue.append(parent.id)

    def win(self, fork: Fork, winner: Task) -> None:
        """ "With first_success, the first clone to succeed (it ends with success, or parks at the merge where the
        branch meets) settles the branch at once: its siblings, and the tasks they wait for, are cancelled where
        they are; the parent goes on to the merge with the winner alone, or ends with its output"."""
        for sibling in fork.children:
            if sibling != winner.id:
                self.cancel(self.tasks[sibling])
        parent = self.tasks[fork.parent]
        parent.fork = None
        if winner.id in fork.parked:
            merge, source = fork.parked[winner.id]
            winner.ended, winner.ended_at, winner.merged_into = True, merge, merge
            parent.node, parent.output = merge, [self.entry(winner, source)]
            self.queue.append(parent.id)
            return
        parent.output = copy.deepcopy(winner.output)
        parent.status = "partial" if parent.status == "partial" else "success"
        self.end(parent, fork.node)

    def cancel(self, task: Task) -> None:
        if task.ended:
            return
        if task.fork is not None:
            for child in task.fork.children:
                self.cancel(self.tasks[child])
        if task.id in self.queue:
            self.queue.remove(task.id)
        task.status, task.ended, task.ended_at = "cancelled", True, task.node

    def settle_by_rule(self, fork: Fork, parent: Task, children: list[Task]) -> None:
        """'A fork whose tasks all end without a merge settles its parent by the fork's rule (the parent then
        ends too)'."""
        statuses = [c.status for c in children]
        if fork.kind == "branch":
            # "success when one clone succeeded, and the first successful clone in edge order gives the output;
            # else partial if one ended partial; else failure"; doc silent: the output then; as the engine: the
            # first partial clone's, or none
            winners = [c for c in children if c.status == "success"] or [
                c for c in children if c.status == "partial"
            ]
            status = winners[0].status if winners else "failure"
            parent.output = copy.deepcopy(winners[0].output) if winners else None
        else:
            # "success when all succeeded, failure when all failed; otherwise partial when every subtask ended
            # success or partial, or when the split node has continue_on_failure, and failure if not"
            if all(s == "success" for s in statuses):
                status = "success"
            elif all(s == "failure" for s in statuses):
                status = "failure"
            elif all(s in ("success", "partial") for s in statuses) or self.nodes[fork.node].get(
                "continue_on_failure"
            ):
                status = "partial"
            else:
                status = "failure"
            parent.output = [self.entry(c, str(c.ended_at)) for c in children]
        # doc silent: a parent already partial (it continued after a failure) whose fork settles with success;
        # as the engine: it stays partial ("success until something makes it partial or failure")
        if status == "success" and parent.status == "partial":
            status = "partial"
        parent.status = status
        self.end(parent, fork.node)


def interpret(flow: dict[str, Any], value: Any, start: str | None = None) -> Outcome:
    """Run ``flow`` (the dict of ``flow.yaml``) on ``value`` by the documented semantics."""
    return Reference(flow).run(value, start)
