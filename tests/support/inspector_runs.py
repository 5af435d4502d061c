"""Runs for the inspector's tests: recorded by real engines on the scripted model (and a flow replayed from its
cassette), a 10,000-cycle run written straight into a SQLite state store, and a log that holds a secret raw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aeon_kernel import Engine, LogEntry, PlanStep, ToolCall
from aeon_kernel.config import AeonConfig, parse_config
from aeon_plugins.sqlite_state import SqliteStateStore
from tests.support.builders import llm_step, plan, tool_step

ROOT = Path(__file__).resolve().parents[2]
TICKET_TRIAGE = ROOT / "examples" / "flows" / "ticket-triage"
TRIAGE_CASSETTE = ROOT / "tests" / "cassettes" / "flows" / "ticket-triage.jsonl"
BILLING = "I was charged twice for my subscription this month, please refund one payment."
#: what the echo step returns: it must render as text, never run (no digit in it: the calculator's review would
#: ask that a number the request states be used)
SCRIPT = "<script>alert(document.domain)</script>"
#: what record_plain asks: the sum, then the echo of SCRIPT (each tool's review finds its calls asked for)
REQUEST = f"add 5 and 10, then echo {SCRIPT}"
#: the nodes of examples/flows/ticket-triage
TRIAGE_NODES = (
    "intake",
    "classify",
    "billing",
    "facts",
    "acknowledge",
    "join",
    "billing_done",
    "fix",
    "fix_reply",
    "fix_done",
)


def record_plain(
    directory: Path,
    state: Path,
    log: Path,
    *,
    answer: str = "15",
    record: Path | None = None,
    name: str = "a",
) -> str:
    """A completed run: calculator 5 + 10, echo of a ``<script>``, then the model's answer — written with a
    trailing comma, which the supervisor repairs. Recorded in ``state`` and ``log``; returns its id."""
    responses = directory / f"responses-{name}.json"
    script = [
        plan(
            tool_step("1", "calculator", {"expression": "5 + 10"}),
            tool_step("2", "echo", {"message": SCRIPT}),
            llm_step("3"),
        ),
        '{"answer": ' + json.dumps(answer) + ",}",
    ]
    responses.write_text(json.dumps(script), encoding="utf-8")
    config = parse_config(
        {
            "llm": {"use": "scripted", "responses": str(responses)},
            "state": {"use": "sqlite", "path": str(state)},
        }
    )
    with Engine(config, record=str(record) if record else None) as engine:
        engine.add_sink("jsonl", path=str(log))
        result = engine.run(REQUEST)
    assert result["status"] == "completed", result
    return str(result["run_id"])


def record_flow(state: Path, log: Path) -> str:
    """examples/flows/ticket-triage on a billing ticket, replayed from its cassette (no model is loaded)."""
    config = AeonConfig().with_choice("state", "sqlite", path=str(state))
    with Engine.from_config_dir(TICKET_TRIAGE, config, replay=str(TRIAGE_CASSETTE)) as flow:
        flow.engine.add_sink("jsonl", path=str(log))
        result = flow.run({"ticket": BILLING})
    assert result.status == "success", result.message
    return str(result.run.run_id)


def build_big_run(state: Path, cycles: int = 10_000, run_id: str = "big0000run0000000000000000000000") -> str:
    """A run of ``cycles`` cycles — a plan cycle, then one calculator step per cycle, a model call every tenth —
    written into the store's tables in one transaction, as the store itself would have committed it (running it
    would take minutes: the loop is not what is tested here)."""
    SqliteStateStore(state).close()  # the store's own schema
    steps = [
        PlanStep(
            step_id=str(n),
            description=f"add {n} and 1",
            status="complete",
            tool="calculator",
            arguments={"expression": f"{n} + 1"},
            result={"expression": f"{n} + 1", "value": n + 1},
        ).model_dump(mode="json")
        for n in range(1, cycles)
    ]
    goal = f"Count to {cycles}"
    plan_text = json.dumps(
        {"goal": goal, "steps": [{k: s[k] for k in ("step_id", "description", "tool")} for s in steps[:3]]}
    )
    first = LogEntry(
        step_number=1,
        plan_state=None,
        llm_output={
            "text": plan_text,
            "model": "scripted",
            "usage": {"prompt_tokens": 900, "completion_tokens": 400},
        },
        ttl_remaining=cycles - 1,
        run_id=run_id,
        phase="plan",
        usage={"prompt_tokens": 900, "completion_tokens": 400, "llm_calls": 1, "llm_ms": 3},
        duration_ms=4.0,
    ).model_dump(mode="json", exclude={"plan_state"})
    rows: list[tuple[str, int, str, str]] = [
        (run_id, 1, json.dumps(first), json.dumps([first["llm_output"]]))
    ]
    for number in range(2, cycles + 1):
        step = steps[number - 2]
        call = ToolCall(
            tool_name="calculator",
            arguments=step["arguments"],
            result=step["result"],
            step_id=step["step_id"],
            duration_ms=0.05,
        )
        outputs: list[dict[str, Any]] = []
        if number % 10 == 0:
            outputs = [
                {
                    "text": f'{{"note": "{number} cycles done"}}',
                    "model": "scripted",
                    "usage": {"prompt_tokens": 120, "completion_tokens": 8},
                }
            ]
        entry = LogEntry(
            step_number=number,
            plan_state=None,
            llm_output=outputs[0] if outputs else {},
            tool_calls=(call,),
            ttl_remaining=cycles - number,
            run_id=run_id,
            phase="step",
            step_id=step["step_id"],
            step_status="complete",
            usage={
                "llm_calls": len(outputs),
                "llm_ms": len(outputs),
                **({"prompt_tokens": 120, "completion_tokens": 8} if outputs else {}),
            },
            duration_ms=0.4,
        ).model_dump(mode="json", exclude={"plan_state"})
        rows.append((run_id, number, json.dumps(entry), json.dumps(outputs)))
    manifest = {
        "aeon_version": "0.1.0",
        "llm": "scripted",
        "model": "scripted",
        "scheduler": "linear",
        "run_id": run_id,
        "started": "2026-01-01T00:00:00.000+00:00",
    }
    result = {"run_id": run_id, "status": "completed", "answer": str(cycles), "message": "done"}
    import sqlite3

    db = sqlite3.connect(state)
    with db:
        db.execute(
            "INSERT INTO runs (run_id, request, goal, status, ttl_remaining, cycle, current_step_id, manifest, result, "
            "started, updated) VALUES (?, ?, ?, 'completed', 0, ?, NULL, ?, ?, ?, ?)",
            (
                run_id,
                f"count to {cycles}",
                goal,
                cycles,
                json.dumps(manifest),
                json.dumps(result),
                manifest["started"],
                manifest["started"],
            ),
        )
        db.executemany(
            "INSERT INTO steps VALUES (?, ?, ?)", [(run_id, i, json.dumps(s)) for i, s in enumerate(steps)]
        )
        db.executemany("INSERT INTO cycles VALUES (?, ?, ?, ?)", rows)
    db.close()
    return run_id


def write_secret_log(path: Path, secret: str, run_id: str = "canary000run0000000000000000000") -> str:
    """A JSONL log written by hand, holding ``secret`` raw in a plan, a model output, tools' arguments, a result, a
    tool's error and the cycle's error — as a log kept from before the value was registered as a secret would."""
    step = PlanStep(step_id="1", description=f"send {secret}", tool="echo", arguments={"message": secret})
    done = step.model_copy(update={"status": "complete", "result": {"message": secret}})
    entries = [
        LogEntry(
            step_number=1,
            plan_state=None,
            llm_output={
                "text": json.dumps({"goal": f"use {secret}", "steps": [step.model_dump(mode="json")]}),
                "model": "scripted",
            },
            ttl_remaining=9,
            run_id=run_id,
            phase="plan",
            usage={"llm_calls": 1},
        ),
        LogEntry(
            step_number=2,
            plan_state={"goal": f"use {secret}", "steps": [step]},
            llm_output={},
            tool_calls=(
                ToolCall(
                    tool_name="echo", arguments={"message": secret}, result={"message": secret}, step_id="1"
                ),
                ToolCall(
                    tool_name="http",
                    arguments={"url": f"https://example.invalid/?key={secret}"},
                    error={"type": "ToolError", "message": f"401 for key {secret}"},
                    step_id="1",
                ),
            ),
            errors=({"type": "ToolError", "message": f"the key {secret} was refused", "step_id": "1"},),
            ttl_remaining=8,
            run_id=run_id,
            phase="step",
            step_id="1",
            step_status=done.status,
        ),
    ]
    lines = [
        json.dumps(
            {"manifest": {"run_id": run_id, "started": "2026-01-02T00:00:00.000+00:00", "model": "scripted"}}
        )
    ]
    lines += [entry.model_dump_json() for entry in entries]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run_id
