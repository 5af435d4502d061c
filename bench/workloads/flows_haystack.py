"""Haystack, W5, W6 and W7: a ``Pipeline`` of custom ``@component``s, built once and run for every run.

W5 fan-out: the split's one output socket is connected to all ten workers' inputs (a socket may have many
receivers); the merge has one ``Variadic`` input that all ten workers connect to, and the pipeline runs it once
every worker has delivered. W6 is a chain of 100 components. ``Pipeline`` runs components one at a time
(``AsyncPipeline`` would run the workers concurrently). W7 is W5's pipeline with K workers.

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
from haystack.core.component.types import Variadic

from . import flows
from .common import Case

NAME = "haystack"
VARIANTS = {"W5": ("plain",), "W6": ("plain",), "W7": ("plain",)}


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


def _case(pipeline: Pipeline, nodes: int, check_output: Any) -> Case:
    def run() -> dict[str, Any]:
        return pipeline.run({"start": {"value": dict(flows.INPUT)}})["exit"]["value"]  # type: ignore[no-any-return]

    return Case(run=run, units=nodes, check=check_output)


def fanout(variant: str, tmp: Path, width: int = flows.FANOUT_WIDTH) -> Case:
    return _case(build_fanout(width), flows.fanout_nodes(width), flows.fanout_check(width))


def chain(variant: str, tmp: Path) -> Case:
    return _case(build_chain(), flows.CHAIN_NODES, flows.check_chain)
