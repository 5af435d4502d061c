"""``aeon mcp serve``, as a real process, with the official SDK's client at the other end: over stdio (the client
starts it) and over streamable HTTP on loopback. The engine's tools and ``run`` are listed with their schemas;
calls go through the kernel's hook, so arguments are validated and policies refuse what they deny."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_types import CallToolResult, ElicitResult, TextContent

from tests.support.builders import plan, tool_step
from tests.support.servers import started


def write_config(tmp: Path, tables: str = "") -> Path:
    """An aeon.toml: the scripted model with one plan (10 + 5), a policy that denies one echo message, and
    ``tables``."""
    responses = tmp / "responses.json"
    steps = plan(tool_step("1", "calculator", {"expression": "10 + 5"}), goal="Add 10 and 5")
    responses.write_text(json.dumps([json.dumps(steps)]))
    path = tmp / "aeon.toml"
    path.write_text(
        f"""
[llm]
use = "scripted"
responses = {json.dumps(str(responses))}

[policy]
use = ["rules"]

[[policy.rules.deny]]
name = "no-shouting"
tool = "echo"
arguments = {{ message = "^LOUD" }}
reason = "no shouting"
{tables}
"""
    )
    return path


def serve_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "aeon_cli", "mcp", "serve", "--config", str(config), *extra]


def text(result: CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, TextContent)
    return block.text


def structured(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    assert json.loads(text(result)) == result.structured_content
    return result.structured_content


async def exercise(session: ClientSession) -> None:
    """What both transports must do alike."""
    await session.initialize()
    listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert {"calculator", "echo", "run"} <= set(listed)
    assert listed["calculator"].input_schema["properties"]["expression"]["type"] == "string"
    assert listed["calculator"].output_schema is not None
    assert listed["run"].input_schema["required"] == ["request"]

    calculated = structured(await session.call_tool("calculator", {"expression": "5 + 10"}))
    assert calculated["value"] == 15

    echoed = structured(await session.call_tool("echo", {"message": "quiet"}))
    assert echoed == {"message": "quiet"}

    denied = await session.call_tool("echo", {"message": "LOUD noises"})
    assert denied.is_error
    assert "denied by rule 'no-shouting' of the policy 'rules': no shouting" in text(denied)

    invalid = await session.call_tool("calculator", {"expression": 5})
    assert invalid.is_error and "invalid arguments for calculator" in text(invalid)

    unknown = await session.call_tool("nothing", {})
    assert unknown.is_error and "there is no tool 'nothing'" in text(unknown)


def with_notes_server(tmp: Path) -> tuple[Path, Path]:
    """An aeon.toml (see :func:`write_config`) that also grants the test MCP server's tools, and the file where
    that server writes its pid as it starts."""
    notes = Path(__file__).resolve().parents[1] / "support" / "mcp_server.py"
    marker = tmp / "marker"
    config = write_config(
        tmp,
        f"""
