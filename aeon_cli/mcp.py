"""``aeon mcp serve``: Aeon's tools, and ``run``, as a Model Context Protocol server (issue 17).

An MCP client (an IDE, a desktop assistant, another agent) sees every tool the engine builds from ``aeon.toml`` —
with its input and output schemas, only those granted, MCP servers' own tools included — and one more, ``run``,
which runs a request through the engine (plan, tools, answer) and returns how it ended. Calls are Aeon tool calls
like any other: the arguments are checked against the tool's input schema, then the call goes through the
``aeon_invoke_tool`` hook, so permissions and every policy of ``[policy]`` judge it, and the result is held to
the tool's output schema. A call that fails or is refused comes back as an error result (``isError``) carrying
the reason; a result comes back as JSON text and as structured content. Every answer is scrubbed of registered
secrets, as any output of ``aeon`` is.

Over stdio by default (the client starts ``aeon mcp serve --config aeon.toml``); ``--http PORT`` serves streamable
HTTP at ``http://127.0.0.1:PORT/mcp``, on the loopback interface only, with the SDK's DNS-rebinding protection.
It needs the MCP SDK: ``pip install 'aeon-core[mcp]'``.

Exit status: 0 when the client disconnects (or the HTTP server is stopped), 2 when the engine cannot be built.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
import uuid
from itertools import count
from typing import TYPE_CHECKING, Any, Final, NoReturn

import click

from aeon_cli.output import safe_streams
from aeon_kernel.errors import AeonError
from aeon_kernel.secrets import scrub_secrets, scrub_secrets_data

if TYPE_CHECKING:
    import mcp_types

    from aeon_kernel.engine import Engine
    from aeon_kernel.tools import Tool

EXIT_SETUP_ERROR: Final = 2
#: the name of the tool that runs a request through the engine
RUN_TOOL: Final = "run"
RUN_INPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "request": {"type": "string", "minLength": 1, "description": "what to do, in plain words"}
    },
    "required": ["request"],
    "additionalProperties": False,
}
RUN_OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string"},
        "status": {"enum": ["completed", "failed", "ttl_expired"]},
        "answer": {},
        "message": {"type": "string"},
        "errors": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["run_id", "status", "answer", "message", "errors"],
}
RUN_DESCRIPTION: Final = (
    "Run a request through Aeon: a plan is made, its steps call the configured tools, and the answer comes back "
    "with the run's status (completed, failed, ttl_expired) and a message saying why it ended so."
)


def _fail(exc: AeonError | str) -> NoReturn:
    click.echo(f"Error: {scrub_secrets(str(exc))}", err=True)
    sys.exit(EXIT_SETUP_ERROR)


@click.group()
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Model Context Protocol: serve Aeon's tools to MCP clients."""
    safe_streams(ctx)


@mcp.command()
@click.option(
    "--config", type=click.Path(dir_okay=False), help="aeon.toml to use (default: $AEON_CONFIG, ./aeon.toml)."
)
@click.option(
    "--http",
    "port",
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="Serve streamable HTTP at http://127.0.0.1:PORT/mcp (loopback only) instead of stdio.",
)
def serve(config: str | None, port: int | None) -> None:
    """Serve the engine's tools, and `run`, as an MCP server: over stdio, or streamable HTTP with --http.

    Exit status: 0 when the client disconnects or the server is stopped, 2 when the engine cannot be built.
    """
    try:
        import anyio
        from mcp.server.lowlevel import Server
    except ImportError:
        _fail("aeon mcp serve needs the MCP SDK: pip install 'aeon-core[mcp]' (or pip install mcp)")
    from aeon_kernel.engine import Engine
    from aeon_kernel.version import __version__

    try:
        engine = Engine(config)
    except AeonError as exc:
        _fail(exc)
    try:
        engine.check_choices()
        bridge = Bridge(engine)
    except AeonError as exc:
        engine.close()
        _fail(exc)
    server = Server(
        "aeon",
        version=__version__,
        instructions="Aeon's tools; `run` runs a whole request (plan, tool calls, answer).",
        on_list_tools=bridge.list_tools,
        on_call_tool=bridge.call_tool,
    )
    listening = None
    if port is not None:
        try:
            listening = _listen(port)
        except OSError as exc:
            engine.close()
            _fail(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}; choose another --http port")
    where = "stdio" if listening is None else f"http://127.0.0.1:{port}/mcp"
    click.echo(f"aeon mcp: serving {len(bridge.tools) + 1} tools on {where}", err=True)
    # SIGTERM ends the server as a client's disconnecting would: the engine is closed (uvicorn stops gracefully,
    # then raises the signal again, which lands here).
    signal.signal(signal.SIGTERM, _stop)
    try:
        if listening is None:
            anyio.run(_serve_stdio, server)
        else:
            anyio.run(_serve_http, server, listening)
    except KeyboardInterrupt:
        pass
    finally:
        engine.close()


