"""The floor: the same node work in a plain Python loop, with no framework at all."""

from __future__ import annotations

import json
from pathlib import Path

from . import common
from .common import Case, PlanModel, ToolArgs

NAME = "bare"
W2_VARIANTS = ("plain",)
IMPORTS: dict[str, str] = {}
COMMANDS: dict[str, list[str]] = {}


def version() -> str:
    import platform

    return "python " + platform.python_version()


def w1(n: int) -> Case:
    texts = [common.step_args_text(index) for index in range(n)]

    def run() -> int:
        total = 0
        for text in texts:
            total += common.node_work(text)["value"]
        return total

    def check(total: int) -> None:
        assert total == common.w1_expected_total(n), total

    return Case(run=run, units=n, check=check)


def w2_run() -> list[int]:
    plan = PlanModel.model_validate(json.loads(common.instant_llm(common.plan_prompt(common.REQUEST))))
    results: list[int] = []
    for index, step in enumerate(plan.steps):
        prompt = common.thought_prompt(plan.goal, step, results[-1:] or None)
        args = ToolArgs.model_validate(json.loads(common.instant_llm(prompt, index)))
        results.append(common.add_one(args)["value"])
    return results


def w2(variant: str, tmp: Path) -> Case:
    def check(results: list[int]) -> None:
        assert results == common.W2_EXPECTED, results

    return Case(run=w2_run, units=common.PLAN_STEPS, check=check)


def w4_init() -> None:
    pass


def w4_run() -> list[int]:
    return w2_run()
