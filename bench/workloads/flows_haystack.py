"""Haystack, W5, W6, W7 and W9: a ``Pipeline`` of custom ``@component``s, built once and run for every run.

W5 fan-out: the split's one output socket is connected to all ten workers' inputs (a socket may have many
receivers); the merge has one ``Variadic`` input that all ten workers connect to, and the pipeline runs it once
every worker has delivered. W6 is a chain of 100 components. ``Pipeline`` runs components one at a time
(``AsyncPipeline`` would run the workers concurrently). W7 is W5's pipeline with K workers.
W9 loop: a cycle, ``step → check → step``: ``check`` has two output sockets and emits on one of them (``step``
again, or ``done`` to the exit); ``step``'s input is ``GreedyVariadic`` (what Haystack's ``BranchJoiner`` does) so
that both the start and ``check`` may feed it; ``max_runs_per_component`` is raised above the 100 rounds.
W8, a map, cannot be expressed (:data:`NOT_EXPRESSIBLE`).

One variant: a Pipeline keeps no history of its runs (its tracing is off by default; snapshots are written
only at a break point).
"""

# No ``from __future__ import annotations`` here: Haystack reads the ``Variadic`` annotation at run time.
import os

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no network; set before haystack is imported

import itertools
from pathlib import Path
from typing import Any

from haystack import Pipeline, component
from haystack.core.component.types import GreedyVariadic, Variadic

from . import flows
from .common import Case

NAME = "haystack"
VARIANTS = {w: ("plain",) for w in ("W5", "W6", "W7", "W9")}
#: workloads this framework cannot express, and why (a row saying so, not a run)
NOT_EXPRESSIBLE = {
    "W8": "no dynamic fan-out: a Pipeline's graph is fixed when built and a component runs once per input it "
    "gets, so one subtask per list item (LangGraph's Send) has no counterpart short of a Python loop inside one "
    "component",
}


def version() -> str:
    from importlib.metadata import version

    return version("haystack-ai")


@component
class Start:
    @component.output_types(value=dict)
    def run(self, value: dict) -> dict[str, Any]:  # type: ignore[type-arg]
        return {"value": flows.start_work(value)}


@component
class Identity:
    @component.output_types(value=dict)
    def run(self, value: dict) -> dict[str, Any]:  # type: ignore[type-arg]
        return {"value": flows.identity_work(value)}


@component
class Add:
    def __init__(self, amount: int) -> None:
        self.amount = amount

    @component.output_types(value=dict)
    def run(self, value: dict) -> dict[str, Any]:  # type: ignore[type-arg]
        return {"value": flows.add_work(value, self.amount)}


@component
class Merge:
    @component.output_types(value=dict)
    def run(self, parts: Variadic[dict]) -> dict[str, Any]:  # type: ignore[type-arg]
        return {"value": flows.merge_work(list(parts))}


@component
class LoopStart:
    @component.output_types(value=dict)
    def run(self, value: dict) -> dict[str, Any]:  # type: ignore[type-arg]
        return {"value": flows.loop_start_work(value)}


@component
class Count:
    """The loop's ``step``: fed by the start once and by ``check`` every round after (a greedy variadic input)."""

    @component.output_types(value=dict)
    def run(self, value: GreedyVariadic[dict]) -> dict[str, Any]:  # type: ignore[type-arg]
        (given,) = value
        return {"value": flows.count_work(given)}


@component
class Check:
    """The loop's decision: its output goes out on the socket its ``route`` names."""

    @component.output_types(step=dict, done=dict)
    def run(self, value: dict) -> dict[str, Any]:  # type: ignore[type-arg]
        routed = flows.route_work(value)
        return {routed["route"]: routed}


def build_fanout(width: int = flows.FANOUT_WIDTH) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("start", Start())
    pipeline.add_component("split", Identity())
    workers = [f"w{i}" for i in range(width)]
    for i, name in enumerate(workers):
        pipeline.add_component(name, Add(flows.amount(i)))
    pipeline.add_component("merge", Merge())
    pipeline.add_component("exit", Identity())
    pipeline.connect("start.value", "split.value")
    for name in workers:
        pipeline.connect("split.value", f"{name}.value")
        pipeline.connect(f"{name}.value", "merge.parts")
    pipeline.connect("merge.value", "exit.value")
    return pipeline


def build_chain() -> Pipeline:
    pipeline = Pipeline()
    names = ["start", *(f"step_{i}" for i in range(flows.CHAIN_STEPS)), "exit"]
    pipeline.add_component("start", Start())
    for i in range(flows.CHAIN_STEPS):
        pipeline.add_component(f"step_{i}", Add(flows.amount(i)))
    pipeline.add_component("exit", Identity())
    for first, second in itertools.pairwise(names):
        pipeline.connect(f"{first}.value", f"{second}.value")
    return pipeline


def build_loop() -> Pipeline:
    pipeline = Pipeline(max_runs_per_component=flows.LOOP_ROUNDS + 10)
    pipeline.add_component("start", LoopStart())
    pipeline.add_component("step", Count())
    pipeline.add_component("check", Check())
    pipeline.add_component("exit", Identity())
    pipeline.connect("start.value", "step.value")
    pipeline.connect("step.value", "check.value")
    pipeline.connect(f"check.{flows.LOOP_AGAIN}", "step.value")
    pipeline.connect(f"check.{flows.LOOP_DONE}", "exit.value")
    return pipeline


def _case(pipeline: Pipeline, nodes: int, check_output: Any, given: Any = flows.INPUT) -> Case:
    def run() -> dict[str, Any]:
        return pipeline.run({"start": {"value": dict(given)}})["exit"]["value"]  # type: ignore[no-any-return]

    return Case(run=run, units=nodes, check=check_output)


def fanout(variant: str, tmp: Path, width: int = flows.FANOUT_WIDTH) -> Case:
    return _case(build_fanout(width), flows.fanout_nodes(width), flows.fanout_check(width))


def chain(variant: str, tmp: Path) -> Case:
    return _case(build_chain(), flows.CHAIN_NODES, flows.check_chain)


def loop(variant: str, tmp: Path) -> Case:
    return _case(build_loop(), flows.LOOP_NODES, flows.check_loop, flows.LOOP_INPUT)
