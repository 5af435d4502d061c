"""A model, a tool and a cycle hook that stop at a chosen point, for the Ctrl-C tests (issue 27).

Installed as a plugin (``tests/runtime/test_interrupts.py`` gives the ``aeon`` command a dist-info entry point to
this module), it registers:

* the ``interrupting`` model, which answers by request, not by call order — the plan :data:`PLAN` to a planning
  prompt, ``{"answer": "noted <step>"}`` to an ``agent: "llm"`` step — so a run resumed in another process gets
  the same answers. With ``interrupt_at = N`` it raises ``KeyboardInterrupt`` on its N-th call (as Ctrl-C would,
  for the tests that run in the test's own process; ``raises = "SystemExit"``: that instead);
* the ``ledger`` tool of :mod:`tests.support.ledger` (each idempotency key once in ``ledger.txt``), which also
  appends every execution, repeats included, to ``executions.txt``;
* an ``aeon_cycle_end`` hook.

Each of them stops at the point ``$AEON_TEST_INTERRUPT_AT`` names, with files in ``$AEON_TEST_INTERRUPT_DIR``:

* ``model:plan`` inside the planning model call, ``model:ID`` inside the model call of the llm step ID;
* ``tool:N`` inside ledger step N, after its side effect;
* ``cycle:K`` at the boundary after cycle K (committed, in ``aeon_cycle_end``).

There it writes ``entered-<point>`` (``:`` as ``-``) and waits for a file ``release`` (a minute at most): the
test sends SIGINT meanwhile.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from aeon_kernel import LLMAdapter, LLMResponse, LogEntry, Register, hookimpl
from aeon_kernel.kit import current_idempotency_key
from tests.support import ledger

DIR_ENV = "AEON_TEST_INTERRUPT_DIR"
AT_ENV = "AEON_TEST_INTERRUPT_AT"
#: four steps, five cycles (the plan, then one per step): a tool, the model, a tool, the model
PLAN: dict[str, Any] = {
    "goal": "record two things and note them",
    "steps": [
        {"step_id": "1", "description": "record 1", "tool": "ledger", "arguments": {"n": 1}},
        {"step_id": "2", "description": "note what was recorded", "agent": "llm"},
        {"step_id": "3", "description": "record 3", "tool": "ledger", "arguments": {"n": 3}},
        {"step_id": "4", "description": "report both", "agent": "llm"},
    ],
}
REQUEST = "record two things and note them"
_STEP = re.compile(r"Now do step (\S+?):")


def marker(point: str, directory: Path | None = None) -> Path:
    return (directory or Path(os.environ[DIR_ENV])) / f"entered-{point.replace(':', '-')}"


def stop_here(point: str) -> None:
    """At the point the environment names: say so (a marker file) and wait to be interrupted."""
    if os.environ.get(AT_ENV) != point:
        return
    entered = marker(point)
    partial = entered.with_name(entered.name + ".partial")
    partial.write_text(point, encoding="utf-8")
    partial.replace(entered)  # the test sees the marker whole
    deadline = time.monotonic() + 60
    while not (entered.parent / "release").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"nobody interrupted or released {point}")
        time.sleep(0.005)


class InterruptingModel(LLMAdapter):
    model_id = "interrupting"

    def __init__(self, interrupt_at: int = 0, raises: str = "KeyboardInterrupt") -> None:
        self.interrupt_at, self.raises = (
            interrupt_at,
            {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit}[raises],
        )
        self.calls = 0

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        self.calls += 1
        if self.calls == self.interrupt_at:
            raise self.raises  # what Ctrl-C (or a plugin's sys.exit) raises in the middle of a model call
        step = _STEP.findall(prompt)
        if step:
            stop_here(f"model:{step[-1]}")
            return {"text": json.dumps({"answer": f"noted {step[-1]}"}), "usage": {"completion_tokens": 3}}
        stop_here("model:plan")
        return {"text": json.dumps(PLAN), "usage": {"completion_tokens": 40}}


class InterruptingLedger(ledger.LedgerTool):
    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        key = current_idempotency_key()
        with (Path(os.environ[ledger.LEDGER_ENV]).parent / "executions.txt").open("a") as executions:
            executions.write(f"{key}\n")
        result = super().invoke(**kwargs)
        stop_here(f"tool:{kwargs['n']}")
        return result


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@hookimpl
def aeon_register_llm_adapters(register: Register) -> None:
    register("interrupting", InterruptingModel)


@hookimpl
def aeon_register_tools(register: Register) -> None:
    register("ledger", InterruptingLedger)


@hookimpl
def aeon_cycle_end(entry: LogEntry, state: Any) -> None:
    stop_here(f"cycle:{entry.step_number}")
