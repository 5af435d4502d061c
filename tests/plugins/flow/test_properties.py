"""Property-based tests of the flow engine (spec 004) against ``tests/plugins/flow/reference.py``.

Hypothesis builds valid DAGs from a recursive grammar (a block is a chain of linear nodes and forks; a fork — a
decision, branch or split — has sub-blocks that each end at exits or rejoin at one merge), runs them through
``Engine.from_config_dir(...).run(...)`` and compares status, output, tasks, the merges' inputs and the history
with the reference interpreter; the same flow with ``parallelism: 1`` and ``4`` must give the same run. It also
breaks valid DAGs in one way each (a cycle, an unreachable node, a degree rule, an agent start, ...) and checks
that ``load_flow`` refuses them naming the node to blame.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import aeon_plugins.in_memory
import aeon_plugins.plan_finished
import aeon_plugins.schema_validator
import aeon_plugins.supervisor
from aeon_kernel import Engine, hookimpl
from aeon_kernel.config import AeonConfig
from aeon_plugins.flow.loader import FlowError, load_flow
from tests.plugins.flow.reference import ROLE_DEGREES, NodeFailed, interpret, step_output

MAX_NODES = 30
SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

# --- the test's node code -----------------------------------------------------------------------------------


def step(
    fail: bool = False,
    route: str | None = None,
    key: str = "route",
    routes: list[str] | None = None,
    items: int | None = None,
) -> Any:
    """``impl: t.step``: the reference's :func:`step_output`, raising when ``fail``."""
    options: dict[str, Any] = {"fail": fail, "key": key}
    if route is not None:
        options["route"] = route
    if routes is not None:
        options["routes"] = routes
    if items is not None:
        options["items"] = items

    def run(value: Any, context: Any) -> Any:
        try:
            return step_output(context.node.id, value, options)
        except NodeFailed as exc:
            raise RuntimeError(str(exc)) from None

    return run


class StepNodes:
    @hookimpl
    def aeon_register_nodes(self, register: Any) -> None:
        register("t.step", step)


PLUGINS = [
    StepNodes(),
    aeon_plugins.in_memory,
    aeon_plugins.schema_validator,
    aeon_plugins.supervisor,
    aeon_plugins.plan_finished,
]
CONFIG = AeonConfig().with_choice("memory", "in_memory")

# --- generating valid flows -----------------------------------------------------------------------------------


@dataclass
class Graph:
    """A flow under construction: nodes (``id`` -> role) in creation order and edges."""

    roles: dict[str, str] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)
    exits: list[str] = field(default_factory=list)
    #: loop edges (from a decision back to the linear node before it) and their max_iterations
    loops: dict[tuple[str, str], int] = field(default_factory=dict)
    #: maps: splits with ``over``
    maps: set[str] = field(default_factory=set)

    def add(self, role: str) -> str:
        prefix = {"start": "s", "linear": "l", "decision": "d", "branch": "b", "split": "p", "merge": "m"}
        node_id = f"{prefix.get(role, 'x')}{len(self.roles)}"
        self.roles[node_id] = role
        if role == "exit":
            self.exits.append(node_id)
        return node_id

    def successors(self, node: str) -> list[str]:
        return [b for a, b in self.edges if a == node]

    def predecessors(self, node: str) -> list[str]:
        return [a for a, b in self.edges if b == node]


