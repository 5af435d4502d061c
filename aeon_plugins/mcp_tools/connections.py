"""The sessions of the ``mcp`` tool's servers, on an event loop of their own in a daemon thread.

:class:`_Connections` starts every :class:`~aeon_plugins.mcp_tools.servers._Server` of one ``[tools.mcp]``
table at once, hands their calls to the loop and closes them; :class:`_Shared` is what the tools of that table
hold, closing the sessions when it is closed or dropped. The tool (:mod:`aeon_plugins.mcp_tools`) puts them
together.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from typing import Any, Final

from aeon_kernel import ToolError

from .servers import _cut, _reason, _Server, _StartFailure

#: seconds ``close()`` waits for the sessions to end (a stdio server gets a few of them to exit by itself)
CLOSE_SECONDS: Final = 10.0


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
