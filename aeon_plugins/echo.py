"""The ``echo`` tool: returns its message unchanged. The simplest possible tool (FR-023)."""

from __future__ import annotations

from typing import Any

from aeon_kernel import Register, Tool, hookimpl


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


@hookimpl
def aeon_register_tools(register: Register) -> None:
    register("echo", EchoTool)