class Builder:
    """The recursive grammar; every flow it builds is valid by construction."""

    def __init__(self, draw: Any, budget: int, refork: bool, dynamic: bool = True) -> None:
        self.draw, self.budget, self.refork, self.graph = draw, budget, refork, Graph()
        self.dynamic = dynamic  # loops and maps

    def room(self, nodes: int) -> bool:
        return len(self.graph.roles) + nodes <= self.budget

    def terminate(self, pred: str) -> None:
        """An edge from ``pred`` to an exit: a new one, or one already there."""
        g = self.graph
        reusable = [x for x in g.exits if x not in g.successors(pred)]
        if reusable and (not self.room(1) or self.draw(st.booleans())):
            target = self.draw(st.sampled_from(reusable))
        else:
            target = g.add("exit")
        g.edges.append((pred, target))

    def chain(self, pred: str, depth: int, may_stay_open: bool, forked: bool = False) -> str | None:
        """Nodes after ``pred``; returns the open tail (to rejoin a merge) or None when every path ended.

        ``forked``: the task running this chain has already forked (and merged); with ``self.refork`` off it does
        not fork again (the engine's known bug, see ``test_a_task_forks_twice``).
        """
        g = self.graph
        while True:
            choices = ["stop"]  # first: what Hypothesis shrinks to
            if self.room(3):
                choices += ["linear", "linear"]
            if self.room(4) and self.dynamic:
                choices += ["loop"]
            if self.room(5) and self.dynamic and depth < 4 and (self.refork or not forked):
                choices += ["map"]
            if self.room(6) and depth < 4:
                choices += ["decision", "decision"]
                if self.refork or not forked:
                    choices += ["branch", "branch", "split", "split"]
            what = self.draw(st.sampled_from(choices))
            if what == "stop":
                if may_stay_open and self.draw(st.integers(0, 3)):
                    return pred
                self.terminate(pred)
                return None
            if what == "map":  # pred -> split over a list -> one or two linear nodes -> a merge or an exit
                split, body = g.add("split"), g.add("linear")
                g.maps.add(split)
                g.edges += [(pred, split), (split, body)]
                if self.room(3) and self.draw(st.booleans()):
                    after = g.add("linear")
                    g.edges.append((body, after))
                    body = after
                if not self.room(2) or self.draw(st.integers(0, 3)) == 0:
                    self.terminate(body)  # the subtasks end at exits: the split's rule settles the task
                    return None
                merge = g.add("merge")
                g.edges.append((body, merge))
                pred, forked = merge, True
                continue
            if what == "loop":  # pred -> body -> decision, and the decision's loop edge back to body
                body, decision = g.add("linear"), g.add("decision")
                g.edges += [(pred, body), (body, decision), (decision, body)]
                g.loops[decision, body] = self.draw(st.integers(1, 3))
                pred = decision
                continue
            node = g.add(what)
            g.edges.append((pred, node))
            if what == "linear":
                pred = node
                continue
            tail = self.fork(node, what, depth, forked)
            if tail is None:
                return None
            pred, forked = tail, forked or what != "decision"

    def fork(self, node: str, role: str, depth: int, forked: bool) -> str | None:
        """The sub-blocks of a fork node; returns the merge they rejoin (its outbound edge open) or None."""
        g = self.graph
        count = self.draw(st.integers(1 if role == "split" else 2, 3))
        tails: list[str] = []
        for _ in range(count):
            # a decision's sub-blocks are run by the same task; a branch's or split's by new ones
            tail = self.chain(node, depth + 1, may_stay_open=True, forked=forked and role == "decision")
            if tail is not None and tail in tails:  # a second empty sub-block: the edge would be a duplicate
                self.terminate(tail)
            elif tail is not None:
                tails.append(tail)
        if len(tails) == 1:  # a merge needs two inbound edges
            self.terminate(tails[0])
            tails = []
        if not tails:
            return None
        merge = g.add("merge")
        g.edges.extend((tail, merge) for tail in tails)
        return merge


@st.composite
def graphs(draw: Any, refork: bool = False, dynamic: bool = True) -> Graph:
    """The shape of a valid flow (one or two start nodes), at most MAX_NODES nodes; ``dynamic``: with loops and
    maps."""
    budget = draw(st.integers(8, MAX_NODES - 6))
    builder = Builder(draw, budget, refork, dynamic)
    for _ in range(draw(st.integers(1, 2))):
        start = builder.graph.add("start")
        builder.chain(start, 0, may_stay_open=False)
    assert len(builder.graph.roles) <= MAX_NODES, len(builder.graph.roles)
    return builder.graph


