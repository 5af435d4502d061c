"""Tools (FR-019…023): the Tool contract, tools made of typed functions (:func:`tool`), and the registry a run
calls into.

How a tool is called — the ``aeon_invoke_tool`` hook and the kernel's implementation of it — is in
:mod:`aeon_kernel.invocation`; this module stays light, so that defining a tool imports no more than it needs.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, overload

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from aeon_kernel.errors import ConfigError, ToolRegistrationError, ValidationError
from aeon_kernel.markers import hookimpl
from aeon_kernel.schemas import check_schema, schema_errors

if TYPE_CHECKING:
    from aeon_kernel.verification import Review

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]+")
#: seconds the kernel waits past ``timeout`` for a tool that ``enforces_timeout``
TIMEOUT_GRACE: Final = 2.0

#: what judges the call running in this context (the policies, see :func:`judged_by`): given the tool and more of
#: what the call touches, it raises the refusal, or returns
Judge = Callable[["Tool", dict[str, list[str]]], None]
_JUDGE: ContextVar[Judge | None] = ContextVar("aeon_tool_judge", default=None)


@contextmanager
def judged_by(judge: Judge) -> Iterator[None]:
    """While the block runs (a tool call, in this context and the worker thread that copies it), have
    :meth:`Tool.check_resources` ask ``judge``."""
    token = _JUDGE.set(judge)
    try:
        yield
    finally:
        _JUDGE.reset(token)


class Tool(BaseModel, ABC):
    """A tool: a name, a description, JSON Schemas for input and output, and ``invoke`` (FR-019).

    A tool is a pydantic model, so its definition is validated when it is created: blank names and invalid
    schemas are rejected up front rather than at the first call. Validators are compiled once per schema.
    """

    # The kernel's own tool classes build their schema when first used, so that importing them stays light; any
    # other is built as it is defined (__pydantic_init_subclass__), so its signature, which the registry binds
    # a tool's options to, is its own from the start.
    model_config = ConfigDict(
        frozen=True, arbitrary_types_allowed=True, validate_default=True, defer_build=True
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__module__ != __name__:
            cls.model_rebuild(raise_errors=False)

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    example: dict[str, Any] | None = None
    #: argument names whose values are secrets: the tool gets them, no record keeps them (issue 13, item 4)
    sensitive_arguments: frozenset[str] = frozenset()
    #: result keys whose values are secrets: redacted in every record, the step's result and memory included
    sensitive_results: frozenset[str] = frozenset()
    #: seconds a call may take; past it the call is a failed one (``DeadlineError``) and the run goes on. Python
    #: cannot stop a thread: the call itself runs on, in the background, until it returns (issue 13, item 14)
    timeout: float | None = Field(default=None, gt=0)
    #: True for a tool that stops its own work at ``timeout`` (a command it kills, a request it abandons): the
    #: kernel then waits :data:`TIMEOUT_GRACE` seconds longer before it gives up on the call, so the tool's own
    #: message, which says which limit was hit, is the one recorded
    enforces_timeout: ClassVar[bool] = False
    #: what the tool can do that a user must grant, by name, each with what it allows ("read": "read files
    #: under the root"). A tool that declares any is built only when ``[tools.<name>] grant`` lists some of
    #: them, and a call is refused unless every permission it uses was granted: the default is deny (issue 17)
    permissions: dict[str, str] = {}
    #: the permissions this instance was granted (the engine passes ``[tools.<name>] grant``)
    granted: frozenset[str] = frozenset()
    #: the permissions whose every use needs a person's approval: the run waits for it (:mod:`aeon_kernel.approvals`;
    #: a tool may declare some by default, ``[tools.<name>] ask`` chooses)
    ask: frozenset[str] = frozenset()
    #: True for a tool whose result depends only on its arguments and whose call changes nothing (the calculator):
    #: a planner may call it, outside the run, to compare plans (``[planner] samples``). One that declares
    #: ``permissions`` is never called so
    pure: bool = False

    # Validators rather than Field constraints: a subclass that redeclares ``name: str = "echo"`` keeps them.
    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not _TOOL_NAME.fullmatch(name):
            raise ValueError(f"tool names are letters, digits, '_', '.' and '-' (got {name!r})")
        return name

    @field_validator("description")
    @classmethod
    def _valid_description(cls, description: str) -> str:
        if not description.strip():
            raise ValueError("a tool needs a description: the model chooses tools by it")
        return description

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        try:
            check_schema(schema)
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        return schema

    @model_validator(mode="after")
    def _granted_declared(self) -> Tool:
        unknown = sorted((self.granted | self.ask) - set(self.permissions))
        if unknown:
            offered = ", ".join(sorted(self.permissions)) or "none"
            raise ValueError(
                f"{self.name} has no permission {', '.join(map(repr, unknown))} (it has: {offered})"
            )
        return self

    def required_permissions(self, arguments: dict[str, Any]) -> frozenset[str]:
        """The permissions a call with ``arguments`` (already valid) uses; the kernel refuses the call unless each
        was granted. By default every permission the tool declares; a tool whose operations need different
        ones (reading, writing) says which."""
        return frozenset(self.permissions)

    def resources(self, arguments: dict[str, Any]) -> dict[str, list[str]]:
        """What a call with ``arguments`` touches, for policies to match: ``{"path": [...], "host": [...]}`` and
        the like. Paths are relative to the tool's root, with ``/`` between parts; a path outside the root is
        absolute, and what the tool could not work out is listed under ``unresolved`` (a policy that matches paths
        should refuse it). By default nothing."""
        return {}

    def review(self, request: str, calls: Sequence[Mapping[str, Any]]) -> Review | None:
        """Whether the ``calls`` a run makes (or its plan proposes) to this tool do what ``request`` asks of it:
        each call as ``{"arguments": ..., "result": ...}`` (``result`` once it ran), in order. The kernel asks
        every tool a run used, and a planner may ask before the plan runs and re-plan with the findings; an
        approved review is what lets a result say ``verified`` (issue 26). Asked with no calls (a plan that calls
        no tool), a review that is not approved and not ``unrelated`` says the request asks this tool for
        something no step does. By default None: this tool cannot judge its calls, and a result that rests on
        them is ``unverified``."""
        return None

    def check_resources(self, resources: dict[str, list[str]]) -> None:
        """Have what this call touches beyond what :meth:`resources` said beforehand — found only while it runs,
        as a redirect's host — judged as the call itself was, before the tool touches it: raises the refusal
        (:class:`~aeon_kernel.errors.PolicyDeniedError`) when a policy denies it. Outside a judged call (no
        policy configured, or the tool called directly) it does nothing."""
        judge = _JUDGE.get()
        if judge is not None:
            judge(self, resources)

    @classmethod
    def from_function(cls, function: Callable[..., Any], **options: Any) -> FunctionTool:
        """The tool made of a typed function: see :func:`tool`."""
        return tool(**options)(function)

    def as_factory(self) -> Callable[..., Tool]:
        """This tool where a factory is expected (``register(name, tool)``, ``Engine(tools=[...])``)."""
        return _Given(self)

    @abstractmethod
    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        """Run the tool on arguments already validated against ``input_schema``. Raise ToolError on failure."""

    def validate_input(self, **kwargs: Any) -> bool:
        """True when ``kwargs`` match ``input_schema``; raises :class:`ValidationError` listing each problem."""
        return self._check(self.input_schema, kwargs, "arguments")

    def validate_output(self, result: dict[str, Any]) -> bool:
        """True when ``result`` matches ``output_schema``; raises :class:`ValidationError` otherwise."""
        return self._check(self.output_schema, result, "result")

    def _check(self, schema: dict[str, Any], value: Any, what: str) -> bool:
        errors = schema_errors(schema, value)
        if errors:
            raise ValidationError(f"{self.name} {what} invalid: " + "; ".join(errors), errors)
        return True

    @property
    def has_secrets(self) -> bool:
        return bool(self.sensitive_arguments or self.sensitive_results)

    def describe(self) -> dict[str, Any]:
        """The tool as ``export_tools_for_llm`` shows it."""
        return self.model_dump(include={"name", "description", "input_schema", "output_schema", "example"})


class FunctionTool(Tool):
    """Wrap a plain function as a tool, so embedders need not subclass :class:`Tool`: the long form, with
    hand-written schemas; :func:`tool` derives them from the function's types."""

    function: Callable[..., dict[str, Any]] = Field(exclude=True)

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        return self.function(**kwargs)


