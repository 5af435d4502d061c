"""pydantic-graph, W5 to W9: ``GraphBuilder`` step functions, built once and run with ``run_sync``.

W5 fan-out: ``split`` broadcasts to the ten workers (``edge_from(split).to(w0, …, w9)``: a fork, the branches run
as concurrent asyncio tasks); each worker goes to one ``join`` whose reducer (``reduce_list_append``) gathers the
parts; the join hands the list to ``merge``. W6 is a chain of 100 steps. W7 is W5's graph with K workers.
W8 map: the edge out of ``split`` picks its ``items`` (``transform``, the counterpart of Aeon's ``over: /items``)
and spreads them (``map()``: a fork with one branch per item, asyncio tasks) to the one ``work`` step, whose
branches meet at a ``join`` (``reduce_list_append``) in front of ``merge``. W9 loop: ``step → check`` into a
``decision`` whose branches match the ``route`` the step wrote: back to ``step`` (a cycle), or on to ``exit``.
The fork, the join and the decision are the builder's structure, not nodes.

One variant: a ``GraphBuilder`` graph keeps no history and has no persistence (the ``BaseNode`` API's
``FullStatePersistence`` belongs to the old ``Graph`` runner, which 2.x builds through the same builder).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from pydantic_graph import GraphBuilder, StepContext, reduce_list_append

from . import flows
from .common import Case

NAME = "pydantic_graph"
VARIANTS = {w: ("plain",) for w in ("W5", "W6", "W7", "W8", "W9")}

Value = dict[str, Any]


def version() -> str:
    from importlib.metadata import version

    return version("pydantic-graph")


async def _start(ctx: StepContext[None, None, Value]) -> Value:
    return flows.start_work(ctx.inputs)


async def _identity(ctx: StepContext[None, None, Value]) -> Value:
    return flows.identity_work(ctx.inputs)


async def _merge(ctx: StepContext[None, None, list[Value]]) -> Value:
    return flows.merge_work(ctx.inputs)


async def _map_start(ctx: StepContext[None, None, Value]) -> Value:
    return flows.map_start_work(ctx.inputs)


async def _map_work(ctx: StepContext[None, None, Value]) -> Value:
    return flows.add_work(ctx.inputs, flows.MAP_AMOUNT)


def _items(ctx: StepContext[None, None, Value]) -> list[Value]:
    return ctx.inputs["items"]  # type: ignore[no-any-return]


async def _loop_start(ctx: StepContext[None, None, Value]) -> Value:
    return flows.loop_start_work(ctx.inputs)


async def _count(ctx: StepContext[None, None, Value]) -> Value:
    return flows.count_work(ctx.inputs)


async def _check(ctx: StepContext[None, None, Value]) -> Value:
    return flows.route_work(ctx.inputs)


def _adder(builder: GraphBuilder[None, None, Value, Value], node_id: str, amount: int) -> Any:
    async def add(ctx: StepContext[None, None, Value]) -> Value:
        return flows.add_work(ctx.inputs, amount)

    return builder.step(add, node_id=node_id)


def build_fanout(width: int = flows.FANOUT_WIDTH) -> Any:
    builder: GraphBuilder[None, None, Value, Value] = GraphBuilder(input_type=Value, output_type=Value)
    start = builder.step(_start, node_id="start")
    split = builder.step(_identity, node_id="split")
    workers = [_adder(builder, f"w{i}", flows.amount(i)) for i in range(width)]
    join = builder.join(reduce_list_append, initial_factory=list, node_id="join")
    merge = builder.step(_merge, node_id="merge")
    done = builder.step(_identity, node_id="exit")
    builder.add(
        builder.edge_from(builder.start_node).to(start),
        builder.edge_from(start).to(split),
        builder.edge_from(split).to(*workers),
        *(builder.edge_from(worker).to(join) for worker in workers),
        builder.edge_from(join).to(merge),
        builder.edge_from(merge).to(done),
        builder.edge_from(done).to(builder.end_node),
    )
    return builder.build()


def build_chain() -> Any:
    builder: GraphBuilder[None, None, Value, Value] = GraphBuilder(input_type=Value, output_type=Value)
    path = [builder.start_node, builder.step(_start, node_id="start")]
    path += [_adder(builder, f"step_{i}", flows.amount(i)) for i in range(flows.CHAIN_STEPS)]
    path += [builder.step(_identity, node_id="exit"), builder.end_node]
    for first, second in itertools.pairwise(path):
        builder.add(builder.edge_from(first).to(second))
    return builder.build()


def build_map() -> Any:
    builder: GraphBuilder[None, None, Value, Value] = GraphBuilder(input_type=Value, output_type=Value)
    start = builder.step(_map_start, node_id="start")
    split = builder.step(_identity, node_id="split")
    work = builder.step(_map_work, node_id="work")
    join = builder.join(reduce_list_append, initial_factory=list, node_id="join")
    merge = builder.step(_merge, node_id="merge")
    done = builder.step(_identity, node_id="exit")
    builder.add(
        builder.edge_from(builder.start_node).to(start),
        builder.edge_from(start).to(split),
        builder.edge_from(split).transform(_items).map(downstream_join_id="join").to(work),
        builder.edge_from(work).to(join),
        builder.edge_from(join).to(merge),
        builder.edge_from(merge).to(done),
        builder.edge_from(done).to(builder.end_node),
    )
    return builder.build()


def _routed(route: str) -> Any:
    return lambda value: value["route"] == route


def build_loop() -> Any:
    builder: GraphBuilder[None, None, Value, Value] = GraphBuilder(input_type=Value, output_type=Value)
    start = builder.step(_loop_start, node_id="start")
    step = builder.step(_count, node_id="step")
    check = builder.step(_check, node_id="check")
    done = builder.step(_identity, node_id="exit")
    decide = (
        builder.decision(node_id="route")
        .branch(builder.match(Value, matches=_routed(flows.LOOP_AGAIN)).to(step))
        .branch(builder.match(Value, matches=_routed(flows.LOOP_DONE)).to(done))
    )
    builder.add(
        builder.edge_from(builder.start_node).to(start),
        builder.edge_from(start).to(step),
        builder.edge_from(step).to(check),
        builder.edge_from(check).to(decide),
        builder.edge_from(done).to(builder.end_node),
    )
    return builder.build()


def _case(graph: Any, nodes: int, check_output: Any, given: Any = flows.INPUT) -> Case:
    return Case(run=lambda: graph.run_sync(inputs=dict(given)), units=nodes, check=check_output)


def fanout(variant: str, tmp: Path, width: int = flows.FANOUT_WIDTH) -> Case:
    return _case(build_fanout(width), flows.fanout_nodes(width), flows.fanout_check(width))


def chain(variant: str, tmp: Path) -> Case:
    return _case(build_chain(), flows.CHAIN_NODES, flows.check_chain)


def map_items(variant: str, tmp: Path, items: int = flows.MAP_ITEMS) -> Case:
    return _case(build_map(), flows.map_nodes(items), flows.map_check(items), flows.map_input(items))


def loop(variant: str, tmp: Path) -> Case:
    return _case(build_loop(), flows.LOOP_NODES, flows.check_loop, flows.LOOP_INPUT)
