"""A process for the crash tests: runs (or resumes) the ten-step ledger plan with a SQLite state store and a
JSONL log, and kills itself with SIGKILL at a chosen point when ``AEON_CRASH_AT`` says so.

    python tests/crash_worker.py DIR run|resume|approve|deny [RUN_ID]

With ``AEON_ASK=N`` the ledger call of step N needs a person's approval (a ``rules`` ask rule): the run stops
``waiting``; ``approve`` and ``deny`` answer it and go on (issue 29).

``AEON_CRASH_AT``: ``commit:K`` (right after cycle K is committed, before its log line), ``torn:K`` (halfway
through writing cycle K's log line), ``tool:K`` (inside step K's tool, after its side effect). Prints
``READY`` when the engine is built, and the result as JSON at the end.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aeon_kernel import Engine, LogEntry, hookimpl
from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.kit import Approval
from aeon_plugins import jsonl, sqlite_state
from tests.support import ledger

PLAN = {
    "goal": "ten side effects",
    "steps": [
        {"step_id": str(i), "description": f"record {i}", "tool": "ledger", "arguments": {"n": i}}
        for i in range(1, 11)
    ],
}
CRASH = os.environ.get("AEON_CRASH_AT", "")
KIND, _, AT = CRASH.partition(":")


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class CrashingStore(sqlite_state.SqliteStateStore):
    def commit_cycle(self, state: Any, entry: LogEntry, llm_outputs: list[dict[str, Any]]) -> None:
        super().commit_cycle(state, entry, llm_outputs)
        if KIND == "commit" and entry.step_number == int(AT):
            die()


class CrashingSink(jsonl.JsonlSink):
    @hookimpl
    def aeon_cycle_end(self, entry: LogEntry, state: Any) -> None:
        if KIND == "torn" and entry.step_number == int(AT):
            line = entry.model_dump_json()
            with self.path.open("a") as file:
                file.write(line[: len(line) // 2])
                file.flush()
            die()
        super().aeon_cycle_end(entry, state)


class CrashingLedger(ledger.LedgerTool):
    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        result = super().invoke(**kwargs)
        if KIND == "tool" and kwargs["n"] == int(AT):
            die()
        return result


class Components:
    @hookimpl
    def aeon_register_state_stores(self, register: Any) -> None:
        register("crashing", CrashingStore)

    @hookimpl
    def aeon_register_telemetry_sinks(self, register: Any) -> None:
        register("crashing_jsonl", CrashingSink)

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        register("ledger", CrashingLedger)


def main() -> None:
    directory, mode = Path(sys.argv[1]), sys.argv[2]
    os.environ[ledger.LEDGER_ENV] = str(directory / "ledger.txt")
    ask = os.environ.get("AEON_ASK")
    rules = [{"name": "a-person", "tool": "ledger", "arguments": {"n": f"^{ask}$"}}] if ask else []
    config = AeonConfig(
        ttl=40,
        state=Choice("crashing", {"path": str(directory / "state.db")}),
        telemetry=(Choice("crashing_jsonl", {"path": str(directory / "run.jsonl")}),),
        policies=(Choice("rules", {"ask": rules}),) if ask else (),
    ).with_choice("llm", "scripted", responses=[PLAN])
    from aeon_plugins import in_memory, plan_finished, policy_rules, schema_validator, scripted, supervisor

    builtins = [
        scripted,
        in_memory,
        schema_validator,
        supervisor,
        plan_finished,
        jsonl,
        sqlite_state,
        policy_rules,
    ]
    with Engine(config, plugins=[*builtins, Components()], autoload=False) as engine:
        orchestrator = engine.orchestrator()
        print("READY", flush=True)
        answer = {"approve": Approval(by="tester"), "deny": Approval.deny("not today", "tester")}.get(mode)
        if mode == "run":
            cycles = orchestrator.iter("record ten things")
        else:
            cycles = orchestrator.resume(sys.argv[3], approval=answer)
        for _ in cycles:
            pass
        print(json.dumps(orchestrator.result), flush=True)


if __name__ == "__main__":
    main()
