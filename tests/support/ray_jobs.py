"""A plugin for the executor tests that Ray workers import by name (``plugins=["tests.support.ray_jobs"]``).

A model that plans from the request, not by call order (tasks end in any order, on any worker): a request is
``job {json}`` and its plan is ``steps`` calls of ``nap`` (a sleep returning its value), the last one ``boom``
(raises) or ``crash`` (ends the worker's process) when the request says so. Each construction of the model appends
its process id to the file ``$AEON_RAY_JOBS_BUILDS`` names, so a test counts how often a model was loaded, and where.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

from aeon_kernel import FunctionTool, LLMAdapter, LLMResponse, ToolError, hookimpl

BUILDS_ENV = "AEON_RAY_JOBS_BUILDS"
OBJECT = {"type": "object"}


def job(word: str, *, steps: int = 2, nap: float = 0.0, boom: bool = False, crash: bool = False) -> str:
    return "job " + json.dumps({"word": word, "steps": steps, "nap": nap, "boom": boom, "crash": crash})


class ByRequest(LLMAdapter):
    model_id = "by-request"

    def __init__(self) -> None:
        builds = os.environ.get(BUILDS_ENV)
        if builds:
            with open(builds, "a", encoding="utf-8") as out:
                out.write(f"{os.getpid()}\n")

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        spec = json.loads(re.findall(r"job (\{[^{}]*\})", prompt)[-1])
        last = "crash" if spec["crash"] else "boom" if spec["boom"] else "nap"
        steps = [
            {
                "step_id": f"{spec['word']}{i}",
                "description": "nap",
                "tool": last if i == spec["steps"] else "nap",
                "arguments": {"seconds": spec["nap"], "value": f"{spec['word']}-{i}"},
            }
            for i in range(1, spec["steps"] + 1)
        ]
        return {"text": json.dumps({"goal": f"job {spec['word']}", "steps": steps}), "usage": {}}


def nap(seconds: float, value: str) -> dict[str, Any]:
    time.sleep(seconds)
    return {"value": value}


def boom(seconds: float, value: str) -> dict[str, Any]:
    raise ToolError(f"boom on {value}")


def crash(seconds: float, value: str) -> dict[str, Any]:
    os._exit(3)  # the worker's process dies mid-task


@hookimpl
def aeon_register_llm_adapters(register: Any) -> None:
    register("by_request", ByRequest)


@hookimpl
def aeon_register_tools(register: Any) -> None:
    for name, function in (("nap", nap), ("boom", boom), ("crash", crash)):
        register(
            name,
            lambda name=name, function=function: FunctionTool(
                name=name,
                description=f"{name} for a while",
                input_schema=OBJECT,
                output_schema=OBJECT,
                function=function,
            ),
        )
