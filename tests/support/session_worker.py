"""A process for the session crash tests: one turn of a conversation whose plan records its number in the ledger.

    python tests/support/session_worker.py DIR SESSION_ID "record N"

``AEON_CRASH_AT=tool:N`` kills the process with SIGKILL inside the ledger call for N, after its side effect.
Prints the turns as JSON at the end.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aeon_kernel import Engine, hookimpl
from aeon_kernel.config import AeonConfig, Choice
from aeon_plugins.sessions import Session
from tests.support import ledger

CRASH = os.environ.get("AEON_CRASH_AT", "")


class CrashingLedger(ledger.LedgerTool):
    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        result = super().invoke(**kwargs)
        if f"tool:{kwargs['n']}" == CRASH:
            os.kill(os.getpid(), signal.SIGKILL)
        return result


class Components:
    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        register("ledger", CrashingLedger)


def main() -> None:
    directory, session_id, message = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.environ[ledger.LEDGER_ENV] = str(directory / "ledger.txt")
    number = int(message.split()[-1])
    plan = {
        "goal": message,
        "steps": [{"step_id": "1", "description": message, "tool": "ledger", "arguments": {"n": number}}],
    }
    config = AeonConfig(ttl=10, state=Choice("sqlite", {"path": str(directory / "state.db")})).with_choice(
        "llm", "scripted", responses=[plan]
    )
    with Engine(config, plugins=[Components()]) as engine:
        session = Session(engine, session_id)
        session.ask(message)
        print(json.dumps([[t.number, t.message, t.status, t.answer] for t in session.turns()]), flush=True)


if __name__ == "__main__":
    main()
