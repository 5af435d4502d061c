"""A flow run's DAG, laid out for an inline SVG drawn by the server: no layout library, nothing downloaded.

The nodes and edges come from the flow's directory as the run's manifest names it (``aeon flow graph`` reads the
same); where it is gone or no longer loads, from the run's own stages (each stage's node, and its route as
edges). Each node shows the status of its last stage and, from the stages' routing events (:mod:`.flowtasks`),
the tasks that ran it, the clones or subtasks it spawned and the merge it did or waits for. The layout is layered:
a node sits one layer below its deepest predecessor, and each layer is ordered by its predecessors' mean position
(one barycentre sweep), which keeps the small DAGs flows are free of most crossings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from aeon_cli.inspect.flowtasks import Tally, tally
from aeon_cli.inspect.records import RunData

NODE_WIDTH: Final = 168
#: three lines: the id, role and status, the tasks' marks (a node without marks centres the first two)
NODE_HEIGHT: Final = 60
GAP_X: Final = 28
GAP_Y: Final = 64
MARGIN: Final = 16
#: characters of a node id shown in its box (the whole id is its tooltip)
LABEL: Final = 22


@dataclass(frozen=True)
class GraphNode:
    id: str
    label: str
    role: str
    agent: bool
    #: the status of its last stage, or ``not-reached``
    status: str
    runs: int
    #: the index of the cycle of its last stage (None: never ran)
    cycle: int | None
    x: int
    y: int
    #: its tasks: who ran it, what it spawned, what it merged or waits for
    tally: Tally


@dataclass(frozen=True)
class GraphEdge:
    source: str
    target: str
    #: a stage of the source routed a task along it
    taken: bool
    x1: int
    y1: int
    x2: int
    y2: int
    #: a loop edge's rounds: ``2 of 3 rounds`` (None: not a loop edge)
    label: str | None = None


@dataclass(frozen=True)
class Graph:
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    width: int
    height: int
    #: why the drawing may differ from the flow the run ran (its files changed, or could not be read)
    note: str | None


def _declared(
    manifest: dict[str, Any],
) -> tuple[list[tuple[str, str, bool]], list[tuple[str, str]], dict[tuple[str, str], int], str | None]:
    """The flow's nodes (id, role, agent), edges and loop edges' bounds from its directory, and a note when they
    may differ."""
    recorded = manifest.get("flow") or {}
    directory = recorded.get("directory")
    if not isinstance(directory, str):
        return [], [], {}, "the run does not name its flow's directory: the graph shows the stages it ran"
    try:
        from aeon_plugins.flow.loader import load_flow

        flow = load_flow(directory)
    except Exception as exc:  # gone, changed into something invalid: draw what the run did
        return (
            [],
            [],
            {},
            f"the flow at {directory} cannot be loaded ({type(exc).__name__}): the graph shows the stages the run ran",
        )
    note = None
    if recorded.get("hashes") and dict(flow.hashes) != recorded.get("hashes"):
        note = f"the flow's files in {directory} changed since this run: the graph shows them as they are now"
    nodes = [(node.id, str(node.role), node.kind == "agent") for node in flow.spec.nodes]
    loops = {pair: edge.max_iterations or 0 for pair, edge in flow.loops.items()}
    return nodes, [(edge.source, edge.target) for edge in flow.spec.edges], loops, note


def flow_graph(data: RunData) -> Graph:
    """The run's flow with each node's status, laid out."""
    declared, edges, loops, note = _declared(data.manifest)
    stages = data.stages
    known = {node_id for node_id, _, _ in declared}
    nodes = list(declared)
    routed: set[tuple[str, str]] = set()
    for _, stage in stages:
        node = str(stage.get("node"))
        if node not in known:
            known.add(node)
            nodes.append((node, str(stage.get("role") or "?"), False))
        for target in stage.get("route") or ():
            routed.add((node, str(target)))
    for source, target in sorted(routed):
        if target not in known:
            known.add(target)
            nodes.append((target, "?", False))
        if (source, target) not in edges:
            edges.append((source, target))
    rounds: dict[str, int] = {}  # loop edge -> the most rounds a task took along it
    for _, stage in stages:
        for event in stage.get("events") or ():
            if event.get("event") == "loop":
                rounds[event["edge"]] = max(rounds.get(event["edge"], 0), int(event["iteration"]))
    layers = _layers([node_id for node_id, _, _ in nodes], [edge for edge in edges if edge not in loops])
    positions = _positions(layers)
    ran: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for index, stage in stages:
        ran.setdefault(str(stage.get("node")), []).append((index, stage))
    tallies = tally(stages, edges)
    shown = []
    for node_id, role, agent in nodes:
        x, y = positions[node_id]
        mine = ran.get(node_id, [])
        shown.append(
            GraphNode(
                id=node_id,
                label=node_id if len(node_id) <= LABEL else node_id[: LABEL - 1] + "…",
                role=role,
                agent=agent,
                status=str(mine[-1][1].get("status")) if mine else "not-reached",
                runs=len(mine),
                cycle=mine[-1][0] if mine else None,
                x=x,
                y=y,
                tally=tallies.get(node_id, Tally()),
            )
        )
    lines = []
    for source, target in edges:
        (sx, sy), (tx, ty) = positions[source], positions[target]
        lines.append(
            GraphEdge(
                source,
                target,
                (source, target) in routed,
                sx + NODE_WIDTH // 2,
                sy + NODE_HEIGHT,
                tx + NODE_WIDTH // 2,
                ty,
                f"{rounds.get(f'{source} -> {target}', 0)} of {loops[source, target]} rounds"
                if (source, target) in loops
                else None,
            )
        )
    widest = max((len(layer) for layer in layers), default=1)
    width = 2 * MARGIN + widest * NODE_WIDTH + (widest - 1) * GAP_X
    height = 2 * MARGIN + len(layers) * NODE_HEIGHT + max(len(layers) - 1, 0) * GAP_Y
    return Graph(shown, lines, width, height, note)


def _layers(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Nodes by depth (the longest path from a node without predecessors), each layer ordered by barycentre."""
    predecessors: dict[str, list[str]] = {node: [] for node in nodes}
    successors: dict[str, list[str]] = {node: [] for node in nodes}
    for source, target in edges:
        successors[source].append(target)
        predecessors[target].append(source)
    waiting = {node: len(predecessors[node]) for node in nodes}
    depth = dict.fromkeys(nodes, 0)
    ready = [node for node in nodes if waiting[node] == 0]
    placed = []
    while ready:
        node = ready.pop(0)
        placed.append(node)
        for target in successors[node]:
            depth[target] = max(depth[target], depth[node] + 1)
            waiting[target] -= 1
            if waiting[target] == 0:
                ready.append(target)
    deepest = max(depth.values(), default=0)
    for node in nodes:  # only on a cycle, which a checked flow cannot have: put what is left below
        if node not in placed:
            depth[node] = deepest + 1
    layers: list[list[str]] = [[] for _ in range(max(depth.values(), default=0) + 1)]
    for node in nodes:  # declaration order first
        layers[depth[node]].append(node)
    order = {node: i for layer in layers for i, node in enumerate(layer)}
    for layer in layers[1:]:
        layer.sort(key=lambda node: _mean([order[p] for p in predecessors[node]], order[node]))
        order.update({node: i for i, node in enumerate(layer)})
    return [layer for layer in layers if layer]


def _mean(values: Sequence[int], default: int) -> float:
    return sum(values) / len(values) if values else float(default)


def _positions(layers: Sequence[Sequence[str]]) -> dict[str, tuple[int, int]]:
    widest = max((len(layer) for layer in layers), default=1)
    full = widest * NODE_WIDTH + (widest - 1) * GAP_X
    positions = {}
    for depth, layer in enumerate(layers):
        span = len(layer) * NODE_WIDTH + (len(layer) - 1) * GAP_X
        left = MARGIN + (full - span) // 2
        for i, node in enumerate(layer):
            positions[node] = (left + i * (NODE_WIDTH + GAP_X), MARGIN + depth * (NODE_HEIGHT + GAP_Y))
    return positions
