"""The ``mcp`` tool: the tools of Model Context Protocol servers, as Aeon tools (issue 17).

Off until granted, and no server is started until then: ``[tools.mcp] grant = ["call"]`` and one table per
server, each with a ``command`` (a program run with its stdin and stdout as the connection) or a ``url``
(streamable HTTP)::

    [tools.mcp]
    grant = ["call"]
    # timeout = 30                     seconds for connecting, and for each call (a server's own timeout wins)

    [tools.mcp.servers.notes]
    command = ["python3", "-m", "notes_server"]
    env = { NOTES_TOKEN = { "$env" = "NOTES_TOKEN" } }     # stdio only
    # cwd = "servers/notes"

    [tools.mcp.servers.search]
    url = "http://127.0.0.1:8765/mcp"
    headers = { Authorization = { "$env" = "SEARCH_TOKEN" } }   # HTTP only

Each server is connected with the official SDK (``mcp``, ``pip install 'aeon-core[mcp]'``) when the engine builds
its tools; one that cannot be started, or does not list its tools within ``timeout``, is a ConfigError naming it
(with the end of what it wrote to stderr). Every tool it lists becomes an Aeon tool named
``mcp.<server>.<tool>`` (characters other than letters, digits, ``_``, ``.`` and ``-`` become ``_``) with the
server's description and its ``inputSchema``, against which the kernel validates every call before the server
sees it; a tool whose schema the kernel cannot use is left out, with a warning on the ``aeon`` logger (the
server's other tools stay usable). A call returns ``{"text": ..., "structured": ...}``: ``text`` joins the text
of the result's content (other content is named, as ``[image image/png]``), ``structured`` is the result's
``structuredContent``, present when the server sends it, required and checked against the server's
``outputSchema`` when it declares one. A result the server marks ``isError`` is a failed call carrying its text.

The tools are like any other: a call needs the ``call`` permission, and policies judge it first — by the tool's
name (``tool = "mcp.notes.delete*"``) or by what it touches (``{"server": ["notes"]}``, and the URL's
``host`` for an HTTP server).

One session per server stays open for the engine's life, on an event loop of its own in a daemon thread; the
server's tools share it. ``Engine.close()`` closes the sessions: a stdio server's stdin is closed and the process
(its process group) is stopped as the SDK does it (terminated, then killed, within a few seconds). A server that
exits meanwhile is not restarted: its calls fail, saying so, until the engine is built again.

A stdio server's environment holds nothing of this process's but the variables the SDK passes on
(``get_default_environment()``: ``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM`` and ``USER``), plus
``env``, which may override them. A credential in ``env`` or ``headers`` is a reference
(``{ "$env" = "TOKEN" }``); each such value, and a plain header value under a credential-like name, is registered
as a secret, so that no record, log or error shows it.

The tool and its factory are here; its parts are :mod:`aeon_plugins.mcp_tools.servers` (how one server is
described, started and reported when it cannot be used) and :mod:`aeon_plugins.mcp_tools.connections` (the
event loop thread and the sessions the tools share). Registering the plugin imports neither, nor ``asyncio``
(DESIGN rule 5): they are imported when the factory builds the tools. Their names stay readable here
(``aeon_plugins.mcp_tools.ServerOptions``, ``CLOSE_SECONDS``, ...), each imported on first use.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, ClassVar, Final
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr
from pydantic import ValidationError as PydanticValidationError

from aeon_kernel import ConfigError, Register, Tool, ToolError, ValidationError, hookimpl
from aeon_kernel.kit import check_schema, lazy_getattr, schema_errors

# The servers' code (asyncio, the SDK) is imported when the factory builds the tools; its names below stay
# readable as names of this package, each imported on first use.
if TYPE_CHECKING:
    from .connections import CLOSE_SECONDS as CLOSE_SECONDS
    from .connections import _Connections as _Connections
    from .connections import _Shared as _Shared
    from .servers import MAX_ERROR_CHARS as MAX_ERROR_CHARS
    from .servers import MAX_TOOLS as MAX_TOOLS
    from .servers import STDERR_TAIL_BYTES as STDERR_TAIL_BYTES
    from .servers import ServerOptions as ServerOptions
    from .servers import _cut as _cut
    from .servers import _Server as _Server
    from .servers import _server_options as _server_options

_CONNECTIONS: Final = "aeon_plugins.mcp_tools.connections"
_SERVERS: Final = "aeon_plugins.mcp_tools.servers"
_LAZY: Final[dict[str, str]] = {
    "CLOSE_SECONDS": _CONNECTIONS,
    "_Connections": _CONNECTIONS,
    "_Shared": _CONNECTIONS,
    "MAX_ERROR_CHARS": _SERVERS,
    "MAX_TOOLS": _SERVERS,
    "STDERR_TAIL_BYTES": _SERVERS,
    "ServerOptions": _SERVERS,
    "_Server": _SERVERS,
    "_cut": _SERVERS,
    "_server_options": _SERVERS,
}

log = logging.getLogger("aeon")

PERMISSIONS: Final = {"call": "call the tools of the configured MCP servers"}
#: seconds for connecting to a server and listing its tools, and for each call, unless ``timeout`` says otherwise
DEFAULT_TIMEOUT: Final = 30.0
_NOT_IN_A_NAME: Final = re.compile(r"[^A-Za-z0-9_.-]")


class MCPTool(Tool):
    """One tool of an MCP server, called through the session its server's tools share."""

    #: at ``timeout`` the call is cancelled and the tool says so; the kernel waits a little longer
    enforces_timeout: ClassVar[bool] = True
    permissions: dict[str, str] = dict(PERMISSIONS)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    #: the configured name of the server
    server: str
    #: the tool's name on its server
    remote_name: str
    #: the server's ``outputSchema`` for ``structuredContent``, when it declares one
    structured_schema: dict[str, Any] | None = None
    #: the URL's host, for policies, when the server is reached over HTTP
    host: str | None = None
    _shared: _Shared | None = PrivateAttr(default=None)

    def resources(self, arguments: dict[str, Any]) -> dict[str, list[str]]:
        touched = {"server": [self.server]}
        if self.host is not None:
            touched["host"] = [self.host]
        return touched

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        from .servers import _cut

        if self._shared is None:
            raise ToolError(
                f"{self.name} has no session to its MCP server; build it with the mcp tool factory"
            )
        answer = self._shared.connections.call(self.server, self.remote_name, kwargs, self.timeout)
        text = _content_text(answer.get("content"))
        if answer.get("isError"):
            raise ToolError(
                f"the MCP server {self.server!r} reported an error from {self.remote_name}: "
                + (_cut(text) or "(it gave no reason)")
            )
        result: dict[str, Any] = {"text": text}
        structured = answer.get("structuredContent")
        if structured is not None:
            result["structured"] = structured
        if self.structured_schema is not None:
            if structured is None:
                raise ToolError(
                    f"the MCP server {self.server!r} declares an output schema for {self.remote_name} but sent "
                    "no structured content"
                )
            problems = schema_errors(self.structured_schema, structured)
            if problems:
                raise ToolError(
                    f"the MCP server {self.server!r} sent structured content that does not match the output "
                    f"schema of {self.remote_name}: " + _cut("; ".join(problems))
                )
        return result

    def close(self) -> None:
        """Close the sessions of this tool's ``[tools.mcp]`` table (every tool of its servers stops working)."""
        if self._shared is not None:
            self._shared.close()


