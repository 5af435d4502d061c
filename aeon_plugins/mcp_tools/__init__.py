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
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import re
import threading
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr
from pydantic import ValidationError as PydanticValidationError

from aeon_kernel import (
    ConfigError,
    Register,
    Tool,
    ToolError,
    ValidationError,
    check_schema,
    hookimpl,
    register_secret,
    schema_errors,
    scrub_secrets,
)

if TYPE_CHECKING:
    from mcp import ClientSession

log = logging.getLogger("aeon")

PERMISSIONS: Final = {"call": "call the tools of the configured MCP servers"}
#: seconds for connecting to a server and listing its tools, and for each call, unless ``timeout`` says otherwise
DEFAULT_TIMEOUT: Final = 30.0
#: seconds ``close()`` waits for the sessions to end (a stdio server gets a few of them to exit by itself)
CLOSE_SECONDS: Final = 10.0
#: how much of a stdio server's stderr is kept, for the error that says why it could not be used
STDERR_TAIL_BYTES: Final = 4000
#: the most tools taken from one server (pages of ``tools/list`` are followed until then)
MAX_TOOLS: Final = 1000
MAX_ERROR_CHARS: Final = 2000
_SERVER_NAME: Final = re.compile(r"[A-Za-z0-9_-]+")
_NOT_IN_A_NAME: Final = re.compile(r"[^A-Za-z0-9_.-]")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: configured headers whose plain values are treated as secrets all the same
_CREDENTIAL_NAME: Final = re.compile(
    r"authorization|cookie|token|secret|password|api-?key|auth", re.IGNORECASE
)
_SERVER_KEYS: Final = "command, url, env, headers, cwd, timeout"


