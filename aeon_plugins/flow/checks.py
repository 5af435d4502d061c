"""What a flow must satisfy beyond the shape of its files (spec 004 §2.3, §3.3, §5): the DAG invariants, the degree
rules of each role, and every name a node gives (schemas, profiles, tools, implementations) resolving.

Each check appends :class:`Problem` values and goes on, so that every problem is reported at once.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import jsonpointer

from aeon_kernel.errors import ValidationError
from aeon_kernel.kit import schema_errors
from aeon_plugins.flow.graph import loop_body, map_path, reach
from aeon_plugins.flow.manifest import (
    ROLE_FIELDS,
    ContextFile,
    FlowSpec,
    MemoryFile,
    NodeSpec,
    ProfileRef,
    ProfileSpec,
)
from aeon_plugins.flow.templates import Template
from aeon_plugins.flow.yamlfile import Loaded, Problem, dotted


@dataclass(frozen=True)
class Known:
    """The names the engine's plugins registered; a flow may name only these (None: not checked)."""

    nodes: Collection[str] | None = None
    tools: Collection[str] | None = None
    policies: Collection[str] | None = None
    memory_backends: Collection[str] | None = None


#: (fewest, most) inbound and outbound edges of each role; None: no limit (spec 004 §3.3)
DEGREES: dict[str, tuple[tuple[int, int | None], tuple[int, int | None]]] = {
    "start": ((0, 0), (1, 1)),
    "linear": ((1, 1), (1, 1)),
    "decision": ((1, 1), (2, None)),
    "branch": ((1, 1), (2, None)),
    "split": ((1, 1), (1, None)),
    "merge": ((2, None), (1, 1)),
    "exit": ((1, None), (0, 0)),
}


@dataclass(frozen=True)
class Sources:
    """The files a flow was read from, for the lines problems point to."""

    flow: Loaded
    context: Loaded | None = None
    memory: Loaded | None = None
    #: the name of every schema file found, valid or not
    schema_files: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Malformed:
    """What :func:`~aeon_plugins.flow.loader.load_flow` kept of a ``flow.yaml`` that did not validate, so that the
    graph is still checked without reporting what the shape problems (reported already) explain."""

    #: nodes whose own entry is malformed: they take part in the graph only
    unchecked: frozenset[str] = frozenset()
    #: of those, the ones whose role is unknown (their degree, and whether they start or end a path, is unknown)
    roleless: frozenset[str] = frozenset()
    #: how many node entries have no usable id (edges naming them cannot be resolved)
    idless: int = 0
    #: each node's place in ``nodes:`` (the spec holds only the nodes that were kept)
    positions: tuple[int, ...] = ()
    #: whether every edge was well formed
    edges_complete: bool = True


