"""A flow as a graph: its nodes, its edges in declaration order, and what the router asks of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aeon_plugins.flow.manifest import EdgeSpec, FlowSpec, MemoryFile, NodeSpec, ProfileRef, ProfileSpec

#: the items a map's default TTL makes room for (a longer list needs ``ttl:``)
MAP_ITEMS_ROOM = 1000


@dataclass(frozen=True)
class Flow:
    """A loaded, checked flow (:func:`aeon_plugins.flow.loader.load_flow`). Immutable: many runs share one."""

    spec: FlowSpec
    directory: Path
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    profiles: dict[str, ProfileSpec] = field(default_factory=dict)
    memory: MemoryFile = field(default_factory=MemoryFile)
    #: sha256 of every file read, by path relative to the directory (spec 004 §10.2)
    hashes: dict[str, str] = field(default_factory=dict)
    #: the line of each node in flow.yaml, for problems found after loading
    node_lines: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        nodes = {node.id: node for node in self.spec.nodes}
        successors: dict[str, list[str]] = {node_id: [] for node_id in nodes}
        predecessors: dict[str, list[str]] = {node_id: [] for node_id in nodes}
        for edge in self.spec.edges:
            successors.setdefault(edge.source, []).append(edge.target)
            predecessors.setdefault(edge.target, []).append(edge.source)
        loops = {
            (edge.source, edge.target): edge for edge in self.spec.edges if edge.max_iterations is not None
        }
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "successors", {k: tuple(v) for k, v in successors.items()})
        object.__setattr__(self, "predecessors", {k: tuple(v) for k, v in predecessors.items()})
        object.__setattr__(self, "loops", loops)
        object.__setattr__(
            self, "forward", {k: tuple(t for t in v if (k, t) not in loops) for k, v in successors.items()}
        )
        body = {node for source, target in loops for node in loop_body(self.forward, source, target)}
        object.__setattr__(self, "in_loop", frozenset(body))
        roles = {node_id: node.role for node_id, node in nodes.items()}
        meeting = {
            node.id: map_path(self.forward, roles, node.id)[0] for node in self.spec.nodes if node.over
        }
        object.__setattr__(
            self, "maps", {split: min(merges, default=None) for split, merges in meeting.items()}
        )

    nodes: dict[str, NodeSpec] = field(init=False)
    #: targets of each node's outbound edges, in declaration order
    successors: dict[str, tuple[str, ...]] = field(init=False)
    #: sources of each node's inbound edges, in declaration order
    predecessors: dict[str, tuple[str, ...]] = field(init=False)
    #: the loop edges (``max_iterations``), by (from, to)
    loops: dict[tuple[str, str], EdgeSpec] = field(init=False)
    #: ``successors`` without the loop edges: the DAG the loops go back on
    forward: dict[str, tuple[str, ...]] = field(init=False)
    #: the nodes inside a loop (on a path from a loop edge's target back to its source)
    in_loop: frozenset[str] = field(init=False)
    #: each map (a split with ``over``) and the merge its subtasks meet at (None: they end at exits)
    maps: dict[str, str | None] = field(init=False)

    def reachable(self, node_id: str) -> frozenset[str]:
        """The node and every node reachable from it without going back along a loop edge (cached: the router asks
        at every merge)."""
        cache: dict[str, frozenset[str]] = self.__dict__.setdefault("_reachable", {})
        if node_id not in cache:
            cache[node_id] = frozenset(reach(self.forward, [node_id]))
        return cache[node_id]

    def joins(self, fork: str, merge: str) -> bool:
        """Whether the tasks of ``fork`` meet at ``merge`` (two or more of its edges lead there), cached per pair: every
        task reaching the merge asks, so a K-way fan-out costs K lookups once, not K per subtask."""
        if fork in self.maps:  # a map's one edge stands for all its subtasks
            return self.maps[fork] == merge
        cache: dict[tuple[str, str], bool] = self.__dict__.setdefault("_joins", {})
        if (fork, merge) not in cache:
            cache[fork, merge] = sum(merge in self.reachable(target) for target in self.successors[fork]) >= 2
        return cache[fork, merge]

    def inbound_order(self, node_id: str) -> dict[str, int]:
        """Each inbound source of ``node_id`` and its first edge's place: how a merge orders its inputs (cached)."""
        cache: dict[str, dict[str, int]] = self.__dict__.setdefault("_inbound", {})
        if node_id not in cache:
            order: dict[str, int] = {}
            for place, source in enumerate(self.predecessors[node_id]):
                order.setdefault(source, place)
            cache[node_id] = order
        return cache[node_id]

    @property
    def reads_task_layer(self) -> bool:
        """Whether a node's context includes the task layer (``global``, or a profile listing ``task``)."""
        return any(
            node.context == "global"
            or (isinstance(node.context, ProfileRef) and "task" in self.profiles[node.context.profile].layers)
            for node in self.spec.nodes
        )

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def starts(self) -> tuple[str, ...]:
        return tuple(node.id for node in self.spec.nodes if node.role == "start")

    @property
    def default_start(self) -> str:
        return self.spec.start or self.starts[0]

    @property
    def ttl(self) -> int:
        bounds = sum(edge.max_iterations or 0 for edge in self.loops.values())
        mapped = sum(  # each map's body: the nodes from its edge to the merge it meets at
            len(self.reachable(self.successors[split][0]) - (self.reachable(meet) if meet else frozenset()))
            for split, meet in self.maps.items()
        )
        return self.spec.ttl or len(self.nodes) * (10 + bounds) + MAP_ITEMS_ROOM * (mapped + len(self.maps))

    def schema(self, name: str | None) -> dict[str, Any] | None:
        return None if name is None else self.schemas[name]

    def metadata(self) -> dict[str, Any]:
        """What a run records of its flow (spec 004 §10.2): name, version, directory, file hashes."""
        return {
            "name": self.spec.name,
            "version": self.spec.version,
            "directory": str(self.directory),
            "hashes": dict(self.hashes),
            "schema_revisions": {
                name: schema.get("$id") or schema.get("version")
                for name, schema in sorted(self.schemas.items())
            },
        }


