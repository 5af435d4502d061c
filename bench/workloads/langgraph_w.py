"""LangGraph: a ``StateGraph`` chain of N nodes (W1) and a plan → thought → tool loop with a conditional edge (W2).

The compiled graph is built once and reused for every run, as LangGraph recommends. W2 runs without a
checkpointer, with ``InMemorySaver`` and with ``SqliteSaver`` (a fresh ``thread_id`` per run).
"""

from __future__ import annotations

import itertools
import json
import operator
import sqlite3
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from . import common
from .common import Case, PlanModel, ToolArgs

NAME = "langgraph"
W2_VARIANTS = ("plain", "memory", "sqlite")
IMPORTS = {"import langgraph.graph": "import langgraph.graph"}
COMMANDS: dict[str, list[str]] = {}


def version() -> str:
    from importlib.metadata import version

    return version("langgraph")


# --- W1 ----------------------------------------------------------------------------------------------------------


class ChainState(TypedDict):
    total: int


def _chain_node(index: int) -> Any:
    text = common.step_args_text(index)

    def node(state: ChainState) -> dict[str, int]:
        return {"total": state["total"] + common.node_work(text)["value"]}

    return node


def w1(n: int) -> Case:
    builder = StateGraph(ChainState)
    names = [f"step_{index}" for index in range(n)]
    for index, name in enumerate(names):
        builder.add_node(name, _chain_node(index))
    builder.add_edge(START, names[0])
    for first, second in itertools.pairwise(names):
        builder.add_edge(first, second)
    builder.add_edge(names[-1], END)
    graph = builder.compile()
    config = {"recursion_limit": n + 10}

    def check(state: ChainState) -> None:
        assert state["total"] == common.w1_expected_total(n), state

    return Case(run=lambda: graph.invoke({"total": 0}, config), units=n, check=check)


# --- W2 ----------------------------------------------------------------------------------------------------------


class LoopState(TypedDict, total=False):
    request: str
    plan: PlanModel
    index: int
    args: ToolArgs
    results: Annotated[list[int], operator.add]


def plan(state: LoopState) -> dict[str, Any]:
    text = common.instant_llm(common.plan_prompt(state["request"]))
    return {"plan": PlanModel.model_validate(json.loads(text)), "index": 0}


def thought(state: LoopState) -> dict[str, Any]:
    index, results = state["index"], state.get("results") or []
    prompt = common.thought_prompt(state["plan"].goal, state["plan"].steps[index], results[-1:] or None)
    return {"args": ToolArgs.model_validate(json.loads(common.instant_llm(prompt, index)))}


def tool(state: LoopState) -> dict[str, Any]:
    return {"results": [common.add_one(state["args"])["value"]], "index": state["index"] + 1}


def route(state: LoopState) -> str:
    return "thought" if state["index"] < len(state["plan"].steps) else END


def build_loop(checkpointer: Any = None) -> Any:
    builder = StateGraph(LoopState)
    builder.add_node("plan", plan)
    builder.add_node("thought", thought)
    builder.add_node("tool", tool)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "thought")
    builder.add_edge("thought", "tool")
    builder.add_conditional_edges("tool", route, ["thought", END])
    return builder.compile(checkpointer=checkpointer)


def _run(graph: Any, threaded: bool) -> list[int]:
    config = {"configurable": {"thread_id": uuid.uuid4().hex}} if threaded else None
    return graph.invoke({"request": common.REQUEST, "results": []}, config)["results"]


def w2(variant: str, tmp: Path) -> Case:
    checkpointer, db, close = None, None, lambda: None
    if variant == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        checkpointer = InMemorySaver()
    elif variant == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        db = tmp / "langgraph.db"
        connection = sqlite3.connect(db, check_same_thread=False)  # what SqliteSaver.from_conn_string does
        checkpointer, close = SqliteSaver(connection), connection.close
        checkpointer.setup()  # WAL; then the same durability as Aeon's store: WAL + synchronous=NORMAL
        connection.execute("PRAGMA synchronous=NORMAL")
    graph = build_loop(checkpointer)

    def check(results: list[int]) -> None:
        assert results == common.W2_EXPECTED, results

    return Case(
        run=lambda: _run(graph, checkpointer is not None),
        units=common.PLAN_STEPS,
        check=check,
        close=close,
        bytes_written=(lambda: common.file_bytes(db)) if db is not None else None,
    )


# --- W4 ----------------------------------------------------------------------------------------------------------

_worker_graph: Any = None


def w4_init() -> None:
    """Process-pool initializer: one compiled graph per worker, reused by every run."""
    global _worker_graph
    _worker_graph = build_loop()


def w4_run() -> list[int]:
    return _run(_worker_graph, threaded=False)
