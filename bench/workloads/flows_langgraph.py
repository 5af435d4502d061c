"""LangGraph, W5 to W9: a ``StateGraph`` of the same nodes, compiled once and invoked for every run.

W5 fan-out: ``split`` has ten plain edges to the workers, which run as parallel branches in one superstep (the
``send`` variant dispatches them with ``Send`` from a conditional edge instead); each worker returns its part into
a list channel whose reducer (``operator.add``) gathers them, and ``merge`` — behind a waiting edge from all ten
— sums them. W6 is a chain of 100 nodes. W7 is W5's graph with K workers (``plain`` only).
W8 map: a conditional edge from ``split`` returns one ``Send("work", item)`` per item (LangGraph's map-reduce),
each ``work`` returns its part into the ``operator.add`` list channel, and the plain edge ``work → merge`` runs the
merge once, in the superstep after all of them. W9 loop: a cycle, ``step → check`` and a conditional edge from
``check`` reading the ``route`` the node wrote (``step`` again, or ``exit``); ``recursion_limit`` is raised above
the 202 supersteps.

Variants: ``plain`` (no checkpointer: LangGraph keeps no history), ``memory`` (``InMemorySaver`` and a fresh
``thread_id`` per run: a checkpoint per superstep plus every node's writes — the closest to Aeon's always-on
history). The bytes the checkpointer kept per node are measured on one extra run (its serialised checkpoints,
metadata, channel blobs and pending writes).
"""

from __future__ import annotations

import itertools
import operator
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from . import flows
from .common import Case

NAME = "langgraph"
#: W7 (the wide fan-out, K = 100 and 1,000): the plain edges only, W5's cheapest variant
#: W8 (the map): ``Send`` is the only way to express it; ``send`` has no checkpointer, ``memory`` adds InMemorySaver
VARIANTS = {
    "W5": ("plain", "send", "memory"),
    "W6": ("plain", "memory"),
    "W7": ("plain",),
    "W8": ("send", "memory"),
    "W9": ("plain", "memory"),
}


def version() -> str:
    from importlib.metadata import version

    return version("langgraph")


class FanState(TypedDict, total=False):
    total: int
    note: str
    parts: Annotated[list[dict[str, int]], operator.add]


class ChainState(TypedDict, total=False):
    total: int
    note: str


class MapState(TypedDict, total=False):
    items: list[dict[str, int]]
    note: str
    total: int
    parts: Annotated[list[dict[str, int]], operator.add]


class LoopState(TypedDict, total=False):
    n: int
    note: str
    route: str


# State updates are partial in LangGraph: a node returns the keys it changes.


def _start(state: dict[str, Any]) -> dict[str, int]:
    return flows.start_work(state)


def _identity(state: dict[str, Any]) -> dict[str, Any]:
    flows.identity_work(state)
    return {}


def _worker(amount: int) -> Any:
    def worker(state: dict[str, Any]) -> dict[str, list[dict[str, int]]]:
        return {"parts": [flows.add_work(state, amount)]}

    return worker


def _merge(state: FanState) -> dict[str, int]:
    return flows.merge_work(state["parts"])


def _step(amount: int) -> Any:
    def step(state: ChainState) -> dict[str, int]:
        return flows.add_work(state, amount)

    return step


def build_fanout(send: bool = False, checkpointer: Any = None, width: int = flows.FANOUT_WIDTH) -> Any:
    workers = [f"w{i}" for i in range(width)]
    builder = StateGraph(FanState)
    builder.add_node("start", _start)
    builder.add_node("split", _identity)
    for i, name in enumerate(workers):
        builder.add_node(name, _worker(flows.amount(i)))
    builder.add_node("merge", _merge)
    builder.add_node("exit", _identity)
    builder.add_edge(START, "start")
    builder.add_edge("start", "split")
    if send:
        builder.add_conditional_edges(
            "split", lambda state: [Send(name, {"total": state["total"]}) for name in workers], workers
        )
    else:
        for name in workers:
            builder.add_edge("split", name)
    builder.add_edge(workers, "merge")  # waits for all of them
    builder.add_edge("merge", "exit")
    builder.add_edge("exit", END)
    return builder.compile(checkpointer=checkpointer)


def build_chain(checkpointer: Any = None) -> Any:
    steps = [f"step_{i}" for i in range(flows.CHAIN_STEPS)]
    builder = StateGraph(ChainState)
    builder.add_node("start", _start)
    for i, name in enumerate(steps):
        builder.add_node(name, _step(flows.amount(i)))
    builder.add_node("exit", _identity)
    path = [START, "start", *steps, "exit", END]
    for first, second in itertools.pairwise(path):
        builder.add_edge(first, second)
    return builder.compile(checkpointer=checkpointer)


