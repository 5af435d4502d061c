"""How a tool is called: the ``aeon_invoke_tool`` hook's context, the kernel's implementation, and the check of
whatever the hook answers.

Every tool invocation goes through ``aeon_invoke_tool``, whose kernel implementation (here, ``trylast``) runs the
tool inside its idempotency scope. A plugin can deny a call (``tryfirst``, returning a ``ToolCall`` with an
error), or wrap it (``wrapper=True``) to time, limit or sandbox it — the seam that the permissions and policies of
spec 004 §5/§10.5 plug into. Whoever produced the record, :func:`checked` then holds it to the tool's
``output_schema``, once.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from aeon_kernel.errors import AeonError, ValidationError
from aeon_kernel.idempotency import idempotency_scope
from aeon_kernel.markers import hookimpl
from aeon_kernel.models import ToolCall, utc_now
from aeon_kernel.tools import Tool


class ToolContext(NamedTuple):
    """Who is calling a tool: the run and the step. Passed to every ``aeon_invoke_tool`` implementation."""

    run_id: str
    step_id: str

    @property
    def idempotency_key(self) -> str:
        """``"<run_id>:<step_id>"``: the same when a resumed run executes a step again."""
        return f"{self.run_id}:{self.step_id}"


def invoke_tool(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> ToolCall:
    """Run a tool inside its idempotency scope; any exception is a tool failure (FR-054).

    The result is checked against ``output_schema`` afterwards, by :func:`checked`, whoever produced the record.
    """
    started = time.perf_counter()
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    try:
        with idempotency_scope(context.run_id, context.step_id):
            result = tool.invoke(**arguments)
        if not isinstance(result, dict):
            raise ValidationError(f"{tool.name} returned {type(result).__name__}, not an object")
    except Exception as exc:
        result = None
        error = failed_call_error(tool.name, exc)
    # Every field is built here, and ``result`` xor ``error`` holds by construction.
    return ToolCall.trusted(
        tool_name=tool.name,
        arguments=arguments,
        step_id=context.step_id,
        result=result,
        error=error,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        timestamp=utc_now(),
    )


def checked(tool: Tool, arguments: dict[str, Any], step_id: str, call: Any) -> ToolCall:
    """What ``aeon_invoke_tool`` answered, made trustworthy: a result must match ``output_schema`` (FR-054),
    a record needs a result or an error, and anything that is not a ``ToolCall`` is refused. A bad answer becomes
    a record with an error, so the step fails and the history keeps it."""
    if not isinstance(call, ToolCall):
        return _refused(tool, arguments, step_id, f"got {type(call).__name__} instead of a ToolCall")
    if call.error is not None:
        return call
    if call.result is None:
        return _refused(tool, arguments, step_id, "the ToolCall has neither a result nor an error")
    try:
        tool.validate_output(call.result)
    except ValidationError as exc:
        return call.model_copy(update={"result": None, "error": failed_call_error(tool.name, exc)})
    return call


def _refused(tool: Tool, arguments: dict[str, Any], step_id: str, why: str) -> ToolCall:
    return ToolCall(
        tool_name=tool.name,
        arguments=arguments,
        step_id=step_id,
        error={"type": "ValidationError", "message": f"{tool.name}: unusable aeon_invoke_tool answer: {why}"},
        timestamp=utc_now(),
    )


def failed_call_error(tool_name: str, exc: BaseException) -> dict[str, Any]:
    """The ``error`` record of a tool call that raised ``exc``."""
    if isinstance(exc, AeonError):
        return {**exc.to_dict(), "message": f"{tool_name} failed: {exc}"}
    return {"type": type(exc).__name__, "message": f"{tool_name} failed: {type(exc).__name__}: {exc}"}


class KernelToolInvoker:
    """The kernel's ``aeon_invoke_tool``: runs last, so any plugin may deny, replace or wrap the call."""

    @hookimpl(trylast=True)
    def aeon_invoke_tool(self, tool: Tool, arguments: dict[str, Any], context: ToolContext) -> ToolCall:
        return invoke_tool(tool, arguments, context)
