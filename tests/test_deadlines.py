"""Issue 13, item 14: a tool that blocks and a run that goes on too long end in structured failures, on time."""

from __future__ import annotations

import importlib
import json
import threading
import time
from typing import Any

from aeon_kernel import DeadlineError, Engine, FunctionTool, hookimpl
from aeon_kernel.config import AeonConfig
from aeon_kernel.kit import current_idempotency_key
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from tests.support.builders import plan, tool_step


class Slow:
    """A tool that blocks until released (or for ``seconds``), with a timeout; it notes the key it ran under."""

    def __init__(self, timeout: float | None, seconds: float = 30.0) -> None:
        self.release = threading.Event()
        self.keys: list[str | None] = []
        self.timeout, self.seconds = timeout, seconds

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        def wait(n: int) -> dict[str, Any]:
            self.keys.append(current_idempotency_key())
            self.release.wait(self.seconds)
            return {"n": n}

        register(
            "slow",
            lambda: FunctionTool(
                name="slow",
                description="wait",
                input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                output_schema={"type": "object"},
                function=wait,
                timeout=self.timeout,
            ),
        )


def engine(replies: list[Any], plugin: Any) -> Engine:
    builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    config = AeonConfig().with_choice("llm", "scripted", responses=replies)
    return Engine(config, plugins=[*builtins, plugin], autoload=False)


def test_a_tool_past_its_timeout_fails_its_step_and_the_run_goes_on() -> None:
    slow = Slow(timeout=0.2)
    steps = plan(tool_step("1", "slow", {"n": 1}), tool_step("2", "echo", {"message": "after"}), goal="wait")
    with engine([json.dumps(steps)], slow) as built:
        began = time.monotonic()
        result = built.run("wait, then echo")
        took = time.monotonic() - began
        slow.release.set()
    assert took < 10  # not the 30 s the tool would take
    (first, second) = result["final_state"]["plan"]["steps"]
    assert first["status"] == "failed" and "within its timeout of 0.2 s" in first["failure"]
    assert second["status"] == "complete"  # the run went on
    (call, _) = result["final_state"]["tool_history"]
    assert call["error"]["type"] == "DeadlineError"
    assert slow.keys == [f"{result['run_id']}:1"]  # the call ran with its idempotency key


def test_a_tool_within_its_timeout_answers_as_usual() -> None:
    slow = Slow(timeout=5.0, seconds=0.0)
    with engine([json.dumps(plan(tool_step("1", "slow", {"n": 7}), goal="wait"))], slow) as built:
        result = built.run("wait")
    assert result["status"] == "completed" and result["answer"] == {"n": 7}


def test_a_run_past_its_deadline_ends_failed_at_the_next_cycle_and_keeps_its_state() -> None:
    slow = Slow(timeout=None, seconds=0.3)
    steps = plan(*(tool_step(str(i), "slow", {"n": i}) for i in range(1, 6)), goal="wait five times")
    with engine([json.dumps(steps)], slow) as built:
        result = built.run("wait five times", deadline=0.5)
    assert result["status"] == "failed"
    (error,) = [e for e in result["errors"] if e["type"] == DeadlineError.__name__]
    assert "deadline of 0.5 s passed" in error["message"]
    statuses = [s["status"] for s in result["final_state"]["plan"]["steps"]]
    assert statuses[:2] == ["complete", "complete"] and "pending" in statuses  # stopped between cycles
