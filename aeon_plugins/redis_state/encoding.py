"""Text in, text out: what the ``redis`` state store writes is text — JSON, decimal integers, UTF-8 — scrubbed
of every secret the process knows (the kernel's :func:`aeon_kernel.storable_text`, ``storable_json`` and
``storable_model_json``, as every store writes it), and what the server replies is turned back into text that can
be shown.
"""

from __future__ import annotations

from typing import Any

from aeon_kernel import Plan
from aeon_kernel.kit import storable_model_json

# --- text in, text out ----------------------------------------------------------------------------------------------


def _flat(fields: dict[str, str]) -> list[str]:
    return [item for pair in fields.items() for item in pair]


def _step_pairs(plan: Plan, indexes: Any) -> list[str]:
    return [item for i in indexes for item in (str(i), storable_model_json(plan.steps[i]))]


def _decoded(reply: Any) -> str:
    """A TYPE reply as text (a refused command, or bytes that are not UTF-8, shows as what it is)."""
    if isinstance(reply, bytes):
        return reply.decode("utf-8", "replace")
    return str(reply)
