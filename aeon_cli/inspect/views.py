"""Cycles, plans and stages as the pages show them: plain dicts of text and numbers for the templates.

Nothing here escapes anything: the templates autoescape every value. JSON values are shown exactly, indented; a
value longer than :data:`MAX_SHOWN` characters is cut on the page (the JSON endpoint has it whole).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from aeon_cli.inspect.records import TERMINAL, RunData

#: cycles per page of a run's timeline (and of a diff)
PAGE: Final = 200
#: runs per page of the list
RUNS_PAGE: Final = 100
#: artifacts per page of a run's artifact list
ARTIFACTS_PAGE: Final = 100
#: characters of one value shown on a page
MAX_SHOWN: Final = 100_000
#: characters of a cycle's output shown in its timeline row
PREVIEW: Final = 90
#: plan steps shown around the step a cycle worked on, when the plan is longer than WHOLE_PLAN
AROUND: Final = 20
WHOLE_PLAN: Final = 60


def pretty(value: Any) -> str:
    """``value`` as indented JSON (a string as itself), cut at :data:`MAX_SHOWN` characters."""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if len(text) > MAX_SHOWN:
        return f"{text[:MAX_SHOWN]}\n… {len(text) - MAX_SHOWN} more characters (the JSON endpoint has them)"
    return text


def preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"


def page_count(total: int, per_page: int) -> int:
    return max(1, math.ceil(total / per_page))


def clamp_page(page: int, total: int, per_page: int) -> int:
    return min(max(page, 1), page_count(total, per_page))


def page_of(index: int) -> int:
    """The timeline page holding the cycle at ``index``."""
    return index // PAGE + 1


def _label(entry: Mapping[str, Any]) -> str:
    return str(entry.get("step_id") or ("plan" if entry.get("phase") == "plan" else "—"))


def _status(entry: Mapping[str, Any]) -> str:
    stages = entry.get("stages") or ()
    if stages:
        statuses = [str(stage.get("status")) for stage in stages]
        return statuses[0] if len(set(statuses)) == 1 else "/".join(statuses)
    if entry.get("step_status"):
        return str(entry["step_status"])
    return "failed" if entry.get("errors") else "done"


def _what(data: RunData, index: int) -> str:
    """One line saying what the cycle produced: its model output, else its tool's result or error."""
    entry = data.entries[index]
    for stage in entry.get("stages") or ():
        return preview(stage.get("error") or stage.get("output"))
    calls = data.calls[index]
    if calls and calls[0].get("text"):
        return preview(calls[0]["text"])
    for call in entry.get("tool_calls") or ():
        return preview(call.get("error") or call.get("result"))
    for error in entry.get("errors") or ():
        return preview(error.get("message"))
    return ""


def timeline(data: RunData, page: int) -> list[dict[str, Any]]:
    """The rows of one page of the run's timeline."""
    figures = data.stats["cycles"]
    rows = []
    for index in range((page - 1) * PAGE, min(page * PAGE, len(data.entries))):
        entry, cycle = data.entries[index], figures[index]
        rows.append(
            {
                "index": index,
                "number": entry.get("step_number", index + 1),
                "phase": entry.get("phase") or "—",
                "label": _label(entry),
                "status": _status(entry),
                "duration_ms": cycle["duration_ms"],
                "model_ms": cycle["model_ms"],
                "llm_calls": cycle["llm_calls"],
                "tokens": cycle["prompt_tokens"] + cycle["completion_tokens"],
                "tools": [str(call.get("tool_name")) for call in entry.get("tool_calls") or ()],
                "repairs": len(entry.get("supervisor_actions") or ()),
                "errors": cycle["errors"],
                "what": _what(data, index),
            }
        )
    return rows


def last_cycles(data: RunData) -> dict[str, int]:
    """step id (or flow node) -> the index of the last cycle that worked on it."""
    found: dict[str, int] = {}
    for index, entry in enumerate(data.entries):
        if isinstance(entry.get("step_id"), str):
            found[entry["step_id"]] = index
        for stage in entry.get("stages") or ():
            found[str(stage.get("node"))] = index
    return found