def _map_start(state: MapState) -> dict[str, Any]:
    return flows.map_start_work(state)


def _map_work(item: dict[str, int]) -> dict[str, list[dict[str, int]]]:
    """A ``Send`` target: its input is the item the ``Send`` carries, not the graph's state."""
    return {"parts": [flows.add_work(item, flows.MAP_AMOUNT)]}


def _send_each(state: MapState) -> list[Send]:
    return [Send("work", item) for item in state["items"]]


def build_map(checkpointer: Any = None) -> Any:
    builder = StateGraph(MapState)
    builder.add_node("start", _map_start)
    builder.add_node("split", _identity)
    builder.add_node("work", _map_work)
    builder.add_node("merge", _merge)
    builder.add_node("exit", _identity)
    builder.add_edge(START, "start")
    builder.add_edge("start", "split")
    builder.add_conditional_edges("split", _send_each, ["work"])
    builder.add_edge("work", "merge")
    builder.add_edge("merge", "exit")
    builder.add_edge("exit", END)
    return builder.compile(checkpointer=checkpointer)


def _loop_start(state: LoopState) -> dict[str, int]:
    return flows.loop_start_work(state)


def _count(state: LoopState) -> dict[str, int]:
    return flows.count_work(state)


def _check(state: LoopState) -> dict[str, Any]:
    return flows.route_work(state)


def _route(state: LoopState) -> str:
    return state["route"]


def build_loop(checkpointer: Any = None) -> Any:
    builder = StateGraph(LoopState)
    builder.add_node("start", _loop_start)
    builder.add_node("step", _count)
    builder.add_node("check", _check)
    builder.add_node("exit", _identity)
    builder.add_edge(START, "start")
    builder.add_edge("start", "step")
    builder.add_edge("step", "check")
    routes = {flows.LOOP_AGAIN: "step", flows.LOOP_DONE: "exit"}
    builder.add_conditional_edges("check", _route, routes)
    builder.add_edge("exit", END)
    return builder.compile(checkpointer=checkpointer)


def _saver_bytes(saver: Any, thread_id: str) -> int:
    """What ``InMemorySaver`` keeps for one thread: checkpoints with metadata, channel blobs, pending writes."""
    return (
        flows.payload_bytes(saver.storage.get(thread_id, {}))
        + flows.payload_bytes([v for k, v in saver.blobs.items() if k[0] == thread_id])
        + flows.payload_bytes([v for k, v in saver.writes.items() if k[0] == thread_id])
    )


def _case(
    graph: Any, saver: Any, nodes: int, check_output: Any, given: Any = flows.INPUT, key: str = "total"
) -> Case:
    limit = {"recursion_limit": nodes + 10}  # a superstep per node at most (W9: 202 supersteps)

    def invoke(thread_id: str | None = None) -> dict[str, Any]:
        config: dict[str, Any] = dict(limit)
        if saver is not None:
            config["configurable"] = {"thread_id": thread_id or uuid.uuid4().hex}
        return graph.invoke(dict(given), config)

    def check(state: dict[str, Any]) -> None:
        check_output({key: state[key]})

    def history_bytes() -> float:
        thread_id = uuid.uuid4().hex
        invoke(thread_id)
        return _saver_bytes(saver, thread_id) / nodes

    return Case(
        run=invoke,
        units=nodes,
        check=check,
        history_bytes=history_bytes if saver is not None else None,
    )


def _saver(variant: str) -> Any:
    if variant != "memory":
        return None
    from langgraph.checkpoint.memory import InMemorySaver

    return InMemorySaver()


def fanout(variant: str, tmp: Path, width: int = flows.FANOUT_WIDTH) -> Case:
    saver = _saver(variant)
    graph = build_fanout(send=variant == "send", checkpointer=saver, width=width)
    return _case(graph, saver, flows.fanout_nodes(width), flows.fanout_check(width))


def chain(variant: str, tmp: Path) -> Case:
    saver = _saver(variant)
    return _case(build_chain(saver), saver, flows.CHAIN_NODES, flows.check_chain)


def map_items(variant: str, tmp: Path, items: int = flows.MAP_ITEMS) -> Case:
    saver = _saver(variant)
    graph = build_map(saver)
    return _case(graph, saver, flows.map_nodes(items), flows.map_check(items), flows.map_input(items))


def loop(variant: str, tmp: Path) -> Case:
    saver = _saver(variant)
    return _case(build_loop(saver), saver, flows.LOOP_NODES, flows.check_loop, flows.LOOP_INPUT, key="n")