class ServerOptions(BaseModel):
    """One ``[tools.mcp.servers.<name>]`` table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: the program and its arguments (stdio)
    command: list[str] | None = None
    #: the endpoint (streamable HTTP)
    url: str | None = None
    #: variables added to a stdio server's environment; secrets arrive as SecretStr
    env: dict[str, str | SecretStr] = {}
    #: headers sent with every request to an HTTP server; secrets arrive as SecretStr
    headers: dict[str, str | SecretStr] = {}
    #: a stdio server's working directory (default: this process's)
    cwd: Path | None = None
    #: seconds for connecting and for each call (default: ``[tools.mcp] timeout``)
    timeout: float | None = Field(default=None, gt=0)


def _plain(value: str | SecretStr) -> str:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def _server_options(name: str, raw: Any) -> ServerOptions:
    """``raw`` as the options of the server ``name``, every problem a ConfigError saying what to write."""
    where = f"[tools.mcp.servers.{name}]"
    if not _SERVER_NAME.fullmatch(name):
        raise ConfigError(
            f"[tools.mcp.servers] {name!r} is not a usable server name: use letters, digits, '_' and '-' (it "
            "becomes part of the tool names, mcp.<server>.<tool>)"
        )
    if not isinstance(raw, dict):
        raise ConfigError(f'{where} must be a table, e.g. command = ["python3", "-m", "server"]')
    if isinstance(raw.get("command"), str):
        raise ConfigError(
            f'{where} command must be a list: the program, then its arguments (command = ["python3", "-m", '
            '"server"]); it is never run through a shell'
        )
    try:
        options = ServerOptions(**raw)
    except PydanticValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'the table'}: {error['msg']}"
            for error in exc.errors(include_input=False)
        )
        raise ConfigError(f"{where}: {problems} (the keys are {_SERVER_KEYS})") from None
    for value in (*options.env.values(), *options.headers.values()):
        if isinstance(value, SecretStr):
            register_secret(value.get_secret_value())
    for header, value in options.headers.items():
        if isinstance(value, str) and _CREDENTIAL_NAME.search(header):
            register_secret(value)
    if (options.command is None) == (options.url is None):
        raise ConfigError(
            f'{where} needs either command = ["program", "argument", ...] (a server on stdio) or '
            'url = "http://host:port/mcp" (streamable HTTP), not both'
        )
    if options.command is not None:
        if not options.command or not all(part for part in options.command):
            raise ConfigError(f'{where} command must name a program: command = ["program", ...]')
        if any("\x00" in part for part in options.command):
            raise ConfigError(f"{where} command holds a NUL byte, which no program can be given")
        if options.headers:
            raise ConfigError(f"{where} headers are for a server at a url; give a stdio server env instead")
        for variable, value in options.env.items():
            if not _ENV_NAME.fullmatch(variable):
                raise ConfigError(f"{where} env: {variable!r} is not a variable name (letters, digits, '_')")
            if "\x00" in _plain(value):
                raise ConfigError(f"{where} env: the value of {variable} holds a NUL byte")
    else:
        assert options.url is not None
        parts = urlsplit(options.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f'{where} url must be an http:// or https:// URL, e.g. "http://127.0.0.1:8765/mcp"'
            )
        if parts.username is not None or parts.password is not None:
            raise ConfigError(
                f"{where} url must not hold a user or password: send credentials in headers, e.g. "
                'headers = { Authorization = { "$env" = "TOKEN" } }'
            )
        if options.env or options.cwd is not None:
            raise ConfigError(f"{where} env and cwd are for a server started with command; remove them")
    return options


def _reason(exc: BaseException) -> str:
    """What went wrong, for an error message: the leaves of an exception group, each as ``Type: message``."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(_reason(inner) for inner in exc.exceptions))
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "no answer in time"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _cut(text: str, at: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= at else text[: at - 1] + "…"


class _StderrTail:
    """A pipe for a stdio server's stderr, read by a daemon thread that keeps the last bytes (for errors)."""

    def __init__(self) -> None:
        read_end, write_end = os.pipe()
        self.writer = open(write_end, "w", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed after spawn
        self._reader = read_end
        self._tail = b""
        self._thread = threading.Thread(target=self._read, name="aeon-mcp-stderr", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while chunk := os.read(self._reader, 65536):
                self._tail = (self._tail + chunk)[-STDERR_TAIL_BYTES:]
        except OSError:
            pass
        finally:
            os.close(self._reader)

    def close_writer(self) -> None:
        """Close this process's copy of the write end (the server has its own), so that reading ends with it."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def text(self, wait: float = 0.5) -> str:
        """The end of what the server wrote, once it has finished writing (waiting at most ``wait`` seconds)."""
        self._thread.join(wait)
        return self._tail.decode("utf-8", "replace").strip()


class _Server:
    """One server's session, opened and closed by :meth:`run` on the connections' loop."""

    def __init__(self, name: str, options: ServerOptions, timeout: float) -> None:
        self.name, self.options, self.timeout = name, options, timeout
        self.session: ClientSession | None = None
        self.stderr: _StderrTail | None = None
        self.lost: str | None = None
        self.task: asyncio.Task[None] | None = None
        self.ready: asyncio.Future[list[dict[str, Any]]] | None = None
        self.stop: asyncio.Event | None = None

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        """The SDK's stream pair to the server, over stdio or streamable HTTP."""
        if self.options.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            program, *arguments = self.options.command
            parameters = StdioServerParameters(
                command=program,
                args=arguments,
                env={key: _plain(value) for key, value in self.options.env.items()},
                cwd=self.options.cwd,
            )
            self.stderr = _StderrTail()
            try:
                async with stdio_client(parameters, errlog=self.stderr.writer) as streams:
                    self.stderr.close_writer()
                    yield streams[0], streams[1]
            finally:
                self.stderr.close_writer()
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            assert self.options.url is not None
            headers = {key: _plain(value) for key, value in self.options.headers.items()}
            client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(self.timeout, read=300.0))
            async with client, streamable_http_client(self.options.url, http_client=client) as streams:
                yield streams[0], streams[1]

    async def run(self) -> None:
        """Connect, list the tools (``ready``), keep the session open until ``stop``, then close it."""
        from mcp import ClientSession

        assert self.ready is not None and self.stop is not None
        try:
            async with self._transport() as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                tools = await self._list_tools(session)
                self.session = session
                self.ready.set_result(tools)
                await self.stop.wait()
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError("cancelled"))
            else:
                self.lost = _reason(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self.session = None
            if self.lost is None and not self.stop.is_set():
                self.lost = "the connection was closed"

    async def _list_tools(self, session: ClientSession) -> list[dict[str, Any]]:
        """Every page of ``tools/list``, up to :data:`MAX_TOOLS` tools, as the protocol writes them."""
        import mcp_types

        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while len(tools) < MAX_TOOLS:
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = (await session.list_tools(params=params)).model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
            tools += page.get("tools", [])
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return tools[:MAX_TOOLS]

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        session = self.session
        if session is None:
            why = f" ({self.lost})" if self.lost else ""
            raise ToolError(
                f"the MCP server {self.name!r} is no longer connected{why}; it is not restarted: build the "
                "engine again"
            )
        result = await session.call_tool(tool, arguments)
        answer: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return answer

    def failure(self, exc: BaseException) -> ConfigError:
        """The ConfigError for a server that could not be connected."""
        what = (
            f"the command {self.options.command!r}"
            if self.options.command
            else f"the url {self.options.url!r}"
        )
        message = (
            f"[tools.mcp.servers.{self.name}]: the MCP server could not be used ({what}): {_reason(exc)}"
        )
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
            message += (
                f"; it did not list its tools within {self.timeout:g} s (raise timeout in "
                f"[tools.mcp.servers.{self.name}] if it needs longer)"
            )
        stderr = self.stderr.text() if self.stderr is not None else ""
        if stderr:
            message += f"; it wrote to stderr: {_cut(stderr[-1000:], 1000)}"
        return ConfigError(scrub_secrets(message))  # a server may well print its own token


class _StartFailure(Exception):
    """A server that could not be connected, and why (turned into a ConfigError once everything is closed)."""

    def __init__(self, server: _Server, reason: BaseException) -> None:
        super().__init__(server.name)
        self.server, self.reason = server, reason


class _Connections:
    """The sessions of the servers of one ``[tools.mcp]`` table, on an event loop of their own (a daemon thread)."""

    def __init__(self, servers: dict[str, _Server]) -> None:
        self.servers = servers
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="aeon-mcp", daemon=True)
        self._lock = threading.Lock()
        self._closed = False

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def start(self) -> dict[str, list[dict[str, Any]]]:
        """Connect to every server at once; each one's tools, as listed. A ConfigError when one cannot be used,
        raised once every session is closed (and the failed server's stderr read to its end)."""
        self._thread.start()
        try:
            return asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()
        except _StartFailure as failure:
            self.close()
            raise failure.server.failure(failure.reason) from None
        except BaseException:
            self.close()
            raise

    async def _start(self) -> dict[str, list[dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        for server in self.servers.values():
            server.ready, server.stop = loop.create_future(), asyncio.Event()
            server.ready.add_done_callback(_retrieved)
            server.task = loop.create_task(server.run(), name=f"aeon-mcp-{server.name}")
        listings: dict[str, list[dict[str, Any]]] = {}
        for name, server in self.servers.items():
            assert server.ready is not None
            try:
                listings[name] = await asyncio.wait_for(server.ready, server.timeout)
            except Exception as exc:
                raise _StartFailure(server, exc) from None
        return listings

    def call(self, server: str, tool: str, arguments: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Call ``tool`` on ``server`` and wait at most ``timeout`` seconds (then the call is cancelled)."""
        if self._closed:
            raise ToolError(
                f"the MCP session of {server!r} was closed with its engine; build the engine again"
            )
        coroutine = self.servers[server].call(tool, arguments)
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        except RuntimeError:  # the loop was closed meanwhile
            coroutine.close()
            raise ToolError(f"the MCP session of {server!r} was closed; build the engine again") from None
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(
                f"the MCP server {server!r} did not answer the call of {tool!r} within timeout = {timeout:g} s, "
                f"so it was cancelled; if it needs longer, raise timeout in [tools.mcp.servers.{server}]"
            ) from None
        except ToolError:
            raise
        except concurrent.futures.CancelledError:
            raise ToolError(f"the call of {tool!r} on the MCP server {server!r} was cancelled") from None
        except Exception as exc:
            raise ToolError(
                f"the call of {tool!r} on the MCP server {server!r} failed: {_cut(_reason(exc))}"
            ) from None

    def close(self) -> None:
        """End every session (stdio servers stop) and the loop; idempotent, never raises."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if not self._thread.is_alive():
            return
        if threading.current_thread() is self._thread:  # from the loop itself (a finalizer): cannot wait here
            self._loop.create_task(self._shutdown())
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(Exception):
            future.result(CLOSE_SECONDS + 1)
        self._thread.join(2)

    async def _shutdown(self) -> None:
        tasks = [server.task for server in self.servers.values() if server.task is not None]
        for server in self.servers.values():
            if server.session is not None and server.stop is not None:
                server.stop.set()  # connected: the session ends as it should (a stdio server's stdin is closed)
            elif server.task is not None:
                server.task.cancel()  # still connecting: nothing to wait for
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=CLOSE_SECONDS / 2)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=CLOSE_SECONDS / 2)
        current = asyncio.current_task()
        others = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
        for task in others:  # calls still waiting for an answer
            task.cancel()
        if others:
            await asyncio.wait(others, timeout=1)
        asyncio.get_running_loop().call_soon(self._loop.stop)


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a server's failure as seen, whether or not :meth:`_Connections._start` got to it."""
    if not future.cancelled():
        future.exception()


class _Shared:
    """What the tools of one ``[tools.mcp]`` table share. Closing it — or dropping the last of its tools, or the
    interpreter's exit — closes the sessions: a toolset built and thrown away leaves no server running."""

    def __init__(self, connections: _Connections) -> None:
        self.connections = connections
        self._finalizer = weakref.finalize(self, connections.close)

    def close(self) -> None:
        self._finalizer()


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