class _AsyncFunctionTool(FunctionTool):
    enforces_timeout: ClassVar[bool] = True  # its coroutine is cancelled at the timeout


@overload
def tool(function: Callable[..., Any], /) -> FunctionTool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, **options: Any
) -> Callable[..., FunctionTool]: ...
def tool(function: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Make a tool of a typed function, sync or async, as ``@tool`` or ``@tool(name=..., permissions=...)``.

    The input schema is pydantic's for its parameters (defaults, ``Annotated[..., Field(description=...)]``,
    enums, models), the description its docstring, with each parameter's (Google, NumPy or Sphinx style); the
    output schema is its return annotation's: a return that is an object (dict, TypedDict, model, dataclass) is
    the result, anything else (``-> int``) is returned as ``{"result": value}``. ``options``: ``name``,
    ``description``, and :class:`Tool`'s ``permissions``, ``timeout``, ``example``, ``pure``,
    ``sensitive_arguments``, ``sensitive_results``. A parameter the tool cannot be called with by name, or typed
    without a JSON Schema, is a :class:`ToolRegistrationError` naming it.
    """
    if function is None:
        return lambda function: tool(function, **options)
    from aeon_kernel.function_tools import derive

    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise ToolRegistrationError(
            f"tool() has no option {', '.join(unknown)} (it has: {', '.join(sorted(_OPTIONS))})"
        )
    name, description = options.pop("name", None), options.pop("description", None)
    fields, is_async = derive(function, name, description, options.get("timeout"))
    try:
        return (_AsyncFunctionTool if is_async else FunctionTool)(**fields, **options)
    except PydanticValidationError as exc:  # a name, a timeout, an example that is not valid
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ToolRegistrationError(f"{fields['name'] or repr(function)}: {problems}") from None


_OPTIONS: Final = frozenset(
    {"name", "description", "permissions", "timeout", "example", "pure"}
    | {"sensitive_arguments", "sensitive_results"}
)


class _Given:
    """A tool instance registered where a factory is expected: it takes what ``[tools.<name>] grant`` grants, and
    declares the tool's permissions, so that a tool that needs some is off until granted, as any is."""

    def __init__(self, tool: Tool) -> None:
        self.tool, self.permissions = tool, tool.permissions

    def __call__(self, granted: frozenset[str] = frozenset()) -> Tool:
        if granted == self.tool.granted:
            return self.tool
        unknown = sorted(set(granted) - set(self.permissions))
        if unknown:
            offered = ", ".join(sorted(self.permissions)) or "none"
            name = self.tool.name
            raise ConfigError(
                f"[tools.{name}] grant names {unknown}, which {name} does not have (it has: {offered})"
            )
        return self.tool.model_copy(update={"granted": frozenset(granted)})


