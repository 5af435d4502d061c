"""Haystack: a ``Pipeline`` of N custom ``@component``s (W1) and a pipeline loop for W2.

W2 is Haystack's loop pattern: a ``BranchJoiner`` merges the planner's output with the loop-back edge, the
thinker asks the instant model for the step's arguments, and the tool runner emits ``next`` (back to the
joiner) or ``done`` (the pipeline's output). Pipelines are built once and reused for every run.
"""

from __future__ import annotations

import os

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no network; set before haystack is imported

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from haystack import Pipeline, component
from haystack.components.joiners import BranchJoiner

from . import common
from .common import Case, PlanModel, ToolArgs

NAME = "haystack"
W2_VARIANTS = ("plain",)
IMPORTS = {"import haystack": "import haystack"}
COMMANDS: dict[str, list[str]] = {}


def version() -> str:
    from importlib.metadata import version

    return version("haystack-ai")


# --- W1 ----------------------------------------------------------------------------------------------------------


@component
class AddStep:
    def __init__(self, index: int) -> None:
        self.text = common.step_args_text(index)

    @component.output_types(total=int)
    def run(self, total: int) -> dict[str, int]:
        return {"total": total + common.node_work(self.text)["value"]}


def w1(n: int) -> Case:
    pipeline = Pipeline()
    for index in range(n):
        pipeline.add_component(f"step_{index}", AddStep(index))
    for index in range(n - 1):
        pipeline.connect(f"step_{index}.total", f"step_{index + 1}.total")
    last = f"step_{n - 1}"

    def check(output: dict[str, Any]) -> None:
        assert output[last]["total"] == common.w1_expected_total(n), output

    return Case(run=lambda: pipeline.run({"step_0": {"total": 0}}), units=n, check=check)


# --- W2 ----------------------------------------------------------------------------------------------------------


@dataclass
class LoopState:
    plan: PlanModel
    index: int = 0
    results: list[int] = field(default_factory=list)


@component
class Planner:
    @component.output_types(state=LoopState)
    def run(self, request: str) -> dict[str, Any]:
        text = common.instant_llm(common.plan_prompt(request))
        return {"state": LoopState(PlanModel.model_validate(json.loads(text)))}


@component
class Thinker:
    @component.output_types(state=LoopState, args=ToolArgs)
    def run(self, state: LoopState) -> dict[str, Any]:
        prompt = common.thought_prompt(
            state.plan.goal, state.plan.steps[state.index], state.results[-1:] or None
        )
        args = ToolArgs.model_validate(json.loads(common.instant_llm(prompt, state.index)))
        return {"state": state, "args": args}


@component
class ToolRunner:
    @component.output_types(next=LoopState, done=list[int])
    def run(self, state: LoopState, args: ToolArgs) -> dict[str, Any]:
        state.results.append(common.add_one(args)["value"])
        state.index += 1
        if state.index < len(state.plan.steps):
            return {"next": state}
        return {"done": state.results}


def build_loop() -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("planner", Planner())
    pipeline.add_component("joiner", BranchJoiner(LoopState))
    pipeline.add_component("thinker", Thinker())
    pipeline.add_component("tool", ToolRunner())
    pipeline.connect("planner.state", "joiner.value")
    pipeline.connect("tool.next", "joiner.value")
    pipeline.connect("joiner.value", "thinker.state")
    pipeline.connect("thinker.state", "tool.state")
    pipeline.connect("thinker.args", "tool.args")
    return pipeline


def _run(pipeline: Pipeline) -> list[int]:
    return pipeline.run({"planner": {"request": common.REQUEST}})["tool"]["done"]


def w2(variant: str, tmp: Path) -> Case:
    pipeline = build_loop()

    def check(results: list[int]) -> None:
        assert results == common.W2_EXPECTED, results

    return Case(run=lambda: _run(pipeline), units=common.PLAN_STEPS, check=check)


# --- W4 ----------------------------------------------------------------------------------------------------------

_worker_pipeline: Pipeline | None = None


def w4_init() -> None:
    global _worker_pipeline
    _worker_pipeline = build_loop()


def w4_run() -> list[int]:
    assert _worker_pipeline is not None
    return _run(_worker_pipeline)
