"""The ``echo`` tool: returns its message unchanged. The simplest possible tool (FR-023)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from aeon_kernel import Register, Tool, hookimpl
from aeon_kernel.kit import Review

#: what asks for text back
_ASKS: Final = re.compile(r"\b(?:echo|repeat|say|print|write back|copy|return|read back|recite)\b", re.I)
_WORDS: Final = re.compile(r"[^\W_]+")


class EchoTool(Tool):
    name: str = "echo"
    description: str = "Return the given message unchanged."
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
        "additionalProperties": False,
    }
    output_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
        "additionalProperties": False,
    }
    example: dict[str, Any] | None = {"message": "hello"}

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        return {"message": kwargs["message"]}

    def review(self, request: str, calls: Sequence[Mapping[str, Any]]) -> Review:
        """An echo does what the request asks when the request asks for text back and each message is the
        request's own words, in its order (or a number, which an earlier tool may have found)."""
        findings = []
        unrelated = not _ASKS.search(request)
        if unrelated:
            findings.append("The request does not ask for text to be repeated.")
        said = " ".join(_WORDS.findall(request.casefold()))
        for call in calls:
            message = str((call.get("arguments") or {}).get("message", ""))
            words = " ".join(_WORDS.findall(message.casefold()))
            if not words or (f" {words} " not in f" {said} " and not words.replace(" ", "").isdigit()):
                findings.append(f"{message!r} is not text from the request.")
        return Review(approved=not findings, findings=tuple(findings), unrelated=unrelated)


@hookimpl
def aeon_register_tools(register: Register) -> None:
    register("echo", EchoTool)