def plan_view(plan: Mapping[str, Any] | None, focus: str | None = None) -> dict[str, Any] | None:
    """The plan's goal, its status counts and its steps — all of them, or those around ``focus`` in a long plan."""
    if plan is None:
        return None
    steps = list(plan.get("steps") or ())
    counts: dict[str, int] = {}
    for step in steps:
        counts[str(step.get("status"))] = counts.get(str(step.get("status")), 0) + 1
    start, stop = 0, len(steps)
    if len(steps) > WHOLE_PLAN:
        at = next((i for i, step in enumerate(steps) if step.get("step_id") == focus), None)
        if at is None:
            at = next((i for i, step in enumerate(steps) if step.get("status") not in TERMINAL), 0)
        start, stop = max(0, at - AROUND), min(len(steps), at + AROUND + 1)
    return {
        "goal": plan.get("goal"),
        "total": len(steps),
        "counts": sorted(counts.items()),
        "before": start,
        "after": len(steps) - stop,
        "steps": [
            {
                "step_id": step.get("step_id"),
                "description": step.get("description"),
                "status": step.get("status"),
                "does": step.get("tool") or ("model" if step.get("agent") == "llm" else "—"),
                "arguments": pretty(step["arguments"]) if step.get("arguments") is not None else None,
                "result": pretty(step["result"]) if step.get("result") is not None else None,
                "failure": step.get("failure"),
                "focus": step.get("step_id") == focus,
            }
            for step in steps[start:stop]
        ],
    }


def _calls(data: RunData, index: int, prompts: Mapping[int, dict[str, Any]]) -> list[dict[str, Any]]:
    shown = []
    for number, call in enumerate(data.calls[index]):
        request = prompts.get(number)
        shown.append(
            {
                "number": number + 1,
                "model": call.get("model"),
                "constrained": call.get("constrained"),
                "duration_ms": call.get("duration_ms"),
                "usage": call.get("usage") or {},
                "text": pretty(call.get("text", "")),
                "prompt": pretty(request.get("prompt")) if request else None,
                "system_prompt": pretty(request["system_prompt"])
                if request and request.get("system_prompt")
                else None,
            }
        )
    return shown


def _repairs(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The cycle's repair attempts, each with what triggered it: the previous attempt's failure, else the
    problems recorded on what came in, else the cycle's errors."""
    shown = []
    previous: str | None = None
    for action in entry.get("supervisor_actions") or ():
        original = action.get("original_output") or {}
        error = action.get("error") or {}
        trigger = previous if action.get("attempt_number", 1) > 1 and previous else None
        if trigger is None and isinstance(original, dict) and original.get("errors"):
            trigger = "; ".join(str(e) for e in original["errors"])
        if trigger is None and entry.get("errors"):
            trigger = "; ".join(str(e.get("message")) for e in entry["errors"])
        shown.append(
            {
                "action_type": action.get("action_type"),
                "method": action.get("method"),
                "attempt": action.get("attempt_number"),
                "trigger": trigger,
                "original": pretty(original),
                "repaired": pretty(action["repaired_output"])
                if action.get("repaired_output") is not None
                else None,
                "error": error.get("message") if error else None,
                "reply": pretty(error["reply"]) if error.get("reply") else None,
            }
        )
        previous = error.get("message") if error else None
    return shown


def tool_calls(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "tool_name": call.get("tool_name"),
            "step_id": call.get("step_id"),
            "duration_ms": call.get("duration_ms"),
            "arguments": pretty(call.get("arguments")),
            "result": pretty(call["result"]) if call.get("result") is not None else None,
            "error": pretty(call["error"]) if call.get("error") is not None else None,
        }
        for call in calls
    ]