def _content_text(content: Any) -> str:
    """The text of a result's content blocks, one per line; other blocks named by their type and MIME type."""
    parts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            resource = block["resource"]
            if isinstance(resource.get("text"), str):
                parts.append(resource["text"])
            else:
                parts.append(f"[resource {resource.get('uri', '')} {resource.get('mimeType', '')}]".strip())
        elif kind == "resource_link":
            parts.append(f"[resource link {block.get('uri', '')}]")
        else:
            parts.append(f"[{kind} {block.get('mimeType', '')}]".replace(" ]", "]"))
    return "\n".join(parts)


def _output_schema(structured: dict[str, Any] | None) -> dict[str, Any]:
    """``{"text", "structured"}``; ``structured`` described by the server's schema when it can be embedded (its
    ``$defs`` moved to the top, where its ``#/$defs/...`` references then point)."""
    inner: dict[str, Any] = {"type": "object"}
    definitions: dict[str, Any] = {}
    if structured is not None:
        candidate = {k: v for k, v in structured.items() if k not in ("$defs", "$schema", "$id")}
        refs = _refs(structured)
        if all(ref.startswith("#/$defs/") for ref in refs):
            inner = candidate
            definitions = structured.get("$defs", {}) if refs else {}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "structured": inner},
        "required": ["text", "structured"] if structured is not None else ["text"],
        "additionalProperties": False,
    }
    if definitions:
        schema["$defs"] = definitions
    return schema


