"""The ``mcp`` tool against a real MCP server (tests/support/mcp_server.py, written with the SDK), over stdio and
streamable HTTP: the server's tools in the registry with its schemas, called through whole runs, validated, judged
by permissions and policies, its secrets kept out of sight, and no server process left behind."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import ConfigError, Engine, ToolContext, ToolError, ValidationError
from aeon_kernel.config import parse_config
from aeon_kernel.invocation import invoke_tool
from aeon_kernel.kit import scrub_secrets
from aeon_plugins.mcp_tools import MCPTool
from tests.support.builders import plan, tool_step
from tests.support.servers import started as started_server

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_server.py")
SECRET = "mcp-secret-token-7c1e9b"
NAMES = ["add", "boom", "delete_note", "environment", "fail", "nap", "note", "stats", "whoami"]


def started(marker: Path) -> list[int]:
    """The pids of the servers that wrote to ``marker`` as they started."""
    if not marker.exists():
        return []
    return [int(line.split()[1]) for line in marker.read_text().splitlines()]


def gone(pid: int, within: float = 5.0) -> bool:
    """Whether ``pid`` has exited (or is a zombie) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return True
        if "State:\tZ" in status:
            return True
        time.sleep(0.05)
    return False


def stdio(tmp: Path, **options: Any) -> dict[str, Any]:
    """A ``[tools.mcp.servers.notes]`` table for the test server over stdio, marking and noting in ``tmp``."""
    env = {"MCP_TEST_MARKER": str(tmp / "marker"), "MCP_TEST_NOTES": str(tmp / "notes.jsonl")}
    return {"command": [sys.executable, SERVER], "env": {**env, **options.pop("env", {})}, **options}


def config(tmp: Path, servers: dict[str, Any], responses: list[Any] | None = None, **extra: Any) -> Any:
    """``servers`` granted, and the scripted model answering with ``responses`` (plans, as JSON text)."""
    path = tmp / "responses.json"
    path.write_text(json.dumps([json.dumps(item) for item in responses or []]))
    data: dict[str, Any] = {"tools": {"mcp": {"grant": ["call"], "servers": servers}}, **extra}
    return parse_config({"llm": {"use": "scripted", "responses": str(path)}, **data})