[tools.mcp]
grant = ["call"]
[tools.mcp.servers.notes]
command = [{json.dumps(sys.executable)}, {json.dumps(str(notes))}]
env = {{ MCP_TEST_MARKER = {json.dumps(str(marker))} }}
""",
    )
    return config, marker


def stopped(marker: Path) -> bool:
    """Whether the test MCP server that wrote ``marker`` has exited."""
    [pid] = [int(line.split()[1]) for line in marker.read_text().splitlines()]
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_serve_over_stdio(tmp_path: Path) -> None:
    """Over stdio, with an MCP server of its own among the tools (Aeon between a client and a server)."""
    config, marker = with_notes_server(tmp_path)
    command, *args = serve_command(config)
    parameters = StdioServerParameters(command=command, args=args, cwd=str(tmp_path))

    async def main() -> None:
        with open(tmp_path / "stderr", "w") as errlog:
            async with (
                stdio_client(parameters, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await exercise(session)
                added = structured(await session.call_tool("mcp.notes.add", {"a": 2, "b": 3}))
                assert added == {"text": "5", "structured": {"result": 5}}
                heard: list[tuple[float, str | None]] = []

                async def progress(done: float, total: float | None, message: str | None) -> None:
                    heard.append((done, message))

                ran = structured(
                    await session.call_tool("run", {"request": "Add 10 and 5"}, progress_callback=progress)
                )
                assert ran["status"] == "completed", ran["message"]
                assert ran["answer"]["value"] == 15
                # each event of the run was a progress notification, in order, while the call was open
                assert [done for done, _ in heard] == list(range(1, len(heard) + 1))
                messages = [message for _, message in heard]
                assert messages[0] == "run started" and messages[-1].startswith("run completed")
                assert "step 1: calling calculator" in messages and "step 1: calculator returned" in messages

    anyio.run(main)
    assert "aeon mcp: serving" in (tmp_path / "stderr").read_text()
    assert stopped(marker)  # the engine was closed as the client went


def test_a_configuration_that_cannot_be_built_exits_with_status_2(tmp_path: Path) -> None:
    config = tmp_path / "aeon.toml"
    config.write_text('[tools.mcp]\nservers = { x = { url = "http://127.0.0.1:1/mcp" } }\n')
    done = subprocess.run(
        serve_command(config), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2
    assert "add grant = [...] to [tools.mcp]" in done.stderr and done.stdout == ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_serve_over_streamable_http(tmp_path: Path) -> None:
    """With the session's token it prints (test_local_servers.py: without it, every request is 401)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    config, marker = with_notes_server(tmp_path)
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if key != "AEON_MCP_TOKEN"}
    with (
        open(tmp_path / "stderr", "wb") as stderr,
        started(
            serve_command(config, "--http", str(port)),
            cwd=tmp_path,
            env=env,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
        ) as process,
    ):
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"aeon mcp serve --http did not start: {(tmp_path / 'stderr').read_text()[-2000:]}"
                )
            time.sleep(0.05)

        said = (tmp_path / "stderr").read_text()
        token = re.search(r"this session's token: (\S+)", said)
        assert token, said

        async def main() -> None:
            client = create_mcp_http_client(headers={"Authorization": f"Bearer {token[1]}"})
            async with (
                client,
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as (read, write),
                ClientSession(read, write) as session,
            ):
                await exercise(session)

        anyio.run(main)
        assert listening_on(port) == {"127.0.0.1"}  # the loopback interface only
        assert f"http://127.0.0.1:{port}/mcp" in said
        process.terminate()
        status = process.wait(15)
    assert status == 0, (tmp_path / "stderr").read_text()[-2000:]  # SIGTERM stops it cleanly,
    assert stopped(marker)  # the engine closed too


def test_a_port_in_use_exits_with_status_2(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            serve_command(config, "--http", str(port)), capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 2
    assert f"cannot serve on 127.0.0.1:{port}: Address already in use" in done.stderr


def listening_on(port: int) -> set[str]:
    """The addresses a socket listens on at ``port`` (IPv4 and IPv6), from /proc/net."""
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                raw = bytes.fromhex(address)
                if len(raw) == 4:
                    addresses.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                    addresses.add(socket.inet_ntop(socket.AF_INET6, words))
    return addresses


def test_a_run_that_needs_approval_asks_the_client_by_elicitation(tmp_path: Path) -> None:
    """Decision 0021 over MCP: the `run` tool puts the call to the client (elicitation). Approved, the run
    completes; refused, the call fails with the client's reason; a client that cannot be asked gets `waiting`."""
    steps = plan(tool_step("1", "calculator", {"expression": "10 + 5"}), goal="Add 10 and 5")
    (tmp_path / "responses.json").write_text(json.dumps([json.dumps(steps)] * 3))
    config = tmp_path / "aeon.toml"
    config.write_text(
        f'[llm]\nuse = "scripted"\nresponses = {json.dumps(str(tmp_path / "responses.json"))}\n'
        '[[policy.rules.ask]]\nname = "sums"\ntool = "calculator"\nreason = "a person checks sums"\n'
    )
    command, *args = serve_command(config)
    parameters = StdioServerParameters(command=command, args=args, cwd=str(tmp_path))
    answers = [
        ElicitResult(action="accept", content={"approve": True}),
        ElicitResult(action="accept", content={"approve": False, "reason": "not today"}),
    ]
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return answers.pop(0)

    async def session_runs(callback: Any, times: int) -> list[Any]:
        with open(tmp_path / "stderr", "a") as errlog:
            async with (
                stdio_client(parameters, errlog=errlog) as (read, write),
                ClientSession(read, write, elicitation_callback=callback) as session,
            ):
                await session.initialize()
                return [
                    structured(await session.call_tool("run", {"request": "Add 10 and 5"}))
                    for _ in range(times)
                ]

    approved, refused = anyio.run(session_runs, answer, 2)
    (waiting,) = anyio.run(session_runs, None, 1)  # a client that cannot be asked: left waiting
    assert approved["status"] == "completed" and approved["answer"]["value"] == 15
    assert refused["status"] == "failed"
    assert any("not approved (denied): not today" in str(e.get("message")) for e in refused["errors"])
    assert waiting["status"] == "waiting" and "aeon approve" in waiting["message"]
    assert (
        len(asked) == 2
        and "a person checks sums" in asked[0]
        and 'calculator {"expression": "10 + 5"}' in asked[0]
    )
