"""pydantic-graph: a ``GraphBuilder`` chain of N steps (W1) and ``BaseNode`` classes thought → tool (W2).

pydantic-graph 2.x builds every graph with ``GraphBuilder``: W1 chains N step functions; W2 starts with a
``plan`` step whose return type hands over to the ``Thought`` and ``Tool`` nodes (``BaseNode`` subclasses whose
return hints are the edges). Graphs are built once and run with ``run_sync`` (which reuses one event loop).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_graph import BaseNode, End, GraphBuilder, GraphRunContext, StepContext

from . import common
from .common import Case, PlanModel, ToolArgs

NAME = "pydantic_graph"
W2_VARIANTS = ("plain",)
IMPORTS = {"import pydantic_graph": "import pydantic_graph"}
COMMANDS: dict[str, list[str]] = {}


def version() -> str:
    from importlib.metadata import version

    return version("pydantic-graph")


# --- W1 ----------------------------------------------------------------------------------------------------------


def _chain_step(builder: GraphBuilder[None, None, int, int], index: int) -> Any:
    text = common.step_args_text(index)

    async def step(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs + common.node_work(text)["value"]

    return builder.step(step, node_id=f"step_{index}")


def w1(n: int) -> Case:
    builder = GraphBuilder(input_type=int, output_type=int)
    steps = [_chain_step(builder, index) for index in range(n)]
    builder.add(builder.edge_from(builder.start_node).to(steps[0]))
    for first, second in itertools.pairwise(steps):
        builder.add(builder.edge_from(first).to(second))
    builder.add(builder.edge_from(steps[-1]).to(builder.end_node))
    graph = builder.build()

    def check(total: int) -> None:
        assert total == common.w1_expected_total(n), total

    return Case(run=lambda: graph.run_sync(inputs=0), units=n, check=check)


# --- W2 ----------------------------------------------------------------------------------------------------------


@dataclass
class LoopState:
    request: str = common.REQUEST
    plan: PlanModel | None = None
    index: int = 0
    results: list[int] = field(default_factory=list)


@dataclass
class Thought(BaseNode[LoopState]):
    async def run(self, ctx: GraphRunContext[LoopState]) -> Tool:
        state = ctx.state
        assert state.plan is not None
        prompt = common.thought_prompt(
            state.plan.goal, state.plan.steps[state.index], state.results[-1:] or None
        )
        return Tool(ToolArgs.model_validate(json.loads(common.instant_llm(prompt, state.index))))


@dataclass
class Tool(BaseNode[LoopState, None, list[int]]):
    args: ToolArgs

    async def run(self, ctx: GraphRunContext[LoopState]) -> Thought | End[list[int]]:
        state = ctx.state
        assert state.plan is not None
        state.results.append(common.add_one(self.args)["value"])
        state.index += 1
        return Thought() if state.index < len(state.plan.steps) else End(state.results)


async def plan(ctx: StepContext[LoopState, None, None]) -> Thought:
    text = common.instant_llm(common.plan_prompt(ctx.state.request))
    ctx.state.plan = PlanModel.model_validate(json.loads(text))
    return Thought()


def build_loop() -> Any:
    builder = GraphBuilder(state_type=LoopState, output_type=list[int])
    start = builder.step(plan)
    builder.add(builder.edge_from(builder.start_node).to(start), builder.node(Thought), builder.node(Tool))
    return builder.build()


def w2(variant: str, tmp: Path) -> Case:
    graph = build_loop()

    def check(results: list[int]) -> None:
        assert results == common.W2_EXPECTED, results

    return Case(run=lambda: graph.run_sync(state=LoopState()), units=common.PLAN_STEPS, check=check)


# --- W4 ----------------------------------------------------------------------------------------------------------

_worker_graph: Any = None


def w4_init() -> None:
    global _worker_graph
    _worker_graph = build_loop()


def w4_run() -> list[int]:
    return _worker_graph.run_sync(state=LoopState())
