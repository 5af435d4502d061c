"""Text in, text out: what the ``redis`` state store writes is text — JSON, decimal integers, UTF-8 — scrubbed
of every secret the process knows, and what the server replies is turned back into text that can be shown.
"""

from __future__ import annotations

import json
from typing import Any

from aeon_kernel import Plan, RunStoreError, is_utf8, scrub_secrets, scrub_secrets_json

# --- text in, text out ----------------------------------------------------------------------------------------------


def _text(text: str) -> str:
    """``text`` as Redis can store it: a lone surrogate (from bytes that were not UTF-8) is kept as its escape,
    and no secret (:func:`aeon_kernel.scrub_secrets`)."""
    text = scrub_secrets(text)
    return text if is_utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _reason(exc: BaseException) -> str:
    """What went wrong, as text a terminal can hold (even from an exception whose str() fails)."""
    try:
        return _text(str(exc))
    except Exception:
        return f"{type(exc).__name__} (its message cannot be shown)"


def _dumps(value: Any) -> str:
    """JSON text; ASCII-escaped, so even a lone surrogate is kept exactly."""
    try:
        return scrub_secrets_json(json.dumps(value, default=str))
    except Exception as exc:  # too deep, or an object whose str() fails
        raise RunStoreError(f"a value is not JSON: {type(exc).__name__}: {_reason(exc)[:300]}") from None


def _model_json(model: Any, exclude: set[str] | None = None) -> str:
    """A model's JSON; one holding a lone surrogate (which pydantic cannot write as UTF-8) is written escaped."""
    try:
        text: str = model.model_dump_json(exclude=exclude)
    except ValueError:
        return _dumps(model.model_dump(mode="json", exclude=exclude))
    return scrub_secrets_json(text)


def _flat(fields: dict[str, str]) -> list[str]:
    return [item for pair in fields.items() for item in pair]


def _step_pairs(plan: Plan, indexes: Any) -> list[str]:
    return [item for i in indexes for item in (str(i), _model_json(plan.steps[i]))]


def _decoded(reply: Any) -> str:
    """A TYPE reply as text (a refused command, or bytes that are not UTF-8, shows as what it is)."""
    if isinstance(reply, bytes):
        return reply.decode("utf-8", "replace")
    return str(reply)