@st.composite
def flows(draw: Any, dynamic: bool = True) -> dict[str, Any]:
    """A valid ``flow.yaml`` (as a dict): a generated shape with drawn options, edges and nodes shuffled."""
    g = draw(graphs(dynamic=dynamic))
    edges = draw(st.permutations(g.edges))
    successors = {n: [b for a, b in edges if a == n] for n in g.roles}
    nodes = []
    for node_id, role in g.roles.items():
        node: dict[str, Any] = {"id": node_id, "role": role}
        if role != "exit":
            options: dict[str, Any] = {}
            if draw(st.integers(0, 14)) == 0:
                options["fail"] = True
            if node_id in g.maps:  # mostly a list of items; sometimes the trail (strings), or no list at all
                node["over"] = draw(st.sampled_from(["/items"] * 6 + ["/trail", "/ticket", "/nothing"]))
                options["items"] = draw(st.integers(0, 3))
            if role == "decision":
                key = draw(st.sampled_from(["route", "route", "go"]))
                if key != "route":
                    node["route_key"] = key
                    options["key"] = key
                choices = st.sampled_from(successors[node_id])
                if draw(st.integers(0, 9)) and any(a == node_id for a, _ in g.loops):  # a loop's decision
                    options["routes"] = draw(st.lists(choices, min_size=1, max_size=5))
                elif draw(st.integers(0, 9)):
                    options["route"] = draw(choices)
                else:  # an invalid routing decision: garbage, or a node that is not a successor
                    others = [n for n in g.roles if n not in successors[node_id]]
                    options["route"] = draw(st.sampled_from(["nowhere", *others]))
            if role in ("linear", "merge") and not options and draw(st.integers(0, 5)) == 0:
                pass  # no impl: the kernel's identity
            else:
                node["impl"] = "t.step"
                if options:
                    node["options"] = options
            # (on a decision it changes nothing: there is no route to take)
            if draw(st.integers(0, 5 if role == "decision" else 3)) == 0:
                node["continue_on_failure"] = True
        if role == "branch" and draw(st.integers(0, 2)) == 0:
            node["first_success"] = True
        if role == "merge":
            strategy = draw(st.sampled_from([None, "collect", "successes"]))
            if strategy:
                node["strategy"] = strategy
        if role == "exit" and draw(st.integers(0, 6)) == 0:
            node["always_fail"] = True
        nodes.append(node)
    nodes = draw(st.permutations(nodes))
    written: list[Any] = []
    for a, b in edges:
        if (a, b) not in g.loops:
            written.append([a, b])
            continue
        loop: dict[str, Any] = {"from": a, "to": b, "max_iterations": g.loops[a, b]}
        if draw(st.booleans()):
            loop["otherwise"] = next(t for s, t in edges if s == a and (s, t) not in g.loops)
        written.append(loop)
    flow: dict[str, Any] = {"name": "prop", "ttl": 10_000, "nodes": list(nodes), "edges": written}
    starts = [n["id"] for n in nodes if n["role"] == "start"]
    if len(starts) > 1 and draw(st.booleans()):
        flow["start"] = draw(st.sampled_from(starts))
    return flow


def write(directory: Path, flow: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False), encoding="utf-8")
    return directory


def run_engine(directory: Path, value: Any) -> Any:
    with Engine.from_config_dir(directory, config=CONFIG, plugins=PLUGINS, autoload=False) as engine:
        return engine.run(value)


def stripped(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("started", "duration_ms", "profile")}


def task_view(task: Any) -> dict[str, Any]:
    return {
        "id": task.id,
        "parent": task.parent,
        "lineage": task.lineage,
        "status": task.status,
        "ended_at": task.ended_at,
    }


def compare(result: Any, flow: dict[str, Any], value: Any) -> None:
    """The engine's run (a TaskResult) is the reference's: stages, merge inputs, tasks, status and output."""
    expected = interpret(flow, value)
    keys = ("task", "node", "role", "status", "input", "output", "task_status", "iteration")
    got = [{k: r.get(k) for k in keys} for r in result.history]
    expected.history = [{k: r.get(k) for k in keys} for r in expected.history]
    assert [(r["task"], r["node"], r["status"]) for r in got] == [
        (r["task"], r["node"], r["status"]) for r in expected.history
    ]
    merges = [(r["task"], r["node"], r["input"]) for r in got if r["role"] == "merge"]
    assert merges == [(r["task"], r["node"], r["input"]) for r in expected.history if r["role"] == "merge"]
    for mine, theirs in zip(got, expected.history, strict=True):
        assert mine == theirs
    tasks = {
        t["id"]: {k: t[k] for k in ("id", "parent", "lineage", "status", "ended_at")} for t in result.tasks
    }
    assert tasks == {t.id: task_view(t) for t in expected.tasks.values()}
    assert (result.status, result.output) == (expected.status, expected.output)


