"""What every framework shares: the prepared model output, the node work, the trivial tool and the checks.

Only orchestration may differ between frameworks, so the work inside a node is this module's, everywhere:
parse the prepared JSON text (``json.loads``), validate it with a pydantic model, call the trivial tool.
The "LLM" is :func:`instant_llm`: a deterministic function that returns prepared JSON text at once.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

#: W2: the model writes a plan of this many tool steps, then one "thought" (an instant call) per step.
PLAN_STEPS = 10
REQUEST = "add one to each number from 1 to 10"
TOOL_NAME = "add_one"


class ToolArgs(BaseModel):
    """The trivial tool's input, validated with pydantic in every framework."""

    value: int


class PlanStepModel(BaseModel):
    step_id: str
    description: str
    tool: str


class PlanModel(BaseModel):
    """The W2 plan as the peers validate it (Aeon validates the same text with its own Plan model)."""

    goal: str
    steps: list[PlanStepModel]


def add_one(args: ToolArgs) -> dict[str, int]:
    """The trivial tool."""
    return {"value": args.value + 1}


def tool_from_kwargs(**kwargs: Any) -> dict[str, int]:
    """The tool as a framework that already parsed the arguments calls it: pydantic, then the tool."""
    return add_one(ToolArgs.model_validate(kwargs))


def node_work(text: str) -> dict[str, int]:
    """One node's work: parse the prepared JSON, validate it with pydantic, call the tool."""
    return add_one(ToolArgs.model_validate(json.loads(text)))


# --- prepared model output ---------------------------------------------------------------------------------------


@cache
def step_args_text(index: int) -> str:
    """The arguments of step ``index`` (0-based) as the model would write them: ``{"value": index + 1}``."""
    return json.dumps({"value": index + 1})


def w1_expected_total(n: int) -> int:
    """W1 chains add up each step's result: sum(index + 2) for index in range(n)."""
    return sum(index + 2 for index in range(n))


@cache
def w1_plan(n: int) -> str:
    """W1 for Aeon: the whole plan as JSON text, every step carrying its arguments (no model call per step)."""
    steps = [
        {
            "step_id": str(index + 1),
            "description": f"add one to {index + 1}",
            "tool": TOOL_NAME,
            "arguments": {"value": index + 1},
        }
        for index in range(n)
    ]
    return json.dumps({"goal": f"run {n} deterministic steps", "steps": steps})


PLAN_TEXT = json.dumps(
    {
        "goal": REQUEST,
        "steps": [
            {"step_id": str(index + 1), "description": f"add one to {index + 1}", "tool": TOOL_NAME}
            for index in range(PLAN_STEPS)
        ],
    }
)

#: W2: what a finished run must have produced, in every framework (the tool results, in step order).
W2_EXPECTED = [index + 2 for index in range(PLAN_STEPS)]


def instant_llm(prompt: str, step: int | None = None) -> str:
    """The instant deterministic model: the plan when ``step`` is None, else the arguments of ``step``."""
    return PLAN_TEXT if step is None else step_args_text(step)


def plan_prompt(request: str) -> str:
    return f"Write a plan for: {request}"


def thought_prompt(goal: str, step: PlanStepModel, last_result: Any) -> str:
    """The next call sees the previous step's result (as Aeon's prompt does)."""
    return f"Goal: {goal}\nLast result: {json.dumps(last_result)}\nStep {step.step_id}: {step.description}"


def file_bytes(path: Path) -> int:
    """A log's size, or a SQLite database's once its write-ahead log is folded in."""
    if path.suffix == ".db":
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


# --- what a workload hands the runner ------------------------------------------------------------------------------


@dataclass
class Case:
    """One framework's workload, built and ready: ``run()`` is the timed unit, ``check(run())`` verifies it.

    ``units`` is how many steps (W1), cycles (W2) or nodes (W5, W6) one ``run()`` executes; ``bytes_written``
    measures what a persistent variant wrote so far (divided by the units run, by the runner);
    ``history_bytes`` (W5, W6) does one more run, untimed, and returns the bytes of history or checkpoints it
    kept per node.
    """

    run: Any
    units: int
    check: Any
    close: Any = field(default=lambda: None)
    bytes_written: Any = None
    history_bytes: Any = None