def check_flow(
    spec: FlowSpec,
    sources: Sources,
    schemas: Mapping[str, Any],
    context: ContextFile,
    memory: MemoryFile,
    known: Known,
    malformed: Malformed | None = None,
) -> list[Problem]:
    """Every problem of ``spec`` beyond its shape, each reported once at its root: a rule that a malformed entry
    or an edge naming no node would break anyway (degrees, reachability) is not checked while they stand."""
    problems: list[Problem] = []
    loaded = sources.flow
    profiles = context.profiles
    malformed = malformed or Malformed()
    index: dict[str, int] = {}
    for i, node in enumerate(spec.nodes):
        if node.id in index:
            problems.append(
                loaded.problem(
                    ("nodes", _place(malformed, i), "id"),
                    "is used by two nodes; node ids are unique",
                    node.id,
                )
            )
        index.setdefault(node.id, i)

    def at(node_id: str, key: str | None = None) -> tuple[str | int, ...]:
        place = _place(malformed, index[node_id])
        return ("nodes", place, key) if key else ("nodes", place)

    successors: dict[str, list[str]] = {node_id: [] for node_id in index}
    predecessors: dict[str, list[str]] = {node_id: [] for node_id in index}
    seen_edges: set[tuple[str, str]] = set()
    dangling: dict[str, list[tuple[int, str]]] = {}
    for i, edge in enumerate(spec.edges):
        for end, key in ((edge.source, "from"), (edge.target, "to")):
            if end not in index:
                dangling.setdefault(end, []).append((i, key))
        if edge.source == edge.target:
            problems.append(
                loaded.problem(("edges", i), f"loops from {edge.source!r} to itself", edge.source)
            )
        if (edge.source, edge.target) in seen_edges:
            problems.append(loaded.problem(("edges", i), "is declared twice", edge.source))
        seen_edges.add((edge.source, edge.target))
        if edge.source in index and edge.target in index and edge.source != edge.target:
            successors[edge.source].append(edge.target)
            if edge.max_iterations is None:  # a loop edge goes back: it does not count as the target's way in
                predecessors[edge.target].append(edge.source)
    problems += _dangling_problems(dangling, successors, predecessors, loaded, at, malformed.idless)
    edges_known = malformed.edges_complete and not dangling and not malformed.idless
    loops = {(e.source, e.target) for e in spec.edges if e.max_iterations is not None}
    forward = {node: [t for t in targets if (node, t) not in loops] for node, targets in successors.items()}
    map_merges = _map_problems(spec, index, forward, loaded, at, problems) if edges_known else set()

    for i, node in enumerate(spec.nodes):
        if index[node.id] != i:
            continue  # a duplicate id, reported above
        if node.id not in malformed.unchecked:
            problems += _node_problems(node, loaded, at, schemas, sources.schema_files, profiles, known)
        if not edges_known or node.id in malformed.roleless:
            continue
        (min_in, max_in), (min_out, max_out) = DEGREES[node.role]
        if node.id in map_merges:  # a map's one edge brings all its subtasks
            min_in = 1
        for count, low, high, what in (
            (len(predecessors[node.id]), min_in, max_in, "inbound"),
            (len(successors[node.id]), min_out, max_out, "outbound"),
        ):
            if count < low or (high is not None and count > high):
                wanted = (
                    f"{low}" if low == high else f"at least {low}" if high is None else f"{low} to {high}"
                )
                problems.append(
                    loaded.problem(
                        at(node.id, "role"),
                        f"a {node.role} node has {wanted} {what} edges; this one has {count}",
                        node.id,
                    )
                )

    cycle = _cycle(list(index), forward)
    if cycle:
        message = (
            "is on a cycle: "
            + " -> ".join(cycle)
            + "; a flow's only cycles are loops: give the edge that goes back max_iterations (docs/flows.md"
            ' "Loops")'
        )
        problems.append(loaded.problem(at(cycle[0]), message, cycle[0]))
    else:
        problems += _loop_problems(spec, index, forward, loaded)
    starts = [node.id for node in spec.nodes if node.role == "start"]
    graph_known = edges_known and not malformed.roleless
    if not starts and graph_known:
        problems.append(loaded.problem(("nodes",), "no start node: a flow begins at a node with role: start"))
    if spec.start is not None and (spec.start not in index or spec.nodes[index[spec.start]].role != "start"):
        meant = near(spec.start, starts)
        hint = f"; did you mean {meant!r}?" if meant else f"; the start nodes are {starts}"
        problems.append(loaded.problem(("start",), f"names {spec.start!r}, which is not a start node{hint}"))
    if graph_known:
        reached = reach(successors, starts)
        for node_id in index:
            if node_id not in reached:
                problems.append(loaded.problem(at(node_id), "cannot be reached from any start node", node_id))
        exits = {node.id for node in spec.nodes if node.role == "exit"}
        for start in starts:
            if not reach(successors, [start]) & exits:
                problems.append(loaded.problem(at(start), "reaches no exit node", start))
    for layer, choice in memory.layers.items():
        if known.memory_backends is not None and choice.use not in known.memory_backends:
            message = f"uses {choice.use!r}, which no plugin registered: choose one of {sorted(known.memory_backends)}"
            problems.append(_problem(sources.memory, "memory.yaml", ("layers", layer, "use"), message))
    for name, profile in profiles.items():
        if known.policies is not None and profile.policy not in known.policies:
            message = (
                f"names retrieval policy {profile.policy!r}, which no plugin registered: "
                f"choose one of {sorted(known.policies)}"
            )
            problems.append(_problem(sources.context, "context.yaml", ("profiles", name, "policy"), message))
    return problems