INPUT = {"trail": [], "ticket": "hello"}


@settings(SETTINGS, max_examples=400)
@given(flow=flows())
def test_engine_matches_reference_and_parallelism(flow: dict[str, Any]) -> None:
    expected = interpret(flow, INPUT)
    event("a loop went round" if any((r.get("iteration") or 0) > 1 for r in expected.history) else "no round")
    mapped = any(
        r["role"] == "split" and r["status"] == "success" and r["output"].get("items")
        for r in expected.history
    )
    event("a map made subtasks" if mapped else "no map subtasks")
    note(f"flow.yaml:\n{yaml.safe_dump(flow, sort_keys=False)}")
    note(f"reference history: {[(r['task'], r['node'], r['status']) for r in expected.history]}")
    with tempfile.TemporaryDirectory() as tmp:
        one = run_engine(write(Path(tmp) / "one", {**flow, "parallelism": 1}), INPUT)
        note(f"engine history: {[(r['task'], r['node'], r['status']) for r in one.history]}")
        compare(one, flow, INPUT)
        # decision 0019's termination bound: a task takes at most nodes x (1 + the loop edges' bounds) stages
        bounds = sum(e["max_iterations"] for e in flow["edges"] if isinstance(e, dict))
        per_task: dict[str, int] = {}
        for record in one.history:
            per_task[record["task"]] = per_task.get(record["task"], 0) + 1
        assert max(per_task.values()) <= len(flow["nodes"]) * (1 + bounds), per_task
        four = run_engine(write(Path(tmp) / "four", {**flow, "parallelism": 4}), INPUT)
        # a stage that ran beside the one winning its branch is recorded as cancelled (it ran); nothing else differs
        ran = [stripped(r) for r in four.history if r["status"] != "cancelled"]
        assert ran == [stripped(r) for r in one.history]
        assert all(r["seq"] is None for r in four.history if r["status"] == "cancelled")
        assert (four.status, four.output, four.tasks) == (one.status, one.output, one.tasks)


# --- invalid flows -------------------------------------------------------------------------------------------


def _reach(edges: list[list[str]], roots: set[str], forward: bool = True) -> set[str]:
    seen, todo = set(), list(roots)
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo += [b if forward else a for a, b in edges if (a if forward else b) == node]
    return seen


@dataclass
class Broken:
    """An invalid flow, what was done to it, and what ``load_flow`` must say: for each node to blame, a problem
    naming one of ``nodes`` whose message holds ``words`` (lowercase)."""

    flow: dict[str, Any]
    mutation: str
    blame: list[tuple[set[str], str]] = field(default_factory=list)


MUTATIONS = [  # what broken_flows can do to a valid flow
    "cycle",
    "self_loop",
    "unreachable",
    "degree",
    "exit_tools",
    "exit_impl",
    "agent_exit",
    "agent_start",
    "agent_without_instruction",
    "duplicate_id",
    "duplicate_edge",
    "unknown_endpoint",
    "role_metadata",
    "start_reaching_no_exit",
]


