"""A tool with a side effect, for durability tests: it appends its idempotency key to a ledger file.

A repeat of the same key (a step executed again after a crash) is recognised and not appended twice, which is
what a well-behaved tool with side effects does with ``aeon_kernel.current_idempotency_key()``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from aeon_kernel import Register, Tool, hookimpl
from aeon_kernel.kit import current_idempotency_key

LEDGER_ENV = "AEON_TEST_LEDGER"


class LedgerTool(Tool):
    name: str = "ledger"
    description: str = "Record that step n happened, exactly once."
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    output_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        key = current_idempotency_key()
        assert key is not None, "tools are always called with an idempotency key"
        ledger = Path(os.environ[LEDGER_ENV])
        seen = ledger.read_text().splitlines() if ledger.exists() else []
        if key not in seen:
            with ledger.open("a") as file:
                file.write(key + "\n")
                file.flush()
                os.fsync(file.fileno())
        time.sleep(float(os.environ.get("AEON_TEST_TOOL_SECONDS", "0")))
        return {"n": kwargs["n"]}


@hookimpl
def aeon_register_tools(register: Register) -> None:
    register("ledger", LedgerTool)
