"""How a tool is called: the ``aeon_invoke_tool`` hook's context, the kernel's implementation, and the check of
whatever the hook answers.

Every tool invocation goes through ``aeon_invoke_tool``, whose kernel implementation (here, ``trylast``) runs the
tool inside its idempotency scope. A plugin can deny a call (``tryfirst``, returning a ``ToolCall`` with an
error), or wrap it (``wrapper=True``) to time, limit or sandbox it — the seam that the permissions and policies of
spec 004 §5/§10.5 plug into. Whoever produced the record, :func:`checked` then holds it to the tool's
``output_schema``, once.

Whatever a tool returns is held to be JSON data (:func:`json_problem`) in :func:`checked`, where the kernel first
takes the record of a call, whoever made it: a result that is not — bytes, an arbitrary object, NaN, a non-string
key, a lone surrogate, nesting deeper than :data:`MAX_RESULT_DEPTH` — becomes a tool failure record, so it never
reaches the state, the store or the log.
"""

from __future__ import annotations

import contextvars
import json
import math
import threading
import time
from collections.abc import Iterator
from typing import Any, Final, NamedTuple

from aeon_kernel.approvals import ask
from aeon_kernel.errors import (
    AeonError,
    ApprovalRequired,
    DeadlineError,
    PermissionDeniedError,
    ValidationError,
)
from aeon_kernel.idempotency import idempotency_scope
from aeon_kernel.markers import hookimpl
from aeon_kernel.memory_values import is_utf8
from aeon_kernel.models import ToolCall, utc_now
from aeon_kernel.tools import TIMEOUT_GRACE, Tool

#: Tool results nested deeper than this are refused: serialisers fail a few hundred levels down (pydantic's at
#: about 250), and the state keeps a result several levels deep in the records it writes.
MAX_RESULT_DEPTH: Final = 100
#: A value with more parts than this is refused rather than walked (shared sub-lists can make a small object
#: stand for an astronomically large JSON document).
MAX_JSON_VALUES: Final = 1_000_000
#: Text (strings and keys) beyond this many characters in one value is refused: every result is kept in the
#: state, the store and the log, so a tool that returns a whole disk image must write it elsewhere.
MAX_JSON_CHARS: Final = 16_000_000
#: Integers are limited to what every JSON encoder here can write (Python's str() stops at 4,300 digits).
_MAX_INT: Final = 10**4000


def json_problem(value: Any, max_depth: int = MAX_RESULT_DEPTH) -> str | None:
    """None when ``value`` is JSON data the kernel can keep; otherwise what is wrong with it, and where.

    JSON data is ``None``, bools, integers of at most 4,000 digits, finite floats, strings that encode as UTF-8
    (no lone surrogates), lists and tuples of JSON data, and dicts with string keys and JSON values, nested at
    most ``max_depth`` levels. Never raises: a value that cannot even be inspected is a problem too.
    """
    if type(value) is dict:  # the usual result, a flat object of plain scalars: checked in one pass
        chars = 0
        for key, item in value.items():
            kind = type(item)
            if type(key) is not str or not key.isascii():
                break
            if kind is str:
                chars += len(item)
                if not item.isascii() or chars > MAX_JSON_CHARS:
                    break
            elif kind is int:
                if not -_MAX_INT < item < _MAX_INT:
                    break
            elif kind is float:
                if not math.isfinite(item):
                    break
            elif kind is not bool and item is not None:
                break
        else:
            return None
    try:
        return _walk(value, max_depth)
    except Exception as exc:  # a container whose iteration raises, say
        return f"it cannot be read: {type(exc).__name__}"


_END: Final = object()


def _walk(value: Any, max_depth: int) -> str | None:
    """Depth first, with one iterator per open container (memory grows with the depth, not the size)."""
    budget = MAX_JSON_VALUES
    chars = MAX_JSON_CHARS
    # each open container: the rest of its (key, value) pairs, and whether it is an object
    frames: list[tuple[Iterator[tuple[Any, Any]], bool]] = []
    path: list[Any] = []  # the key of the value being looked at, in each open container
    item = value
    while True:
        budget -= 1
        if budget < 0:
            return f"it has more than {MAX_JSON_VALUES:,} parts"
        if isinstance(item, str):
            chars -= len(item)
            if chars < 0:
                return f"it holds more than {MAX_JSON_CHARS:,} characters of text"
            if not is_utf8(item):
                return f"{_where(path)}a string holds a lone surrogate (it has no UTF-8 form)"
        elif item is None or isinstance(item, bool):
            pass
        elif isinstance(item, int):
            if not -_MAX_INT < item < _MAX_INT:
                return f"{_where(path)}an integer has more than 4,000 digits"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{_where(path)}{item!r} is not a JSON number"
        elif isinstance(item, (dict, list, tuple)):
            if len(frames) >= max_depth:
                return f"{_where(path)}it nests deeper than {max_depth} levels"
            if isinstance(item, dict):
                frames.append((iter(item.items()), True))
            else:
                frames.append((enumerate(item), False))
            path.append(None)
        else:
            return f"{_where(path)}{_kind(item)} is not a JSON value"
        while frames:  # the next value: the next child of the innermost container that has one left
            entry: Any = next(frames[-1][0], _END)
            if entry is not _END:
                break
            frames.pop()
            path.pop()
        else:
            return None
        key, item = entry
        if frames[-1][1]:
            if not isinstance(key, str):
                return f"{_where(path[:-1])}a key is {_kind(key)}, not a string"
            chars -= len(key)
            if not is_utf8(key):
                return f"{_where(path[:-1])}a key holds a lone surrogate (it has no UTF-8 form)"
        path[-1] = key