def reach(successors: Mapping[str, Sequence[str]], starts: Iterable[str]) -> set[str]:
    """``starts`` and every node a path along ``successors`` leads to from them."""
    found: set[str] = set()
    todo = list(starts)
    while todo:
        node = todo.pop()
        if node not in found:
            found.add(node)
            todo.extend(successors.get(node, ()))
    return found


def loop_body(successors: Mapping[str, Sequence[str]], source: str, target: str) -> set[str]:
    """The nodes on a path from a loop edge's ``target`` back to its ``source`` (``successors``: no loop edges)."""
    return {node for node in reach(successors, [target]) if source in reach(successors, [node])}


def map_path(
    successors: Mapping[str, Sequence[str]], roles: Mapping[str, str], split: str
) -> tuple[set[str], list[str]]:
    """Where a map's subtasks go from ``split``'s edge: the merges they first reach, and the forks they reach before
    one (the load checks allow one merge and no fork)."""
    merges: set[str] = set()
    forks: list[str] = []
    seen: set[str] = set()
    todo = list(successors[split])
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        if roles[node] == "merge":
            merges.add(node)
        elif roles[node] in ("branch", "split"):
            forks.append(node)
        else:
            todo.extend(successors[node])
    return merges, forks


def mermaid(flow: Flow) -> str:
    """The DAG as a Mermaid flowchart: shapes by role, agents marked."""
    shapes = {
        "start": ("([", "])"),
        "exit": ("([", "])"),
        "decision": ("{", "}"),
        "branch": ("{{", "}}"),
        "split": ("[/", "\\]"),
        "merge": ("[\\", "/]"),
        "linear": ("[", "]"),
    }
    # Mermaid ids are the nodes' positions (node ids may hold characters Mermaid reads as syntax); labels show ids.
    ids = {node.id: f"n{i}" for i, node in enumerate(flow.spec.nodes)}
    lines = ["flowchart TD"]
    for node in flow.spec.nodes:
        left, right = shapes[node.role]
        label = f"{node.id}<br/>{node.role}{' · agent' if node.kind == 'agent' else ''}"
        lines.append(f'    {ids[node.id]}{left}"{label}"{right}')
    for edge in flow.spec.edges:
        taken_on = _edge_label(flow, edge.source, edge.target)
        shown = f'|"{taken_on.replace(chr(34), "#quot;")}"|' if taken_on else ""
        lines.append(f"    {ids[edge.source]} -->{shown} {ids[edge.target]}")
    return "\n".join(lines) + "\n"


def dot(flow: Flow) -> str:
    """The DAG in Graphviz's DOT language."""
    shapes = {
        "start": "oval",
        "exit": "doubleoctagon",
        "decision": "diamond",
        "branch": "hexagon",
        "split": "trapezium",
        "merge": "invtrapezium",
        "linear": "box",
    }
    lines = [f"digraph {_quote(flow.name)} {{", "    rankdir=TB;"]
    for node in flow.spec.nodes:
        style = ', style="filled", fillcolor="#e8f0fe"' if node.kind == "agent" else ""
        label = f"{node.id}\\n{node.role}"
        lines.append(f"    {_quote(node.id)} [shape={shapes[node.role]}, label={_quote(label)}{style}];")
    for edge in flow.spec.edges:
        taken_on = _edge_label(flow, edge.source, edge.target)
        shown = f" [label={_quote(taken_on)}]" if taken_on else ""
        lines.append(f"    {_quote(edge.source)} -> {_quote(edge.target)}{shown};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _edge_label(flow: Flow, source: str, target: str) -> str | None:
    """What a decision's edge is taken on (its output key naming the target, and a loop edge's bound), or a map's
    edge taken by; other edges are always taken."""
    node = flow.nodes[source]
    if node.over is not None:
        return f"each item of {node.over}"
    if node.role != "decision":
        return None
    loop = flow.loops.get((source, target))
    bound = f", at most {loop.max_iterations} times" if loop is not None else ""
    return f"{node.decides_by} = {target}{bound}"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\\\\n", "\\n") + '"'
