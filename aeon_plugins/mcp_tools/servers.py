"""One server of the ``mcp`` tool: its ``[tools.mcp.servers.<name>]`` table, its session, and what is said
when it cannot be used.

:func:`_server_options` reads a table into :class:`ServerOptions`, every problem a ConfigError; :class:`_Server`
opens the SDK's session over stdio or streamable HTTP, lists the tools and makes the calls, keeping the end of a
stdio server's stderr (:class:`_StderrTail`) for the error that says why it could not be started. The tool
(:mod:`aeon_plugins.mcp_tools`) puts them together.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic import ValidationError as PydanticValidationError

from aeon_kernel import ConfigError, ToolError
from aeon_kernel.kit import register_secret, scrub_secrets

if TYPE_CHECKING:
    from mcp import ClientSession

#: how much of a stdio server's stderr is kept, for the error that says why it could not be used
STDERR_TAIL_BYTES: Final = 4000
#: the most tools taken from one server (pages of ``tools/list`` are followed until then)
MAX_TOOLS: Final = 1000
MAX_ERROR_CHARS: Final = 2000
_SERVER_NAME: Final = re.compile(r"[A-Za-z0-9_-]+")
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