class GivenTools:
    """The plugin that registers the tools passed to ``Engine(tools=[...])``: tools, or functions to make them of."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]]) -> None:
        self.__name__ = "engine_tools"  # the plugin name (the "aeon." prefix is the kernel's)
        self.tools = [given if isinstance(given, Tool) else tool(given) for given in tools]

    @hookimpl
    def aeon_register_tools(self, register: Callable[[str, Any], None]) -> None:
        for given in self.tools:
            register(given.name, given)


class ToolRegistry:
    """The tools a run may call (FR-020…022), with spec 002's interface."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools or ():
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool``. Its schemas were validated when it was built; a duplicate name is refused."""
        if not isinstance(tool, Tool):
            raise ToolRegistrationError(
                f"expected an aeon_kernel.Tool, got {type(tool).__name__}; make functions tools with "
                "@aeon_kernel.tool (or FunctionTool)"
            )
        if tool.name in self._tools:
            raise ToolRegistrationError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def list_all(self) -> list[str]:
        return list(self._tools)

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def export_tools_for_llm(self) -> list[dict[str, Any]]:
        """Every tool's name, description, schemas and example, for prompts and repairs."""
        return [tool.describe() for tool in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


#: directories that hold the kernel's and the devices' view of the machine: never a tool's workspace
_SYSTEM_DIRECTORIES: Final = tuple(Path(p) for p in ("/proc", "/sys", "/dev"))


def workspace_root(root: Path | None, tool: str) -> Path:
    """``root`` resolved, once checked as a directory a tool may work in: set, existing, and neither the
    filesystem's root nor under ``/proc``, ``/sys`` or ``/dev``. A ConfigError names ``[tools.<tool>] root``."""
    if root is None:
        raise ConfigError(f'the {tool} tool needs a root: set root = "a/directory" in [tools.{tool}]')
    expanded = root.expanduser()
    if not expanded.is_dir():
        raise ConfigError(f"[tools.{tool}] root {str(expanded)!r} is not an existing directory")
    resolved = expanded.resolve()
    if resolved == Path(resolved.anchor) or any(
        resolved == system or system in resolved.parents for system in _SYSTEM_DIRECTORIES
    ):
        raise ConfigError(f"[tools.{tool}] root {str(resolved)!r} is a system directory, not a workspace")
    return resolved