def _stages(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "seq": stage.get("seq"),
            "task": stage.get("task"),
            "node": stage.get("node"),
            "role": stage.get("role"),
            "status": stage.get("status"),
            "task_status": stage.get("task_status"),
            "route": list(stage.get("route") or ()),
            "duration_ms": stage.get("duration_ms"),
            "schema": stage.get("schema"),
            "input": pretty(stage.get("input")),
            "output": pretty(stage.get("output")),
            "error": pretty(stage["error"]) if stage.get("error") else None,
            "context": pretty(stage["context"]) if stage.get("context") else None,
            "events": [pretty(event) for event in stage.get("events") or ()],
            "tool_calls": tool_calls(stage.get("tool_calls") or ()),
        }
        for stage in entry.get("stages") or ()
    ]


def cycle_view(data: RunData, index: int) -> dict[str, Any]:
    """Everything about one cycle: figures, model calls (with their prompts where the artifact store or the
    cassette has them), repairs, tool calls, errors, flow stages, and the plan after it."""
    entry = data.entries[index]
    prompts = data.prompts_of(index)
    recorded = int((entry.get("usage") or {}).get("llm_calls") or 0)
    return {
        "index": index,
        "number": entry.get("step_number", index + 1),
        "phase": entry.get("phase"),
        "label": _label(entry),
        "status": _status(entry),
        "timestamp": entry.get("timestamp"),
        "ttl_remaining": entry.get("ttl_remaining"),
        "figures": data.stats["cycles"][index],
        "calls": _calls(data, index, prompts.requests),
        "prompts_from": prompts.source,
        "calls_left_out": max(recorded - len(data.calls[index]), 0),
        "repairs": _repairs(entry),
        "tools": tool_calls(entry.get("tool_calls") or ()),
        "errors": [pretty(error) for error in entry.get("errors") or ()],
        "stages": _stages(entry),
        "plan": None if data.is_flow else plan_view(data.plans.after(index), entry.get("step_id")),
    }


def cycle_json(data: RunData, index: int) -> dict[str, Any]:
    """One cycle whole, for the JSON endpoint: its record, its model calls and the plan after it."""
    prompts = data.prompts_of(index).requests
    return {
        "entry": data.entries[index],
        "llm_calls": [
            {**call, "prompt": prompts.get(number)} for number, call in enumerate(data.calls[index])
        ],
        "plan_after": data.plans.after(index),
    }


def pass_rows(data: RunData) -> list[dict[str, Any]]:
    """A multi-pass run's events as its page lists them: the cycle (with its index, for the link), the pass, the
    event, the live view's one line on it (an excerpt where it has none) and the record whole."""
    from aeon_cli.live import pass_line  # rich: only for a run that has passes

    indexes = {entry.get("step_number"): index for index, entry in enumerate(data.entries)}
    rows = []
    for event in data.pass_events():
        name, record = str(event.get("event")), event.get("record")
        try:
            line = pass_line(name, record) if isinstance(record, dict) else None
        except (KeyError, TypeError, ValueError, AttributeError):  # a record this version does not know
            line = None
        rows.append(
            {
                "cycle": event.get("cycle"),
                "index": indexes.get(event.get("cycle")),
                "pass_number": event.get("pass_number"),
                "event": name,
                "summary": line.plain if line is not None else preview(record),
                "record": pretty(record),
            }
        )
    return rows


def artifact_rows(found: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Artifacts (dicts: cycle, kind, node, task, schema_name, timestamp, value) as the run page lists them: the
    value's excerpt in the row, the value whole (cut at :data:`MAX_SHOWN`) when it is opened."""
    return [
        {
            "cycle": artifact.get("cycle"),
            "kind": artifact.get("kind"),
            "node": artifact.get("node"),
            "task": artifact.get("task"),
            "schema": artifact.get("schema_name"),
            "timestamp": artifact.get("timestamp"),
            "excerpt": preview(artifact.get("value")),
            "value": pretty(artifact.get("value")),
        }
        for artifact in found
    ]


def waiting_on(data: RunData) -> dict[str, Any] | None:
    """The request a waiting run waits on: the last ``ApprovalRequested`` record of its cycles (decision 0021)."""
    for entry in reversed(data.entries):
        for error in reversed(entry.get("errors") or ()):
            if error.get("type") == "ApprovalRequested":
                return dict(error)
    return None