@st.composite
def broken_flows(draw: Any, mutation: str) -> Broken:
    """A valid flow broken by ``mutation`` (a cycle, an unreachable node, a degree rule, ...)."""
    flow = draw(flows(dynamic=False))
    nodes: list[dict[str, Any]] = [dict(n) for n in flow["nodes"]]
    edges: list[list[str]] = [list(e) for e in flow["edges"]]
    role = {n["id"]: n["role"] for n in nodes}
    by_id = {n["id"]: n for n in nodes}
    ids = sorted(role)
    exits = sorted(n for n in ids if role[n] == "exit")
    broken = Broken({**flow, "nodes": nodes, "edges": edges}, mutation)

    def pick(candidates: list[str]) -> str:
        return str(draw(st.sampled_from(sorted(candidates))))

    if mutation == "cycle":
        # best: an edge from a fork node back to a merge above it breaks no degree rule (both are unbounded)
        pairs = [
            (f, m)
            for m in ids
            if role[m] == "merge"
            for f in _reach(edges, {m}) - {m}
            if role[f] in ("decision", "branch", "split")
        ]
        if pairs:
            source, target = draw(st.sampled_from(sorted(pairs)))
        else:  # any node back to one of its ancestors (other rules may break too)
            source = pick([n for n in ids if role[n] != "start" and len(_reach(edges, {n}, False)) > 1])
            target = pick(list(_reach(edges, {source}, forward=False) - {source}))
        edges.insert(draw(st.integers(0, len(edges))), [source, target])
        on_cycle = _reach(edges, {target}) & _reach(edges, {source}, forward=False)
        broken.blame.append((on_cycle, "cycle"))
    elif mutation == "self_loop":
        node = pick(ids)
        edges.append([node, node])
        broken.blame.append(({node}, ""))
    elif mutation == "unreachable":
        # a node nothing leads to (its own rules broken too) and after it a linear node with valid degrees that
        # only the reachability check can blame
        head = draw(st.sampled_from(["linear", "decision", "branch", "split", "merge"]))
        nodes += [{"id": "orphan", "role": head}, {"id": "after_orphan", "role": "linear"}]
        edges.append(["orphan", "after_orphan"])
        for target in exits[: 2 if head in ("decision", "branch") else 0]:
            edges.append(["orphan", target])
        edges.append(["after_orphan", pick(exits)])
        broken.blame += [({"orphan"}, ""), ({"after_orphan"}, "reach")]
    elif mutation == "degree":
        options = []
        for n in ids:
            (low_in, high_in), (low_out, high_out) = ROLE_DEGREES[role[n]]
            inbound = sum(1 for a, b in edges if b == n)
            outbound = sum(1 for a, b in edges if a == n)
            if high_in is not None and inbound + 1 > high_in:
                options.append((n, "add_in"))
            if high_out is not None and outbound + 1 > high_out:
                options.append((n, "add_out"))
            if inbound and inbound - 1 < low_in:
                options.append((n, "remove_in"))
            if outbound and outbound - 1 < low_out:
                options.append((n, "remove_out"))
        node, op = draw(st.sampled_from(options))
        broken.mutation = f"degree:{op}:{role[node]}"
        if op == "add_in":  # from a new start node, which breaks nothing else
            nodes.append({"id": "extra_start", "role": "start"})
            edges.append(["extra_start", node])
        elif op == "add_out":  # to an exit, which takes any number of inbound edges
            targets = [x for x in exits if x != node and [node, x] not in edges]
            if targets:
                target = pick(targets)
            else:
                target = "extra_exit"
                nodes.append({"id": target, "role": "exit"})
            edges.append([node, target])
        else:
            side = 1 if op == "remove_in" else 0
            edges.remove(draw(st.sampled_from([e for e in edges if e[side] == node])))
        broken.blame.append(({node}, "inbound" if op.endswith("_in") else "outbound"))
    elif mutation in ("exit_tools", "exit_impl", "agent_exit"):
        node = pick(exits)
        by_id[node].update(
            {"tools": ["echo"]}
            if mutation == "exit_tools"
            else {"impl": "t.step"}
            if mutation == "exit_impl"
            else {"kind": "agent", "instruction": "Present the result."}
        )
        broken.blame.append(({node}, ""))
    elif mutation == "agent_start":
        node = pick([n for n in ids if role[n] == "start"])
        by_id[node].pop("impl", None)
        by_id[node].pop("options", None)
        by_id[node].update({"kind": "agent", "instruction": "Normalise the input."})
        broken.blame.append(({node}, ""))
    elif mutation == "agent_without_instruction":
        node = pick(ids)
        by_id[node].pop("impl", None)
        by_id[node].pop("options", None)
        by_id[node]["kind"] = "agent"
        broken.blame.append(({node}, "instruction"))
    elif mutation == "duplicate_id":
        node = pick(ids)
        twin = {"id": node, "role": draw(st.sampled_from(sorted(ROLE_DEGREES)))}
        nodes.insert(draw(st.integers(0, len(nodes))), twin)
        broken.blame.append(({node}, ""))
    elif mutation == "duplicate_edge":
        edge = draw(st.sampled_from(edges))
        edges.insert(draw(st.integers(0, len(edges))), list(edge))
        broken.blame.append(({edge[0]}, ""))
    elif mutation == "unknown_endpoint":
        node = pick(ids)
        edges.append(draw(st.sampled_from([[node, "ghost"], ["ghost", node]])))
        broken.blame.append(({None}, "ghost"))  # type: ignore[arg-type]  # the problem is the edge's
    elif mutation == "role_metadata":
        key, owner, value = draw(
            st.sampled_from(
                [
                    ("route_key", "decision", "go"),
                    ("strategy", "merge", "collect"),
                    ("always_fail", "exit", True),
                ]
            )
        )
        node = pick([n for n in ids if role[n] != owner])
        by_id[node][key] = value
        broken.blame.append(({node}, key))
    else:  # start_reaching_no_exit
        nodes += [{"id": "lost_start", "role": "start"}, {"id": "dead_end", "role": "linear"}]
        edges.append(["lost_start", "dead_end"])
        broken.blame += [({"lost_start"}, "exit"), ({"dead_end"}, "outbound")]
    return broken