def _loop_problems(
    spec: FlowSpec, index: Mapping[str, int], forward: Mapping[str, list[str]], loaded: Loaded
) -> list[Problem]:
    """The rules of loop edges (docs/flows.md "Loops"), which make every run end: a loop edge is a decision's, goes
    back, and encloses only linear and decision nodes; its ``otherwise`` is another edge of the decision."""
    problems: list[Problem] = []
    plain = {(e.source, e.target) for e in spec.edges if e.max_iterations is None}
    for i, edge in enumerate(spec.edges):
        source, target = edge.source, edge.target

        def refuse(
            message: str, key: str | None = "max_iterations", edge_at: int = i, at: str = source
        ) -> None:
            problems.append(
                loaded.problem(("edges", edge_at, key) if key else ("edges", edge_at), message, at)
            )

        if edge.max_iterations is None or source not in index or target not in index or source == target:
            if edge.max_iterations is None and edge.otherwise is not None:
                refuse("only a loop edge (max_iterations) takes otherwise", "otherwise")
            continue  # an ordinary edge, or one reported above
        role = spec.nodes[index[source]].role
        body = loop_body(forward, source, target)
        if role != "decision":
            refuse(
                f"max_iterations is for an edge a decision chooses; {source!r} is a {role} node, always left"
            )
        elif not forward[source]:
            refuse(f"{source!r} has only loop edges; a decision with a loop edge needs a way on without one")
        elif not body:
            refuse(f"goes forward ({target!r} does not lead back to {source!r}); a loop edge goes back")
        else:
            for node in spec.nodes:
                if node.id in body and node.role not in ("linear", "decision"):
                    refuse(
                        f"encloses {node.role} node {node.id!r}; a loop holds only linear and decision nodes",
                        None,
                    )
            if edge.otherwise is not None and (
                edge.otherwise == target or (source, edge.otherwise) not in plain
            ):
                refuse(
                    f"names {edge.otherwise!r}; otherwise is another, forward edge of {source!r}", "otherwise"
                )
    return problems


def _map_problems(
    spec: FlowSpec,
    index: Mapping[str, int],
    forward: Mapping[str, list[str]],
    loaded: Loaded,
    at: Any,
    problems: list[Problem],
) -> set[str]:
    """The rules of maps (splits with ``over``, docs/flows.md "Maps"): a JSON pointer, one outbound edge, and a path
    to at most one merge with no fork before it. Returns the merges maps meet at (one inbound edge is enough)."""
    met: set[str] = set()
    roles = {node_id: spec.nodes[i].role for node_id, i in index.items()}
    for i, node in enumerate(spec.nodes):
        if node.over is None or node.role != "split" or index[node.id] != i:
            continue

        def refuse(message: str, map_id: str = node.id) -> None:
            problems.append(loaded.problem(at(map_id, "over"), message, map_id))

        try:
            jsonpointer.JsonPointer(node.over)
        except jsonpointer.JsonPointerException as exc:
            refuse(f"is not a JSON pointer: {exc}")
        if len(forward[node.id]) != 1:
            refuse(f"a map (a split with over) has one outbound edge; this one has {len(forward[node.id])}")
            continue
        merges, forks = map_path(forward, roles, node.id)
        for fork in forks:
            refuse(
                f"its subtasks reach {roles[fork]} node {fork!r} before a merge; a map's path holds no fork"
            )
        if len(merges) > 1:
            refuse(
                f"its subtasks would meet at several merges ({', '.join(sorted(merges))}); a map meets at one"
            )
        met |= merges
    return met


def near(word: Any, choices: list[Any], cutoff: float = 0.6) -> str | None:
    """The choice ``word`` most likely misspells, if any."""
    if not isinstance(word, str):
        return None
    found = difflib.get_close_matches(word, [c for c in choices if isinstance(c, str)], n=1, cutoff=cutoff)
    return found[0] if found else None


def _place(malformed: Malformed, i: int) -> int:
    """The place in ``nodes:`` of the spec's ``i``-th node."""
    return malformed.positions[i] if malformed.positions else i


def _dangling_problems(
    dangling: Mapping[str, list[tuple[int, str]]],
    successors: Mapping[str, list[str]],
    predecessors: Mapping[str, list[str]],
    loaded: Loaded,
    at: Any,
    idless: int,
) -> list[Problem]:
    """One problem per name that edges give but no node has, at its root: a node whose id is a near miss of it and
    that no edge names (the id is misspelt), or else the first edge naming it (with the near miss, if any)."""
    problems: list[Problem] = []
    orphans = [node for node in successors if not successors[node] and not predecessors[node]]
    for name, ends in dangling.items():
        edges = ", ".join(f"edges[{i}]" for i, _ in ends)
        orphan = near(name, orphans)
        if orphan:
            message = (
                f"no edge names {orphan!r}, while {edges} name{'s' if len(ends) == 1 else ''} {name!r}, "
                f"which no node has: is one of them misspelt?"
            )
            problems.append(loaded.problem(at(orphan, "id"), message, orphan))
            continue
        meant = near(name, list(successors))
        if idless and not meant:
            continue  # a node without a usable id is reported already; it is likely the one meant
        first, key = ends[0]
        message = f"{key} names no node: {name!r}" + (f"; did you mean {meant!r}?" if meant else "")
        if len(ends) > 1:
            message += f" (so do {', '.join(f'edges[{i}]' for i, _ in ends[1:])})"
        problems.append(loaded.problem(("edges", first), message))
    return problems