def notes(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "notes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path]]:
    """One engine on the stdio server, for the tests that only call tools."""
    tmp = tmp_path_factory.mktemp("mcp")
    engine = Engine(config(tmp, {"notes": stdio(tmp)}))
    try:
        _ = engine.tools
        yield engine, tmp
    finally:
        engine.close()


def tool(engine: Engine, name: str) -> MCPTool:
    found = engine.tools.get(name)
    assert isinstance(found, MCPTool), name
    return found


def test_the_servers_tools_are_in_the_registry_with_their_schemas(shared: tuple[Engine, Path]) -> None:
    engine, _ = shared
    names = [name for name in engine.tools.list_all() if name.startswith("mcp.")]
    assert sorted(names) == [f"mcp.notes.{name}" for name in NAMES]
    assert {"calculator", "echo"} <= set(engine.tools.list_all())  # the others are still there
    add = tool(engine, "mcp.notes.add")
    assert add.description == "Add two integers."
    assert add.input_schema["properties"] == {
        "a": {"title": "A", "type": "integer"},
        "b": {"title": "B", "type": "integer"},
    }
    assert add.input_schema["required"] == ["a", "b"]
    assert add.output_schema["properties"]["structured"]["properties"]["result"]["type"] == "integer"
    assert add.granted == {"call"} and add.resources({"a": 1, "b": 2}) == {"server": ["notes"]}
    exported = {entry["name"]: entry for entry in engine.tools.export_tools_for_llm()}
    assert exported["mcp.notes.stats"]["input_schema"]["properties"]["text"]["type"] == "string"


def test_calls_return_text_and_structured_content(shared: tuple[Engine, Path]) -> None:
    engine, _ = shared
    call = invoke_tool(tool(engine, "mcp.notes.add"), {"a": 2, "b": 3}, ToolContext("run", "1"))
    assert call.result == {"text": "5", "structured": {"result": 5}}
    counter = tool(engine, "mcp.notes.stats")
    stats = counter.invoke(text="one two three")
    longest = {"text": "three", "length": 5}
    assert stats["structured"] == {"count": 3, "words": ["one", "two", "three"], "longest": longest}
    # the server's output schema, embedded: its $defs moved to the top, where its references point
    assert "Word" in counter.output_schema["$defs"]
    assert counter.validate_output(stats)
    with pytest.raises(ValidationError, match="result invalid"):
        counter.validate_output({**stats, "structured": {**stats["structured"], "longest": {"text": 1}}})


def test_an_error_result_is_a_tool_error_with_its_text(shared: tuple[Engine, Path]) -> None:
    engine, _ = shared
    with pytest.raises(ToolError, match=r"'notes' reported an error from fail: .*the notebook is locked"):
        tool(engine, "mcp.notes.fail").invoke()
    failed = invoke_tool(tool(engine, "mcp.notes.boom"), {}, ToolContext("run", "2"))
    assert failed.error is not None and failed.error["type"] == "ToolError"
    assert "Error executing tool boom" in failed.error["message"]


def test_a_call_past_its_timeout_is_cancelled_and_the_session_goes_on(shared: tuple[Engine, Path]) -> None:
    engine, _ = shared
    hasty = tool(engine, "mcp.notes.nap").model_copy(update={"timeout": 0.3})
    started_at = time.monotonic()
    with pytest.raises(ToolError, match=r"did not answer the call of 'nap' within timeout = 0.3 s"):
        hasty.invoke(seconds=3)
    assert time.monotonic() - started_at < 2
    assert tool(engine, "mcp.notes.add").invoke(a=1, b=1)["text"] == "2"


def test_a_stdio_server_gets_only_the_default_environment_and_env(shared: tuple[Engine, Path]) -> None:
    engine, _ = shared
    names = set(tool(engine, "mcp.notes.environment").invoke()["structured"]["result"])
    assert {"MCP_TEST_MARKER", "MCP_TEST_NOTES", "PATH"} <= names
    # the SDK's defaults, what Python adds itself (PEP 538), and env: nothing else of this process
    allowed = {
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "USER",
        "LC_CTYPE",
        "MCP_TEST_MARKER",
        "MCP_TEST_NOTES",
    }
    assert names <= allowed, names - allowed


def test_a_run_calls_the_server_and_its_secret_stays_out_of_sight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole run: the plan's steps call the server (over stdio), the answer is the server's; the token reaches
    the server and no record, log or result; closing the engine stops the server."""
    monkeypatch.setenv("NOTES_TOKEN", SECRET)
    log = tmp_path / "run.jsonl"
    steps = plan(
        tool_step("1", "mcp.notes.note", {"text": "buy milk"}),
        tool_step("2", "mcp.notes.whoami", {}),
        tool_step("3", "mcp.notes.add", {"a": 2, "b": 3}),
        goal="Add 2 and 3",
    )
    server = stdio(tmp_path, env={"MCP_TEST_TOKEN": {"$env": "NOTES_TOKEN"}})
    engine = Engine(
        config(
            tmp_path, {"notes": server}, [steps], telemetry={"use": ["jsonl"], "jsonl": {"path": str(log)}}
        )
    )
    with engine:
        result = engine.run("Add 2 and 3")
        for built in engine.tools:
            assert SECRET not in repr(built) and SECRET not in json.dumps(built.describe())
        [pid] = started(tmp_path / "marker")
    assert result["status"] == "completed", result["message"]
    assert result["answer"] == {"text": "5", "structured": {"result": 5}}
    history = result["final_state"]["tool_history"]
    whoami = {"token_set": True, "token_length": len(SECRET), "authorized": False}  # stdio: no header
    assert history[1]["result"]["structured"] == whoami
    assert notes(tmp_path) == [{"tool": "note", "text": "buy milk"}]
    assert SECRET not in json.dumps(result) and SECRET not in log.read_text()
    assert scrub_secrets(SECRET) != SECRET  # registered as a secret
    assert gone(pid), "the stdio server still runs after engine.close()"


def test_refusals_and_failures_are_failed_steps_the_server_never_sees(tmp_path: Path) -> None:
    """A policy's deny rule on a glob, arguments that do not match the server's schema: refused before the server
    sees them. An error the server reports fails its step; the run goes on."""
    steps = plan(
        tool_step("1", "mcp.notes.delete_note", {"text": "milk"}),
        tool_step("2", "mcp.notes.fail", {"reason": "out of ink"}),
        tool_step("3", "mcp.notes.note", {"text": "kept"}),
        tool_step("4", "mcp.notes.note", {"text": 5}),
    )
    policy = {"use": ["rules"], "rules": {"deny": [{"tool": "mcp.notes.delete*", "reason": "notes stay"}]}}
    with Engine(config(tmp_path, {"notes": stdio(tmp_path)}, [steps], policy=policy)) as engine:
        result = engine.run("tidy the notes")
    status = {
        step["step_id"]: (step["status"], step.get("failure") or "") for step in result["plan"]["steps"]
    }
    assert (
        status["1"][0] == "failed"
        and "denied by rule 'deny[0]' of the policy 'rules': notes stay" in status["1"][1]
    )
    assert status["2"][0] == "failed" and "out of ink" in status["2"][1]
    assert status["3"][0] == "complete"
    assert status["4"][0] == "failed"
    history = result["final_state"]["tool_history"]
    assert not any(call["arguments"] == {"text": 5} and call["result"] is not None for call in history)
    assert notes(tmp_path) == [{"tool": "note", "text": "kept"}]  # neither the deletion nor the bad note
    denial = next(call for call in history if call["tool_name"] == "mcp.notes.delete_note")
    assert denial["error"]["type"] == "PolicyDeniedError"


def test_arguments_are_validated_against_the_servers_schema(shared: tuple[Engine, Path]) -> None:
    """What the step executor checks before any call (a whole run shows it: see the refusals test)."""
    engine, _ = shared
    note = tool(engine, "mcp.notes.note")
    assert note.validate_input(text="fine")
    with pytest.raises(ValidationError, match=r"mcp\.notes\.note arguments invalid"):
        note.validate_input(text=5)
    with pytest.raises(ValidationError, match=r"mcp\.notes\.note arguments invalid"):
        note.validate_input()


def test_without_a_grant_no_server_is_started(tmp_path: Path) -> None:
    scripted = {"use": "scripted", "responses": []}
    with Engine(parse_config({"llm": scripted})) as engine:
        assert not [name for name in engine.tools.list_all() if name.startswith("mcp")]
    for table in (
        {"servers": {"notes": stdio(tmp_path)}},
        {"grant": [], "servers": {"notes": stdio(tmp_path)}},
    ):
        with Engine(parse_config({"llm": scripted, "tools": {"mcp": table}})) as engine:
            with pytest.raises(
                ConfigError, match=r"'call': call the tools .*add grant = \[...\] to \[tools.mcp\]"
            ):
                _ = engine.tools
            assert [p["kind"] for p in engine.check_components() if p["name"] == "mcp"] == ["tools"]
    assert started(tmp_path / "marker") == []


@pytest.mark.parametrize(
    ("table", "complaint"),
    [
        (
            {"grant": ["delete"], "servers": {"x": {"url": "http://127.0.0.1:1/mcp"}}},
            "no permission 'delete'",
        ),
        ({"grant": ["call"]}, r"names no server: add a table per server"),
        ({"grant": ["call"], "servers": {"a.b": {"url": "http://h/mcp"}}}, "not a usable server name"),
        ({"grant": ["call"], "servers": {"x": {"command": "python3 -m x"}}}, "command must be a list"),
        ({"grant": ["call"], "servers": {"x": {}}}, "needs either command"),
        ({"grant": ["call"], "servers": {"x": {"command": ["a"], "url": "http://h/mcp"}}}, "not both"),
        (
            {"grant": ["call"], "servers": {"x": {"command": ["a"], "colour": 1}}},
            r"colour: Extra inputs.*the keys are",
        ),
        ({"grant": ["call"], "servers": {"x": {"url": "ftp://h/mcp"}}}, "must be an http:// or https:// URL"),
        (
            {"grant": ["call"], "servers": {"x": {"url": "http://u:p@h/mcp"}}},
            "must not hold a user or password",
        ),
        (
            {"grant": ["call"], "servers": {"x": {"url": "http://h/mcp", "env": {"A": "b"}}}},
            "env and cwd are for",
        ),
        (
            {"grant": ["call"], "servers": {"x": {"command": ["a"], "headers": {"A": "b"}}}},
            "headers are for a server",
        ),
        (
            {"grant": ["call"], "servers": {"x": {"command": ["a"], "env": {"1A": "b"}}}},
            "not a variable name",
        ),
        (
            {"grant": ["call"], "servers": {"x": {"command": ["a"], "timeout": 0}}},
            "timeout: Input should be greater",
        ),
    ],
)
def test_unusable_options_are_config_errors(table: dict[str, Any], complaint: str) -> None:
    with (
        Engine(parse_config({"tools": {"mcp": table}})) as engine,
        pytest.raises(ConfigError, match=complaint),
    ):
        _ = engine.tools


def test_a_server_that_cannot_be_used_is_a_config_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = {"broken": {"command": [str(tmp_path / "no-such-server")]}}
    with Engine(config(tmp_path, missing)) as engine, pytest.raises(ConfigError) as raised:
        _ = engine.tools
    assert "[tools.mcp.servers.broken]" in str(raised.value) and "No such file" in str(raised.value)

    monkeypatch.setenv("NOTES_TOKEN", SECRET)
    leaky = "import os, sys; sys.exit('no notebook here for ' + os.environ['MCP_TEST_TOKEN'])"
    crashing = {
        "crashing": {
            "command": [sys.executable, "-c", leaky],
            "env": {"MCP_TEST_TOKEN": {"$env": "NOTES_TOKEN"}},
        }
    }
    with Engine(config(tmp_path, crashing)) as engine, pytest.raises(ConfigError) as raised:
        _ = engine.tools
    assert "[tools.mcp.servers.crashing]" in str(raised.value)
    assert "it wrote to stderr: no notebook here for ***" in str(raised.value)  # its token, scrubbed

    silent = {"silent": {"command": [sys.executable, "-c", "import sys; sys.stdin.read()"], "timeout": 0.5}}
    with Engine(config(tmp_path, silent)) as engine, pytest.raises(ConfigError) as raised:
        _ = engine.tools
    assert "[tools.mcp.servers.silent]" in str(raised.value)
    assert "did not list its tools within 0.5 s" in str(raised.value)


def test_when_one_server_fails_the_others_are_stopped(tmp_path: Path) -> None:
    servers = {"notes": stdio(tmp_path), "broken": {"command": [str(tmp_path / "no-such-server")]}}
    with Engine(config(tmp_path, servers)) as engine, pytest.raises(ConfigError, match=r"servers\.broken"):
        _ = engine.tools
    assert all(gone(pid) for pid in started(tmp_path / "marker"))


def test_a_server_is_started_once_and_stopped_with_the_engine(tmp_path: Path) -> None:
    """``aeon run`` builds every component to check it (build_selected), then runs on the same tools: one server
    process, stopped when the engine closes."""
    with Engine(config(tmp_path, {"notes": stdio(tmp_path)})) as engine:
        engine.build_selected()
        assert engine.tools.get("mcp.notes.add") is not None
        (server,) = started(tmp_path / "marker")
        assert not gone(server, within=0.2)
    assert gone(server)


def test_a_tool_with_an_unusable_schema_is_left_out_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    from aeon_plugins.mcp_tools import _tools_of

    class Fake:
        class options:  # the attributes _tools_of reads
            url = None

        timeout = 5.0

    listed = [
        {"name": "good", "inputSchema": {"type": "object"}},
        {"name": "bad", "inputSchema": {"type": "no such type"}},
        {"name": "odd name!", "description": "", "inputSchema": {"type": "object"}},
        {"name": "odd_name_", "inputSchema": {"type": "object"}},
    ]
    with caplog.at_level(logging.WARNING, logger="aeon"):
        tools = _tools_of("srv", Fake(), listed, frozenset({"call"}))  # type: ignore[arg-type]
    assert [t.name for t in tools] == ["mcp.srv.good", "mcp.srv.odd_name_"]
    assert (
        tools[1].remote_name == "odd name!"
        and tools[1].description == "The tool odd name! of the MCP server srv."
    )
    assert "'bad' is left out: its inputSchema is not a usable schema" in caplog.text
    assert "'odd_name_' is left out: its name is taken" in caplog.text


# --- streamable HTTP ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The test server on a free loopback port, over streamable HTTP."""
    tmp = tmp_path_factory.mktemp("mcp-http")
    port = _free_port()
    env = {**os.environ, "MCP_TEST_NOTES": str(tmp / "notes.jsonl"), "MCP_TEST_TOKEN": SECRET}
    with (
        open(tmp / "stderr", "wb") as stderr,
        started_server([sys.executable, SERVER, "--http", str(port)], env=env, stderr=stderr) as process,
    ):  # stopped however the tests end: SIGTERM, then SIGKILL
        deadline = time.monotonic() + 15
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the MCP test server did not start: {(tmp / 'stderr').read_text()[-2000:]}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", tmp


def test_a_run_over_streamable_http(
    http_server: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, server_tmp = http_server
    monkeypatch.setenv("BEARER", f"Bearer {SECRET}")
    steps = plan(
        tool_step("1", "mcp.remote.note", {"text": "over http"}),
        tool_step("2", "mcp.remote.whoami", {}),
        tool_step("3", "mcp.remote.add", {"a": 2, "b": 3}),
    )
    remote = {"remote": {"url": url, "headers": {"Authorization": {"$env": "BEARER"}}, "timeout": 10}}
    with Engine(config(tmp_path, remote, [steps])) as engine:
        add = tool(engine, "mcp.remote.add")
        assert add.resources({}) == {"server": ["remote"], "host": ["127.0.0.1"]}
        result = engine.run("Add 2 and 3")
    assert result["status"] == "completed", result["message"]
    assert result["answer"]["text"] == "5"
    assert notes(server_tmp) == [{"tool": "note", "text": "over http"}]
    assert result["final_state"]["tool_history"][1]["result"]["structured"]["authorized"] is True
    assert SECRET not in json.dumps(result)


def test_an_http_server_that_is_not_there_is_a_config_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    complaint = r"\[tools.mcp.servers.nowhere\]: the MCP server could not be used"
    nowhere = Engine(config(tmp_path, {"nowhere": {"url": url, "timeout": 5}}))
    with nowhere, pytest.raises(ConfigError, match=complaint):
        _ = nowhere.tools
