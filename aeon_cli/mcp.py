"""``aeon mcp serve``: Aeon's tools, and ``run``, as a Model Context Protocol server (issue 17).

An MCP client (an IDE, a desktop assistant, another agent) sees every tool the engine builds from ``aeon.toml`` —
with its input and output schemas, only those granted, MCP servers' own tools included — and one more, ``run``,
which runs a request through the engine (plan, tools, answer) and returns how it ended. Calls are Aeon tool calls
like any other: the arguments are checked against the tool's input schema, then the call goes through the
``aeon_invoke_tool`` hook, so permissions and every policy of ``[policy]`` judge it, and the result is held to
the tool's output schema. A call that fails or is refused comes back as an error result (``isError``) carrying
the reason; a result comes back as JSON text and as structured content. Every answer is scrubbed of registered
secrets, as any output of ``aeon`` is.

Over stdio by default (the client starts ``aeon mcp serve --config aeon.toml``, and only it holds the pipes);
``--http PORT`` serves streamable HTTP at ``http://127.0.0.1:PORT/mcp``, on the loopback interface only, with the
SDK's DNS-rebinding protection. Loopback keeps other machines out, not other processes or accounts of this one, so
over HTTP every request must carry the session's bearer token (``Authorization: Bearer TOKEN``), checked by the
SDK's own auth middleware through a :class:`SessionToken` verifier (constant-time): without it, or with another,
the answer is ``401`` and no tool is listed or called. The token is ``--token-file FILE``'s (a file only its owner
can read; created with a new token where it does not exist), else ``$AEON_MCP_TOKEN``, else a new random one
printed on stderr — for the user who started the server only.
It needs the MCP SDK: ``pip install 'aeon-core[mcp]'``.

Exit status: 0 when the client disconnects or the server is stopped (Ctrl-C, or SIGTERM as a supervisor stops it,
even where SIGINT was inherited ignored), 2 when the engine cannot be built or the token cannot be had.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import sys
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from itertools import count
from typing import TYPE_CHECKING, Any, Final, NoReturn

import click

from aeon_cli.inspect.local import new_token, same, stopping
from aeon_cli.output import safe_streams
from aeon_kernel.errors import AeonError
from aeon_kernel.secrets import register_secret, scrub_secrets, scrub_secrets_data

if TYPE_CHECKING:
    import mcp_types
    from mcp.server.auth.provider import AccessToken

    from aeon_kernel.engine import Engine
    from aeon_kernel.kit import Approval
    from aeon_kernel.tools import Tool

EXIT_SETUP_ERROR: Final = 2
#: where ``aeon mcp serve --http`` reads its bearer token when no ``--token-file`` names one
TOKEN_VARIABLE: Final = "AEON_MCP_TOKEN"  # noqa: S105 - a variable's name
#: the shortest token accepted from a file or the environment (a new one has 43 characters)
MIN_TOKEN: Final = 32
#: seconds the HTTP server waits, once told to stop, for a client's open stream before it closes it
GRACEFUL: Final = 3
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
        "status": {"enum": ["completed", "failed", "ttl_expired", "waiting"]},
        "answer": {},
        "message": {"type": "string"},
        "errors": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["run_id", "status", "answer", "message", "errors"],
}
RUN_DESCRIPTION: Final = (
    "Run a request through Aeon: a plan is made, its steps call the configured tools, and the answer comes back "
    "with the run's status (completed, failed, ttl_expired; or waiting, for a person's approval: aeon approve RUN_ID) "
    "and a message saying why it ended so."
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
    help="Serve streamable HTTP at http://127.0.0.1:PORT/mcp (loopback only) instead of stdio; every request "
    "must carry the session's token (Authorization: Bearer TOKEN).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    help=f"With --http: the token clients must send, read from FILE (readable by its owner only; created with a "
    f"new token, mode 0600, where it does not exist). Default: ${TOKEN_VARIABLE}, else a new token printed on "
    "stderr.",
)
def serve(config: str | None, port: int | None, token_file: str | None) -> None:
    """Serve the engine's tools, and `run`, as an MCP server: over stdio, or streamable HTTP with --http (a bearer
    token required: from --token-file, $AEON_MCP_TOKEN, else a new one printed on stderr).

    Exit status: 0 when the client disconnects or the server is stopped (Ctrl-C, SIGTERM), 2 when the engine
    cannot be built or the token cannot be had.
    """
    if token_file is not None and port is None:
        raise click.UsageError(
            "--token-file is for --http: over stdio only the client that started the server talks"
        )
    try:
        import anyio
        from mcp.server.lowlevel import Server
    except ImportError:
        _fail("aeon mcp serve needs the MCP SDK: pip install 'aeon-core[mcp]' (or pip install mcp)")
    token, told = (None, "") if port is None else _session_token(token_file)
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
    # SIGTERM ends the server as Ctrl-C and a client's disconnecting do: the engine is closed (uvicorn stops
    # gracefully, then raises the signal again, which lands here); SIGINT too where it was inherited ignored.
    interrupted = False
    with stopping():
        try:
            if listening is None:  # over stdio, a signal closes the engine and exits (see _exit_closed)
                stop = partial(_exit_closed, engine)
                for signum in (signal.SIGINT, signal.SIGTERM):  # until the event loop takes them over
                    signal.signal(signum, lambda *_: stop())
            where = "stdio" if listening is None else f"http://127.0.0.1:{port}/mcp"
            click.echo(f"aeon mcp: serving {len(bridge.tools) + 1} tools on {where}", err=True)
            if listening is None:
                anyio.run(_serve_stdio, server, stop)
            else:
                assert token is not None
                click.echo(f"aeon mcp: {told}", err=True)
                sys.stderr.flush()
                anyio.run(_serve_http, server, listening, token)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            engine.close()
    if interrupted and listening is None:
        _exit_closed(engine)


def _exit_closed(engine: Engine) -> NoReturn:
    """Over stdio, stopped by a signal while the client still holds the pipe: the engine closed, exit (status 0)
    at once. The SDK's thread reading stdin stays blocked in read() until the client writes or goes, and neither
    cancelling it nor Python's exit would wait less."""
    engine.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _session_token(token_file: str | None) -> tuple[str, str]:
    """The bearer token of this HTTP session, and what to tell the user about it: ``token_file``'s (a new one
    written there, mode 0600, where it does not exist), else ``$AEON_MCP_TOKEN``'s, else a new one (shown)."""
    header = 'every request must carry the header "Authorization: Bearer TOKEN"; '
    if token_file is not None:
        path = token_file
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            token = _read_token(path)
        except OSError as exc:
            _fail(f"cannot write a token to {path}: {exc.strerror or exc}")
        else:
            token = new_token()
            with os.fdopen(descriptor, "w", encoding="ascii") as file:
                file.write(token + "\n")
            register_secret(token)
            return token, f"{header}TOKEN is in {path} (new, readable by you only)"
        register_secret(token)
        return token, f"{header}TOKEN is the one in {path}"
    given = os.environ.get(TOKEN_VARIABLE)
    if given is not None:
        token = _checked_token(given.strip(), f"${TOKEN_VARIABLE}")
        register_secret(token)
        return token, f"{header}TOKEN is ${TOKEN_VARIABLE}'s"
    token = new_token()
    register_secret(token)  # never in an answer or a record (it is printed here, unscrubbed, for the user)
    return token, f"{header}this session's token: {token}  (your own: --token-file FILE or ${TOKEN_VARIABLE})"


