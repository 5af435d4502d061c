"""LangGraph, W5, W6 and W7: a ``StateGraph`` of the same nodes, compiled once and invoked for every run.

W5 fan-out: ``split`` has ten plain edges to the workers, which run as parallel branches in one superstep (the
``send`` variant dispatches them with ``Send`` from a conditional edge instead); each worker returns its part into
a list channel whose reducer (``operator.add``) gathers them, and ``merge`` — behind a waiting edge from all ten
— sums them. W6 is a chain of 100 nodes. W7 is W5's graph with K workers (``plain`` only).

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
VARIANTS = {"W5": ("plain", "send", "memory"), "W6": ("plain", "memory"), "W7": ("plain",)}


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


def _saver_bytes(saver: Any, thread_id: str) -> int:
    """What ``InMemorySaver`` keeps for one thread: checkpoints with metadata, channel blobs, pending writes."""
    return (
        flows.payload_bytes(saver.storage.get(thread_id, {}))
        + flows.payload_bytes([v for k, v in saver.blobs.items() if k[0] == thread_id])
        + flows.payload_bytes([v for k, v in saver.writes.items() if k[0] == thread_id])
    )


def _case(graph: Any, saver: Any, nodes: int, check_output: Any) -> Case:
    limit = {"recursion_limit": nodes + 10}

    def invoke(thread_id: str | None = None) -> dict[str, Any]:
        config: dict[str, Any] = dict(limit)
        if saver is not None:
            config["configurable"] = {"thread_id": thread_id or uuid.uuid4().hex}
        return graph.invoke(dict(flows.INPUT), config)

    def check(state: dict[str, Any]) -> None:
        check_output({"total": state["total"]})

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