def _problem(loaded: Loaded | None, file: str, path: tuple[str | int, ...], message: str) -> Problem:
    return loaded.problem(path, message) if loaded is not None else Problem(file, message, key=dotted(path))


def _node_problems(
    node: NodeSpec,
    loaded: Loaded,
    at: Any,
    schemas: Mapping[str, Any],
    schema_files: frozenset[str],
    profiles: Mapping[str, ProfileSpec],
    known: Known,
) -> list[Problem]:
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        problems.append(loaded.problem(at(node.id, key), message, node.id))

    if node.role in ("start", "exit") and node.kind != "deterministic":
        problem("kind", f"{node.role} nodes are deterministic (spec 004 §3.3)")
    if node.kind == "agent" and not (node.instruction or "").strip():
        problem("instruction", "an agent node needs an instruction")
    if node.kind == "deterministic" and node.instruction is not None:
        problem("instruction", "only agent nodes take an instruction")
    if node.kind == "agent" and node.impl is not None:
        problem("impl", "agent nodes are run by the model; impl is for deterministic nodes")
    if node.role == "exit":
        if node.tools:
            problem("tools", "exit nodes are read-only and cannot call tools")
        if node.impl is not None:
            problem("impl", "exit nodes are read-only: they present the task's output as it is")
    if node.continue_on_failure and node.fail_on_failure:
        problem("continue_on_failure", "choose one of continue_on_failure and fail_on_failure")
    for key, role in ROLE_FIELDS.items():
        if getattr(node, key) is not None and node.role != role:
            problem(key, f"only {role} nodes take {key}")
    for key in ("input_schema", "output_schema"):
        name = getattr(node, key)
        if name is not None and name not in schemas:
            if name in schema_files:
                problem(
                    key,
                    f"names schema {name!r}, whose file in schemas/ is not a usable JSON Schema (see above)",
                )
            else:
                problem(
                    key,
                    f"names schema {name!r}, but there is no schemas/{name}.json; have: {sorted(schemas)}",
                )
    if isinstance(node.context, ProfileRef) and node.context.profile not in profiles:
        problem(
            "context",
            f"names profile {node.context.profile!r}, which context.yaml does not define; "
            f"have: {sorted(profiles)}",
        )
    if known.tools is not None:
        for tool in node.tools:
            if tool not in known.tools:
                problem("tools", f"names tool {tool!r}, which is not enabled; have: {sorted(known.tools)}")
    schema = schemas.get(node.output_schema) if node.output_schema else None
    if node.example is not None and isinstance(schema, dict):
        wrong = schema_errors(schema, node.example)
        if wrong:
            problem("example", f"does not match output schema {node.output_schema!r} ({wrong[0]}): fix it")
    for i, check in enumerate(node.checks):
        try:
            Template(list(check.equal or check.within or ()), f"checks[{i}]")
        except ValidationError as exc:
            problem("checks", str(exc))
    called = node.options.get("tool") if node.impl == "call_tool" else None
    if isinstance(called, str) and called not in node.tools:
        problem(
            "options",
            f"call_tool calls {called!r}, which the node does not list in tools: add tools: [{called}]",
        )
    if known.nodes is not None and node.kind == "deterministic" and node.role != "exit":
        impl = node.impl or "identity"
        if impl not in known.nodes:
            problem(
                "impl",
                f"names node implementation {impl!r}, which no plugin registered "
                f"(aeon_register_nodes); have: {sorted(known.nodes)}",
            )
    return problems


def _cycle(nodes: list[str], successors: Mapping[str, list[str]]) -> list[str] | None:
    """A cycle as ``[a, b, ..., a]``, or None; iterative, so a 10,000-node chain cannot overflow the stack."""
    colour: dict[str, int] = dict.fromkeys(nodes, 0)  # 0 new, 1 on the path, 2 done
    for root in nodes:
        if colour[root]:
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0:
                colour[node] = 1
                path.append(node)
            following = successors.get(node, [])
            if i < len(following):
                stack.append((node, i + 1))
                nxt = following[i]
                if colour[nxt] == 1:
                    return [*path[path.index(nxt) :], nxt]
                if colour[nxt] == 0:
                    stack.append((nxt, 0))
            else:
                colour[node] = 2
                path.pop()
    return None