def _refs(schema: Any) -> list[str]:
    """Every ``$ref`` in ``schema``, at any depth (anything that is not a string counts as unusable)."""
    found: list[str] = []
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key == "$ref":
                    found.append(value if isinstance(value, str) else "")
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _usable_schema(schema: Any) -> bool:
    try:
        check_schema(schema)
    except ValidationError:
        return False
    return isinstance(schema, dict)


def _tools_of(
    name: str, server: _Server, listed: list[dict[str, Any]], granted: frozenset[str]
) -> list[MCPTool]:
    from .servers import _cut

    tools: dict[str, MCPTool] = {}
    host = urlsplit(server.options.url).hostname if server.options.url else None
    for entry in listed:
        remote = entry.get("name")
        if not isinstance(remote, str) or not remote:
            continue
        local = f"mcp.{name}.{_NOT_IN_A_NAME.sub('_', remote)}"
        if local in tools:
            log.warning(
                "MCP server %r: the tool %r is left out: its name is taken (as %s)", name, remote, local
            )
            continue
        input_schema = entry.get("inputSchema") or {"type": "object"}
        if not _usable_schema(input_schema):
            log.warning(
                "MCP server %r: the tool %r is left out: its inputSchema is not a usable schema", name, remote
            )
            continue
        structured = entry.get("outputSchema")
        if structured is not None and not _usable_schema(structured):
            log.warning(
                "MCP server %r: the outputSchema of %r is not a usable schema; it is ignored", name, remote
            )
            structured = None
        description = _cut(str(entry.get("description") or entry.get("title") or "").strip())
        try:
            tools[local] = MCPTool(
                name=local,
                description=description or f"The tool {remote} of the MCP server {name}.",
                input_schema=input_schema,
                output_schema=_output_schema(structured),
                server=name,
                remote_name=remote,
                structured_schema=structured,
                host=host,
                timeout=server.timeout,
                granted=granted,
            )
        except PydanticValidationError as exc:
            log.warning("MCP server %r: the tool %r is left out: %s", name, remote, _cut(str(exc), 500))
    return list(tools.values())


def mcp_tools(
    servers: dict[str, Any] | None = None,
    granted: frozenset[str] = frozenset(),
    timeout: float = DEFAULT_TIMEOUT,
) -> list[Tool]:
    """Connect to every server of ``[tools.mcp.servers]`` and return their tools (see the module docstring)."""
    from .connections import _Connections, _Shared
    from .servers import _Server, _server_options

    unknown = sorted(set(granted) - set(PERMISSIONS))
    if unknown:
        raise ConfigError(f"[tools.mcp] grant: the mcp tool has no permission {unknown[0]!r} (it has: call)")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigError(f"[tools.mcp] timeout must be a positive number of seconds, got {timeout!r}")
    if not servers or not isinstance(servers, dict):
        raise ConfigError(
            "[tools.mcp] names no server: add a table per server, e.g. [tools.mcp.servers.notes] with "
            'command = ["python3", "-m", "notes_server"] or url = "http://127.0.0.1:8765/mcp"'
        )
    try:
        import mcp  # noqa: F401 - only to say how to install it
    except ImportError:
        raise ConfigError(
            "the mcp tool needs the MCP SDK: pip install 'aeon-core[mcp]' (or pip install mcp)"
        ) from None
    configured = {name: _server_options(name, raw) for name, raw in servers.items()}
    connections = _Connections(
        {name: _Server(name, options, options.timeout or timeout) for name, options in configured.items()}
    )
    listings = connections.start()
    shared = _Shared(connections)
    tools: list[Tool] = []
    try:
        for name, server in connections.servers.items():
            for tool in _tools_of(name, server, listings[name], frozenset(granted)):
                tool._shared = shared
                tools.append(tool)
    except BaseException:
        shared.close()
        raise
    return tools


mcp_tools.permissions = dict(PERMISSIONS)  # type: ignore[attr-defined]


@hookimpl
def aeon_register_tools(register: Register) -> None:
    register("mcp", mcp_tools)


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
