"""The ``jsonl`` telemetry sink: one complete JSON line per cycle (FR-037…039, SC-007)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pluggy

from aeon_kernel import (
    LogEntry,
    OrchestrationState,
    Plan,
    PlanStep,
    StepStatus,
    SupervisorAction,
    TelemetrySink,
    ToolCall,
    hookspecs,
)
from aeon_kernel.kit import PLAN_CHANGES
from aeon_kernel.logs import read_log
from aeon_plugins.jsonl import DEFAULT_PATH, JsonlSink, aeon_register_telemetry_sinks

FR_038_FIELDS = {
    "step_number",
    "plan_state",
    "llm_output",
    "supervisor_actions",
    "tool_calls",
    "ttl_remaining",
    "errors",
    "timestamp",
}

PLAN = Plan.model_validate(
    {"goal": "add", "steps": [{"step_id": "s1", "description": "add 5 and 10", "tool": "calculator"}]}
)
STATE = OrchestrationState(run_id="run-1", request="add 5 and 10", plan=PLAN, ttl_remaining=5)


def entry(step_number: int = 1, **fields: Any) -> LogEntry:
    values: dict[str, Any] = {
        "step_number": step_number,
        "plan_state": PLAN.model_dump(mode="json"),
        "llm_output": {"text": '{"expression": "5 + 10"}'},
        "ttl_remaining": 4,
        "run_id": "run-1",
        "phase": "step",
        "step_id": "s1",
    }
    return LogEntry(**{**values, **fields})


def read_lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_each_cycle_appends_one_complete_line(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    sink = JsonlSink(path)
    call = ToolCall(
        tool_name="calculator", arguments={"expression": "5 + 10"}, result={"value": 15}, step_id="s1"
    )
    action = SupervisorAction(
        action_type="json_repair",
        original_output={"text": "{oops"},
        repaired_output={"ok": 1},
        attempt_number=1,
    )
    error = {"type": "ToolError", "message": "division by zero"}
    entries = [
        entry(1, phase="plan", step_id=None, plan_state=None),
        entry(2, tool_calls=(call,), supervisor_actions=(action,)),
        entry(3, errors=(error,), ttl_remaining=0),
    ]
    for count, item in enumerate(entries, start=1):
        sink.aeon_cycle_end(entry=item, state=STATE)
        assert len(read_lines(path)) == count  # flushed at once, one line per call
    sink.close()

    lines = list(read_log(path))  # every FR-038 field whole, plan_state rebuilt where a line carries changes
    for line, item in zip(lines, entries, strict=True):
        assert set(line) >= FR_038_FIELDS
        assert line == item.model_dump(mode="json")
    assert lines[0]["plan_state"] is None
    assert lines[1]["tool_calls"][0]["result"] == {"value": 15}
    assert lines[1]["supervisor_actions"][0]["repaired_output"] == {"ok": 1}
    assert lines[2]["errors"] == [error]
    assert lines[2]["ttl_remaining"] == 0


def test_appends_to_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"earlier": true}\n', encoding="utf-8")
    sink = JsonlSink(path)
    sink.aeon_cycle_end(entry=entry(), state=STATE)
    sink.close()
    lines = read_lines(path)
    assert lines[0] == {"earlier": True}
    assert lines[1]["step_number"] == 1
    assert len(lines) == 2


def test_creates_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c" / "run.jsonl"
    sink = JsonlSink(str(path))
    sink.aeon_cycle_end(entry=entry(), state=STATE)
    sink.close()
    assert len(read_lines(path)) == 1


def test_nothing_is_created_before_the_first_cycle(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "run.jsonl"
    JsonlSink(path).close()
    assert not path.parent.exists()


def test_writes_after_close_reopen_and_append(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    sink = JsonlSink(path)
    sink.aeon_cycle_end(entry=entry(1), state=STATE)
    sink.close()
    sink.close()  # closing twice is harmless
    sink.aeon_cycle_end(entry=entry(2), state=STATE)
    sink.close()
    assert [line["step_number"] for line in read_lines(path)] == [1, 2]


def test_unicode_is_written_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    sink = JsonlSink(path)
    sink.aeon_cycle_end(entry=entry(llm_output={"text": "日本語 😀\nnew line"}), state=STATE)
    sink.close()
    [line] = read_lines(path)
    assert line["llm_output"]["text"] == "日本語 😀\nnew line"


def test_concurrent_writers_never_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    sink = JsonlSink(path)
    per_thread = 150
    big = "x" * 20_000  # long lines make torn or interleaved writes likely without the lock

    def writer(name: str) -> None:
        for i in range(1, per_thread + 1):
            sink.aeon_cycle_end(entry=entry(i, llm_output={"text": big, "thread": name}), state=STATE)

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b", "c")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sink.close()

    lines = read_lines(path)  # every line parses
    assert len(lines) == 3 * per_thread
    for name in ("a", "b", "c"):
        mine = [line["step_number"] for line in lines if line["llm_output"]["thread"] == name]
        assert mine == list(range(1, per_thread + 1))  # each thread's lines in its own order
    assert all(line["llm_output"]["text"] == big for line in lines)


def test_works_as_a_pluggy_hook_implementation(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    manager = pluggy.PluginManager("aeon")
    manager.add_hookspecs(hookspecs)
    sink = JsonlSink(path)
    manager.register(sink)  # validates the hookimpl signature against the spec
    manager.hook.aeon_cycle_end(entry=entry(7), state=STATE)
    sink.close()
    assert [line["step_number"] for line in read_lines(path)] == [7]


def test_registered_as_a_telemetry_sink(tmp_path: Path, monkeypatch: Any) -> None:
    registered: list[tuple[str, Any]] = []
    aeon_register_telemetry_sinks(lambda name, factory: registered.append((name, factory)))
    assert [name for name, _ in registered] == ["jsonl"]
    monkeypatch.chdir(tmp_path)
    sink = registered[0][1]()
    assert isinstance(sink, TelemetrySink)
    sink.aeon_cycle_end(entry=entry(), state=STATE)
    sink.close()
    assert len(read_lines(tmp_path / DEFAULT_PATH)) == 1


def test_a_line_carries_the_plan_whole_only_when_its_shape_changes(tmp_path: Path) -> None:
    """Issue 13 item 13: otherwise only the steps that changed since the run's previous line (decision 0012)."""
    steps = [PlanStep(step_id=f"s{i}", description=f"step {i}", tool="echo") for i in range(1000)]
    plans = [Plan(goal="many", steps=tuple(steps))]
    for i in range(3):  # each cycle changes one step, as a run does; the other step objects are shared
        changed = list(plans[-1].steps)
        changed[i] = changed[i].model_copy(update={"status": StepStatus.COMPLETE, "result": {"n": i}})
        plans.append(Plan(goal="many", steps=tuple(changed)))
    other = Plan(goal="another", steps=tuple(steps[:2]))
    path = tmp_path / "run.jsonl"
    sink = JsonlSink(path)
    for number, plan in enumerate([*plans, other], start=1):
        sink.aeon_cycle_end(entry=entry(number, plan_state=plan), state=STATE)
    sink.close()
    raw = read_lines(path)
    assert ["plan_state" in line for line in raw] == [True, False, False, False, True]
    assert [len(line.get(PLAN_CHANGES, [])) for line in raw] == [0, 1, 1, 1, 0]
    assert raw[2][PLAN_CHANGES][0]["result"] == {"n": 1}
    sizes = [len(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert max(sizes[1:4]) * 50 < sizes[0]  # a changed step, not the 1,000-step plan
    expanded = list(read_log(path))
    assert [line["plan_state"] for line in expanded] == [p.model_dump(mode="json") for p in [*plans, other]]


def test_a_resumed_run_and_an_ended_one_start_again_from_a_whole_plan(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    sink = JsonlSink(path)
    sink.aeon_cycle_end(entry=entry(1), state=STATE)
    sink.aeon_run_end(run_id="run-1", result={})
    sink.aeon_cycle_end(entry=entry(2), state=STATE)
    sink.close()
    assert all("plan_state" in line for line in read_lines(path))