def _where(path: list[Any]) -> str:
    if not path:
        return ""
    shown = "".join(
        f"[{part!r}]" if len(repr(part)) <= 40 else f"[{repr(part)[:37]}...]" for part in path[:8]
    )
    return f"at {shown}{'...' if len(path) > 8 else ''}: "


def _kind(value: Any) -> str:
    return safe_text(type(value).__name__)


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate written as its escape (``\\udcff``), so it can be kept and printed."""
    return text if is_utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def describe(exc: BaseException) -> str:
    """``str(exc)``, made safe to keep: never raises, holds no lone surrogate."""
    try:
        text = str(exc)
    except Exception:
        return f"<{type(exc).__name__} that cannot be printed>"
    return safe_text(text) if isinstance(text, str) else f"<{type(exc).__name__}>"


class ToolContext(NamedTuple):
    """Who is calling a tool: the run, the step (``task/node`` in a flow) and, in a flow, the node. Passed to
    every ``aeon_invoke_tool`` implementation."""

    run_id: str
    step_id: str
    node: str | None = None

    @property
    def idempotency_key(self) -> str:
        """``"<run_id>:<step_id>"``: the same when a resumed run executes a step again."""
        return f"{self.run_id}:{self.step_id}"


def invoke_tool(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> ToolCall:
    """Run a tool inside its idempotency scope; any exception is a tool failure (FR-054). A call that needs a
    permission the tool was not granted is refused before the tool runs (:class:`PermissionDeniedError`).

    The result is held to JSON data and to ``output_schema`` afterwards, by :func:`checked`, whoever produced
    the record (a plugin wrapping this call sees the result as the tool returned it).
    """
    started = time.perf_counter()
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    try:
        if tool.permissions:
            used = tool.required_permissions(arguments)
            missing = used - tool.granted
            if missing:
                raise PermissionDeniedError(tool.name, sorted(missing))
            if used & tool.ask:  # the run waits for a person (ApprovalRequired), or they answered
                asked = ", ".join(map(repr, sorted(used & tool.ask)))
                reason = f"the {tool.name} tool's {asked} permission needs approval at every use"
                ask(
                    tool.name,
                    arguments,
                    context.step_id,
                    policy=f"tools.{tool.name}",
                    rule="ask",
                    reason=reason,
                )
        with idempotency_scope(context.run_id, context.step_id):
            result = tool.invoke(**arguments) if tool.timeout is None else _within(tool, arguments)
        if not isinstance(result, dict):
            raise ValidationError(f"{tool.name} returned {_kind(result)}, not an object")
    except ApprovalRequired:
        raise
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


def _within(tool: Tool, arguments: dict[str, Any]) -> Any:
    """``tool.invoke`` in a daemon thread, waited for at most ``tool.timeout`` seconds (with this context: the
    idempotency key); a call still running then is a ``DeadlineError``, and is left to finish on its own."""
    outcome: list[Any] = []
    context = contextvars.copy_context()

    def call() -> None:
        try:
            outcome.append((True, context.run(tool.invoke, **arguments)))
        except BaseException as exc:  # handed back to the caller's thread
            outcome.append((False, exc))

    worker = threading.Thread(target=call, name=f"aeon-tool-{tool.name}", daemon=True)
    worker.start()
    assert tool.timeout is not None  # only called for a tool with one
    worker.join(tool.timeout + (TIMEOUT_GRACE if tool.enforces_timeout else 0.0))
    if not outcome:
        raise DeadlineError(
            f"{tool.name} did not answer within its timeout of {tool.timeout} s (it goes on in the background; "
            "Python cannot stop it)"
        )
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value


#: What a sensitive value is replaced with in records.
REDACTED: Final = "[redacted]"


def redacted(tool: Tool, call: ToolCall) -> ToolCall:
    """The record of ``call`` as logs, stores and histories keep it: the values of the tool's sensitive arguments
    and result keys replaced with :data:`REDACTED`, and those values scrubbed from its error's text too."""
    if not tool.has_secrets:
        return call
    secrets = [str(call.arguments[name]) for name in tool.sensitive_arguments if name in call.arguments] + [
        str(call.result[key]) for key in tool.sensitive_results if call.result and key in call.result
    ]
    update: dict[str, Any] = {
        "arguments": {k: REDACTED if k in tool.sensitive_arguments else v for k, v in call.arguments.items()}
    }
    if call.result is not None:
        update["result"] = {k: REDACTED if k in tool.sensitive_results else v for k, v in call.result.items()}
    if call.error is not None:
        text = json.dumps(call.error, ensure_ascii=False)
        for secret in sorted(filter(None, secrets), key=len, reverse=True):
            text = text.replace(json.dumps(secret, ensure_ascii=False)[1:-1], REDACTED)
        update["error"] = json.loads(text)
    return call.model_copy(update=update)


