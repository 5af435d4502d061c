"""Issue 13, item 4: a tool marks arguments and result keys as sensitive; the tool gets them, no record keeps them
(the result, the JSONL log, the state store, a flow's history), and its error text is scrubbed of them."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import yaml

from aeon_kernel import Engine, FunctionTool, ToolError, hookimpl
from aeon_kernel.config import AeonConfig
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from tests.support.builders import plan, tool_step

PASSWORD = "pw-canary-7f3a9c"
TOKEN = "tok-canary-b81e2d"


def login_tool(received: list[dict[str, Any]]) -> FunctionTool:
    def login(user: str, password: str) -> dict[str, Any]:
        received.append({"user": user, "password": password})
        if password != PASSWORD:
            raise ToolError(f"wrong password {password!r} for {user}")
        return {"user": user, "token": TOKEN}

    return FunctionTool(
        name="login",
        description="log in and get a token",
        input_schema={
            "type": "object",
            "properties": {"user": {"type": "string"}, "password": {"type": "string"}},
            "required": ["user", "password"],
        },
        output_schema={"type": "object", "required": ["user", "token"]},
        function=login,
        sensitive_arguments=frozenset({"password"}),
        sensitive_results=frozenset({"token"}),
    )


class Plugin:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        register("login", lambda: login_tool(self.received))

    @hookimpl
    def aeon_register_nodes(self, register: Any) -> None:
        def use_token() -> Any:
            def run(value: Any, context: Any) -> Any:
                call = context.call_tool("login", user="ada", password=PASSWORD)
                return {"token_length": len(call.result["token"])}  # the node's code sees the real token

            return run

        register("t.use_token", use_token)


def engine(tmp_path: Path, replies: list[Any], plugin: Plugin) -> Engine:
    builtins = [importlib.import_module(name) for name in (*BUILTIN_PLUGINS, "aeon_plugins.sqlite_state")]
    config = (
        AeonConfig()
        .with_choice("llm", "scripted", responses=replies)
        .with_choice("state", "sqlite", path=str(tmp_path / "runs.db"))
    )
    built = Engine(config, plugins=[*builtins, plugin], autoload=False)
    built.add_sink("jsonl", path=str(tmp_path / "run.jsonl"))
    return built


def outputs(tmp_path: Path, result: Any) -> dict[str, str]:
    return {
        "result": json.dumps(result, default=str),
        "jsonl": (tmp_path / "run.jsonl").read_text(encoding="utf-8"),
        "store": b"".join(p.read_bytes() for p in tmp_path.glob("runs.db*")).decode("utf-8", "replace"),
    }


def test_a_sensitive_argument_and_result_reach_the_tool_and_no_record(tmp_path: Path) -> None:
    plugin = Plugin()
    step = tool_step("1", "login", {"user": "ada", "password": PASSWORD})
    with engine(tmp_path, [json.dumps(plan(step, goal="log in"))], plugin) as built:
        result = built.orchestrator().execute("log in as ada")
    assert result["status"] == "completed", result["message"]
    assert plugin.received == [{"user": "ada", "password": PASSWORD}]  # the tool got the real one
    (call,) = result["final_state"]["tool_history"]
    assert call["arguments"] == {"user": "ada", "password": "[redacted]"}
    assert call["result"] == {"user": "ada", "token": "[redacted]"}
    for channel, text in outputs(tmp_path, result).items():
        assert TOKEN not in text, channel
    # the model wrote the password into its plan, so the plan (and the model's raw output) hold it; the tool's own
    # records do not
    assert PASSWORD not in json.dumps(result["final_state"]["tool_history"])


def test_a_failing_tool_s_error_text_is_scrubbed_of_sensitive_values(tmp_path: Path) -> None:
    plugin = Plugin()
    wrong = "wrong-canary-55d1"
    step = tool_step("1", "login", {"user": "ada", "password": wrong})
    with engine(tmp_path, [json.dumps(plan(step, goal="log in"))], plugin) as built:
        result = built.orchestrator().execute("log in as ada")
    (call,) = result["final_state"]["tool_history"]
    assert "wrong password '[redacted]' for ada" in call["error"]["message"]
    assert wrong not in json.dumps(call) and wrong not in json.dumps(result["errors"])


def test_a_flow_node_uses_the_real_value_and_its_history_keeps_none(tmp_path: Path) -> None:
    plugin = Plugin()
    flow = {
        "name": "login",
        "nodes": [
            {"id": "in", "role": "start"},
            {"id": "use", "role": "linear", "impl": "t.use_token", "tools": ["login"]},
            {"id": "out", "role": "exit"},
        ],
        "edges": [["in", "use"], ["use", "out"]],
    }
    directory = tmp_path / "flow"
    directory.mkdir()
    (directory / "flow.yaml").write_text(yaml.safe_dump(flow), encoding="utf-8")
    config = AeonConfig().with_choice("state", "sqlite", path=str(tmp_path / "runs.db"))
    builtins = [importlib.import_module(name) for name in (*BUILTIN_PLUGINS, "aeon_plugins.sqlite_state")]
    with Engine.from_config_dir(directory, config, plugins=[*builtins, plugin], autoload=False) as built:
        built.engine.add_sink("jsonl", path=str(tmp_path / "run.jsonl"))
        result = built.run({})
    assert result.status == "success" and result.output == {"token_length": len(TOKEN)}
    (record,) = [r for r in result.history if r["node"] == "use"]
    (call,) = record["tool_calls"]
    assert call["arguments"]["password"] == "[redacted]" and call["result"]["token"] == "[redacted]"
    for channel, text in outputs(tmp_path, result.to_dict()).items():
        assert TOKEN not in text and PASSWORD not in text, channel
