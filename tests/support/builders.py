"""Builders for the plans and model answers tests script."""

from __future__ import annotations

import json
from typing import Any


def plan(*steps: dict[str, Any], goal: str = "Add 5 and 10") -> dict[str, Any]:
    return {"goal": goal, "steps": list(steps)}


def tool_step(
    step_id: str, tool: str, arguments: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    step = {"step_id": step_id, "description": f"use {tool}", "tool": tool, **extra}
    if arguments is not None:
        step["arguments"] = arguments
    return step


def llm_step(step_id: str, description: str = "report the result") -> dict[str, Any]:
    return {"step_id": step_id, "description": description, "agent": "llm"}


def answer(text: str) -> str:
    return json.dumps({"answer": text})
