"""A small MCP server for the tests, written with the official SDK (``mcp``): the other end of the ``mcp`` tool.

    python tests/support/mcp_server.py [--marker FILE] [--http PORT]

Over stdio by default; ``--http PORT`` serves streamable HTTP at ``http://127.0.0.1:PORT/mcp`` (loopback only).

* it writes ``started <pid>`` to the marker file (``--marker`` or ``$MCP_TEST_MARKER``) as it starts, so a test
  can prove that a server was never started;
* every call of ``note`` and ``delete_note`` is appended to ``$MCP_TEST_NOTES`` (one JSON line each), so a test
  can prove which calls reached the server;
* ``whoami`` says whether ``$MCP_TEST_TOKEN`` is set and how long it is, and whether an HTTP request's
  ``Authorization`` header is ``Bearer <token>``, never the values themselves; ``environment`` lists
  the names of the variables the server was started with;
* ``fail`` fails with a message; ``boom`` crashes (the SDK hides the message: "Error executing tool boom");
* ``stats`` returns structured content with an output schema of its own;
* ``nap`` sleeps, for timeouts.

SIGTERM stops it (the SDK's server handles it), and so does SIGINT even where it was started with SIGINT ignored
(as a shell starts a background job).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer("aeon-test-notes", log_level="WARNING")


class Word(BaseModel):
    text: str
    length: int


class Stats(BaseModel):
    count: int
    words: list[str]
    longest: Word | None  # a nested model: the output schema has $defs and a $ref


def _record(entry: dict[str, Any]) -> None:
    path = os.environ.get("MCP_TEST_NOTES")
    if path:
        with open(path, "a", encoding="utf-8") as notes:
            notes.write(json.dumps(entry) + "\n")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def note(text: str) -> str:
    """Keep a note."""
    _record({"tool": "note", "text": text})
    return f"noted: {text}"


@server.tool()
def delete_note(text: str) -> str:
    """Delete a note."""
    _record({"tool": "delete_note", "text": text})
    return f"deleted: {text}"


@server.tool()
def fail(reason: str = "the notebook is locked") -> str:
    """Fail on purpose, saying why."""
    raise ToolError(reason)


@server.tool()
def boom() -> str:
    """Crash on purpose."""
    raise RuntimeError("an unexpected crash")


@server.tool()
def whoami(ctx: Context) -> dict[str, Any]:
    """Whether the token variable is set, and whether the request's Authorization header holds it (never the
    values themselves)."""
    token = os.environ.get("MCP_TEST_TOKEN")
    headers = ctx.headers or {}
    authorized = token is not None and headers.get("authorization") == f"Bearer {token}"
    return {"token_set": token is not None, "token_length": len(token or ""), "authorized": authorized}


@server.tool()
def environment() -> list[str]:
    """The names of this server's environment variables."""
    return sorted(os.environ)


@server.tool()
def stats(text: str) -> Stats:
    """Count the words of a text."""
    words = text.split()
    longest = max(words, key=len) if words else None
    return Stats(
        count=len(words), words=words, longest=Word(text=longest, length=len(longest)) if longest else None
    )


@server.tool()
def nap(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "rested"


def main() -> None:
    if (
        signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    ):  # started as a background job: Ctrl-C stops it all the same
        signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser()
    parser.add_argument("--marker", default=os.environ.get("MCP_TEST_MARKER"))
    parser.add_argument("--http", type=int, metavar="PORT")
    options = parser.parse_args()
    if options.marker:
        with open(options.marker, "a", encoding="utf-8") as marker:
            marker.write(f"started {os.getpid()}\n")
    if options.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=options.http)


if __name__ == "__main__":
    main()