def _read_token(path: str) -> str:
    """The token ``path`` holds; refused where another account could read (or replace) the file."""
    try:
        with open(path, "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            if not stat.S_ISREG(mode):
                _fail(f"the token file {path} is not a regular file")
            if mode & 0o077:
                _fail(
                    f"the token file {path} can be read or written by other accounts (mode "
                    f"{stat.S_IMODE(mode):04o}): chmod 600 {path}"
                )
            raw = file.read(4096)
    except OSError as exc:
        _fail(f"cannot read the token file {path}: {exc.strerror or exc}")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        _fail(f"the token file {path} holds no usable token: printable ASCII expected")
    return _checked_token(text.strip(), f"the token file {path}")


def _checked_token(token: str, where: str) -> str:
    if len(token) < MIN_TOKEN or not all("!" <= char <= "~" for char in token):
        _fail(
            f"{where} holds no usable token: {MIN_TOKEN} printable characters or more, no spaces "
            "(python3 -c 'import secrets; print(secrets.token_urlsafe(32))' makes one)"
        )
    return token


class SessionToken:
    """The MCP SDK's ``TokenVerifier`` for one session's bearer token, compared in constant time."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        if not same(token, self._token):
            return None
        return AccessToken(token=token, client_id="aeon-mcp-session", scopes=[])


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


async def _serve_stdio(server: Any, stop: Callable[[], NoReturn]) -> None:
    """Serve over stdin and stdout until the client goes, or until SIGINT or SIGTERM, which ``stop`` the process
    (handled in the event loop, between its tasks)."""
    import anyio
    from mcp.server.stdio import stdio_server

    async def watch() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
            async for _ in received:
                stop()

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        group.cancel_scope.cancel()


async def _serve_http(server: Any, listening: socket.socket, token: str) -> None:
    import uvicorn
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    here = AnyHttpUrl(f"http://127.0.0.1:{listening.getsockname()[1]}")
    app = server.streamable_http_app(
        host="127.0.0.1",
        # the SDK's bearer middleware on /mcp: a request without the session's token is 401, before any handler
        auth=AuthSettings(issuer_url=here, resource_server_url=None),
        token_verifier=SessionToken(token),
    )
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=GRACEFUL)
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
        self._runs = asyncio.Lock()  # one run at a time

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
                outcome = await self.run(arguments, ctx.session.report_progress, partial(_asked, ctx))
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

    async def run(
        self,
        arguments: dict[str, Any],
        progress: Callable[..., Awaitable[None]],
        ask: Callable[[dict[str, Any]], Awaitable[Approval | None]],
    ) -> tuple[dict[str, Any] | None, str | None]:
        """Run ``request`` through the engine (one run at a time), each of its events a progress notification to a
        client that asked for them (``progressToken``; the text of each, scrubbed); how it ended, or why it could
        not start. A client that cancels the call stops the run at its next safe point. A call that needs approval
        is put to the client (``ask``: MCP elicitation); one that cannot answer gets the ``waiting`` result."""
        from aeon_kernel.schemas import schema_errors

        problems = schema_errors(RUN_INPUT_SCHEMA, arguments)
        if problems:
            return None, "invalid arguments for run: " + "; ".join(problems)
        async with self._runs:
            try:
                run = self.engine.start(arguments["request"])
            except AeonError as exc:
                return None, f"the run could not start: {exc}"
            events = count(1)
            while True:
                async with run.astream() as stream:
                    async for event in stream:
                        await progress(next(events), None, scrub_secrets(event.summary()))
                result = stream.result
                answer = await ask(result["approval"]) if result and result["status"] == "waiting" else None
                if answer is None:
                    break
                run.answer(answer)
        if result is None:  # pragma: no cover - the stream ended without a result: it raised instead
            return None, "the run ended without a result"
        return {key: result.get(key) for key in RUN_OUTPUT_SCHEMA["required"]}, None


#: what an MCP client is asked for when a run waits for approval (decision 0021)
APPROVAL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve", "description": "Let the call run as shown"},
        "reason": {"type": "string", "title": "Reason", "description": "Why it is refused (when it is)"},
    },
    "required": ["approve"],
}


async def _asked(ctx: Any, request: dict[str, Any]) -> Approval | None:
    """The client's answer to the call a run waits on, by MCP elicitation: approved, or refused (declined, or not
    approved, with its reason). None when the client cancels or cannot be asked: the run stays waiting."""
    from aeon_kernel.kit import Approval

    arguments = json.dumps(request.get("arguments"), ensure_ascii=False, default=str)
    message = scrub_secrets(f"{request.get('message')}. The call: {request.get('tool')} {arguments}")
    try:
        answer = await ctx.session.elicit_form(message, APPROVAL_SCHEMA, related_request_id=ctx.request_id)
    except Exception:  # no elicitation in this client, or no channel back to it
        return None
    by = "the MCP client"
    if answer.action == "accept" and isinstance(answer.content, dict):
        if answer.content.get("approve") is True:
            return Approval(by=by)
        return Approval.deny(str(answer.content.get("reason") or "not approved in the MCP client"), by)
    return Approval.deny("declined in the MCP client", by) if answer.action == "decline" else None


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