def _stop(signum: int, frame: Any) -> NoReturn:
    raise SystemExit(0)


def _listen(port: int) -> socket.socket:
    """A socket bound to ``127.0.0.1:port``, so that a port in use is a clear error before serving starts."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(("127.0.0.1", port))
    except OSError:
        listening.close()
        raise
    return listening


async def _serve_stdio(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _serve_http(server: Any, listening: socket.socket) -> None:
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    await uvicorn.Server(config).serve(sockets=[listening])


class Bridge:
    """The engine's tools as MCP sees them, and calls from MCP made as Aeon makes them."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.tools: dict[str, Tool] = {}
        for tool in engine.tools:
            if tool.name == RUN_TOOL:
                click.echo(f"aeon mcp: the tool {tool.name!r} is not served: `run` is Aeon's own", err=True)
                continue
            self.tools[tool.name] = tool
        engine.policies  # noqa: B018 - built now, so that every call is judged by them
        self._run_id = f"mcp-{uuid.uuid4().hex[:12]}"
        self._calls = count(1)
        self._runs = threading.Lock()

    async def list_tools(self, ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        import mcp_types

        listed = [
            mcp_types.Tool(
                name=tool.name,
                description=tool.description,
                input_schema=tool.input_schema,
                output_schema=tool.output_schema,
            )
            for tool in self.tools.values()
        ]
        listed.append(
            mcp_types.Tool(
                name=RUN_TOOL,
                description=RUN_DESCRIPTION,
                input_schema=RUN_INPUT_SCHEMA,
                output_schema=RUN_OUTPUT_SCHEMA,
            )
        )
        return mcp_types.ListToolsResult(tools=listed)

    async def call_tool(self, ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        import anyio.to_thread

        arguments = dict(params.arguments or {})
        outcome: tuple[dict[str, Any] | None, str | None]
        try:
            if params.name == RUN_TOOL:
                outcome = await anyio.to_thread.run_sync(self.run, arguments)
            elif params.name in self.tools:
                outcome = await anyio.to_thread.run_sync(self.call, self.tools[params.name], arguments)
            else:
                served = ", ".join([*self.tools, RUN_TOOL])
                outcome = (None, f"there is no tool {params.name!r}; the tools are: {served}")
        except Exception as exc:  # a plugin's bug: the client hears of it, the server goes on
            outcome = (None, f"{params.name} failed: {type(exc).__name__}: {exc}")
        return _answer(*outcome)

    def call(self, tool: Tool, arguments: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """Call ``tool`` as a plan step would: arguments checked, then the hook (permissions, policies, the
        tool), then the record checked and redacted. ``(result, None)`` or ``(None, why it failed)``."""
        from aeon_kernel.invocation import ToolContext, checked, redacted
        from aeon_kernel.schemas import schema_errors

        problems = schema_errors(tool.input_schema, arguments)
        if problems:
            return None, f"invalid arguments for {tool.name}: " + "; ".join(problems)
        context = ToolContext(self._run_id, f"call-{next(self._calls)}")
        answer = self.engine.pm.hook.aeon_invoke_tool(tool=tool, arguments=arguments, context=context)
        record = redacted(tool, checked(tool, arguments, context.step_id, answer))
        if record.error is not None:
            return None, str(record.error.get("message") or record.error)
        return record.result, None

    def run(self, arguments: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """Run ``request`` through the engine (one run at a time); how it ended, or why it could not start."""
        from aeon_kernel.schemas import schema_errors

        problems = schema_errors(RUN_INPUT_SCHEMA, arguments)
        if problems:
            return None, "invalid arguments for run: " + "; ".join(problems)
        try:
            with self._runs:
                result = self.engine.run(arguments["request"])
        except AeonError as exc:
            return None, f"the run could not start: {exc}"
        return {key: result.get(key) for key in RUN_OUTPUT_SCHEMA["required"]}, None


def _answer(result: dict[str, Any] | None, error: str | None) -> mcp_types.CallToolResult:
    import mcp_types

    if result is None:
        text = scrub_secrets(error or "the call failed")
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=text)], is_error=True
        )
    shown = scrub_secrets_data(result)
    text = json.dumps(shown, ensure_ascii=False, default=str)
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], structured_content=shown
    )
