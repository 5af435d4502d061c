"""The names the ``otel`` sink writes, and how the kernel's records become OpenTelemetry values and times.

The ``gen_ai.*`` names are OpenTelemetry's GenAI semantic conventions (the tests hold them to the installed
``opentelemetry-semantic-conventions``); the ``aeon.*`` ones are Aeon's own. Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from aeon_kernel.kit import scrub_secrets

OPERATION: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
MAX_TOKENS: Final = "gen_ai.request.max_tokens"
TEMPERATURE: Final = "gen_ai.request.temperature"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
CONVERSATION: Final = "gen_ai.conversation.id"
AGENT_NAME: Final = "gen_ai.agent.name"
WORKFLOW_NAME: Final = "gen_ai.workflow.name"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_RESULT: Final = "gen_ai.tool.call.result"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
ERROR_TYPE: Final = "error.type"
#: The span event that carries an inference's content when ``capture_content`` is on.
INFERENCE_DETAILS: Final = "gen_ai.client.inference.operation.details"

MS: Final = 1_000_000  # nanoseconds
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
#: What the OpenTelemetry SDK takes as an attribute value (besides lists of one of them).
_SCALARS: Final = (str, bool, int, float)


def attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """What OpenTelemetry accepts: scalars and lists of strings, every string scrubbed; None is left out."""
    kept: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, str):
            kept[key] = scrub_secrets(value)
        elif isinstance(value, _SCALARS):
            kept[key] = value
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
            kept[key] = [scrub_secrets(v) for v in value]
    return kept


def content(value: Any, limit: int) -> str:
    """Content as a span may hold it: text, or JSON text, scrubbed and cut at ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = scrub_secrets(text)
    return text if len(text) <= limit else text[:limit] + "…"


def messages(role: str, text: Any, limit: int, finish: str | None = None) -> str:
    """One message in GenAI's format (``[{role, parts: [{type: "text", content}]}]``), as JSON text."""
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": content(text, limit)}]}
    if finish:
        message["finish_reason"] = finish
    return json.dumps([message], ensure_ascii=False)


def instructions(text: Any, limit: int) -> str:
    """A system prompt in GenAI's format (``[{type: "text", content}]``), as JSON text."""
    return json.dumps([{"type": "text", "content": content(text, limit)}], ensure_ascii=False)


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one: records read from JSON may hold anything."""
    return value if isinstance(value, Mapping) else {}


def stage_attributes(stage: Mapping[str, Any]) -> dict[str, Any]:
    """A flow stage's history record (spec 004 §6) as attributes; its error is the span's status."""
    return {
        "aeon.task.id": stage.get("task"),
        "aeon.node.id": stage.get("node"),
        "aeon.node.role": stage.get("role"),
        "aeon.node.status": stage.get("status"),
        "aeon.stage.seq": stage.get("seq"),
        **{
            f"aeon.stage.{key}": value for key, value in (stage.get("profile") or {}).items()
        },  # spec 004 §10.4
    }


def kind_of(answer: Any) -> str:
    """The JSON type of a run's answer: what a span says of it without holding it."""
    if answer is None:
        return "none"
    for kind, types in (("boolean", bool), ("number", (int, float)), ("string", str), ("object", dict)):
        if isinstance(answer, types):
            return kind
    return "array" if isinstance(answer, (list, tuple)) else "other"


def nanoseconds(timestamp: Any) -> int | None:
    """An ISO 8601 timestamp of the kernel's records (milliseconds, UTC) in ns since the epoch; None if unreadable."""
    if not isinstance(timestamp, str):
        return None
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def duration(duration_ms: Any) -> int:
    """A record's ``duration_ms`` in ns (0 when missing or not a positive number)."""
    ok = isinstance(duration_ms, (int, float)) and not isinstance(duration_ms, bool) and duration_ms > 0
    return round(duration_ms * MS) if ok else 0


def clamp(start: int, end: int, low: int, high: int) -> tuple[int, int]:
    """``[start, end]`` moved inside ``[low, high]``, keeping its length where it fits."""
    length = min(max(end - start, 0), high - low)
    start = min(max(start, low), high - length)
    return start, start + length