@pytest.mark.parametrize("mutation", MUTATIONS)
@settings(SETTINGS, max_examples=25)
@given(data=st.data())
def test_invalid_flows_are_refused_naming_the_node(mutation: str, data: st.DataObject) -> None:
    # the degree rules are many (7 roles x 4 ways): more examples there
    broken = data.draw(broken_flows(mutation)) if mutation != "degree" else None
    for _ in range(1 if broken else 4):
        check_refused(broken or data.draw(broken_flows(mutation)))


def check_refused(broken: Broken) -> None:
    event(broken.mutation)
    note(f"{broken.mutation}:\n{yaml.safe_dump(broken.flow, sort_keys=False)}")
    with tempfile.TemporaryDirectory() as tmp, pytest.raises(FlowError) as caught:
        load_flow(write(Path(tmp), broken.flow))
    problems = caught.value.problems
    note("\n".join(str(p) for p in problems))
    for blamed, words in broken.blame:
        assert any(p.node in blamed and words in p.message.lower() for p in problems), (blamed, words)


# --- where the engine departs from docs/flows.md: minimal reproducers -----------------------------------------


def run_yaml(text: str) -> tuple[Any, dict[str, Any]]:
    flow = yaml.safe_load(text)
    with tempfile.TemporaryDirectory() as tmp:
        return run_engine(write(Path(tmp), flow), INPUT), flow


REFORK = """
name: refork
nodes:
  - {id: s, role: start, impl: t.step}
  - {id: b1, role: branch, impl: t.step}
  - {id: l1, role: linear, impl: t.step}
  - {id: l2, role: linear, impl: t.step}
  - {id: m1, role: merge, impl: t.step}
  - {id: b2, role: branch, impl: t.step}
  - {id: l3, role: linear, impl: t.step}
  - {id: l4, role: linear, impl: t.step}
  - {id: m2, role: merge, impl: t.step}
  - {id: x, role: exit}
edges: [[s, b1], [b1, l1], [b1, l2], [l1, m1], [l2, m1], [m1, b2], [b2, l3], [b2, l4], [l3, m2], [l4, m2], [m2, x]]
"""


def test_a_task_forks_twice() -> None:
    result, _ = run_yaml(REFORK)
    ids = [t["id"] for t in result.tasks]
    assert len(ids) == len(set(ids)) == 5  # t1 and four clones, each its own task
    assert [r["task"] for r in result.history if r["role"] in ("merge", "exit")] == ["t1", "t1", "t1"]
    (second,) = [r for r in result.history if r["node"] == "m2"]
    assert [e["from"] for e in second["input"]] == ["l3", "l4"]
    assert result.status == "success"