def checked(tool: Tool, arguments: dict[str, Any], step_id: str, call: Any) -> ToolCall:
    """What ``aeon_invoke_tool`` answered, made trustworthy: JSON data throughout, a result that matches
    ``output_schema`` (FR-054), a result or an error; anything that is not a ``ToolCall`` is refused. A bad answer
    becomes a record with an error, so the step fails and the history keeps it (and not the bad value)."""
    return _verified(_checked(tool, arguments, step_id, call))


def _checked(tool: Tool, arguments: dict[str, Any], step_id: str, call: Any) -> ToolCall:
    if not isinstance(call, ToolCall):
        return _refused(tool, arguments, step_id, f"got {_kind(call)} instead of a ToolCall")
    if (problem := json_problem(call.arguments)) is not None:
        return _refused(tool, {}, step_id, f"its arguments are not JSON data: {problem}")
    if call.error is not None:
        if (problem := json_problem(call.error)) is not None:
            return _refused(tool, call.arguments, step_id, f"its error is not JSON data: {problem}")
        return call
    if call.result is None:
        return _refused(tool, call.arguments, step_id, "the ToolCall has neither a result nor an error")
    if not isinstance(call.result, dict):
        return _refused(tool, call.arguments, step_id, f"its result is {_kind(call.result)}, not an object")
    if (problem := json_problem(call.result)) is not None:
        why = ValidationError(f"{tool.name} returned a result that is not JSON data: {problem}")
        return call.model_copy(update={"result": None, "error": failed_call_error(tool.name, why)})
    try:
        tool.validate_output(call.result)
    except ValidationError as exc:
        return call.model_copy(update={"result": None, "error": failed_call_error(tool.name, exc)})
    return call


#: The records :func:`checked` answered lately, by id (the record itself is kept, so an id cannot be reused while
#: it is here): a scheduler keeping them (:func:`was_checked`) need not walk their values a second time. A few
#: only: a record that has dropped out is walked again, which costs time, never correctness.
_VERIFIED: dict[int, ToolCall] = {}
_VERIFIED_AT_MOST: Final = 16


def _verified(call: ToolCall) -> ToolCall:
    if len(_VERIFIED) >= _VERIFIED_AT_MOST:
        _VERIFIED.clear()
    _VERIFIED[id(call)] = call
    return call


def was_checked(call: ToolCall) -> bool:
    """Whether ``call`` is a record :func:`checked` answered (lately): JSON data throughout."""
    return _VERIFIED.get(id(call)) is call


def _refused(tool: Tool, arguments: dict[str, Any], step_id: str, why: str) -> ToolCall:
    return ToolCall(
        tool_name=tool.name,
        arguments=arguments,
        step_id=step_id,
        error={
            "type": "ValidationError",
            "message": safe_text(f"{tool.name}: unusable aeon_invoke_tool answer: {why}"),
        },
        timestamp=utc_now(),
    )


def failed_call_error(tool_name: str, exc: BaseException) -> dict[str, Any]:
    """The ``error`` record of a tool call that raised ``exc`` (JSON data, whatever the exception holds)."""
    name = _kind(exc)
    if isinstance(exc, AeonError):
        try:
            record = {**exc.to_dict(), "message": f"{tool_name} failed: {describe(exc)}"}
        except Exception:
            record = {}
        if record and json_problem(record) is None:
            return record
        return {"type": name, "message": safe_text(f"{tool_name} failed: {describe(exc)}")}
    return {"type": name, "message": safe_text(f"{tool_name} failed: {name}: {describe(exc)}")}


class KernelToolInvoker:
    """The kernel's ``aeon_invoke_tool``: runs last, so any plugin may deny, replace or wrap the call."""

    @hookimpl(trylast=True)
    def aeon_invoke_tool(self, tool: Tool, arguments: dict[str, Any], context: ToolContext) -> ToolCall:
        return invoke_tool(tool, arguments, context)
