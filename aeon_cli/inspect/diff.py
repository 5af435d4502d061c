"""Two runs side by side (a recording and its replay, a run before and after a change): cycles aligned by number,
each field that differs marked, and a differing output shown character by character where it is short enough.

Timings and timestamps are not compared: they differ between any two runs.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any, Final

from aeon_cli.inspect.records import RunData
from aeon_cli.inspect.views import PAGE

#: outputs longer than this are marked as differing, not diffed character by character (difflib is quadratic)
INLINE_LIMIT: Final = 4000
FIELDS: Final = ("label", "status", "output", "tools", "errors")


def _text(value: Any) -> str:
    return (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    )


def side(data: RunData, index: int) -> dict[str, str]:
    """What is compared of one cycle: what it worked on, its status, its output, its tool calls, its errors."""
    entry = data.entries[index]
    stages = entry.get("stages") or ()
    if stages:
        label = ", ".join(f"{s.get('task')}/{s.get('node')}" for s in stages)
        status = ", ".join(str(s.get("status")) for s in stages)
        output = "\n".join(_text(s.get("output")) for s in stages)
    else:
        label = str(entry.get("step_id") or entry.get("phase") or "")
        status = str(entry.get("step_status") or ("failed" if entry.get("errors") else "done"))
        output = "\n".join(str(call.get("text", "")) for call in data.calls[index])
    calls = [*entry.get("tool_calls", ()), *(c for s in stages for c in s.get("tool_calls") or ())]
    tools = "\n".join(
        f"{c.get('tool_name')}({_text(c.get('arguments'))}) → "
        + (f"error {_text(c['error'])}" if c.get("error") is not None else _text(c.get("result")))
        for c in calls
    )
    errors = "\n".join(str(e.get("message")) for e in entry.get("errors") or ())
    return {"label": label, "status": status, "output": output, "tools": tools, "errors": errors}


def _inline(left: str, right: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Each side cut into (``same`` | ``changed``, text) pieces."""
    if len(left) > INLINE_LIMIT or len(right) > INLINE_LIMIT:
        return [("changed", left)], [("changed", right)]
    ours: list[tuple[str, str]] = []
    theirs: list[tuple[str, str]] = []
    for tag, a1, a2, b1, b2 in difflib.SequenceMatcher(None, left, right, autojunk=False).get_opcodes():
        kind = "same" if tag == "equal" else "changed"
        if a2 > a1:
            ours.append((kind, left[a1:a2]))
        if b2 > b1:
            theirs.append((kind, right[b1:b2]))
    return ours, theirs


def differing(a: RunData, b: RunData) -> list[int]:
    """The indexes of the cycles that differ (a cycle only one run has differs)."""
    return [
        index
        for index in range(max(len(a.entries), len(b.entries)))
        if index >= len(a.entries) or index >= len(b.entries) or side(a, index) != side(b, index)
    ]


def diff_rows(a: RunData, b: RunData, page: int) -> list[dict[str, Any]]:
    """One page of aligned cycles: each side's fields, which differ, and the output's pieces."""
    rows = []
    for index in range((page - 1) * PAGE, min(page * PAGE, max(len(a.entries), len(b.entries)))):
        left = side(a, index) if index < len(a.entries) else None
        right = side(b, index) if index < len(b.entries) else None
        changed = {name for name in FIELDS if left is None or right is None or left[name] != right[name]}
        pieces: tuple[list[tuple[str, str]], list[tuple[str, str]]] = ([], [])
        if left is not None and right is not None and "output" in changed:
            pieces = _inline(left["output"], right["output"])
        rows.append(
            {
                "index": index,
                "number": index + 1,
                "left": left,
                "right": right,
                "changed": changed,
                "left_pieces": pieces[0],
                "right_pieces": pieces[1],
            }
        )
    return rows


def summary(data: RunData) -> Mapping[str, Any]:
    """The run-level figures compared at the top."""
    run = data.stats["run"]
    ending = data.result or {}
    return {
        "status": data.info.status,
        "cycles": len(data.entries),
        "llm_calls": run["llm_calls"],
        "tokens": run["prompt_tokens"] + run["completion_tokens"],
        "errors": run["errors"],
        "answer": _text(ending["answer"]) if ending.get("answer") is not None else None,
    }