MERGE_WITH_AN_EXITED_CLONE = """
name: exited-clone
nodes:
  - {id: s, role: start, impl: t.step}
  - {id: b, role: branch, impl: t.step}
  - {id: l1, role: linear, impl: t.step}
  - {id: l2, role: linear, impl: t.step}
  - {id: l3, role: linear, impl: t.step, options: {fail: true}, continue_on_failure: true}
  - {id: m, role: merge, impl: t.step}
  - {id: x1, role: exit}
  - {id: x2, role: exit}
edges: [[s, b], [b, l1], [b, l2], [b, l3], [l1, m], [l2, m], [l3, x1], [m, x2]]
"""


def test_collect_merge_lists_only_failed_tasks() -> None:
    result, flow = run_yaml(MERGE_WITH_AN_EXITED_CLONE)
    (merge,) = [r for r in result.history if r["node"] == "m"]
    assert [(e["task"], e["status"]) for e in merge["input"]] == [("t1.1", "success"), ("t1.2", "success")]
    assert result.status == "success"
    compare(result, flow, INPUT)


SPLIT_WITHOUT_SUCCESS = """
name: split-without-success
nodes:
  - {id: s, role: start, impl: t.step}
  - {id: p, role: split, impl: t.step, continue_on_failure: %s}
  - {id: l1, role: linear, impl: t.step, options: {fail: true}, continue_on_failure: true}
  - {id: l2, role: linear, impl: t.step, options: {fail: true}, continue_on_failure: %s}
  - {id: x1, role: exit}
  - {id: x2, role: exit}
edges: [[s, p], [p, l1], [p, l2], [l1, x1], [l2, x2]]
"""


@pytest.mark.parametrize(
    "split_continues, second_continues",
    [(False, True), (True, False)],
    ids=["both-subtasks-partial", "partial-and-failure-with-continue_on_failure"],
)
def test_a_split_fails_only_when_every_subtask_failed(split_continues: bool, second_continues: bool) -> None:
    """No subtask succeeded, but not all failed: partial (every one ended partial, or the split continues)."""
    text = SPLIT_WITHOUT_SUCCESS % (str(split_continues).lower(), str(second_continues).lower())
    result, flow = run_yaml(text)
    assert result.status == "partial"
    compare(result, flow, INPUT)


# --- the cases the doc leaves open, pinned as the engine resolves them (see reference.py "doc silent") --------

STRAY = """
name: stray
nodes:
  - {id: s, role: start, impl: t.step}
  - {id: b, role: branch, impl: t.step}
  - {id: d, role: decision, impl: t.step, options: {route: l1}}
  - {id: l1, role: linear, impl: t.step}
  - {id: l2, role: linear, impl: t.step}
  - {id: inner, role: merge, impl: t.step}
  - {id: l3, role: linear, impl: t.step}
  - {id: outer, role: merge, impl: t.step}
  - {id: x1, role: exit}
  - {id: x2, role: exit}
edges: [[s, b], [b, d], [b, l3], [b, x1], [d, l1], [d, l2], [l1, inner], [l2, inner], [inner, outer],
        [l3, outer], [outer, x2]]
"""


def test_a_decision_merge_inside_a_clone_joins_the_decision_and_the_fork_meets_at_its_own_merge() -> None:
    """``inner`` joins the paths of the decision inside clone t1.1 (only one of the branch's edges leads to it):
    t1.1 runs it at once. ``outer`` is where the branch meets (two of its edges lead there): t1.1 and t1.2 park
    there and t1 merges them; t1.3 ends at its own exit."""
    result, flow = run_yaml(STRAY)
    compare(result, flow, INPUT)
    (inner,) = [r for r in result.history if r["node"] == "inner"]
    assert inner["task"] == "t1.1" and [e["task"] for e in inner["input"]] == ["t1.1"]
    (outer,) = [r for r in result.history if r["node"] == "outer"]
    assert outer["task"] == "t1"
    assert [(e["task"], e["from"], e["status"]) for e in outer["input"]] == [
        ("t1.1", "inner", "success"),
        ("t1.2", "l3", "success"),
    ]
    assert result.status == "success"
