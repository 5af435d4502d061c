"""What :func:`aeon_kernel.tool` derives from a typed function: the JSON Schemas of its parameters and return
(pydantic's, as ``validate_call`` sees them), its description (its docstring, by ``docstring-parser``), and the call,
which makes the function's types of the validated JSON arguments and a JSON object of what it returns."""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode

from aeon_kernel.errors import DeadlineError, ToolRegistrationError

_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_TYPES = (
    "str, int, float, bool, None, enums, Literal, lists, dicts, pydantic models, dataclasses or TypedDicts"
)


class Untitled(GenerateJsonSchema):
    """Pydantic's schemas without a ``title`` per property: the model is shown the name already."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def derive(
    function: Callable[..., Any], name: str | None, description: str | None, timeout: float | None
) -> tuple[dict[str, Any], bool]:
    """The fields of the tool made of ``function``, and whether it is a coroutine function."""
    where = getattr(function, "__qualname__", repr(function))
    try:
        signature = inspect.signature(function, eval_str=True)
    except (NameError, TypeError, ValueError) as exc:
        raise ToolRegistrationError(f"{where}: its signature cannot be read: {exc}") from None
    for parameter in signature.parameters.values():
        what = f"{where}: the parameter {parameter.name!r}"
        if parameter.kind not in _BY_NAME:
            raise ToolRegistrationError(
                f"{what} is {parameter.kind.description}, but a tool is called with named arguments only: "
                "give each argument a parameter of its own"
            )
        if parameter.annotation is parameter.empty:
            raise ToolRegistrationError(
                f"{what} has no type annotation: annotate it (its JSON Schema is the tool's)"
            )
        _schema(parameter.annotation, what)
    if signature.return_annotation is signature.empty:
        raise ToolRegistrationError(
            f"{where} has no return annotation: annotate it (-> dict[str, Any] for any object)"
        )
    returns, output_schema = _schema(signature.return_annotation, f"{where}: the return", "serialization")
    if "$ref" in output_schema:  # a recursive model: its definition, at the root
        definitions = output_schema["$defs"]
        output_schema = {**definitions[output_schema["$ref"].rsplit("/", 1)[-1]], "$defs": definitions}
    wrapped = output_schema.get("type") != "object"  # a scalar, list or union is the value of {"result": ...}
    arguments, input_schema = _schema(function, f"{where}: the signature")
    docstring = _docstring(function, where)
    for parameter in docstring.params if docstring else ():
        if parameter.description and parameter.arg_name in input_schema["properties"]:
            input_schema["properties"][parameter.arg_name].setdefault("description", parameter.description)
    if docstring and docstring.returns and docstring.returns.description:
        output_schema.setdefault("description", docstring.returns.description)
    if wrapped:
        definitions = output_schema.pop("$defs", None)
        output_schema = {
            "type": "object",
            "properties": {"result": output_schema},
            "required": ["result"],
            "additionalProperties": False,
            **({"$defs": definitions} if definitions else {}),
        }
    description = description or (docstring.description if docstring else None)
    if not description or not description.strip():
        raise ToolRegistrationError(
            f"{where} has no docstring: write one (the model chooses tools by it), or pass description="
        )
    is_async = inspect.iscoroutinefunction(function)
    tool_name = str(name or getattr(function, "__name__", ""))  # a partial has none: name= gives it one

    def call(**kwargs: Any) -> Any:
        value = arguments.validate_python(kwargs)  # pydantic models, enums, ... made from the JSON arguments
        if is_async:
            value = _run(value, timeout, tool_name)
        result = returns.dump_python(value, mode="json", by_alias=True, warnings=False)
        return {"result": result} if wrapped else result

    call.__wrapped__ = function  # type: ignore[attr-defined]
    fields = {"name": tool_name, "description": description.strip(), "function": call}
    return {**fields, "input_schema": input_schema, "output_schema": output_schema}, is_async


def _schema(
    annotation: Any, what: str, mode: JsonSchemaMode = "validation"
) -> tuple[TypeAdapter[Any], dict[str, Any]]:
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        return adapter, adapter.json_schema(mode=mode, schema_generator=Untitled)
    except Exception as exc:
        problem = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ToolRegistrationError(
            f"{what} ({annotation!r}) has no JSON Schema: {problem}. Use {_TYPES}"
        ) from None


def _docstring(function: Callable[..., Any], where: str) -> Any:
    text = inspect.getdoc(function)
    if not text:
        return None
    import docstring_parser  # only when a tool is made of a function

    try:
        return docstring_parser.parse(text)
    except docstring_parser.ParseError as exc:
        raise ToolRegistrationError(f"{where}: its docstring cannot be read: {exc}") from None


def _run(coroutine: Any, timeout: float | None, name: str) -> Any:
    """Await an async tool's call: on a loop of its own, in a worker thread when this thread runs one; past
    ``timeout`` the coroutine is cancelled (the tool ``enforces_timeout``)."""
    import asyncio

    async def bounded() -> Any:
        try:
            async with asyncio.timeout(timeout) as scope:
                return await coroutine
        except TimeoutError:
            if scope.expired():
                raise DeadlineError(
                    f"{name} did not finish within its timeout of {timeout} s: cancelled"
                ) from None
            raise

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix=f"aeon-tool-{name}") as pool:
        return pool.submit(contextvars.copy_context().run, asyncio.run, bounded()).result()
